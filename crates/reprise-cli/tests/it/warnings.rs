//! The chat's own warnings (here: a `context-window.json` that cannot be kept)
//! reach the person, the run's `session.log`, and with `--log-file`, that file.

use std::ffi::OsStr;

use reprise_testkit::assert_contains;
use reprise_testkit::{Reply, ScriptedServer};

use crate::run_commands::{make_run, name};
use crate::support::Sandbox;

/// A run whose `context-window.json` cannot be written (a folder is in its place).
async fn run_that_cannot_keep_its_window(sandbox: &Sandbox) -> std::path::PathBuf {
    let run = make_run(&sandbox.runs_dir(), "bread", 1).await;
    std::fs::create_dir(run.join("context-window.json")).unwrap();
    run
}

#[tokio::test]
async fn a_warning_of_the_chat_is_shown_on_stderr_and_kept_in_session_log() {
    let sandbox = Sandbox::new();
    let run = run_that_cannot_keep_its_window(&sandbox).await;
    let server = ScriptedServer::start().await;
    server.report_context_window(32_768);
    server.push(Reply::text("Still bread."));
    let log_file = sandbox.path().join("reprise.log");
    let mut command = sandbox.command(&[
        "--plain",
        "--base-url",
        &server.base_url(),
        "--model",
        "test-model",
        "--resume",
        &name(&run),
        "--log-file",
        log_file.to_str().unwrap(),
    ]);
    command.env("RUST_LOG", "info");
    let out = crate::support::run_command(command, "and more?\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "Still bread.");
    let warning = out
        .stderr
        .lines()
        .find(|line| line.starts_with("! ") && line.contains("context-window.json"))
        .unwrap_or_else(|| panic!("no warning: {}", out.stderr))
        .to_owned();
    // Said once.
    assert_eq!(
        out.stderr
            .lines()
            .filter(|line| line.contains("context-window.json"))
            .count(),
        1,
        "{}",
        out.stderr
    );

    let log = std::fs::read_to_string(run.join("session.log")).unwrap();
    assert_contains!(log, &warning);
    // The log file has it too, with the other events of that level.
    let file = std::fs::read_to_string(&log_file).unwrap();
    assert_contains!(file, "WARN reprise_chat");
    assert_contains!(file, "context-window.json");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_the_full_screen_a_warning_is_a_notice_of_the_chat() {
    let sandbox = Sandbox::new();
    let run = run_that_cannot_keep_its_window(&sandbox).await;
    let server = ScriptedServer::start().await;
    server.report_context_window(32_768);
    let base_url = server.base_url();
    let mut pty = sandbox.pty_with_env(
        &[
            "--base-url",
            &base_url,
            "--model",
            "test-model",
            "--resume",
            &name(&run),
        ],
        &[("RUST_LOG", OsStr::new("warn"))],
    );
    pty.wait_text("(resumed the conversation of").await;
    pty.wait_text("context-window.json").await;
    pty.send("\x04");
    assert!(pty.wait_exit().await);
    let log = std::fs::read_to_string(run.join("session.log")).unwrap();
    assert_contains!(log, "context-window.json");
}
