//! Sessions written by the chat itself, for benchmarks: the real `reprise` binary in
//! plain mode, driven through turns shaped like a coding agent's against a
//! [`ScriptedServer`] (a question; a reply that reads a file, with `usage`; the file's
//! text as the tool result; an answer, with `usage`), and that conversation repeated
//! with fresh ids to the size a benchmark needs. Every line is one the chat wrote, so
//! a benchmark reads what users' sessions hold, `usage` and all.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use reprise_message::Entry;
use tokio::io::AsyncWriteExt;

use crate::{Reply, ScriptedServer};

/// Source files the driven chat reads, one per turn in turn.
const FILES: usize = 16;

fn setup<T, E: std::fmt::Display>(what: &str, result: Result<T, E>) -> T {
    match result {
        Ok(value) => value,
        Err(error) => panic!("reprise-testkit: cannot {what}: {error}"),
    }
}

/// A file of about 1.5 KB of Rust, different for each `k`.
fn source_file(k: usize) -> String {
    let mut text = format!("//! Module {k}: parsing the input of step {k}.\n\n");
    for f in 0..6 {
        text.push_str(&format!(
            "/// Reads field {f} of a record (\"name\", \"value\").\npub fn field_{f}(record: &str) -> Option<&str> {{\n    record.split('\\t').nth({f}).map(str::trim)\n}}\n\n"
        ));
    }
    text
}

/// Runs `binary` (the `reprise` binary) in plain mode in `work` for `turns` turns
/// against a scripted server, and returns the conversation it wrote
/// (`conversation.jsonl` of the one run folder under `work/.run`).
pub async fn drive_chat(binary: &Path, work: &Path, turns: usize) -> PathBuf {
    setup(
        "create the source folder",
        std::fs::create_dir_all(work.join("src")),
    );
    setup(
        "create the config folder",
        std::fs::create_dir_all(work.join("xdg")),
    );
    for k in 0..FILES {
        setup(
            "write a source file",
            std::fs::write(work.join(format!("src/module_{k}.rs")), source_file(k)),
        );
    }
    let server = ScriptedServer::start().await;
    let mut input = String::new();
    for turn in 0..turns {
        let file = turn % FILES;
        input.push_str(&format!(
            "Please look at src/module_{file}.rs and tell me why field {} returns None for the record of turn {turn}.\n",
            turn % 6
        ));
        let prompt_tokens = 800 + 40 * turn as u64;
        server.push(
            Reply::tool_call(
                format!("call_{turn}"),
                "read_file",
                format!("{{\"path\":\"src/module_{file}.rs\"}}"),
            )
            .with_text("Let me read the file first.")
            .with_usage(prompt_tokens, 24),
        );
        server.push(
            Reply::text(format!(
                "`field_{}` splits on tabs, and the record of turn {turn} uses spaces, so \
                 `nth` finds no field and returns `None`. Split on whitespace instead, or \
                 convert the record first; the other fields behave the same way.",
                turn % 6
            ))
            .with_usage(prompt_tokens + 420, 61),
        );
    }
    let mut child = setup(
        "start reprise",
        tokio::process::Command::new(binary)
            // A window the reported usage never comes near: a compaction would ask the
            // server for a summary, which this script has no reply for.
            .args(["--plain", "--yes", "--model", "bench-model"])
            .args(["--context-window", "1000000", "--base-url"])
            .arg(server.base_url())
            .current_dir(work)
            .env("XDG_CONFIG_HOME", work.join("xdg"))
            .env_remove("REPRISE_CONFIG")
            .env_remove("REPRISE_RUNS_DIR")
            .env_remove("REPRISE_DATABASE_URL")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn(),
    );
    if let Some(mut stdin) = child.stdin.take() {
        setup("type into reprise", stdin.write_all(input.as_bytes()).await);
    }
    let output = setup("wait for reprise", child.wait_with_output().await);
    if !output.status.success() || server.remaining() != 0 {
        panic!(
            "reprise-testkit: the driven chat ended with {} and {} replies unused:\n{}",
            output.status,
            server.remaining(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let runs = setup("list the runs", std::fs::read_dir(work.join(".run")));
    runs.filter_map(Result::ok)
        .map(|entry| entry.path().join("conversation.jsonl"))
        .find(|path| path.is_file())
        .unwrap_or_else(|| panic!("reprise-testkit: the driven chat wrote no conversation"))
}

/// The entries of a conversation file.
pub fn read_entries(conversation: &Path) -> Vec<Entry> {
    let text = setup(
        "read the conversation",
        std::fs::read_to_string(conversation),
    );
    text.lines()
        .map(|line| setup("decode an entry", serde_json::from_str::<Entry>(line)))
        .collect()
}

/// Copy `copy` of `entries`: the same lines with fresh entry uuids and call ids
/// suffixed with the copy's number, so that copies can follow each other in one
/// session (copy 0 is `entries` unchanged).
pub fn repeated(entries: &[Entry], copy: usize) -> Vec<Entry> {
    if copy == 0 {
        return entries.to_vec();
    }
    entries
        .iter()
        .map(|entry| {
            let mut entry = entry.clone();
            entry.uuid = uuid::Uuid::now_v7();
            if let Some(message) = &mut entry.message {
                for call in message.tool_calls.iter_mut().flatten() {
                    call.id = format!("{}_{copy}", call.id);
                }
                if let Some(id) = &mut message.tool_call_id {
                    *id = format!("{id}_{copy}");
                }
            }
            entry
        })
        .collect()
}
