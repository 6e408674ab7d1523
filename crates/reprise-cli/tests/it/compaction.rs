//! Long conversations in the chat: `/compact` in plain mode and full screen, the
//! marker where a compaction happened (on screen, in the redraw, in `reprise show`),
//! and a compaction before a request that would not fit the window.

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use reprise_chat::start::resumed_text;
use reprise_chat::view::redraw::redraw_items;
use reprise_cli::screens::tui::render::draw;
use reprise_cli::screens::tui::view::{ChatView, Item};
use reprise_runs::{create_run_folder, create_run_store};
use reprise_session::{Compaction, Entry, Message, SessionKey, SessionStore};
use reprise_testkit::{Reply, ScriptedServer, assert_contains, check_tool_call_pairing};

use crate::support::{Sandbox, roles_and_texts};

const MARKER_START: &str = "(compacted ";

#[tokio::test]
async fn compact_in_plain_mode_prints_the_line_and_the_model_gets_the_summary() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start_with([
        Reply::text("Paris is the capital of France."),
        Reply::text("Berlin is the capital of Germany."),
        Reply::text("They asked for two capitals: Paris and Berlin."),
        Reply::text("Rome."),
    ])
    .await;
    let out = sandbox
        .chat(
            &server.base_url(),
            &[],
            "capital of France?\ncapital of Germany?\n/compact the city names\nand Italy?\n",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stderr, "(compacted 3 messages: ");
    // Nothing said before is taken back: the answers are all there, in order, and
    // the compaction line (on stderr, with the prompts) between the questions.
    assert_eq!(
        out.stdout,
        "Paris is the capital of France.\nBerlin is the capital of Germany.\nRome.\n"
    );
    let france = out.stderr.find("› capital of France?").unwrap();
    let marker = out.stderr.find(MARKER_START).unwrap();
    let italy = out.stderr.find("› and Italy?").unwrap();
    assert!(france < marker && marker < italy, "{}", out.stderr);

    let bodies = server.request_bodies();
    assert_eq!(bodies.len(), 4);
    let summary_request = roles_and_texts(&bodies[2]);
    assert_contains!(summary_request[0].1, "Keep in particular: the city names");
    assert_contains!(summary_request[1].1, "capital of France?");
    // After it: the system prompt with the summary, then the kept reply and the
    // new question.
    let after = roles_and_texts(&bodies[3]);
    let roles: Vec<&str> = after.iter().map(|(role, _)| role.as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"], "{after:?}");
    assert_contains!(after[1].1, "Paris and Berlin");
    assert_eq!(after[2].1, "Berlin is the capital of Germany.");
    for body in &bodies {
        check_tool_call_pairing(body).unwrap();
    }

    // `reprise show` keeps every message and marks the compaction.
    let shown = sandbox.run(&["show", "last"], "").await;
    assert_eq!(shown.status, 0, "{}", shown.stderr);
    insta::assert_snapshot!(marker_lines(&shown.stdout));
    assert_contains!(shown.stdout, "› capital of France?");
    let json = sandbox.run(&["show", "last", "--json"], "").await;
    let rows: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let kinds: Vec<String> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            row["role"]
                .as_str()
                .or(row["kind"].as_str())
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "user",
            "assistant",
            "user",
            "assistant",
            "compaction",
            "user",
            "assistant"
        ]
    );
}

/// The shown conversation with the token figures of the marker (estimates that
/// change with any wording) replaced, so the snapshot is about the layout.
fn marker_lines(text: &str) -> String {
    text.lines()
        .map(|line| match line.strip_prefix(MARKER_START) {
            Some(rest) => format!(
                "{MARKER_START}{}: N → M tokens)",
                rest.split(':').next().unwrap_or("")
            ),
            None => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn compact_with_too_little_to_compact_says_so() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start_with([Reply::text("hello")]).await;
    let out = sandbox
        .chat(&server.base_url(), &[], "hi\n/compact\n")
        .await;
    assert_contains!(
        format!("{}\n{}", out.stdout, out.stderr),
        "nothing to compact yet"
    );
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn a_request_past_the_window_is_compacted_first() {
    let sandbox = Sandbox::new();
    // The sizes below are measured with the two reading tools' schemas in each request.
    crate::subagents::write_config(&sandbox, "builtin_tools = [\"read_file\", \"list_dir\"]\n");
    let long = "a long question about the weather ".repeat(80);
    let server = ScriptedServer::start_with([
        Reply::text("first answer"),
        // Asked before the second question is sent: it would not fit.
        Reply::text("They asked a long question about the weather."),
        Reply::text("second answer"),
        Reply::text("third answer"),
    ])
    .await;
    let input = format!("{long}\n{long}\nshort one\n");
    let out = sandbox
        .chat(&server.base_url(), &["--context-window", "2048"], &input)
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stderr, MARKER_START);
    assert_contains!(out.stdout, "third answer");
    let bodies = server.request_bodies();
    assert_eq!(bodies.len(), 4);
    let summary_request = serde_json::to_string(&bodies[1]).unwrap();
    assert_contains!(summary_request, "You compact a conversation");
    // The first question is sent no more; the summary is, and the second question.
    for later in &bodies[2..] {
        let text = serde_json::to_string(later).unwrap();
        assert_eq!(
            text.matches("question about the weather ").count(),
            80,
            "{text}"
        );
        assert_contains!(text, "They asked a long question");
    }
}

#[tokio::test]
async fn the_redraw_of_a_compacted_run_shows_every_message_and_the_marker() {
    let dir = tempfile::tempdir().unwrap();
    let folder = create_run_folder(dir.path()).unwrap();
    let store = create_run_store(&folder.dir);
    let key = SessionKey::session("0193c0de-0000-7000-8000-000000000002").unwrap();
    let mut entries = vec![
        Entry::message(Message::user("capital of France?")),
        Entry::message(Message::assistant("Paris.")),
        Entry::message(Message::user("capital of Germany?")),
        Entry::message(Message::assistant("Berlin.")),
    ];
    entries.push(
        Compaction {
            summary: "Two capitals: Paris, Berlin.".into(),
            through: entries[2].uuid,
            tokens_before: 7_100,
            tokens_after: 912,
        }
        .to_entry(),
    );
    entries.push(Entry::message(Message::user("and Italy?")));
    entries.push(Entry::message(Message::assistant("Rome.")));
    store.append(&key, &entries).await.unwrap();
    let mut view = ChatView {
        model: "test-model".into(),
        run: "2026-11-30T09-38-04-123Z".into(),
        context: Some((1_234, 8_192)),
        ..ChatView::default()
    };
    // As a resume redraws it: from the entries the agent loads.
    let loaded = store.load(&key).await.unwrap().unwrap();
    view.conversation.items = redraw_items(&loaded.entries);
    view.conversation
        .items
        .push(Item::Notice(resumed_text("2026-11-30 09:38")));
    let mut terminal = Terminal::new(TestBackend::new(64, 20)).unwrap();
    terminal.draw(|frame| draw(frame, &view)).unwrap();
    insta::assert_snapshot!(terminal.backend());
}

#[tokio::test]
async fn the_window_is_asked_of_llama_cpp_once_and_kept_in_the_run_folder() {
    let sandbox = Sandbox::new();
    let server = reprise_testkit::llama::LlamaServer::shared();
    let base_url = server.base_url();
    let args = [
        "--plain",
        "--base-url",
        &base_url,
        "--model",
        server.model(),
        "--max-tokens",
        "4",
        "--request-timeout",
        "300",
        "--idle-timeout",
        "300",
    ];
    one_model_call_per_turn(&sandbox);
    let out = sandbox.run(&args, "hi\n").await;
    let run = sandbox.conversations().pop().expect(&out.stderr);
    let cached: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("context-window.json")).unwrap()).unwrap();
    assert_eq!(
        cached["tokens"],
        reprise_testkit::llama::SHARED_CTX_SIZE,
        "{cached}"
    );
    assert_eq!(cached["source"], "llama.cpp /props");
    assert_eq!(cached["base_url"], base_url.as_str());

    // A window set in the flags is used as it is and not cached.
    let sandbox = Sandbox::new();
    one_model_call_per_turn(&sandbox);
    let mut with_flag = args.to_vec();
    with_flag.extend_from_slice(&["--context-window", "1000"]);
    let out = sandbox.run(&with_flag, "hi\n").await;
    let run = sandbox.conversations().pop().expect(&out.stderr);
    assert!(!run.join("context-window.json").exists());
}

/// The model may call a tool instead of answering: one model call per turn.
fn one_model_call_per_turn(sandbox: &Sandbox) {
    let config = sandbox.path().join("xdg/reprise");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.toml"), "max_turns = 1\n").unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_in_full_screen_marks_the_place_and_clears_nothing() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start_with([
        Reply::text("Paris is the capital of France.").with_usage(300, 9),
        Reply::text("Berlin is the capital of Germany.").with_usage(320, 9),
        Reply::text("They asked for two capitals: Paris and Berlin.").with_usage(400, 12),
    ])
    .await;
    let base_url = server.base_url();
    let mut pty = sandbox.pty(&[
        "--base-url",
        &base_url,
        "--model",
        "test-model",
        "--context-window",
        "8192",
    ]);
    pty.wait_text("/help · /resume").await;
    pty.line("capital of France?");
    pty.wait_text("Paris is the capital of France.").await;
    pty.wait_for("the turn to end", |s| !s.contains("working"))
        .await;
    pty.line("capital of Germany?");
    pty.wait_text("Berlin is the capital of Germany.").await;
    // The session's totals, and the context used of the window.
    pty.wait_text("620 in · 18 out tokens").await;
    pty.wait_text("/8192").await;
    pty.wait_for("the turn to end", |s| !s.contains("working"))
        .await;
    pty.line("/compact");
    pty.wait_text("(compacted 3 messages: ").await;
    // Everything said is still on screen.
    pty.wait_for("the conversation above the marker", |s| {
        s.contains("Paris is the capital of France.")
            && s.contains("Berlin is the capital of Germany.")
    })
    .await;
    // The summary call counts too.
    pty.wait_text("1020 in · 30 out tokens").await;
    pty.send("\x04");
    assert!(pty.wait_exit().await);
    assert_eq!(server.request_count(), 3);

    // The totals are the session's: a new process shows them before any call.
    let mut pty = sandbox.pty(&[
        "--base-url",
        &base_url,
        "--model",
        "test-model",
        "--context-window",
        "8192",
        "--continue",
    ]);
    pty.wait_text("1020 in · 30 out tokens").await;
    pty.send("\x04");
    assert!(pty.wait_exit().await);
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn a_summary_cut_at_its_limit_is_reported() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start_with([
        Reply::text("Paris."),
        Reply::text("Berlin."),
        Reply::text("They asked for two capit").with_finish_reason("length"),
    ])
    .await;
    let out = sandbox
        .chat(
            &server.base_url(),
            &["--max-tokens", "16"],
            "capital of France?\ncapital of Germany?\n/compact\n",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stderr, "(compacted ");
    assert_contains!(
        out.stderr,
        "the summary of the older messages was cut off at its limit"
    );
    // The summary was not held to the replies' 16 tokens.
    let bodies = server.request_bodies();
    assert_eq!(bodies[0]["max_tokens"], 16);
    assert!(
        bodies[2]["max_tokens"].as_u64().unwrap() > 16,
        "{}",
        bodies[2]
    );
    let run = sandbox.conversations().remove(0);
    let log = std::fs::read_to_string(run.join("session.log")).unwrap();
    assert_contains!(log, "the summary of the older messages was cut off");
}
