//! Peak memory of one large `write_file` call: the scripted server answers one
//! `write_file` call whose content is N MB (20 and 200, or the sizes in
//! `REPRISE_BIG_WRITE_MB`, comma-separated), then "Done."; the release binary
//! runs it in plain mode with `--yes`. Prints the child's peak RSS (`VmHWM`)
//! over the content's size. Data goes under `target/bench-tmp/big-write`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed bench run

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use reprise_testkit::peak::PeakWatch;
use reprise_testkit::{Reply, ScriptedServer};

/// One line of the file written: text with the escapes JSON needs (`\n`, `"`).
const LINE: &str = "fn line() -> &'static str { \"a line of the written file\" }\n";

/// Content of exactly `bytes` bytes, lines of [`LINE`].
fn content(bytes: usize) -> String {
    let mut text = LINE.repeat(bytes / LINE.len() + 1);
    text.truncate(bytes);
    text
}

/// Runs the chat to its end; returns its peak RSS in bytes.
fn peak_rss(cwd: &Path, base_url: &str) -> u64 {
    let mut child = Command::new(env!("CARGO_BIN_EXE_reprise"))
        .args([
            "--plain",
            "--base-url",
            base_url,
            "--model",
            "test-model",
            "--yes",
        ])
        .current_dir(cwd)
        .env("XDG_CONFIG_HOME", cwd.join("xdg"))
        .env("TZ", "UTC")
        .env_remove("REPRISE_BASE_URL")
        .env_remove("REPRISE_MODEL")
        .env_remove("REPRISE_RUNS_DIR")
        .env_remove("REPRISE_CONFIG")
        .env_remove("REPRISE_DATABASE_URL")
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"write it\n")
        .unwrap();
    // Both pipes drained as they fill (and dropped), so the child never blocks.
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            let mut buffer = vec![0u8; 1 << 16];
            loop {
                let read = pipe.read(&mut buffer).unwrap();
                if read == 0 {
                    break kept;
                }
                if kept.len() < 64 * 1024 {
                    kept.extend_from_slice(&buffer[..read]);
                }
            }
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let peak = PeakWatch::of(child.id());
    let status = child.wait().unwrap();
    let peak = peak.finish();
    let stdout = stdout.join().unwrap();
    let stderr = stderr.join().unwrap();
    assert!(
        status.success(),
        "the chat failed ({status}): {}{}",
        String::from_utf8_lossy(&stdout),
        String::from_utf8_lossy(&stderr)
    );
    peak * 1024
}

fn main() {
    let sizes: Vec<usize> = std::env::var("REPRISE_BIG_WRITE_MB")
        .ok()
        .map(|list| list.split(',').map(|n| n.trim().parse().unwrap()).collect())
        .unwrap_or_else(|| vec![20, 200]);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-tmp/big-write");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for megabytes in sizes {
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("xdg/reprise")).unwrap();
        let bytes = megabytes * 1_000_000;
        std::fs::write(
            root.join("xdg/reprise/config.toml"),
            format!(
                "context_window = 4000000000\nrequest_timeout = 0\nidle_timeout = 0\n\
                 [tools.write_file]\nmax_size = {}\n",
                bytes + 1
            ),
        )
        .unwrap();
        let text = content(bytes);
        let arguments = serde_json::json!({ "path": "big.txt", "content": text }).to_string();
        let server = runtime.block_on(ScriptedServer::start());
        server.push_all([
            Reply::tool_call("call_1", "write_file", arguments).chunk_chars(64 * 1024),
            Reply::text("Done."),
        ]);
        let peak = peak_rss(&root, &server.base_url());
        let written = std::fs::read(root.join("big.txt")).unwrap();
        assert!(written == text.as_bytes(), "the file written differs");
        drop((written, text, server));
        println!(
            "write_file of {megabytes} MB: peak RSS {:.1} MB, {:.2}x the content",
            peak as f64 / 1e6,
            peak as f64 / bytes as f64
        );
    }
    let _ = std::fs::remove_dir_all(&root);
}
