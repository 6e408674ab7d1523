//! Redacts standard input to standard output: `cargo run -p reprise-redact --example redact < file`.
//! With `--env`, the values of secret-looking environment variables are masked too.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed test or bench run

use std::io::{Read, Write};

fn main() -> std::io::Result<()> {
    let mut redactor = reprise_redact::Redactor::new();
    if std::env::args().any(|a| a == "--env") {
        redactor = redactor.with_env_secrets();
    }
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input)?;
    std::io::stdout().write_all(redactor.redact(&input).as_bytes())
}
