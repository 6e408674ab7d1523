//! run_command: the result, the cap on output, and the process group killed whole.

use reprise_testkit::assert_contains;
use reprise_testkit::process_group::{group_dies, pid_written};
use reprise_tools::run_command_tool;
use tokio_util::sync::CancellationToken;

use crate::support::{Folders, call, call_cancellable};

const SPAWNS_SLEEPERS: &str = "sleep 1000 & sleep 1000 & echo $$ > src/pid; wait";

#[tokio::test]
async fn the_result_starts_with_the_exit_status_then_stdout_and_stderr() {
    let folders = Folders::new();
    let run = run_command_tool(folders.workspace(), folders.settings());
    let output = call(&run, r#"{"command":"pwd; echo oops >&2; exit 3"}"#).await;
    assert!(!output.is_error, "{}", output.content);
    let work = folders.path("work").canonicalize().unwrap();
    assert_eq!(
        output.content,
        format!(
            "exit status 3\n--- stdout ---\n{}\n--- stderr ---\noops",
            work.display()
        )
    );
    let output = call(&run, r#"{"command":"true"}"#).await;
    assert_eq!(output.content, "exit status 0\n(no output)");
    let output = call(&run, r#"{"command":"kill -9 $$"}"#).await;
    assert_eq!(output.content, "killed by signal 9 (SIGKILL)\n(no output)");
    let output = call(&run, r#"{"command":"read line; echo \"[$line]\""}"#).await;
    assert_contains!(output.content, "[]");
    let output = call(&run, r#"{"command":"  "}"#).await;
    assert!(output.is_error);
    assert_contains!(output.content, "run_command failed: the command is empty");
}

#[tokio::test]
async fn long_output_keeps_its_start_and_end() {
    let folders = Folders::new();
    let mut settings = folders.settings();
    settings.output_cap = 1000;
    let run = run_command_tool(folders.workspace(), settings);
    let output = call(
        &run,
        r#"{"command":"echo start; seq 1 20000; echo end >&2"}"#,
    )
    .await;
    let (stdout, stderr) = output.content.split_once("--- stderr ---").unwrap();
    assert!(
        stdout.starts_with("exit status 0\n--- stdout ---\nstart\n1\n2\n"),
        "{stdout}"
    );
    assert_contains!(stdout, " bytes cut …]\n");
    assert!(stdout.trim_end().ends_with("19999\n20000"), "{stdout}");
    assert!(stdout.len() < 1200, "{} bytes", stdout.len());
    assert_eq!(stderr, "\nend");
}

#[tokio::test]
async fn a_timeout_kills_the_whole_group() {
    let folders = Folders::new();
    // Started through the trampoline (which becomes the shell) and without it.
    for settings in [folders.settings(), folders.settings_without_trampoline()] {
        let run = run_command_tool(folders.workspace(), settings);
        let arguments = format!(r#"{{"command":"{SPAWNS_SLEEPERS}","timeout":1}}"#);
        let output = call(&run, &arguments).await;
        assert_eq!(
            output.content,
            "timed out after 1 s: the command and the processes it started were killed\n\
             (no output)"
        );
        let group = std::fs::read_to_string(folders.path("work/src/pid")).unwrap();
        group_dies(group.trim().parse().unwrap()).await;
    }
}

#[tokio::test]
async fn background_processes_die_when_the_command_ends() {
    let folders = Folders::new();
    let run = run_command_tool(folders.workspace(), folders.settings());
    let output = call(
        &run,
        r#"{"command":"sleep 1000 & echo $$ > src/pid; echo started"}"#,
    )
    .await;
    assert_eq!(output.content, "exit status 0\n--- stdout ---\nstarted");
    let group = std::fs::read_to_string(folders.path("work/src/pid")).unwrap();
    group_dies(group.trim().parse().unwrap()).await;
}

#[tokio::test]
async fn a_cancelled_call_kills_the_whole_group() {
    let folders = Folders::new();
    let run = run_command_tool(folders.workspace(), folders.settings());
    let cancel = CancellationToken::new();
    let arguments = format!(r#"{{"command":"{SPAWNS_SLEEPERS}"}}"#);
    let call = call_cancellable(&run, &arguments, cancel.clone());
    let (output, group) = tokio::join!(call, async {
        let group = pid_written(&folders.path("work/src/pid")).await;
        cancel.cancel();
        group
    });
    assert_contains!(
        output.content,
        "cancelled: the command and the processes it started were killed"
    );
    group_dies(group).await;
}

#[tokio::test]
async fn a_call_dropped_midway_kills_the_whole_group() {
    let folders = Folders::new();
    let run = std::sync::Arc::new(run_command_tool(folders.workspace(), folders.settings()));
    let arguments = format!(r#"{{"command":"{SPAWNS_SLEEPERS}"}}"#);
    let running = {
        let run = std::sync::Arc::clone(&run);
        tokio::spawn(async move { call(run.as_ref(), &arguments).await })
    };
    let group = pid_written(&folders.path("work/src/pid")).await;
    running.abort();
    assert!(running.await.unwrap_err().is_cancelled());
    group_dies(group).await;
}
