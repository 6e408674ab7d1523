//! Subagents in the chat: `[agents.NAME]` in the config, a scripted model server
//! answering both the main agent and the subagent, the real binary.

use std::path::Path;
use std::time::Duration;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use reprise_cli::screens::tui::render::{draw, draw_live};
use reprise_cli::screens::tui::view::{ChatView, Item, SubagentWork, ToolResultView, ToolView};
use reprise_testkit::{Reply, ScriptedServer, assert_contains, request_messages, tool_calls_of};
use serde_json::Value;

use crate::support::{Sandbox, jsonl};

/// A scout that may list folders and read files.
pub(crate) const SCOUT: &str = "[agents.scout]\n\
description = \"Looks through the files and reports what it finds.\"\n\
system_prompt = \"You are a scout. Look, then report in one line.\"\n\
tools = [\"list_*\", \"read_file\"]\n\
max_turns = 5\n";

pub(crate) fn write_config(sandbox: &Sandbox, text: &str) {
    let dir = sandbox.path().join("xdg/reprise");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

fn delegate(id: &str, task: &str) -> Reply {
    Reply::tool_call(id, "scout", format!(r#"{{"task":"{task}"}}"#))
}

/// The entries of a JSONL transcript that hold a message, with their messages.
fn messages_of(path: &Path) -> Vec<(Value, Value)> {
    jsonl(path)
        .into_iter()
        .filter_map(|entry| Some((entry.get("message")?.clone(), entry)))
        .collect()
}

fn roles(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m["role"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// One delegation: the main agent hands the scout a task, the scout lists the
/// folder, answers, and the main agent answers with what it got.
pub(crate) fn one_delegation(server: &ScriptedServer, call: &str, answer: &str) {
    server.push_all([
        delegate(call, "list the folder"),
        Reply::tool_call("s1", "list_dir", r#"{"path":"."}"#),
        Reply::text(answer),
        Reply::text("The scout found notes.txt."),
    ]);
}

/// `reprise show --subagents` of [`one_delegation`] asked "what is here?": the
/// scout's work under the call, between the question and the answer.
pub(crate) fn assert_one_delegation_shown(shown: &str) {
    assert_contains!(shown, "⚙ scout {\"task\":\"list the folder\"}");
    assert_contains!(shown, "  [scout] ⚙ list_dir {\"path\":\".\"}");
    assert_contains!(shown, "  [scout] The folder holds notes.txt.");
    let position = |text: &str| shown.find(text).unwrap();
    assert!(position("› what is here?") < position("⚙ scout"));
    assert!(position("⚙ scout") < position("The scout found notes.txt."));
}

#[tokio::test]
async fn a_configured_subagent_takes_a_task_and_its_answer_is_the_result() {
    let sandbox = Sandbox::new();
    write_config(&sandbox, SCOUT);
    std::fs::write(sandbox.path().join("notes.txt"), "buy milk\n").unwrap();
    let server = ScriptedServer::start().await;
    one_delegation(&server, "p1", "The folder holds notes.txt.");
    let out = sandbox
        .chat(&server.base_url(), &["--yes"], "what is here?\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    // Plain mode: the subagent's work indented and marked with its name.
    assert_contains!(out.stderr, "⚙ scout {\"task\":\"list the folder\"}");
    assert_contains!(out.stderr, "  [scout] ⚙ list_dir {\"path\":\".\"}");
    assert_contains!(out.stderr, "  [scout]   ↳ .run/ (+2 lines)");
    assert_contains!(out.stderr, "  [scout] The folder holds notes.txt.");
    assert_contains!(out.stderr, "  ↳ The folder holds notes.txt.");

    let bodies = server.request_bodies();
    assert_eq!(bodies.len(), 4);
    // The main agent is offered the subagent as a tool, described as configured.
    let scout_tool = bodies[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "scout")
        .unwrap();
    assert_eq!(
        scout_tool["function"]["description"],
        "Looks through the files and reports what it finds."
    );
    // The subagent: its own prompt, the task alone, only the tools its patterns name.
    let child = request_messages(&bodies[1]);
    assert_eq!(
        child[0]["content"],
        "You are a scout. Look, then report in one line."
    );
    assert_eq!(child[1]["content"], "list the folder");
    assert_eq!(child.len(), 2);
    let mut offered = tool_names(&bodies[1]);
    offered.sort();
    assert_eq!(offered, ["list_dir", "read_file"]);
    // Its final answer is the call's result.
    let main_after = request_messages(&bodies[3]);
    let result = main_after.last().unwrap();
    assert_eq!(result["role"], "tool");
    assert_eq!(result["tool_call_id"], "p1");
    assert_eq!(result["content"], "The folder holds notes.txt.");
    server.assert_tool_call_pairing();

    // On disk: its transcript, mapped in session.json, the task naming its call.
    let run = sandbox.conversations().remove(0);
    let session: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("session.json")).unwrap()).unwrap();
    assert_eq!(session["subagents"]["scout"], "subagents/scout.jsonl");
    let child_file = messages_of(&run.join("subagents/scout.jsonl"));
    let (child_messages, child_entries): (Vec<Value>, Vec<Value>) = child_file.into_iter().unzip();
    assert_eq!(
        roles(&child_messages),
        ["user", "assistant", "tool", "assistant"]
    );
    assert_eq!(child_entries[0]["parentCall"], "p1");
    // transcript.jsonl: the subagent's call and result with `agent` set.
    let records = jsonl(&run.join("transcript.jsonl"));
    let agents_and_names: Vec<(String, String, String)> = records
        .iter()
        .map(|r| {
            (
                r["agent"].as_str().unwrap().to_owned(),
                r["type"].as_str().unwrap().to_owned(),
                r["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected = [
        ("main", "tool_call", "scout"),
        ("scout", "tool_call", "list_dir"),
        ("scout", "tool_result", "list_dir"),
        ("main", "tool_result", "scout"),
    ]
    .map(|(a, t, n)| (a.to_owned(), t.to_owned(), n.to_owned()));
    assert_eq!(agents_and_names, expected);
    let log = std::fs::read_to_string(run.join("session.log")).unwrap();
    assert_contains!(log, "  [scout] ⚙ list_dir");
    assert_contains!(log, "  [scout] The folder holds notes.txt.");

    // `reprise show --subagents` prints the work under the call; without it, not.
    let shown = sandbox.run(&["show", "last", "--subagents"], "").await;
    assert_eq!(shown.status, 0, "{}", shown.stderr);
    assert_one_delegation_shown(&shown.stdout);
    let plain = sandbox.run(&["show", "last"], "").await;
    assert!(!plain.stdout.contains("[scout]"), "{}", plain.stdout);
    let json = sandbox
        .run(&["show", "last", "--subagents", "--json"], "")
        .await;
    let rows: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(
        json.stdout,
        format!("{}\n", serde_json::to_string_pretty(&rows).unwrap()),
        "laid out as serde_json lays out a value"
    );
    let rows = rows.as_array().unwrap();
    let at = |wanted: fn(&Value) -> bool| rows.iter().position(wanted).unwrap();
    let call_at = at(|row| row["role"] == "subagent");
    assert!(
        at(|row| row["text"] == "what is here?") < call_at,
        "{rows:#?}"
    );
    assert!(call_at < at(|row| row["text"] == "The scout found notes.txt."));
    let call = &rows[call_at];
    assert_eq!(call["agent"], "scout");
    assert_eq!(call["task"], "list the folder");
    assert_eq!(call["steps"][0]["name"], "list_dir");
    assert_eq!(call["result"]["content"], "The folder holds notes.txt.");

    // --continue: the redraw shows the past work folded, and a subagent called again
    // continues its own transcript.
    server.push_all([
        delegate("p2", "and now?"),
        Reply::text("Still notes.txt."),
        Reply::text("Nothing changed."),
    ]);
    let out = sandbox
        .chat(&server.base_url(), &["--yes", "--continue"], "again\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stderr, "▸ [scout] 1 tool call, 1 reply (folded)");
    let redraw = &out.stderr[..out.stderr.find("(resumed").unwrap()];
    assert!(!redraw.contains("[scout] ⚙ list_dir"), "{redraw}");
    let bodies = server.request_bodies();
    let child = request_messages(&bodies[5]);
    assert_eq!(
        roles(&child),
        ["system", "user", "assistant", "tool", "assistant", "user"]
    );
    assert_eq!(child[1]["content"], "list the folder");
    assert_eq!(child[5]["content"], "and now?");
    server.assert_tool_call_pairing();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gate_asks_about_a_subagents_tool_call_and_says_which_agent_asks() {
    let sandbox = Sandbox::new();
    let writer = SCOUT.replace("\"read_file\"]", "\"read_file\", \"write_file\"]");
    write_config(&sandbox, &writer);
    let server = ScriptedServer::start().await;
    server.push_all([
        delegate("p1", "write the notes"),
        Reply::tool_call("s1", "write_file", r#"{"path":"notes.txt","content":"x"}"#),
        Reply::text("I was not allowed to write it."),
        Reply::text("The scout could not write it."),
    ]);
    let base_url = server.base_url();
    let mut pty = sandbox.pty(&["--plain", "--base-url", &base_url, "--model", "test-model"]);
    pty.line("write my notes");
    pty.wait_text(r#"run [scout] write_file {"path":"notes.txt","content":"x"}?"#)
        .await;
    pty.line("n");
    pty.wait_text("The scout could not write it.").await;
    assert!(!sandbox.path().join("notes.txt").exists());
    // The delegation itself was not asked about: only the subagent's tool call.
    assert!(!pty.contents().contains("run scout"), "{}", pty.contents());
    pty.line("/exit");
    assert!(pty.wait_exit().await, "{}", pty.contents());

    let bodies = server.request_bodies();
    let denied = request_messages(&bodies[2]);
    assert_contains!(
        denied.last().unwrap()["content"].as_str().unwrap(),
        "not allowed"
    );
    let run = sandbox.conversations().remove(0);
    let records = jsonl(&run.join("transcript.jsonl"));
    let decided: Vec<(String, String)> = records
        .iter()
        .filter_map(|r| {
            Some((
                r["agent"].as_str()?.to_owned(),
                r["decision"].as_str()?.to_owned(),
            ))
        })
        .collect();
    assert_eq!(decided, [("scout".to_owned(), "ask-no".to_owned())]);
    server.assert_tool_call_pairing();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_the_subagent_and_the_turn_and_the_call_is_interrupted() {
    let sandbox = Sandbox::new();
    write_config(&sandbox, SCOUT);
    let server = ScriptedServer::start().await;
    server.push_all([
        delegate("p1", "think hard"),
        Reply::text("Thinking about it, slowly")
            .chunk_chars(4)
            .stall_after(3, Duration::from_secs(60)),
    ]);
    let base_url = server.base_url();
    let args = [
        "--plain",
        "--yes",
        "--base-url",
        &base_url,
        "--model",
        "test-model",
    ];
    let mut pty = sandbox.pty(&args);
    pty.line("think");
    pty.wait_text("⚙ scout").await;
    pty.wait_for("the subagent's request", |_| server.request_count() >= 2)
        .await;
    pty.send("\u{3}");
    pty.wait_text("(cancelled)").await;
    pty.line("/exit");
    assert!(pty.wait_exit().await, "{}", pty.contents());

    let run = sandbox.conversations().remove(0);
    let (main, _): (Vec<Value>, Vec<Value>) = messages_of(&run.join("conversation.jsonl"))
        .into_iter()
        .unzip();
    assert_eq!(roles(&main), ["user", "assistant", "tool"]);
    assert_eq!(
        main[2]["content"],
        reprise_agent::subagent_interrupted_text("scout")
    );
    let (child, _): (Vec<Value>, Vec<Value>) = messages_of(&run.join("subagents/scout.jsonl"))
        .into_iter()
        .unzip();
    assert_eq!(roles(&child), ["user"], "the half reply is not kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_in_a_subagents_turn_then_continue_loses_nothing_acknowledged() {
    let sandbox = Sandbox::new();
    write_config(&sandbox, SCOUT);
    std::fs::write(sandbox.path().join("notes.txt"), "buy milk\n").unwrap();
    let server = ScriptedServer::start().await;
    server.push_all([
        delegate("p1", "read the notes"),
        Reply::tool_call("s1", "read_file", r#"{"path":"notes.txt"}"#),
        Reply::text("The note says to buy")
            .chunk_chars(4)
            .stall_after(3, Duration::from_secs(60)),
    ]);
    let base_url = server.base_url();
    let args = [
        "--plain",
        "--yes",
        "--base-url",
        &base_url,
        "--model",
        "test-model",
    ];
    let mut pty = sandbox.pty(&args);
    pty.line("what do my notes say?");
    pty.wait_text("  [scout]   ↳ buy milk").await;
    pty.wait_for("the subagent's second request", |_| {
        server.request_count() >= 3
    })
    .await;
    let pid = pty.child.process_id().unwrap();
    let status = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    pty.wait_exit().await;

    // What was acknowledged (shown as done) is on disk.
    let run = sandbox.conversations().remove(0);
    let (child, _): (Vec<Value>, Vec<Value>) = messages_of(&run.join("subagents/scout.jsonl"))
        .into_iter()
        .unzip();
    assert_eq!(roles(&child), ["user", "assistant", "tool"]);
    assert_eq!(child[2]["content"], "buy milk\n");

    // The cut turn is finished first: the subagent goes on from its result, the
    // main agent gets its answer; then the next prompt.
    server.push_all([
        Reply::text("It says buy milk."),
        Reply::text("Buy milk."),
        Reply::text("Going on."),
    ]);
    let out = sandbox
        .chat(&base_url, &["--yes", "--continue"], "go on\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let bodies = server.request_bodies();
    // The subagent continues its own transcript, nothing of it lost.
    let child = request_messages(&bodies[3]);
    assert_eq!(roles(&child), ["system", "user", "assistant", "tool"]);
    assert_eq!(child[1]["content"], "read the notes");
    assert_eq!(tool_calls_of(&child)[0]["id"], "s1");
    assert_eq!(child[3]["content"], "buy milk\n");
    // The main agent's call gets the subagent's real answer.
    let main = request_messages(&bodies[4]);
    assert_eq!(roles(&main), ["system", "user", "assistant", "tool"]);
    assert_eq!(main[2]["tool_calls"][0]["id"], "p1");
    assert_eq!(main[3]["content"], "It says buy milk.");
    let main = request_messages(&bodies[5]);
    assert_eq!(
        roles(&main),
        ["system", "user", "assistant", "tool", "assistant", "user"]
    );
    server.assert_tool_call_pairing();
}

#[tokio::test]
async fn a_fork_takes_the_subagents_along_and_leaves_the_source_as_it_was() {
    let sandbox = Sandbox::new();
    write_config(&sandbox, SCOUT);
    let server = ScriptedServer::start().await;
    one_delegation(&server, "p1", "The folder holds notes.txt.");
    let out = sandbox
        .chat(&server.base_url(), &["--yes"], "what is here?\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let source = sandbox.conversations().remove(0);
    let source_child = std::fs::read(source.join("subagents/scout.jsonl")).unwrap();

    server.push_all([
        delegate("p2", "anything else?"),
        Reply::text("No."),
        Reply::text("Nothing else."),
    ]);
    let out = sandbox
        .chat(
            &server.base_url(),
            &["--yes", "--continue", "--fork-session"],
            "more?\n",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stderr, "▸ [scout] 1 tool call, 1 reply (folded)");
    let runs = sandbox.conversations();
    assert_eq!(runs.len(), 2);
    let fork = runs.into_iter().find(|run| *run != source).unwrap();
    // The source's subagent is untouched; the fork's continues the copy.
    assert_eq!(
        std::fs::read(source.join("subagents/scout.jsonl")).unwrap(),
        source_child
    );
    let (child, _): (Vec<Value>, Vec<Value>) = messages_of(&fork.join("subagents/scout.jsonl"))
        .into_iter()
        .unzip();
    assert_eq!(
        roles(&child),
        [
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant"
        ]
    );
    let session: Value =
        serde_json::from_str(&std::fs::read_to_string(fork.join("session.json")).unwrap()).unwrap();
    assert_eq!(session["subagents"]["scout"], "subagents/scout.jsonl");
    let bodies = server.request_bodies();
    assert_eq!(
        request_messages(&bodies[5])[1]["content"],
        "list the folder"
    );
    server.assert_tool_call_pairing();
}

/// Full screen: the work shows under the call while the subagent works (its tool
/// call, its text streaming in), and folds to one line when it returned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_screen_nests_the_work_under_the_call_then_folds_it() {
    {
        let sandbox = Sandbox::new();
        write_config(&sandbox, SCOUT);
        std::fs::write(sandbox.path().join("notes.txt"), "buy milk\n").unwrap();
        let server = ScriptedServer::start().await;
        server.push_all([
            delegate("p1", "read the notes"),
            Reply::tool_call("s1", "read_file", r#"{"path":"notes.txt"}"#),
            Reply::text("The note says buy milk.")
                .chunk_chars(8)
                .stall_after(3, Duration::from_millis(1500)),
            Reply::text("Buy milk, says the scout."),
        ]);
        let base_url = server.base_url();
        let mut pty = sandbox.pty(&["--yes", "--base-url", &base_url, "--model", "test-model"]);
        pty.wait_text("/help · /resume").await;
        pty.line("what do my notes say?");
        pty.wait_text(r#"│ ⚙ read_file {"path":"notes.txt"}"#).await;
        pty.wait_text("│   ↳ buy milk").await;
        pty.wait_text("│ The note").await;
        pty.wait_text("Buy milk, says the scout.").await;
        pty.wait_text("▸ [scout] 1 tool call, 1 reply (folded)")
            .await;
        pty.wait_text("↳ The note says buy milk.").await;
        pty.send("\u{4}");
        assert!(pty.wait_exit().await, "{}", pty.contents());
        server.assert_tool_call_pairing();
    }
}

fn tool(id: &str, name: &str, arguments: &str, result: Option<(&str, bool)>) -> ToolView {
    ToolView {
        id: id.into(),
        agent: String::new(),
        name: name.into(),
        arguments: arguments.into(),
        arguments_len: None,
        result: result.map(|(content, is_error)| ToolResultView {
            content: content.into(),
            is_error,
            folded_lines: 0,
        }),
    }
}

#[test]
fn the_nested_view_of_subagents_at_work_and_done() {
    let mut view = ChatView {
        model: "test-model".into(),
        run: "2026-11-30T09-38-04-123Z".into(),
        ..ChatView::default()
    };
    view.conversation
        .items
        .push(Item::User("look around, twice".into()));
    // A call that returned: its work folded to one line above the result.
    view.conversation.items.push(Item::Tool(tool(
        "p1",
        "scout",
        r#"{"task":"list the folder"}"#,
        Some(("The folder holds notes.txt.", false)),
    )));
    view.conversation.work.insert(
        1,
        SubagentWork {
            agent: "scout".into(),
            items: vec![
                Item::Tool(tool(
                    "s1",
                    "list_dir",
                    r#"{"path":"."}"#,
                    Some(("notes.txt", false)),
                )),
                Item::Assistant("The folder holds notes.txt.".into()),
            ],
            streaming: String::new(),
        },
    );
    // A call still running: the work so far, the reply streaming in.
    view.conversation.items.push(Item::Tool(tool(
        "p2",
        "scout",
        r#"{"task":"read the notes"}"#,
        None,
    )));
    view.conversation.work.insert(
        2,
        SubagentWork {
            agent: "scout".into(),
            items: vec![Item::Tool(tool(
                "s2",
                "read_file",
                r#"{"path":"notes.txt"}"#,
                Some(("buy milk", false)),
            ))],
            streaming: "The note says to **buy".into(),
        },
    );
    view.busy = Some(Duration::from_secs(4));
    let mut terminal = Terminal::new(TestBackend::new(64, 20)).unwrap();
    terminal.draw(|frame| draw(frame, &view)).unwrap();
    insta::assert_snapshot!(terminal.backend());

    // Inline: the call still running is drawn live, with its work, below the
    // scrollback; the finished one is not (it went to the scrollback).
    let mut terminal = Terminal::new(TestBackend::new(64, 14)).unwrap();
    terminal.draw(|frame| draw_live(frame, &view)).unwrap();
    let live = format!("{}", terminal.backend());
    assert_contains!(live, "⚙ scout {\"task\":\"read the notes\"}");
    assert_contains!(live, "│ ⚙ read_file {\"path\":\"notes.txt\"}");
    assert_contains!(live, "│ The note says to **buy");
    assert!(!live.contains("list the folder"), "{live}");
}

/// The full screen's redraw of a resumed run: each past subagent call folded, in
/// its place in the conversation.
#[tokio::test]
async fn the_redraw_of_a_resumed_run_folds_the_subagents_past_work() {
    let sandbox = Sandbox::new();
    write_config(&sandbox, SCOUT);
    let server = ScriptedServer::start().await;
    one_delegation(&server, "p1", "The folder holds notes.txt.");
    let out = sandbox
        .chat(&server.base_url(), &["--yes"], "what is here?\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let run = sandbox.conversations().remove(0);
    let entries = reprise_runs::read_run_entries(&run, None)
        .unwrap()
        .unwrap()
        .entries;
    let catalog = reprise_runs::FolderCatalog::new(sandbox.runs_dir());
    let folder = reprise_runs::RunFolder::open(&run).unwrap();
    let calls = reprise_chat::subagents::past_calls(&catalog, &folder)
        .await
        .unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].after_shown, 1, "after the person's message");
    let (items, work) = reprise_chat::view::redraw::redraw_with_subagents(&entries, &calls);
    let mut view = ChatView {
        conversation: reprise_chat::view::live::LiveView {
            items,
            work,
            ..Default::default()
        },
        ..ChatView::default()
    };
    view.model = "test-model".into();
    let mut terminal = Terminal::new(TestBackend::new(64, 12)).unwrap();
    terminal.draw(|frame| draw(frame, &view)).unwrap();
    let screen = format!("{}", terminal.backend());
    let lines: Vec<&str> = screen
        .lines()
        .map(|line| line.trim_matches('"').trim_end())
        .collect();
    let at = |text: &str| lines.iter().position(|line| line.contains(text)).unwrap();
    assert!(at("› what is here?") < at("⚙ scout {\"task\":\"list the folder\"}"));
    assert_eq!(
        at("▸ [scout] 1 tool call, 1 reply (folded)"),
        at("⚙ scout") + 1
    );
    assert_eq!(at("↳ The folder holds notes.txt."), at("⚙ scout") + 2);
    assert!(at("↳ The folder holds notes.txt.") < at("The scout found notes.txt."));
    assert!(!screen.contains("list_dir"), "{screen}");
}

/// `/fork` in the middle of a chat: the new run's subagent continues the copy of its
/// transcript; the old run's keeps only what it had.
#[tokio::test]
async fn slash_fork_brings_the_subagents_along() {
    let sandbox = Sandbox::new();
    write_config(&sandbox, SCOUT);
    let server = ScriptedServer::start().await;
    one_delegation(&server, "p1", "The folder holds notes.txt.");
    server.push_all([
        delegate("p2", "anything else?"),
        Reply::text("No."),
        Reply::text("Nothing else."),
    ]);
    let out = sandbox
        .chat(
            &server.base_url(),
            &["--yes"],
            "what is here?\n/fork\nmore?\n",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stderr, "(forked into run");
    let runs = sandbox.conversations();
    assert_eq!(runs.len(), 2);
    let child_roles = |run: &Path| {
        let (messages, _): (Vec<Value>, Vec<Value>) =
            messages_of(&run.join("subagents/scout.jsonl"))
                .into_iter()
                .unzip();
        roles(&messages)
    };
    assert_eq!(
        child_roles(&runs[0]),
        ["user", "assistant", "tool", "assistant"]
    );
    assert_eq!(
        child_roles(&runs[1]),
        [
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant"
        ]
    );
    let child = request_messages(&server.request_bodies()[5]);
    assert_eq!(child[1]["content"], "list the folder");
    assert_eq!(child[5]["content"], "anything else?");
    server.assert_tool_call_pairing();
}

#[tokio::test]
async fn a_subagent_s_cut_off_reply_is_reported_with_its_name() {
    let sandbox = Sandbox::new();
    write_config(&sandbox, SCOUT);
    let server = ScriptedServer::start().await;
    server.push_all([
        delegate("p1", "list the folder"),
        Reply::text("The folder holds").with_finish_reason("length"),
        Reply::text("The scout was cut short."),
    ]);
    let out = sandbox
        .chat(&server.base_url(), &["--yes"], "what is here?\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stderr, "! [scout] the reply was cut off at max_tokens");
    let run = sandbox.conversations().remove(0);
    let log = std::fs::read_to_string(run.join("session.log")).unwrap();
    assert_contains!(log, "! [scout] the reply was cut off at max_tokens");
}
