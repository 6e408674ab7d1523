//! `write_file` and `edit_file` at the edges of what a file system takes, through
//! the binary: the longest names, the largest writes, and arguments too long to
//! show whole.

use std::time::Duration;

use crate::support::Sandbox;
use reprise_testkit::assert_contains;
use reprise_testkit::{Reply, ScriptedServer};

fn write_config(sandbox: &Sandbox, text: &str) {
    let dir = sandbox.path().join("xdg/reprise");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

/// The tool results the model was sent, in order.
fn tool_results(server: &ScriptedServer) -> Vec<String> {
    let bodies = server.request_bodies();
    let last = bodies.last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .clone();
    last.iter()
        .filter(|message| message["role"] == "tool")
        .map(|message| message["content"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_file_with_a_255_byte_name_is_written_and_edited() {
    let sandbox = Sandbox::new();
    std::fs::create_dir(sandbox.path().join("deep")).unwrap();
    let name = format!("{}.txt", "n".repeat(251));
    assert_eq!(name.len(), 255);
    let path = format!("deep/{name}");
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::tool_call(
            "call_1",
            "write_file",
            serde_json::json!({ "path": path, "content": "one two\n" }).to_string(),
        ),
        Reply::tool_call(
            "call_2",
            "edit_file",
            serde_json::json!({ "path": path, "old": "two", "new": "three" }).to_string(),
        ),
        Reply::text("Done."),
    ]);
    let out = sandbox
        .chat(&server.base_url(), &["--yes"], "write it\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let results = tool_results(&server);
    assert_eq!(
        results,
        [
            format!("created {path} (8 bytes)"),
            format!("edited {path}: replaced 1 lines with 1"),
        ]
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.path().join(&path)).unwrap(),
        "one three\n"
    );
    let left: Vec<_> = std::fs::read_dir(sandbox.path().join("deep"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 1, "temporary files left: {left:?}");
}

#[tokio::test]
async fn a_write_larger_than_max_size_is_refused_with_the_reason() {
    let sandbox = Sandbox::new();
    write_config(&sandbox, "[tools.write_file]\nmax_size = 1000\n");
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::tool_call(
            "call_1",
            "write_file",
            serde_json::json!({ "path": "big.txt", "content": "x".repeat(1001) }).to_string(),
        ),
        Reply::tool_call(
            "call_2",
            "write_file",
            serde_json::json!({ "path": "fits.txt", "content": "x".repeat(1000) }).to_string(),
        ),
        Reply::text("Done."),
    ]);
    let out = sandbox
        .chat(&server.base_url(), &["--yes"], "write it\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let results = tool_results(&server);
    assert_contains!(
        results[0],
        "big.txt: the content has 1001 bytes, more than the largest write (1000 bytes): \
         nothing was written"
    );
    assert_eq!(results[1], "created fits.txt (1000 bytes)");
    assert!(!sandbox.path().join("big.txt").exists());
}

/// A context window that holds a megabyte of arguments without a compaction.
const WIDE_WINDOW: &str = "context_window = 4000000\n";

/// Arguments of a megabyte: `write_file` with 1 MiB of content.
fn megabyte_arguments() -> String {
    serde_json::json!({ "path": "big.txt", "content": "x".repeat(1 << 20) }).to_string()
}

/// `big.txt` holds the megabyte written, and the terminal got fewer than `most` bytes
/// (`shown`).
fn megabyte_written_and_shown_in(sandbox: &Sandbox, shown: u64, most: u64) {
    let written = std::fs::metadata(sandbox.path().join("big.txt")).unwrap();
    assert_eq!(written.len(), 1 << 20);
    assert!(shown < most, "{shown} bytes on the terminal");
}

/// One `write_file` call with `arguments` (streamed in 64 KiB pieces), then "Done.",
/// through the chat in plain mode with `--yes`; the chat must succeed.
async fn write_in_plain_mode(sandbox: &Sandbox, arguments: &str) -> crate::support::Output {
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::tool_call("call_1", "write_file", arguments).chunk_chars(64 * 1024),
        Reply::text("Done."),
    ]);
    let out = sandbox
        .chat(&server.base_url(), &["--yes"], "write it\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    out
}

#[tokio::test]
async fn a_megabyte_of_arguments_shows_as_a_bounded_preview_in_plain_mode() {
    let sandbox = Sandbox::new();
    write_config(&sandbox, WIDE_WINDOW);
    let arguments = megabyte_arguments();
    let out = write_in_plain_mode(&sandbox, &arguments).await;
    megabyte_written_and_shown_in(&sandbox, out.stderr.len() as u64, 8 * 1024);
    assert_contains!(
        out.stderr,
        format!("⚙ write_file {{\"path\":\"big.txt\",\"content\":\"xxxx")
    );
    assert_contains!(out.stderr, format!("x… ({} bytes)\n", arguments.len()));

    let shown = sandbox.run(&["show", "last"], "").await;
    assert_eq!(shown.status, 0, "{}", shown.stderr);
    assert!(
        shown.stdout.len() < 8 * 1024,
        "{} bytes shown",
        shown.stdout.len()
    );
    assert_contains!(shown.stdout, format!("x… ({} bytes)", arguments.len()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_megabyte_of_arguments_shows_as_a_bounded_preview_full_screen() {
    let sandbox = Sandbox::new();
    write_config(&sandbox, WIDE_WINDOW);
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::tool_call("call_1", "write_file", megabyte_arguments()).chunk_chars(64 * 1024),
        Reply::text("Written."),
    ]);
    let base_url = server.base_url();
    let mut pty = sandbox.pty(&["--base-url", &base_url, "--model", "test-model", "--yes"]);
    pty.wait_text("/help · /resume").await;
    pty.line("write it");
    pty.wait_text("created big.txt (1048576 bytes)").await;
    pty.wait_text("Written.").await;
    pty.wait_for("the turn to end", |s| !s.contains("working"))
        .await;
    pty.send("\x04");
    assert!(pty.wait_exit().await);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        pty.bytes_written() < 256 * 1024,
        "{} bytes on the terminal",
        pty.bytes_written()
    );
}

/// Secrets a transcript must never hold, each planted where a piece (64 KiB) or a
/// window (1 MiB) of the long-record path may end.
const PLANTED: [&str; 3] = [
    "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
    "password=hunter22hunter22",
    "AKIAIOSFODNN7EXAMPLE",
];

/// About 3 MiB of text with escapes (quotes, line ends, a tab, non-ASCII, an emoji)
/// and the planted secrets at the edges of pieces and windows.
fn long_content_with_secrets() -> String {
    let line = "let s = \"quoted\\tvalue\"; // é日本😀\n";
    let mut content = String::new();
    let edges = [1 << 16, 3 << 16, 1 << 20, (1 << 20) + (1 << 16), 2 << 20];
    for (at, edge) in edges.iter().enumerate() {
        while content.len() + 12 < *edge {
            content.push_str(line);
        }
        content.push(' ');
        content.push_str(PLANTED[at % PLANTED.len()]);
        content.push_str(" \n");
    }
    while content.len() < 3 << 20 {
        content.push_str(line);
    }
    content
}

#[tokio::test]
async fn a_write_of_megabytes_is_recorded_in_the_transcript_redacted_as_a_short_one_is() {
    let sandbox = Sandbox::new();
    write_config(&sandbox, "context_window = 8000000\n");
    let content = long_content_with_secrets();
    let arguments = serde_json::json!({ "path": "big.txt", "content": content }).to_string();
    write_in_plain_mode(&sandbox, &arguments).await;
    assert_eq!(
        std::fs::read_to_string(sandbox.path().join("big.txt")).unwrap(),
        content
    );

    let run = sandbox.conversations().remove(0);
    let transcript = std::fs::read_to_string(run.join("transcript.jsonl")).unwrap();
    for secret in PLANTED {
        assert!(
            !transcript.contains(secret),
            "{secret} reached the transcript"
        );
    }
    let call = transcript
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .find(|record| record["type"] == "tool_call")
        .unwrap();
    assert_eq!(call["id"], "call_1");
    assert_eq!(call["name"], "write_file");
    assert_eq!(call["arguments"]["path"], "big.txt");
    let redactor = reprise_redact::Redactor::new();
    let recorded = call["arguments"]["content"].as_str().unwrap();
    assert_eq!(recorded.len(), redactor.redact(&content).len());
    assert!(
        recorded == redactor.redact(&content),
        "the content was redacted otherwise"
    );
    assert_eq!(recorded.matches(reprise_redact::MASK).count(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_megabyte_of_arguments_is_asked_about_as_a_bounded_preview_of_its_whole_size() {
    let sandbox = Sandbox::new();
    write_config(&sandbox, WIDE_WINDOW);
    let arguments = megabyte_arguments();
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::tool_call("call_1", "write_file", &arguments).chunk_chars(64 * 1024),
        Reply::text("Written."),
    ]);
    let base_url = server.base_url();
    let mut pty = sandbox.pty(&["--plain", "--base-url", &base_url, "--model", "test-model"]);
    pty.line("write it");
    pty.wait_text(&format!(
        "x… ({} bytes)? [y]es / [n]o / [a]lways for this run",
        arguments.len()
    ))
    .await;
    pty.line("y");
    pty.wait_text("Written.").await;
    pty.line("/exit");
    assert!(pty.wait_exit().await);
    megabyte_written_and_shown_in(&sandbox, pty.bytes_written(), 64 * 1024);
}
