//! A chat killed in the middle of a turn's tool calls, then `--continue`, `/resume`
//! or a fork of the run (`--fork-session`): the turn is finished, not abandoned.
//! Real processes (the chat, the reference MCP server), real SIGKILLs, a scripted
//! model server.

use std::path::{Path, PathBuf};

use reprise_testkit::{Reply, ScriptedServer};

use crate::mcp_chat::configure;
use crate::support::{Sandbox, jsonl};

/// A tool of the reference server that changes things (no read-only or idempotent
/// hint): its calls are recorded as started.
const TOGGLE: &str = "ev__toggle-simulated-logging";

fn toggle(id: &str) -> reprise_testkit::ScriptedCall {
    reprise_testkit::ScriptedCall::new(id, TOGGLE, "{}")
}

fn kill(pty: &mut reprise_testkit::pty::Pty) {
    let pid = pty.child.process_id().unwrap();
    let status = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Starts a chat, has the model call `calls` and kills the chat while the gate
/// asks about the first; returns the run folder.
async fn killed_while_asking(
    sandbox: &Sandbox,
    server: &ScriptedServer,
    calls: Vec<reprise_testkit::ScriptedCall>,
) -> PathBuf {
    server.push(Reply::tool_calls(calls));
    let base_url = server.base_url();
    let mut pty = sandbox.pty(&["--plain", "--base-url", &base_url, "--model", "test-model"]);
    pty.wait_text("MCP server \"ev\": started").await;
    pty.line("toggle the logging");
    pty.wait_text(&format!("run {TOGGLE} {{}}?")).await;
    kill(&mut pty);
    pty.wait_exit().await;
    sandbox.conversations().remove(0)
}

/// The tool results of a run's conversation: (call id, text, afterCrash mark).
fn results(run: &Path) -> Vec<(String, String, Option<String>)> {
    jsonl(&run.join("conversation.jsonl"))
        .iter()
        .filter(|entry| entry["message"]["role"] == "tool")
        .map(|entry| {
            (
                entry["message"]["tool_call_id"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                entry["message"]["content"].as_str().unwrap().to_owned(),
                entry["afterCrash"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

/// Appends a start record for `ids` of the run's last call-making reply: what a
/// crash between the record and the tools' start leaves.
fn record_started(run: &Path, ids: &[&str]) {
    let path = run.join("conversation.jsonl");
    let entries = jsonl(&path);
    let reply = entries
        .iter()
        .rev()
        .find(|entry| entry["message"]["tool_calls"].is_array())
        .unwrap();
    let reply_uuid: uuid::Uuid = reply["uuid"].as_str().unwrap().parse().unwrap();
    let calls: Vec<reprise_session::StartedCall> = ids
        .iter()
        .map(|id| reprise_session::StartedCall {
            entry: reply_uuid,
            tool_call_id: (*id).to_owned(),
            tool: TOGGLE.to_owned(),
            allowed_by: "the person answered yes".to_owned(),
            idempotency_key: format!("key-{id}"),
            rerun: false,
        })
        .collect();
    let line = serde_json::to_string(&reprise_session::tool_start_entry(&calls)).unwrap();
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(&line);
    text.push('\n');
    std::fs::write(&path, text).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_cut_by_a_crash_comes_back_and_the_turn_ends_with_the_reply() {
    let sandbox = Sandbox::new();
    configure(&sandbox, "");
    let server = ScriptedServer::start().await;
    let run = killed_while_asking(&sandbox, &server, vec![toggle("c1")]).await;
    // Nothing ran and nothing was closed: the call has no result yet.
    assert!(results(&run).is_empty());

    server.push(Reply::text("Logging is on now."));
    let base_url = server.base_url();
    let args = [
        "--plain",
        "--base-url",
        &base_url,
        "--model",
        "test-model",
        "--continue",
    ];
    let mut pty = sandbox.pty(&args);
    pty.wait_text(&format!("run {TOGGLE} {{}}?")).await;
    pty.line("y");
    pty.wait_text("Logging is on now.").await;
    assert!(
        pty.contents().contains(&format!("re-asked: {TOGGLE}")),
        "{}",
        pty.contents()
    );
    pty.line("/exit");
    assert!(pty.wait_exit().await, "{}", pty.contents());

    let found = results(&run);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].1.contains("Started simulated"), "{}", found[0].1);
    assert_eq!(found[0].2.as_deref(), Some("reasked"));
    // The model got the real result, right after its call.
    let body = server.request_bodies().pop().unwrap();
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "tool");
    assert!(
        last["content"]
            .as_str()
            .unwrap()
            .contains("Started simulated")
    );
    server.assert_tool_call_pairing();
    let log = std::fs::read_to_string(run.join("session.log")).unwrap();
    assert!(log.contains(&format!("re-asked: {TOGGLE}")), "{log}");
    let shown = sandbox.run(&["show", "last"], "").await;
    assert!(
        shown.stdout.contains("(after a crash: re-asked)"),
        "{}",
        shown.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_may_have_run_is_asked_about_and_both_answers_are_kept() {
    let sandbox = Sandbox::new();
    configure(&sandbox, "");
    let server = ScriptedServer::start().await;
    let run = killed_while_asking(&sandbox, &server, vec![toggle("c1"), toggle("c2")]).await;
    record_started(&run, &["c1", "c2"]);

    server.push(Reply::text("One ran again, one may have run."));
    let base_url = server.base_url();
    let args = [
        "--plain",
        "--base-url",
        &base_url,
        "--model",
        "test-model",
        "--continue",
    ];
    let mut pty = sandbox.pty(&args);
    pty.wait_text("may have taken effect").await;
    pty.line("a");
    // Both calls are decided before either starts: the second question comes next.
    pty.wait_for("the second question", |screen| {
        screen.matches("[a]gain / [i]nterrupted").count() == 2
    })
    .await;
    pty.line("i");
    pty.wait_text("One ran again, one may have run.").await;
    pty.line("/exit");
    assert!(pty.wait_exit().await, "{}", pty.contents());

    let found = results(&run);
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!(found[0].0, "c1");
    assert!(found[0].1.contains("Started simulated"), "{}", found[0].1);
    assert_eq!(found[0].2.as_deref(), Some("ran-again"));
    assert_eq!(found[1].0, "c2");
    assert!(
        found[1].1.contains("may or may not have taken effect"),
        "{}",
        found[1].1
    );
    assert_eq!(found[1].2.as_deref(), Some("interrupted"));
    server.assert_tool_call_pairing();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_terminal_a_call_that_may_have_run_is_not_run_again() {
    let sandbox = Sandbox::new();
    configure(&sandbox, "");
    let server = ScriptedServer::start().await;
    let run = killed_while_asking(&sandbox, &server, vec![toggle("c1")]).await;
    record_started(&run, &["c1"]);

    server.push(Reply::text("It may have been toggled."));
    let out = sandbox.chat(&server.base_url(), &["--continue"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("It may have been toggled."),
        "{}",
        out.stdout
    );
    let found = results(&run);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].2.as_deref(), Some("interrupted"));
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(
        said.contains(&format!("interrupted (may have run): {TOGGLE}")),
        "{said}"
    );
    server.assert_tool_call_pairing();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_screen_a_question_cut_by_a_crash_comes_back_in_its_box() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    server.push(Reply::tool_call(
        "call_1",
        "write_file",
        r#"{"path":"notes.txt","content":"buy milk\n"}"#,
    ));
    let base_url = server.base_url();
    let args = ["--base-url", base_url.as_str(), "--model", "test-model"];
    let mut pty = sandbox.pty(&args);
    pty.wait_text("/help · /resume").await;
    pty.line("note that I must buy milk");
    pty.wait_text("the step gate asks").await;
    kill(&mut pty);
    pty.wait_exit().await;
    let run = sandbox.conversations().remove(0);
    assert!(results(&run).is_empty());
    assert!(!sandbox.path().join("notes.txt").exists());

    server.push(Reply::text("Noted: buy milk."));
    let mut continued = args.to_vec();
    continued.push("--continue");
    let mut pty = sandbox.pty(&continued);
    pty.wait_text("the step gate asks").await;
    pty.wait_text("re-asked: write_file").await;
    pty.send("y");
    pty.wait_text("Noted: buy milk.").await;
    pty.wait_for("the turn to end", |s| !s.contains("working"))
        .await;
    pty.send("\x03");
    assert!(pty.wait_exit().await);
    let found = results(&run);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].1.contains("notes.txt"), "{}", found[0].1);
    assert_eq!(found[0].2.as_deref(), Some("reasked"));
    assert_eq!(
        std::fs::read_to_string(sandbox.path().join("notes.txt")).unwrap(),
        "buy milk\n"
    );
    server.assert_tool_call_pairing();
}

/// A full-screen chat killed while the gate asks about a `write_file` call; returns
/// the run folder.
async fn full_screen_killed_while_asking(sandbox: &Sandbox, server: &ScriptedServer) -> PathBuf {
    server.push(Reply::tool_call(
        "call_1",
        "write_file",
        r#"{"path":"notes.txt","content":"buy milk\n"}"#,
    ));
    let base_url = server.base_url();
    let mut pty = sandbox.pty(&["--base-url", &base_url, "--model", "test-model"]);
    pty.wait_text("/help · /resume").await;
    pty.line("note that I must buy milk");
    pty.wait_text("the step gate asks").await;
    kill(&mut pty);
    pty.wait_exit().await;
    let run = sandbox.conversations().remove(0);
    assert!(results(&run).is_empty());
    run
}

/// The screen with what changes from run to run masked: digits (dates, times, run
/// names) and the status line (the spinner, the seconds the turn has taken).
fn masked(screen: &str) -> String {
    screen
        .lines()
        .filter(|line| !line.contains(" working "))
        .map(|line| {
            line.chars()
                .map(|c| if c.is_ascii_digit() { '#' } else { c })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_of_a_cut_run_brings_its_question_back_and_finishes_the_turn() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    let run = full_screen_killed_while_asking(&sandbox, &server).await;

    server.push(Reply::text("Noted: buy milk."));
    let base_url = server.base_url();
    let mut pty = sandbox.pty(&["--base-url", &base_url, "--model", "test-model"]);
    pty.wait_text("/help · /resume").await;
    pty.line("/resume");
    pty.wait_text("resume a run").await;
    pty.wait_text("note that I must buy milk").await;
    pty.send("\r");
    pty.wait_text("(resumed the conversation of").await;
    pty.wait_text("re-asked: write_file").await;
    pty.wait_text("the step gate asks").await;
    insta::assert_snapshot!(masked(&pty.contents()));
    assert!(!sandbox.path().join("notes.txt").exists());
    pty.send("y");
    pty.wait_text("Noted: buy milk.").await;
    pty.wait_for("the turn to end", |s| !s.contains("working"))
        .await;
    pty.send("\x03");
    assert!(pty.wait_exit().await);

    let found = results(&run);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].2.as_deref(), Some("reasked"));
    assert_eq!(
        std::fs::read_to_string(sandbox.path().join("notes.txt")).unwrap(),
        "buy milk\n"
    );
    let body = server.request_bodies().pop().unwrap();
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "tool");
    assert_eq!(last["tool_call_id"], "call_1");
    server.assert_tool_call_pairing();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_of_a_cut_run_finishes_the_turn_in_the_copy_and_leaves_the_original_cut() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    let run = full_screen_killed_while_asking(&sandbox, &server).await;

    server.push(Reply::text("Noted in the copy."));
    let out = sandbox
        .chat(
            &server.base_url(),
            &["--continue", "--fork-session", "--yes"],
            "",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(said.contains("re-asked: write_file"), "{said}");
    assert!(out.stdout.contains("Noted in the copy."), "{}", out.stdout);
    assert_eq!(
        std::fs::read_to_string(sandbox.path().join("notes.txt")).unwrap(),
        "buy milk\n"
    );
    let runs = sandbox.conversations();
    assert_eq!(runs.len(), 2);
    let copy = runs.iter().find(|r| **r != run).unwrap();
    let found = results(copy);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].2.as_deref(), Some("reasked"));
    // The original is as the crash left it: its turn is finished when it is
    // opened.
    assert!(results(&run).is_empty());
    server.push(Reply::text("Noted in the original."));
    let name = run.file_name().unwrap().to_str().unwrap().to_owned();
    std::fs::remove_file(sandbox.path().join("notes.txt")).unwrap();
    let out = sandbox
        .chat(&server.base_url(), &["--resume", &name, "--yes"], "")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("Noted in the original."),
        "{}",
        out.stdout
    );
    assert_eq!(results(&run).len(), 1);
    server.assert_tool_call_pairing();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_resume_of_a_cut_run_finishes_its_turn_before_the_next_prompt() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    let run = full_screen_killed_while_asking(&sandbox, &server).await;

    server.push_all([
        Reply::text("Noted: buy milk."),
        Reply::text("Anything else?"),
    ]);
    let out = sandbox
        .chat(&server.base_url(), &["--yes"], "/resume\n1\nthanks\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(said.contains("re-asked: write_file"), "{said}");
    let noted = out.stdout.find("Noted: buy milk.").unwrap();
    let next = out.stdout.find("Anything else?").unwrap();
    assert!(noted < next, "{}", out.stdout);
    let found = results(&run);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].2.as_deref(), Some("reasked"));
    let bodies = server.request_bodies();
    let roles: Vec<String> = crate::support::messages(bodies.last().unwrap())
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "assistant", "user"]
    );
    server.assert_tool_call_pairing();
}
