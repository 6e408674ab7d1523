//! The chat's built-in tools end to end: the model writes a file and runs a command
//! in the sandbox, read-only tools pass the gate without a question, the config
//! chooses the tools offered, and Ctrl-C kills a command's whole process group.

use crate::subagents::write_config;
use crate::support::{Sandbox, jsonl};
use reprise_testkit::assert_contains;
use reprise_testkit::process_group::{group_dies, pid_written};
use reprise_testkit::{Reply, ScriptedServer};

/// What plain mode printed from the first tool call to the last result line.
fn tool_lines(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().collect();
    let first = lines.iter().position(|l| l.starts_with('⚙')).unwrap();
    let last = lines
        .iter()
        .rposition(|l| l.starts_with("  ↳") || l.starts_with("  ✗"))
        .unwrap();
    lines[first..=last].join("\n")
}

#[tokio::test]
async fn the_model_writes_a_file_then_runs_a_command_that_cannot_touch_the_runs_folder() {
    // The command makes a file at the top of the working folder, which holds the
    // runs folder: reprise starts it through itself, in a mount namespace where the
    // runs folder alone is read-only.
    let sandbox = Sandbox::new();
    std::fs::create_dir(sandbox.path().join("src")).unwrap();
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::tool_call(
            "call_1",
            "write_file",
            r#"{"path":"src/hello.txt","content":"hello\n"}"#,
        ),
        Reply::tool_call(
            "call_2",
            "run_command",
            r#"{"command":"cat src/hello.txt; echo made > made.txt; echo x > .run/tampered"}"#,
        ),
        Reply::text("Done."),
    ]);
    let out = sandbox
        .chat(&server.base_url(), &["--yes"], "make a hello file\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "Done.\n");
    assert_eq!(
        std::fs::read_to_string(sandbox.path().join("src/hello.txt")).unwrap(),
        "hello\n"
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.path().join("made.txt")).unwrap(),
        "made\n"
    );
    assert!(!sandbox.runs_dir().join("tampered").exists());
    insta::assert_snapshot!(tool_lines(&out.stderr));

    let bodies = server.request_bodies();
    let result = &bodies[2]["messages"][5];
    assert_eq!(result["role"], "tool");
    assert_eq!(
        result["content"],
        "exit status 2\n--- stdout ---\nhello\n--- stderr ---\n\
         sh: 1: cannot create .run/tampered: Read-only file system"
    );
    let run = sandbox.conversations().remove(0);
    let decisions: Vec<(String, String)> = jsonl(&run.join("transcript.jsonl"))
        .iter()
        .filter_map(|r| {
            Some((
                r["name"].as_str()?.to_owned(),
                format!("{} ({})", r["decision"].as_str()?, r["reason"].as_str()?),
            ))
        })
        .collect();
    assert_eq!(
        decisions,
        [
            ("write_file".to_owned(), "allow (--yes)".to_owned()),
            ("run_command".to_owned(), "allow (--yes)".to_owned()),
        ]
    );
}

#[tokio::test]
async fn read_only_tools_run_without_a_question_and_the_config_chooses_the_tools() {
    let sandbox = Sandbox::new();
    std::fs::write(sandbox.path().join("notes.txt"), "buy milk\n").unwrap();
    write_config(
        &sandbox,
        "builtin_tools = [\"read_file\", \"write_file\"]\n",
    );
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::tool_call("call_1", "read_file", r#"{"path":"notes.txt"}"#),
        Reply::tool_call(
            "call_2",
            "write_file",
            r#"{"path":"notes.txt","content":"x"}"#,
        ),
        Reply::text("Read, not written."),
    ]);
    // No --yes and no terminal: a question would be answered no.
    let out = sandbox
        .chat(&server.base_url(), &[], "read my notes\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stderr, "  ↳ buy milk");
    assert_contains!(
        out.stderr,
        "✗ error: the call to write_file was not allowed"
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.path().join("notes.txt")).unwrap(),
        "buy milk\n"
    );
    let bodies = server.request_bodies();
    let offered: Vec<&str> = bodies[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["read_file", "write_file"]);
    let run = sandbox.conversations().remove(0);
    let read = jsonl(&run.join("transcript.jsonl"))
        .into_iter()
        .find(|r| r["type"] == "tool_result" && r["name"] == "read_file")
        .unwrap();
    assert_eq!(read["decision"], "allow");
    assert_eq!(read["reason"], "a read-only built-in tool");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_kills_a_commands_whole_process_group() {
    let sandbox = Sandbox::new();
    std::fs::create_dir(sandbox.path().join("src")).unwrap();
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::tool_call(
            "call_1",
            "run_command",
            r#"{"command":"sleep 1000 & sleep 1000 & echo $$ > src/pid; wait"}"#,
        ),
        Reply::text("Here again."),
    ]);
    let base_url = server.base_url();
    let mut pty = sandbox.pty(&[
        "--plain",
        "--yes",
        "--base-url",
        &base_url,
        "--model",
        "test-model",
    ]);
    pty.line("sleep");
    let group = pid_written(&sandbox.path().join("src/pid")).await;
    // Ctrl-C on the terminal: SIGINT, as a person would send it.
    pty.send("\x03");
    pty.wait_text("(cancelled)").await;
    group_dies(group).await;
    pty.line("hello?");
    pty.wait_text("Here again.").await;
    pty.line("/exit");
    assert!(pty.wait_exit().await, "{}", pty.contents());
}
