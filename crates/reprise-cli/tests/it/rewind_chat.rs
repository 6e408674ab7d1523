//! `/rewind` and `/fork` with the files, in an open chat: the full screen in a
//! pseudo-terminal and the plain mode, over a scripted session that changed files
//! through the real tools.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::rewind::tree;
use crate::support::{Sandbox, roles_and_texts};
use reprise_testkit::assert_contains;
use reprise_testkit::pty::Pty;
use reprise_testkit::{Reply, ScriptedServer};

const DOWN: &str = "\x1b[B";
const ESC: &str = "\x1b";
const CTRL_D: &str = "\x04";
const CTRL_U: &str = "\x15";

/// Two turns through the real tools, each its own process: "write" writes
/// `src/a.txt`, "edit" changes it. Returns the folder after each turn.
async fn write_then_edit(
    sandbox: &Sandbox,
    server: &ScriptedServer,
) -> [BTreeMap<PathBuf, Vec<u8>>; 2] {
    std::fs::create_dir(sandbox.path().join("src")).unwrap();
    server.push_all([
        Reply::tool_call(
            "call_1",
            "write_file",
            r#"{"path":"src/a.txt","content":"one\n"}"#,
        ),
        Reply::text("written"),
        Reply::tool_call(
            "call_2",
            "edit_file",
            r#"{"path":"src/a.txt","old":"one","new":"two"}"#,
        ),
        Reply::text("edited"),
    ]);
    let out = sandbox
        .chat(&server.base_url(), &["--yes"], "write\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let written = tree(sandbox.path());
    let out = sandbox
        .chat(&server.base_url(), &["--yes", "--continue"], "edit\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let edited = tree(sandbox.path());
    assert_ne!(written, edited);
    [written, edited]
}

/// The person's messages in the last request the server got.
fn last_user_texts(server: &ScriptedServer) -> Vec<String> {
    roles_and_texts(server.request_bodies().last().unwrap())
        .into_iter()
        .filter(|(role, _)| role == "user")
        .map(|(_, text)| text)
        .collect()
}

/// The screen with what changes from run to run (the run's name, the temporary
/// folder) replaced.
fn screen_of(pty: &Pty, sandbox: &Sandbox) -> String {
    let run = sandbox.conversations().remove(0);
    let name = run.file_name().unwrap().to_str().unwrap().to_owned();
    let dir = sandbox.path().to_str().unwrap().to_owned();
    let marker = "(resumed the conversation of ";
    pty.contents()
        .replace(&name, "[run]")
        .replace(&dir, "[dir]")
        .lines()
        .map(|line| match line.find(marker) {
            Some(at) => format!("{}{marker}[date])", &line[..at]),
            // The folder's name is as long as the machine's temporary folder's.
            None if line.contains("[dir]") && line.ends_with('│') => {
                format!("{} │", line.trim_end_matches('│').trim_end())
            }
            None => line.trim_end().to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The full screen on the latest run, redrawn.
async fn continued(sandbox: &Sandbox, server: &ScriptedServer) -> Pty {
    let base_url = server.base_url();
    let pty = sandbox.pty(&[
        "--base-url",
        &base_url,
        "--model",
        "test-model",
        "--yes",
        "--continue",
    ]);
    pty.wait_text("(resumed the conversation of").await;
    pty
}

fn rewind_entries(sandbox: &Sandbox) -> usize {
    let run = sandbox.conversations().remove(0);
    crate::support::jsonl(&run.join("conversation.jsonl"))
        .iter()
        .filter(|entry| entry["kind"] == "rewind")
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewind_in_the_full_screen_restores_files_drops_messages_and_undoes() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    let [written, edited] = write_then_edit(&sandbox, &server).await;
    let mut pty = continued(&sandbox, &server).await;

    // Esc closes the list and changes nothing.
    pty.line("/rewind");
    pty.wait_text("rewind to just before which message?").await;
    pty.send(ESC);
    pty.wait_for("the list to close", |s| {
        !s.contains("rewind to just before which message?")
    })
    .await;
    assert_eq!(tree(sandbox.path()), edited);

    pty.line("/rewind");
    pty.wait_text("rewind to just before which message?").await;
    pty.wait_text("1. write").await;
    insta::assert_snapshot!("rewind_list", screen_of(&pty, &sandbox));
    pty.send("\r");
    pty.wait_text("rewind what, to just before message 2?")
        .await;
    pty.send("\r");
    pty.wait_text("go ahead?").await;
    pty.wait_text("restored  src/a.txt").await;
    insta::assert_snapshot!("rewind_preview", screen_of(&pty, &sandbox));
    assert_eq!(
        tree(sandbox.path()),
        edited,
        "nothing changes before the yes"
    );
    pty.send("\r");
    pty.wait_text("(rewound to just before message 2").await;
    assert_eq!(tree(sandbox.path()), written);
    let screen = pty.contents();
    assert!(!screen.contains("edited"), "{screen}");
    // The rewound message is back at the prompt, to send again or change.
    pty.wait_text("› edit").await;

    server.push(Reply::text("fresh"));
    pty.send(CTRL_U);
    pty.line("next");
    pty.wait_text("fresh").await;
    assert_eq!(last_user_texts(&server), ["write", "next"]);

    // The undo comes first in the list.
    pty.line("/rewind");
    pty.wait_text("↶ undo the last rewind").await;
    pty.send("\r");
    pty.wait_text("undo the last rewind").await;
    pty.wait_text("yes, undo it").await;
    pty.send("\r");
    pty.wait_text("(undid the last rewind").await;
    assert_eq!(tree(sandbox.path()), edited);
    server.push(Reply::text("all back"));
    pty.line("again");
    pty.wait_text("all back").await;
    assert_eq!(last_user_texts(&server), ["write", "edit", "next", "again"]);
    assert_eq!(rewind_entries(&sandbox), 2);
    pty.send(CTRL_D);
    assert!(pty.wait_exit().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewind_of_the_conversation_only_in_the_full_screen_keeps_the_files() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    let [_, edited] = write_then_edit(&sandbox, &server).await;
    let mut pty = continued(&sandbox, &server).await;
    pty.line("/rewind");
    pty.wait_text("1. write").await;
    pty.send(DOWN);
    pty.send("\r");
    pty.wait_text("rewind what, to just before message 1?")
        .await;
    pty.send(DOWN);
    pty.send("\r");
    pty.wait_text("files: left as they are").await;
    // Esc at the preview changes nothing either.
    pty.send(ESC);
    pty.wait_for("the preview to close", |s| !s.contains("go ahead?"))
        .await;
    assert_eq!(rewind_entries(&sandbox), 0);
    pty.line("/rewind");
    pty.wait_text("1. write").await;
    pty.send(DOWN);
    pty.send("\r");
    pty.wait_text("rewind what, to just before message 1?")
        .await;
    pty.send(DOWN);
    pty.send("\r");
    pty.wait_text("8 messages leave the model's view").await;
    pty.send("\r");
    pty.wait_text("(rewound to just before message 1").await;
    assert_eq!(tree(sandbox.path()), edited);
    server.push(Reply::text("from scratch"));
    pty.send(CTRL_U);
    pty.line("start over");
    pty.wait_text("from scratch").await;
    assert_eq!(last_user_texts(&server), ["start over"]);
    pty.send(CTRL_D);
    assert!(pty.wait_exit().await);
}

#[tokio::test]
async fn rewind_in_plain_mode_asks_each_step_and_undo_brings_it_back() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    let [written, edited] = write_then_edit(&sandbox, &server).await;
    server.push_all([Reply::text("fresh")]);
    // Message 2, the files too, yes; then a message.
    let out = sandbox
        .chat(
            &server.base_url(),
            &["--yes", "--continue"],
            "/rewind\n2\n1\ny\nnext\n",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert_contains!(all, "  2. edit\n  1. write");
    assert_contains!(all, "  1. the conversation and the files");
    assert_contains!(all, "rewind to just before message 2: edit");
    assert_contains!(all, "    restored  src/a.txt");
    assert_contains!(all, "(rewound to just before message 2");
    assert_eq!(tree(sandbox.path()), written);
    assert_eq!(last_user_texts(&server), ["write", "next"]);

    // An empty answer cancels; then the undo.
    let out = sandbox
        .chat(
            &server.base_url(),
            &["--yes", "--continue"],
            "/rewind\n\n/rewind\nu\nYES\n",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert_contains!(all, "(cancelled)");
    assert_contains!(all, "  u. undo the last rewind");
    assert_contains!(all, "(undid the last rewind: 4 messages are back");
    assert_eq!(tree(sandbox.path()), edited);
    assert_eq!(rewind_entries(&sandbox), 2);
}

#[tokio::test]
async fn fork_with_the_files_writes_the_folder_and_the_new_run_works_in_it() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    let [_, edited] = write_then_edit(&sandbox, &server).await;
    let elsewhere = tempfile::tempdir().unwrap();
    let forked = elsewhere.path().join("attempt-2");
    server.push_all([
        Reply::tool_call(
            "call_3",
            "write_file",
            r#"{"path":"src/only-in-fork.txt","content":"fork\n"}"#,
        ),
        Reply::text("done in the fork"),
    ]);
    let input = format!("/fork\n1\n{}\nwrite more\n", forked.display());
    let out = sandbox
        .chat(&server.base_url(), &["--yes", "--continue"], &input)
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let all = format!("{}{}", out.stdout, out.stderr);
    let workdir = std::fs::canonicalize(sandbox.path()).unwrap();
    assert_contains!(
        all,
        &format!("folder for the files [{}-fork-1]", workdir.display())
    );
    assert_contains!(all, "(forked into run");
    assert_contains!(
        all,
        &format!("this run's working folder is {}", forked.display())
    );
    // The copy has the folder as it was, and the new call wrote there only.
    let mut expected = edited.clone();
    expected.insert(PathBuf::from("src/only-in-fork.txt"), b"fork\n".to_vec());
    assert_eq!(tree(&forked), expected);
    assert_eq!(tree(sandbox.path()), edited);
    assert!(!workdir.join("src/only-in-fork.txt").exists());
    assert_eq!(
        last_user_texts(&server),
        ["write", "edit", "write more"],
        "the fork continues the conversation"
    );
}

#[tokio::test]
async fn fork_without_checkpoints_asks_nothing() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    server.push_all([Reply::text("hi"), Reply::text("hi in the fork")]);
    let out = sandbox
        .chat(&server.base_url(), &["--yes"], "hello\n/fork\nmore\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(!all.contains("fork how?"), "{all}");
    assert_contains!(all, "(forked into run");
    assert_eq!(last_user_texts(&server), ["hello", "more"]);
}

#[tokio::test]
async fn show_marks_what_a_rewind_took_out_of_view_until_it_is_undone() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::text("first answer"),
        Reply::text("second answer"),
        Reply::text("third answer"),
        Reply::text("fourth answer"),
    ]);
    let out = sandbox
        .chat(&server.base_url(), &["--yes"], "one\ntwo\nthree\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let out = sandbox
        .run(
            &[
                "rewind",
                "last",
                "--to",
                "2",
                "--conversation-only",
                "--yes",
            ],
            "",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let out = sandbox
        .chat(&server.base_url(), &["--yes", "--continue"], "four\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);

    let out = sandbox.run(&["show", "last"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    insta::assert_snapshot!("show_of_a_rewound_run", out.stdout);
    let rewound_texts = |json: &str| -> Vec<String> {
        let rows: serde_json::Value = serde_json::from_str(json).unwrap();
        rows.as_array()
            .unwrap()
            .iter()
            .filter(|row| row["rewound"] == true)
            .map(|row| row["text"].as_str().unwrap().to_owned())
            .collect()
    };
    let out = sandbox.run(&["show", "last", "--json"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(
        rewound_texts(&out.stdout),
        ["two", "second answer", "three", "third answer"]
    );
    let rows: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 8, "the same rows as before");

    let out = sandbox
        .run(&["rewind", "last", "--undo", "--yes"], "")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let out = sandbox.run(&["show", "last"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(!out.stdout.contains("│ "), "{}", out.stdout);
    assert_contains!(out.stdout, "── undo of the last rewind");
    let out = sandbox.run(&["show", "last", "--json"], "").await;
    assert!(rewound_texts(&out.stdout).is_empty(), "{}", out.stdout);
}
