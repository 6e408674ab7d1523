//! Starting a chat on runs that are damaged or missing: a damaged `session.json` is
//! rebuilt and the chat says so; a start that fails leaves no run folder behind.

use reprise_testkit::assert_contains;

use crate::run_commands::{make_run, name};
use crate::support::Sandbox;

/// Flags of a plain chat that never reaches a model (nothing is sent in these tests).
const NO_MODEL: [&str; 5] = [
    "--plain",
    "--base-url",
    "http://127.0.0.1:9/v1",
    "--model",
    "m",
];

fn chat_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    NO_MODEL
        .iter()
        .copied()
        .chain(extra.iter().copied())
        .collect()
}

#[tokio::test]
async fn continue_rebuilds_a_corrupt_session_json_and_says_so() {
    let sandbox = Sandbox::new();
    let run = make_run(&sandbox.runs_dir(), "bread", 2).await;
    std::fs::write(run.join("session.json"), "{garbage").unwrap();

    let out = sandbox.run(&chat_args(&["--continue"]), "/exit\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stderr, "bread question 2");
    assert_contains!(out.stderr, "(resumed the conversation of");
    assert_contains!(out.stderr, &format!("{}/session.json", name(&run)));
    assert_contains!(out.stderr, "rebuilt from conversation.jsonl");
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("session.json")).unwrap()).unwrap();
    assert!(meta["sessionId"].is_string(), "{meta}");
}

#[tokio::test]
async fn a_start_that_fails_leaves_no_run_folder() {
    let sandbox = Sandbox::new();
    let run = make_run(&sandbox.runs_dir(), "bread", 1).await;

    let out = sandbox
        .run(&chat_args(&["--resume", "no-such-run"]), "/exit\n")
        .await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "no run matches \"no-such-run\"");
    assert_eq!(sandbox.runs(), vec![run.clone()]);

    // A run whose conversation cannot be read (a folder in its place).
    std::fs::remove_file(run.join("conversation.jsonl")).unwrap();
    std::fs::create_dir(run.join("conversation.jsonl")).unwrap();
    let out = sandbox
        .run(&chat_args(&["--resume", &name(&run)]), "/exit\n")
        .await;
    assert_ne!(out.status, 0, "{}", out.stdout);
    assert_eq!(sandbox.runs(), vec![run]);
}
