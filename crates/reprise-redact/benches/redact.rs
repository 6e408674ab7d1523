//! Redaction throughput on ~1 MB of mixed tool output (code, logs, JSON, prose, with
//! a secret every ~2 KB), and on the same amount of text without secrets; then the
//! cost of one call on short texts (a typed prompt, distinct prompts, the secret corpus).
//! Run: `cargo bench -p reprise-redact --bench redact`. Prints MB/s and µs per call; asserts nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed test or bench run

use std::hint::black_box;
use std::time::{Duration, Instant};

use reprise_redact::Redactor;

const TARGET_BYTES: usize = 1 << 20;

/// Ordinary lines a tool result is made of.
const PLAIN: &[&str] = &[
    "fn main() { let config = Config::load(\"settings.toml\")?; println!(\"{config:?}\"); }",
    "2026-11-30T10:15:00.123Z INFO server listening on 0.0.0.0:8080 (pid 4242)",
    "{\"id\": 17, \"name\": \"reprise\", \"max_tokens\": 1024, \"tags\": [\"a\", \"b\"]}",
    "The session is written as it goes, so a crash loses at most one message.",
    "drwx------  2 user user 4096 Nov 30 10:15 .run/2026-11-30T10-15-00-000Z",
    "    let password = prompt_password()?; // read from the terminal, never logged",
    "error[E0308]: mismatched types: expected `&str`, found `String` at src/lib.rs:42:17",
    "Año nuevo, vida nueva: la sesión sigue donde se quedó. 日本語のテキストも少し。",
    "SELECT id, created_at FROM sessions WHERE updated_at > now() - interval '1 day';",
    "https://docs.example.com/guide/authentication#tokens and s3.amazonaws.com/bucket",
];

/// Lines with a secret in them.
const SECRET: &[&str] = &[
    "export OPENAI_API_KEY=sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "DATABASE_URL=postgres://app:hunter22@db.example.com:5432/app",
    "curl -H 'Authorization: Bearer ghp_0123456789abcdefghijABCDEFGHIJ012345' https://api",
    "{\"password\": \"correct horse battery staple\", \"user\": \"me\"}",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY01",
];

fn corpus(with_secrets: bool) -> String {
    let mut text = String::with_capacity(TARGET_BYTES + 256);
    let mut i = 0usize;
    while text.len() < TARGET_BYTES {
        text.push_str(PLAIN[i % PLAIN.len()]);
        text.push('\n');
        // About one secret line per 2 KB.
        if with_secrets && i % 25 == 24 {
            text.push_str(SECRET[(i / 25) % SECRET.len()]);
            text.push('\n');
        }
        i += 1;
    }
    text
}

/// Best-of-N MB/s (MiB/s) for redacting `text`, within a time budget.
fn throughput(redactor: &Redactor, text: &str) -> f64 {
    let mut best = Duration::MAX;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut runs = 0;
    while runs < 5 || (Instant::now() < deadline && runs < 30) {
        let start = Instant::now();
        black_box(redactor.redact(black_box(text)));
        best = best.min(start.elapsed());
        runs += 1;
    }
    (text.len() as f64 / (1024.0 * 1024.0)) / best.as_secs_f64()
}

fn main() {
    let plain = corpus(false);
    let mixed = corpus(true);
    let redactor = Redactor::new();
    // Compile the table before timing.
    black_box(redactor.redact("warm up"));
    let with_known = Redactor::new()
        .with_secret("a-run-time-api-key-0123456789")
        .with_secret("another-known-secret-value");

    let plain_mbs = throughput(&redactor, &plain);
    let mixed_mbs = throughput(&redactor, &mixed);
    let known_mbs = throughput(&with_known, &mixed);
    let masked = redactor
        .redact(&mixed)
        .matches(reprise_redact::MASK)
        .count();

    println!(
        "redact, {} KiB text without secrets: {plain_mbs:.1} MB/s",
        plain.len() / 1024
    );
    println!(
        "redact, {} KiB mixed text ({masked} secrets masked): {mixed_mbs:.1} MB/s",
        mixed.len() / 1024
    );
    println!("redact, same mixed text, 2 known values too: {known_mbs:.1} MB/s");
    println!("mixed / plain ratio: {:.2}", mixed_mbs / plain_mbs);

    // A typed prompt: what the run store redacts on every append of a user message.
    let prompt: String = plain.chars().take(1024).collect();
    println!(
        "redact, one 1 KiB prompt without secrets: {:.1} µs per call",
        per_call_micros(&redactor, &prompt)
    );
    // Distinct prompts: each new text can make the patterns' automata build new
    // states, which a single repeated text never shows.
    let windows: Vec<&str> = (0..2000)
        .map(|i| {
            let start = floor_char_boundary(&mixed, i * 509);
            let end = floor_char_boundary(&mixed, start + 1024);
            &mixed[start..end]
        })
        .collect();
    let start = Instant::now();
    for window in &windows {
        black_box(redactor.redact(black_box(window)));
    }
    println!(
        "redact, 2,000 distinct 1 KiB prompts (some with secrets): {:.1} µs per call",
        start.elapsed().as_secs_f64() * 1e6 / windows.len() as f64
    );
    let cases = reprise_testkit::secret_corpus::corpus_cases();
    let start = Instant::now();
    for case in &cases {
        black_box(redactor.redact(black_box(&case.text)));
    }
    println!(
        "redact, the {} cases of the secret corpus, once each: {:.1} µs per call",
        cases.len(),
        start.elapsed().as_secs_f64() * 1e6 / cases.len() as f64
    );
    let short: String = plain.chars().take(100).collect();
    println!(
        "redact, one 100-byte prompt without secrets: {:.1} µs per call",
        per_call_micros(&redactor, &short)
    );
}

/// The largest char boundary of `text` at or before `index`.
fn floor_char_boundary(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

/// Median µs per call of redacting `text`, over batches of 1,000 calls.
fn per_call_micros(redactor: &Redactor, text: &str) -> f64 {
    let mut batches: Vec<f64> = (0..15)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..1000 {
                black_box(redactor.redact(black_box(text)));
            }
            start.elapsed().as_secs_f64() * 1e6 / 1000.0
        })
        .collect();
    batches.sort_by(f64::total_cmp);
    batches[batches.len() / 2]
}
