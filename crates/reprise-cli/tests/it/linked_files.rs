//! Files of a runs folder replaced by symbolic links: never followed, and never
//! silently: the chat and the listing say which file is not written, and why.

use crate::support::{Output, Sandbox};
use reprise_testkit::{Reply, ScriptedServer, assert_contains};

/// A sandbox with one run, made by a chat, and `file` of `dir` replaced by a link to
/// a file outside the sandbox (returned, with the run).
async fn run_with_link(
    sandbox: &Sandbox,
    server: &ScriptedServer,
    in_run: bool,
    file: &str,
) -> (std::path::PathBuf, tempfile::TempDir) {
    server.push(Reply::text("First."));
    let out = sandbox.chat(&server.base_url(), &["hello"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let run = sandbox.conversations().pop().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join(file);
    std::fs::write(&target, "").unwrap();
    let dir = if in_run {
        run.clone()
    } else {
        sandbox.runs_dir()
    };
    let _ = std::fs::remove_file(dir.join(file));
    std::os::unix::fs::symlink(&target, dir.join(file)).unwrap();
    (target, outside)
}

/// Continues the latest run with one message that makes a tool call.
async fn tool_call_turn(sandbox: &Sandbox, server: &ScriptedServer) -> Output {
    std::fs::write(sandbox.path().join("notes.txt"), "milk\n").unwrap();
    server.push_all([
        Reply::tool_call("call_1", "read_file", r#"{"path":"notes.txt"}"#),
        Reply::text("Milk."),
    ]);
    sandbox
        .chat(&server.base_url(), &["-c", "--yes"], "notes?\n")
        .await
}

#[tokio::test]
async fn a_linked_transcript_is_refused_aloud_and_nothing_is_written_through_it() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    let (target, _outside) = run_with_link(&sandbox, &server, true, "transcript.jsonl").await;
    let out = tool_call_turn(&sandbox, &server).await;
    assert_ne!(out.status, 0, "{}", out.stdout);
    assert_contains!(out.stderr, "transcript.jsonl");
    assert_contains!(out.stderr, "symbolic link");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "");
}

#[tokio::test]
async fn a_linked_history_is_named_as_the_history_not_as_a_run_folder() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    let (target, _outside) = run_with_link(&sandbox, &server, false, "history.jsonl").await;
    let out = tool_call_turn(&sandbox, &server).await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(
        out.stderr,
        "history.jsonl: a symbolic link, not followed: the prompts"
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "");
    let out = sandbox.run(&["runs"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(
        out.stderr,
        "history.jsonl: a symbolic link, not followed: the prompts"
    );
    assert!(!out.stderr.contains("run folder"), "{}", out.stderr);
}
