//! Resuming a compacted run reads it from the latest compaction on: the model gets
//! exactly what a whole read of the file gives it, after a rewind too, and a file
//! whose end does not hold the whole view (a rewind to before the compaction, a
//! compaction that does not record the counts before it) is read whole. Lines other
//! writers appended are read; a damaged line is reported with its line number in
//! the whole file.

use std::path::{Path, PathBuf};

use reprise_session::{Entry, Message, Rewind};
use reprise_testkit::{Reply, ScriptedServer, assert_contains};
use serde_json::Value;

use crate::support::{Sandbox, jsonl, roles_and_texts};

/// A run of three questions, a `/compact`, and a fourth question, written by the
/// chat; returns its conversation file.
async fn compacted_run(sandbox: &Sandbox) -> PathBuf {
    let server = ScriptedServer::start_with([
        Reply::text("Paris is the capital of France."),
        Reply::text("Berlin is the capital of Germany."),
        Reply::text("Madrid is the capital of Spain."),
        Reply::text("They asked for three capitals: Paris, Berlin and Madrid."),
        Reply::text("Rome is the capital of Italy."),
    ])
    .await;
    let out = sandbox
        .chat(
            &server.base_url(),
            &[],
            "capital of France?\ncapital of Germany?\ncapital of Spain?\n/compact\ncapital of Italy?\n",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stderr, "(compacted ");
    let conversations = sandbox.conversations();
    assert_eq!(conversations.len(), 1);
    conversations[0].join("conversation.jsonl")
}

/// `--continue` with one more question; the request the model got for it, and the
/// chat's stderr.
async fn resume_and_ask(sandbox: &Sandbox) -> (Value, String) {
    let server = ScriptedServer::start_with([Reply::text("Lisbon.")]).await;
    let out = sandbox
        .chat(&server.base_url(), &["--continue"], "and Portugal?\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let bodies = server.request_bodies();
    assert_eq!(bodies.len(), 1, "{}", out.stderr);
    (bodies[0].clone(), out.stderr)
}

/// The file with its compaction's `usage_before` taken out: a compaction written
/// before it was kept, which a resume reads whole.
fn without_usage_before(bytes: &[u8]) -> Vec<u8> {
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    let mut out = String::new();
    for line in text.split_inclusive('\n') {
        // A damaged line stays as it is.
        let Ok(mut entry) = serde_json::from_str::<Value>(line) else {
            out.push_str(line);
            continue;
        };
        if entry["kind"] == "compaction" {
            entry.as_object_mut().unwrap().remove("usage_before");
            out.push_str(&serde_json::to_string(&entry).unwrap());
            out.push('\n');
        } else {
            out.push_str(line);
        }
    }
    out.into_bytes()
}

/// Resumes `file` as it is, then (from the same bytes) as a whole read, and returns
/// both requests' messages and the first resume's stderr.
async fn resumed_both_ways(sandbox: &Sandbox, file: &Path) -> (Value, Value, String) {
    let before = std::fs::read(file).unwrap();
    let (from_compaction, stderr) = resume_and_ask(sandbox).await;
    std::fs::write(file, without_usage_before(&before)).unwrap();
    let (whole, whole_stderr) = resume_and_ask(sandbox).await;
    assert!(
        !whole_stderr.contains("before the last compaction"),
        "{whole_stderr}"
    );
    (
        from_compaction["messages"].clone(),
        whole["messages"].clone(),
        stderr,
    )
}

fn texts(messages: &Value) -> Vec<(String, String)> {
    roles_and_texts(&serde_json::json!({ "messages": messages }))
}

fn uuid_of_text(file: &Path, text: &str) -> uuid::Uuid {
    jsonl(file)
        .into_iter()
        .find(|entry| entry["message"]["content"] == text)
        .and_then(|entry| entry["uuid"].as_str()?.parse().ok())
        .unwrap_or_else(|| panic!("no message {text:?} in {}", file.display()))
}

fn append_raw(file: &Path, entries: &[Entry]) {
    use std::io::Write;
    let mut out = std::fs::OpenOptions::new().append(true).open(file).unwrap();
    for entry in entries {
        writeln!(out, "{}", serde_json::to_string(entry).unwrap()).unwrap();
    }
}

#[tokio::test]
async fn a_resume_after_a_compaction_sends_what_a_whole_read_sends() {
    let sandbox = Sandbox::new();
    let file = compacted_run(&sandbox).await;
    let compaction = jsonl(&file)
        .into_iter()
        .find(|entry| entry["kind"] == "compaction")
        .unwrap();
    // The counts of the three replies before it, for the totals of a later resume.
    assert!(compaction["usage_before"].is_object() || compaction["usage_before"].is_null());
    let (from_compaction, whole, stderr) = resumed_both_ways(&sandbox, &file).await;
    assert_eq!(from_compaction, whole);
    let shown = texts(&from_compaction);
    assert!(
        shown
            .iter()
            .any(|(_, text)| text.contains("Paris, Berlin and Madrid")),
        "{shown:?}"
    );
    assert!(
        !shown.iter().any(|(_, text)| text == "capital of France?"),
        "{shown:?}"
    );
    assert_eq!(shown.last().unwrap().1, "and Portugal?");
    // The redraw says there is more before what it read.
    assert_contains!(stderr, "before the last compaction; reprise show");
}

#[tokio::test]
async fn a_rewind_after_the_compaction_is_honoured() {
    let sandbox = Sandbox::new();
    let file = compacted_run(&sandbox).await;
    let italy = uuid_of_text(&file, "capital of Italy?");
    append_raw(
        &file,
        &[Rewind {
            to: Some(italy),
            files: None,
            undo: None,
            undoes: None,
        }
        .to_entry()],
    );
    let (from_compaction, whole, stderr) = resumed_both_ways(&sandbox, &file).await;
    assert_eq!(from_compaction, whole);
    let shown = texts(&from_compaction);
    assert!(
        !shown
            .iter()
            .any(|(_, text)| text.contains("Italy") || text.contains("Rome")),
        "{shown:?}"
    );
    assert!(
        shown
            .iter()
            .any(|(_, text)| text.contains("Paris, Berlin and Madrid")),
        "{shown:?}"
    );
    assert_contains!(stderr, "before the last compaction; reprise show");
}

#[tokio::test]
async fn a_rewind_to_before_the_compaction_reads_the_whole_file() {
    let sandbox = Sandbox::new();
    let file = compacted_run(&sandbox).await;
    let germany = uuid_of_text(&file, "capital of Germany?");
    append_raw(
        &file,
        &[Rewind {
            to: Some(germany),
            files: None,
            undo: None,
            undoes: None,
        }
        .to_entry()],
    );
    let (first, whole, stderr) = resumed_both_ways(&sandbox, &file).await;
    assert_eq!(first, whole);
    // The compaction is rewound too: the model gets the history before it back.
    let shown = texts(&first);
    let messages: Vec<&str> = shown
        .iter()
        .filter(|(role, _)| role != "system")
        .map(|(_, text)| text.as_str())
        .collect();
    assert_eq!(
        messages,
        [
            "capital of France?",
            "Paris is the capital of France.",
            "and Portugal?"
        ],
        "{shown:?}"
    );
    assert!(!stderr.contains("before the last compaction"), "{stderr}");
}

#[tokio::test]
async fn lines_another_writer_appended_are_read_and_a_damaged_one_is_numbered_in_the_whole_file() {
    let sandbox = Sandbox::new();
    let file = compacted_run(&sandbox).await;
    append_raw(
        &file,
        &[
            Entry::message(Message::user("and Greece?")),
            Entry::message(Message::assistant("Athens.")),
        ],
    );
    {
        use std::io::Write;
        let mut out = std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap();
        out.write_all(b"{not json\n").unwrap();
    }
    let damaged_line = std::fs::read_to_string(&file).unwrap().lines().count();
    let (from_compaction, whole, stderr) = resumed_both_ways(&sandbox, &file).await;
    assert_eq!(from_compaction, whole);
    let shown = texts(&from_compaction);
    let athens = shown.iter().position(|(_, text)| text == "Athens.");
    assert_eq!(athens, Some(shown.len() - 2), "{shown:?}");
    assert_contains!(stderr, &format!("conversation.jsonl:{damaged_line}: "));
}

#[tokio::test]
async fn a_planted_compaction_naming_no_entry_changes_nothing() {
    let sandbox = Sandbox::new();
    let file = compacted_run(&sandbox).await;
    // A later compaction whose `through` names nothing: a whole read ignores it,
    // and so does a resume that reads from the end.
    let mut planted = reprise_session::Compaction {
        summary: "Nothing happened.".into(),
        through: uuid::Uuid::now_v7(),
        tokens_before: 1,
        tokens_after: 1,
    }
    .to_entry();
    planted
        .extra
        .insert("usage_before".into(), serde_json::Value::Null);
    append_raw(&file, &[planted]);
    let (first, whole, _) = resumed_both_ways(&sandbox, &file).await;
    assert_eq!(first, whole);
    let shown = texts(&first);
    assert!(
        shown
            .iter()
            .any(|(_, text)| text.contains("Paris, Berlin and Madrid")),
        "{shown:?}"
    );
    assert!(
        !shown
            .iter()
            .any(|(_, text)| text.contains("Nothing happened")),
        "{shown:?}"
    );
}
