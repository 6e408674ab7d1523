//! Starting a chat on a named run: a prefix names the runs that were there before
//! the start; a damaged `session.json` is rebuilt and the chat says so; a start that
//! fails leaves no run folder behind.

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

#[tokio::test]
async fn resume_by_prefix_does_not_count_the_folder_made_for_this_start() {
    let sandbox = Sandbox::new();
    let run = make_run(&sandbox.runs_dir(), "bread", 1).await;
    // Every run folder's name starts with the year: the one made for this start too.
    let prefix = &name(&run)[..2];

    let out = sandbox
        .run(&chat_args(&["--resume", prefix]), "/exit\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stderr, "bread question 1");
    assert_contains!(out.stderr, "(resumed the conversation of");
    // `show` resolves the same prefix to the same run.
    let show = sandbox.run(&["show", prefix], "").await;
    assert_eq!(show.status, 0, "{}", show.stderr);
    assert_contains!(show.stdout, "bread question 1");

    // The full screen resolves it the same way.
    let mut pty = sandbox.pty(&[
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--resume",
        prefix,
    ]);
    pty.wait_text("(resumed the conversation of").await;
    assert_contains!(pty.contents(), "bread question 1");
    pty.send("\x04");
    assert!(pty.wait_exit().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_another_chat_has_open_is_refused_with_the_way_to_continue_a_copy() {
    let sandbox = Sandbox::new();
    let run = make_run(&sandbox.runs_dir(), "bread", 1).await;
    let mut holder = sandbox.pty(&[
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--resume",
        &name(&run),
    ]);
    holder.wait_text("(resumed the conversation of").await;

    let out = sandbox
        .run(&chat_args(&["--resume", &name(&run)]), "/exit\n")
        .await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "is open for writing by process");
    assert_contains!(
        out.stderr,
        &format!("reprise --resume {} --fork-session", name(&run))
    );
    // What it suggests works while the other chat still has the run open.
    let out = sandbox
        .run(
            &chat_args(&["--resume", &name(&run), "--fork-session"]),
            "/exit\n",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stderr, "bread question 1");
    holder.send("\x04");
    assert!(holder.wait_exit().await);
}
