//! `reprise runs | show | fork | rm` on run folders written through the library.

use reprise_testkit::assert_contains;
use std::path::{Path, PathBuf};

use crate::support::{Sandbox, jsonl};
use reprise_runs::{create_run_folder, create_run_store};
use reprise_session::{Entry, Message, SessionKey, SessionStore};
use serde_json::Value;

/// A run with a conversation of `turns` question/answer pairs; returns its folder.
pub(crate) async fn make_run(runs_dir: &Path, topic: &str, turns: usize) -> PathBuf {
    let folder = create_run_folder(runs_dir).unwrap();
    let store = create_run_store(&folder.dir);
    let key = SessionKey::session(&uuid::Uuid::now_v7().to_string()).unwrap();
    let mut entries = Vec::new();
    for i in 1..=turns {
        entries.push(Entry::message(Message::user(format!(
            "{topic} question {i}"
        ))));
        entries.push(Entry::message(Message::assistant(format!(
            "{topic} answer {i}"
        ))));
    }
    store.append(&key, &entries).await.unwrap();
    // Distinct update times, so "newest first" has one answer.
    std::thread::sleep(std::time::Duration::from_millis(5));
    folder.dir
}

pub(crate) fn name(dir: &Path) -> String {
    dir.file_name().unwrap().to_string_lossy().into_owned()
}

#[tokio::test]
async fn runs_lists_newest_first_as_a_table_and_as_json() {
    let sandbox = Sandbox::new();
    let bread = make_run(&sandbox.runs_dir(), "bread", 1).await;
    let bike = make_run(&sandbox.runs_dir(), "bike", 2).await;
    // A run without a conversation is not listed.
    create_run_folder(&sandbox.runs_dir()).unwrap();

    let out = sandbox.run(&["runs", "--json"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let rows: Vec<Value> = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["run"], name(&bike));
    assert_eq!(rows[0]["messages"], 4);
    assert_eq!(rows[0]["lastMessage"], "bike question 2");
    assert_eq!(rows[1]["run"], name(&bread));

    let out = sandbox.run(&["runs"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(lines[0].starts_with("DATE"), "{}", out.stdout);
    assert!(lines[1].contains("bike question 1") && lines[1].contains(&name(&bike)));
    assert!(lines[2].contains("bread question 1"));
}

#[tokio::test]
async fn show_prints_the_conversation_by_prefix_or_last() {
    let sandbox = Sandbox::new();
    make_run(&sandbox.runs_dir(), "bread", 1).await;
    let bike = make_run(&sandbox.runs_dir(), "bike", 1).await;

    let out = sandbox.run(&["show", "last"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "› bike question 1\n\nbike answer 1\n\n");

    let out = sandbox.run(&["show", &name(&bike), "--json"], "").await;
    let rows: Vec<Value> = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        rows,
        vec![
            serde_json::json!({"role": "user", "text": "bike question 1"}),
            serde_json::json!({"role": "assistant", "text": "bike answer 1"}),
        ]
    );
}

/// The texts of a run's conversation entries.
fn texts(run: &Path) -> Vec<String> {
    jsonl(&run.join("conversation.jsonl"))
        .iter()
        .map(|e| e["message"]["content"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn fork_at_counts_the_persons_messages_as_rewind_to_does_or_takes_an_entry() {
    let sandbox = Sandbox::new();
    let source = make_run(&sandbox.runs_dir(), "bread", 3).await;
    let before = std::fs::read(source.join("conversation.jsonl")).unwrap();

    // --at 2: up to the answer to the second of the person's messages.
    let out = sandbox.run(&["fork", "last", "--at", "2"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let runs = sandbox.conversations();
    assert_eq!(runs.len(), 2);
    let target = runs.iter().find(|r| **r != source).unwrap().clone();
    assert!(out.stdout.contains(&name(&target)), "{}", out.stdout);
    assert_eq!(
        texts(&target),
        [
            "bread question 1",
            "bread answer 1",
            "bread question 2",
            "bread answer 2"
        ]
    );
    assert_eq!(
        std::fs::read(source.join("conversation.jsonl")).unwrap(),
        before
    );
    // What `rewind --to 3` leaves in view is what `fork --at 2` copied.
    let out = sandbox
        .run(
            &[
                "rewind",
                &name(&source),
                "--to",
                "3",
                "--conversation-only",
                "--dry-run",
            ],
            "",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "bread question 3");
    assert_contains!(out.stdout, "2 messages leave the model's view");

    // An exact entry: up to and including the first question.
    let first = jsonl(&source.join("conversation.jsonl"))[0]["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = sandbox
        .run(&["fork", &name(&source), "--at", &first], "")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let newest = sandbox.conversations().pop().unwrap();
    assert_eq!(texts(&newest), ["bread question 1"]);

    let out = sandbox
        .run(&["fork", &name(&source), "--at", "4"], "")
        .await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "has 3 messages of yours (choose 1 to 3)");

    // A fork's title says what it is a fork of, as /fork's does.
    let title_of = |run: &Path| -> Value {
        serde_json::from_slice::<Value>(&std::fs::read(run.join("labels.json")).unwrap())
            .unwrap()["title"]
            .clone()
    };
    assert_eq!(title_of(&target), format!("fork of {}", name(&source)));
    let out = sandbox.run(&["rename", &name(&source), "Bread"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let out = sandbox.run(&["fork", &name(&source)], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let newest = sandbox.conversations().pop().unwrap();
    assert_eq!(title_of(&newest), "fork of Bread");
    let out = sandbox
        .run(&["fork", &name(&source), "--at", "one"], "")
        .await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "not a message number nor an entry's uuid");
}

#[tokio::test]
async fn rm_asks_unless_yes() {
    let sandbox = Sandbox::new();
    let run = make_run(&sandbox.runs_dir(), "bread", 1).await;
    let out = sandbox.run(&["rm", &name(&run)], "n\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "delete run");
    assert!(run.exists());
    let out = sandbox.run(&["rm", &name(&run)], "Yes\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(!run.exists());

    let run = make_run(&sandbox.runs_dir(), "bike", 1).await;
    let out = sandbox.run(&["rm", "last", "--yes"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(!run.exists());
}

#[tokio::test]
async fn bad_run_ids_are_refused() {
    let sandbox = Sandbox::new();
    make_run(&sandbox.runs_dir(), "bread", 1).await;
    make_run(&sandbox.runs_dir(), "bike", 1).await;
    for bad in ["../x", "/etc", "", "a/b"] {
        for command in [
            vec!["show", bad],
            vec!["rm", bad, "--yes"],
            vec!["fork", bad],
        ] {
            let out = sandbox.run(&command, "").await;
            assert_ne!(out.status, 0, "{command:?} was accepted");
            assert!(
                out.stderr.contains("invalid run id"),
                "{command:?}: {}",
                out.stderr
            );
        }
    }
    let out = sandbox.run(&["show", "1999"], "").await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "no run matches");
    // Both runs start with the year: an ambiguous prefix names the candidates.
    let out = sandbox.run(&["show", "20"], "").await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "matches 2 runs");
    assert_eq!(sandbox.conversations().len(), 2);
}

#[tokio::test]
async fn help_explains_every_flag() {
    let sandbox = Sandbox::new();
    let out = sandbox.run(&["--help"], "").await;
    assert_eq!(out.status, 0);
    for flag in [
        "--runs-dir",
        "--continue",
        "--resume",
        "--fork-session",
        "--inline",
        "--plain",
        "--base-url",
        "--model",
        "--api-key-env",
        "--yes",
        "--config",
    ] {
        assert!(out.stdout.contains(flag), "{flag} missing from --help");
    }
}

#[tokio::test]
async fn a_bad_config_file_is_an_error_naming_file_and_line() {
    let sandbox = Sandbox::new();
    let dir = sandbox.path().join("xdg/reprise");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), "model = \"x\"\nbase_url = [1\n").unwrap();
    let out = sandbox.run(&["runs"], "").await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "config.toml:2:");
}

#[tokio::test]
async fn a_run_with_a_corrupt_session_json_is_shown_forked_and_deleted() {
    let sandbox = Sandbox::new();
    let run = make_run(&sandbox.runs_dir(), "bread", 3).await;
    let meta = run.join("session.json");

    std::fs::write(&meta, "{\"sessionId\": ").unwrap();
    let out = sandbox.run(&["show", &name(&run)], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "bread question 3");
    assert_contains!(out.stderr, &format!("{}/session.json", name(&run)));
    assert_contains!(out.stderr, "rebuilt from conversation.jsonl");

    std::fs::write(&meta, "not json").unwrap();
    let out = sandbox.run(&["fork", &name(&run)], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);

    std::fs::write(&meta, "not json either").unwrap();
    let out = sandbox.run(&["rm", &name(&run), "--yes"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(!run.exists());
}

#[tokio::test]
async fn show_prints_a_run_whose_session_json_is_missing() {
    let sandbox = Sandbox::new();
    let run = make_run(&sandbox.runs_dir(), "bike", 3).await;
    std::fs::remove_file(run.join("session.json")).unwrap();
    let out = sandbox.run(&["show", &name(&run), "--json"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let rows: Vec<Value> = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(rows.len(), 6);
    assert_contains!(out.stderr, "session.json: missing");
}

#[tokio::test]
async fn rm_says_in_use_only_for_a_held_run() {
    let sandbox = Sandbox::new();
    let run = make_run(&sandbox.runs_dir(), "bread", 1).await;
    // A lock file that cannot be opened (a folder in its place): not "in use".
    std::fs::remove_file(run.join(".lock")).ok();
    std::fs::create_dir(run.join(".lock")).unwrap();
    let out = sandbox.run(&["rm", &name(&run), "--yes"], "").await;
    assert_ne!(out.status, 0);
    assert!(!out.stderr.contains("in use"), "{}", out.stderr);
    assert_contains!(out.stderr, "cannot delete run");
    assert_contains!(out.stderr, ".lock");
    std::fs::remove_dir(run.join(".lock")).unwrap();

    // Held by a live writer: "in use", with the holder's pid.
    let store = create_run_store(&run);
    let session = reprise_runs::RunFolder::open(&run)
        .unwrap()
        .session_id
        .unwrap();
    let _lock = store.lock(&session).await.unwrap();
    let out = sandbox.run(&["rm", &name(&run), "--yes"], "").await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "in use");
    assert_contains!(out.stderr, &std::process::id().to_string());
    assert!(run.exists());
}

#[tokio::test]
async fn runs_warns_about_a_linked_run_folder_and_shows_none_of_it() {
    let sandbox = Sandbox::new();
    let run = make_run(&sandbox.runs_dir(), "bread", 1).await;
    let outside = tempfile::tempdir().unwrap();
    let moved = outside.path().join("run");
    std::fs::rename(&run, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &run).unwrap();
    let out = sandbox.run(&["runs"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(!out.stdout.contains("bread"), "{}", out.stdout);
    assert_contains!(out.stderr, "symbolic link");
    let out = sandbox.run(&["show", &name(&run)], "").await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "symbolic link");
}

#[tokio::test]
async fn show_prints_tool_calls_and_results_unless_asked_for_the_replies_only() {
    use reprise_session::ToolCall;
    let sandbox = Sandbox::new();
    let folder = create_run_folder(&sandbox.runs_dir()).unwrap();
    let store = create_run_store(&folder.dir);
    let key = SessionKey::session(&uuid::Uuid::now_v7().to_string()).unwrap();
    let entries = vec![
        Entry::message(Message::user("fix the parser")),
        Entry::message(Message::assistant_tool_calls(
            Some("Reading it.".to_owned()),
            vec![ToolCall::function(
                "c1",
                "read_file",
                r#"{"path": "src/parse.rs"}"#,
            )],
        )),
        Entry::message(Message::tool("c1", "fn parse() {\n    todo!()\n}")),
        Entry::message(Message::assistant_tool_calls(
            None,
            vec![ToolCall::function(
                "c2",
                "shell",
                r#"{"cmd": "cargo test"}"#,
            )],
        )),
        Entry::message(Message::tool("c2", "error: the command failed")),
        Entry::message(Message::assistant("Fixed.")),
    ];
    store.append(&key, &entries).await.unwrap();
    drop(store);

    let out = sandbox.run(&["show", "last"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        "› fix the parser\n\nReading it.\n\n⚙ read_file {\"path\": \"src/parse.rs\"}\n  \
         ↳ fn parse() { (+2 lines)\n⚙ shell {\"cmd\": \"cargo test\"}\n  ✗ error: the command \
         failed\n\nFixed.\n\n"
    );
    let out = sandbox.run(&["show", "last", "--no-tools"], "").await;
    assert_eq!(out.stdout, "› fix the parser\n\nReading it.\n\nFixed.\n\n");

    // JSON keeps its shape: the person and the replies; --tools adds the calls.
    let out = sandbox.run(&["show", "last", "--json"], "").await;
    let rows: Vec<Value> = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(rows.len(), 3, "{rows:#?}");
    let out = sandbox
        .run(&["show", "last", "--json", "--tools"], "")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let rows: Vec<Value> = serde_json::from_str(&out.stdout).unwrap();
    let roles: Vec<&str> = rows.iter().map(|r| r["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "tool_call",
            "tool",
            "tool_call",
            "tool",
            "assistant"
        ]
    );
    assert_eq!(rows[2]["id"], "c1");
    assert_eq!(rows[2]["name"], "read_file");
    assert_eq!(rows[3]["id"], "c1");
    assert_eq!(rows[3]["text"], "fn parse() {\n    todo!()\n}");
    assert_eq!(rows[3]["isError"], false);
    assert_eq!(rows[5]["isError"], true);
}
