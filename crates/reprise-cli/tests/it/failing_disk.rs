//! A disk whose syncs fail under a chat: a library preloaded into the binary makes
//! `fsync`/`fdatasync` of chosen files fail with EIO. A failed sync of the
//! conversation stops the chat from writing it (what the file holds and what the
//! model was told must never differ); a failed sync of a file kept beside it (the
//! prompt history, the run's transcript) is said on the screen.

use reprise_testkit::failing_sync::FailingSync;
use reprise_testkit::{Reply, ScriptedServer, assert_contains, check_tool_call_pairing};
use serde_json::Value;

use crate::support::{Output, Sandbox, jsonl, run_command};

/// A plain chat against `server` with the syncs of the paths matching `pattern`
/// failing (the `nth` one, or all).
async fn chat_on_failing_disk(
    sandbox: &Sandbox,
    server: &ScriptedServer,
    pattern: &str,
    nth: Option<usize>,
    input: &str,
) -> Output {
    let libraries = tempfile::tempdir().unwrap();
    let failing = FailingSync::build(libraries.path()).unwrap();
    let base_url = server.base_url();
    let args = [
        "--plain",
        "--yes",
        "--base-url",
        &base_url,
        "--model",
        "test-model",
    ];
    let mut command = sandbox.command(&args);
    command.envs(failing.env(pattern, nth));
    run_command(command, input).await
}

/// The roles of the messages in a conversation file, in order.
fn roles(entries: &[Value]) -> Vec<String> {
    entries
        .iter()
        .filter_map(|entry| entry["message"]["role"].as_str().map(str::to_owned))
        .collect()
}

/// The single run with a conversation.
fn the_conversation(sandbox: &Sandbox) -> std::path::PathBuf {
    let runs = sandbox.conversations();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs[0].join("conversation.jsonl")
}

#[tokio::test]
async fn a_prompt_whose_sync_failed_stops_the_chat_writing_the_conversation() {
    let sandbox = Sandbox::new();
    let server =
        ScriptedServer::start_with([Reply::text("too late"), Reply::text("on disk")]).await;
    // The first sync of the conversation is the first prompt's.
    let out = chat_on_failing_disk(
        &sandbox,
        &server,
        "*/conversation.jsonl",
        Some(1),
        "first\nsecond\n",
    )
    .await;
    assert_ne!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stderr, "Input/output error");
    assert_contains!(out.stderr, "writes nothing more to run");
    assert_contains!(out.stderr, "reprise --resume");
    // Nothing was sent to the model, and the second prompt was not written after
    // the first: the file never holds what this chat's model was not told.
    assert_eq!(server.request_count(), 0);
    let conversation = the_conversation(&sandbox);
    assert_eq!(roles(&jsonl(&conversation)), ["user"]);

    // A new process goes on from what is on disk.
    let out = sandbox
        .chat(&server.base_url(), &["--continue"], "third\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "too late");
    assert_eq!(roles(&jsonl(&conversation)), ["user", "user", "assistant"]);
}

#[tokio::test]
async fn a_tool_result_whose_sync_failed_is_never_followed_by_an_interrupted_one() {
    let sandbox = Sandbox::new();
    std::fs::write(sandbox.path().join("notes.txt"), "the real result\n").unwrap();
    let server = ScriptedServer::start_with([
        Reply::tool_call("call_1", "read_file", r#"{"path":"notes.txt"}"#),
        Reply::text("read it"),
    ])
    .await;
    // Syncs of the conversation: the prompt, the call, then its result.
    let out = chat_on_failing_disk(
        &sandbox,
        &server,
        "*/conversation.jsonl",
        Some(3),
        "read the notes\nand then?\n",
    )
    .await;
    assert_ne!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stderr, "writes nothing more to run");
    assert_eq!(server.request_count(), 1);
    let conversation = the_conversation(&sandbox);
    let entries = jsonl(&conversation);
    assert_eq!(roles(&entries), ["user", "assistant", "tool"]);
    assert_contains!(
        entries[2]["message"]["content"].as_str().unwrap(),
        "the real result"
    );

    // Resumed: the turn the failed sync stopped is finished as after a crash (the
    // model answers the result), and the call has its one result, the real one.
    server.push(Reply::text("nothing more"));
    let out = sandbox
        .chat(&server.base_url(), &["--continue"], "so?\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "read it");
    assert_eq!(server.request_count(), 3);
    let body = server.request_bodies().pop().unwrap();
    check_tool_call_pairing(&body).unwrap();
    let results: Vec<Value> = crate::support::messages(&body)
        .into_iter()
        .filter(|message| message["role"] == "tool")
        .collect();
    assert_eq!(results.len(), 1, "{body}");
    assert_contains!(results[0]["content"].as_str().unwrap(), "the real result");
}

#[tokio::test]
async fn a_failed_sync_of_the_history_is_said_and_the_chat_goes_on() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start_with([Reply::text("hello"), Reply::text("again")]).await;
    // The history's own data sync.
    let out = chat_on_failing_disk(&sandbox, &server, "*/history.jsonl", None, "hi\nthere\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "again");
    assert_eq!(
        out.stderr
            .matches("history.jsonl: this line may not be kept for up/down: sync")
            .count(),
        2,
        "{}",
        out.stderr
    );

    // The runs folder's sync that makes a new history file's name durable: the
    // first sync of the runs folder is the new run's, the second the history's.
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start_with([Reply::text("hello")]).await;
    let out = chat_on_failing_disk(&sandbox, &server, "*/.run", Some(2), "hi\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(
        out.stderr,
        "history.jsonl: this line may not be kept for up/down: sync .run: Input/output error"
    );
}

#[tokio::test]
async fn a_failed_sync_of_the_transcript_is_said_and_the_chat_goes_on() {
    let sandbox = Sandbox::new();
    std::fs::write(sandbox.path().join("notes.txt"), "notes\n").unwrap();
    let script = || {
        [
            Reply::tool_call("call_1", "read_file", r#"{"path":"notes.txt"}"#),
            Reply::text("done"),
        ]
    };
    let server = ScriptedServer::start_with(script()).await;
    let out = chat_on_failing_disk(
        &sandbox,
        &server,
        "*/transcript.jsonl",
        None,
        "read the notes\n",
    )
    .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "done");
    assert_contains!(
        out.stderr,
        "transcript.jsonl: this tool call may not be kept: sync"
    );
    assert_contains!(
        out.stderr,
        "transcript.jsonl: this tool result may not be kept: sync"
    );

    // The run folder's sync that makes the new transcript's name durable: the run
    // folder is synced when session.log is made, when session.json is written, then
    // when the transcript is made.
    let sandbox = Sandbox::new();
    std::fs::write(sandbox.path().join("notes.txt"), "notes\n").unwrap();
    let server = ScriptedServer::start_with(script()).await;
    let out =
        chat_on_failing_disk(&sandbox, &server, "*/.run/*Z", Some(3), "read the notes\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stderr, "this tool call may not be kept: sync .run/");
}
