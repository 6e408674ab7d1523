//! Snapshots of the full-screen chat (ratatui's TestBackend): what a person sees.

use reprise_testkit::assert_contains;
use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use reprise_agent::{AgentEvent, DEFAULT_AGENT_NAME};
use reprise_chat::start::{PickerRow, resumed_text};
use reprise_chat::view::redraw::redraw_items;
use reprise_cli::screens::tui::render::draw;
use reprise_cli::screens::tui::view::{ChatView, Item, Picker, Question, ToolResultView, ToolView};
use reprise_provider::Usage;
use reprise_runs::{create_run_folder, create_run_store};
use reprise_session::{Entry, Message, SessionKey, SessionStore};

fn screen(view: &ChatView, width: u16, height: u16) -> Terminal<TestBackend> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|frame| draw(frame, view)).unwrap();
    terminal
}

fn base_view() -> ChatView {
    ChatView {
        model: "test-model".into(),
        run: "2026-11-30T09-38-04-123Z".into(),
        ..ChatView::default()
    }
}

#[test]
fn the_chat_screen_while_a_reply_streams_in() {
    let mut view = base_view();
    view.conversation
        .items
        .push(Item::User("How do I list files in Rust?".into()));
    view.conversation.items.push(Item::Assistant(
        "Use `std::fs::read_dir`:\n\n```rust\nfor entry in std::fs::read_dir(\".\")? {\n    println!(\"{:?}\", entry?.path());\n}\n```\n\nIt returns an **iterator** of entries.".into(),
    ));
    view.conversation
        .items
        .push(Item::User("and recursively?".into()));
    view.conversation.streaming =
        "Walk it yourself, or use the *walkdir* crate:\n\n- `WalkDir::new(\".\")`\n- filter".into();
    view.busy = Some(Duration::from_secs(3));
    view.conversation.usage = Some(Usage {
        prompt_tokens: 812,
        completion_tokens: 64,
        total_tokens: 876,
        cached_tokens: None,
    });
    view.input.text = "thanks, and in".into();
    view.input.cursor = 14;
    view.queued = vec!["also symlinks?".into()];
    let terminal = screen(&view, 72, 26);
    insta::assert_snapshot!(terminal.backend());
}

#[test]
fn tool_calls_are_compact_and_errors_marked() {
    let mut view = base_view();
    view.conversation
        .items
        .push(Item::User("what is in my notes?".into()));
    view.conversation.items.push(Item::Tool(ToolView {
        id: "call_1".into(),
        agent: String::new(),
        name: "read_file".into(),
        arguments: "{\"path\": \"notes.txt\"}".into(),
        arguments_len: None,
        result: Some(ToolResultView {
            folded_lines: 0,
            content: "buy milk\ncall mum\nfix the bike\nwater the plants\npay rent".into(),
            is_error: false,
        }),
    }));
    view.conversation.items.push(Item::Tool(ToolView {
        id: "call_2".into(),
        agent: String::new(),
        name: "read_file".into(),
        arguments: "{\"path\": \"../secrets.txt\", \"why\": \"a long reason that goes on and on past the width\"}".into(),
        arguments_len: None,
        result: Some(ToolResultView {
            folded_lines: 0,
            content: "../secrets.txt: paths may not go up with ..".into(),
            is_error: true,
        }),
    }));
    view.conversation.items.push(Item::Tool(ToolView {
        id: "call_3".into(),
        agent: "researcher".into(),
        name: "list_dir".into(),
        arguments: "{}".into(),
        arguments_len: None,
        result: None,
    }));
    view.busy = Some(Duration::from_secs(12));
    view.tick = 4;
    let terminal = screen(&view, 72, 18);
    insta::assert_snapshot!(terminal.backend());
}

#[test]
fn a_commands_result_shows_its_exit_status_first() {
    let mut view = base_view();
    view.conversation
        .items
        .push(Item::User("run the tests".into()));
    view.conversation.items.push(Item::Tool(ToolView {
        id: "call_1".into(),
        agent: String::new(),
        name: "run_command".into(),
        arguments: "{\"command\": \"cargo test 2>&1 | tail -3\"}".into(),
        arguments_len: None,
        result: Some(ToolResultView {
            folded_lines: 0,
            content: "exit status 101\n--- stdout ---\ntest parse ... FAILED\n\nfailures:\n    \
                      parse\ntest result: FAILED. 11 passed; 1 failed"
                .into(),
            is_error: false,
        }),
    }));
    let terminal = screen(&view, 72, 14);
    insta::assert_snapshot!(terminal.backend());
}

#[test]
fn the_resume_picker_with_a_filter_typed() {
    let mut view = base_view();
    view.conversation.items.push(Item::User("hello".into()));
    view.conversation
        .items
        .push(Item::Assistant("Hi! How can I help?".into()));
    let row = |name: &str, date: &str, message: &str| PickerRow {
        name: name.into(),
        date: date.into(),
        last_message: message.into(),
        title: String::new(),
    };
    view.picker = Some(Picker {
        rows: vec![
            row(
                "2026-11-30T09-00-00-000Z",
                "2026-11-30 09:00",
                "bake some bread for the weekend",
            ),
            row(
                "2026-11-29T18-00-00-000Z",
                "2026-11-29 18:00",
                "fix the bike's back brake",
            ),
            row(
                "2026-11-28T08-00-00-000Z",
                "2026-11-28 08:00",
                "bread again, this time rye",
            ),
            row(
                "2026-11-27T08-00-00-000Z",
                "2026-11-27 08:00",
                "plan the trip",
            ),
        ],
        ..Picker::default()
    });
    for c in "bread".chars() {
        view.on_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
    }
    view.on_key(KeyEvent::new(KeyCode::Down, KeyModifiers::NONE));
    let terminal = screen(&view, 72, 16);
    insta::assert_snapshot!(terminal.backend());
}

#[tokio::test]
async fn the_redraw_after_continue() {
    // A real run folder, written through the run store, read back as the chat does.
    let dir = tempfile::tempdir().unwrap();
    let folder = create_run_folder(dir.path()).unwrap();
    let store = create_run_store(&folder.dir);
    let key = SessionKey::session("0193c0de-0000-7000-8000-000000000001").unwrap();
    let entries = vec![
        Entry::message(Message::user("what do my notes say?")),
        Entry::message(Message::assistant_tool_calls(
            None,
            vec![reprise_session::ToolCall::function(
                "call_1",
                "read_file",
                "{\"path\":\"notes.txt\"}",
            )],
        )),
        Entry::message(Message::tool(
            "call_1",
            "buy milk\nbread\neggs\ncoffee\ntea",
        )),
        Entry::message(Message::assistant("The note says **buy milk**.")),
        Entry::message(Message::user("thanks")),
        Entry::message(Message::assistant("You are welcome.")),
    ];
    store.append(&key, &entries).await.unwrap();
    let loaded = store.load(&key).await.unwrap().unwrap();
    assert!(loaded.warnings.is_empty());
    let mut view = base_view();
    view.conversation.items = redraw_items(&loaded.entries);
    view.conversation
        .items
        .push(Item::Notice(resumed_text("2026-11-30 09:38")));
    // The tool call and its result, folded as the live view folds them.
    let terminal = screen(&view, 60, 20);
    insta::assert_snapshot!(terminal.backend());
}

#[test]
fn the_gate_question_in_place_of_the_prompt() {
    let mut view = base_view();
    view.conversation
        .items
        .push(Item::User("read my notes".into()));
    view.conversation.items.push(Item::Tool(ToolView {
        id: "call_1".into(),
        agent: String::new(),
        name: "read_file".into(),
        arguments: "{\"path\":\"notes.txt\"}".into(),
        arguments_len: None,
        result: None,
    }));
    view.question = Some(Question {
        tool: "read_file".into(),
        arguments: "{\"path\":\"notes.txt\"}".into(),
        arguments_len: None,
        agent: String::new(),
        again: false,
    });
    view.busy = Some(Duration::from_secs(1));
    let terminal = screen(&view, 64, 12);
    insta::assert_snapshot!(terminal.backend());
}

#[test]
fn a_long_conversation_shows_its_end_and_scrolls_back() {
    let mut view = base_view();
    for i in 0..2000 {
        view.conversation
            .items
            .push(Item::User(format!("question {i}")));
        view.conversation
            .items
            .push(Item::Assistant(format!("answer {i}")));
    }
    let terminal = screen(&view, 40, 10);
    let text = terminal.backend().to_string();
    assert_contains!(text, "answer 1999");
    assert!(!text.contains("answer 1990"), "{text}");
    view.scroll = 12;
    let terminal = screen(&view, 40, 10);
    let text = terminal.backend().to_string();
    assert_contains!(text, "answer 1996");
    assert!(!text.contains("answer 1999"), "{text}");
    assert_contains!(text, "scrolled up 12 lines");
}

#[test]
fn a_cut_off_reply_keeps_its_line_breaks() {
    let mut view = base_view();
    view.conversation
        .items
        .push(Item::User("list three things".into()));
    view.conversation.items.push(Item::Notice(
        "1. apples\n2. pears\n3. plu … (cut off: this unfinished reply is not kept)".into(),
    ));
    view.conversation
        .items
        .push(Item::Notice("(cancelled)".into()));
    let terminal = screen(&view, 60, 12);
    insta::assert_snapshot!(terminal.backend());
}

/// The text of a screen's row.
fn row_text(terminal: &Terminal<TestBackend>, row: u16) -> String {
    let buffer = terminal.backend().buffer();
    (0..buffer.area.width)
        .map(|x| buffer[(x, row)].symbol().to_owned())
        .collect()
}

fn screen_rows(terminal: &Terminal<TestBackend>) -> Vec<String> {
    (0..terminal.backend().buffer().area.height)
        .map(|row| row_text(terminal, row))
        .collect()
}

#[test]
fn a_denial_uses_the_width_of_a_wide_screen() {
    let denial = "error: the call to read_file was not allowed: the person answered no when \
                  asked whether read_file may read notes.txt in this run";
    assert!(denial.chars().count() > 110 && denial.chars().count() < 150);
    let mut view = base_view();
    view.conversation.items.push(Item::Tool(ToolView {
        id: "call_1".into(),
        agent: String::new(),
        name: "read_file".into(),
        arguments: r#"{"path":"notes.txt"}"#.into(),
        arguments_len: None,
        result: Some(ToolResultView {
            content: denial.into(),
            is_error: true,
            folded_lines: 0,
        }),
    }));
    let terminal = screen(&view, 160, 12);
    let rows = screen_rows(&terminal);
    assert!(
        rows.iter().any(|row| row.contains(&format!("✗ {denial}"))),
        "{rows:#?}"
    );
    // On a narrow screen it is cut to the width, not wrapped over rows.
    let terminal = screen(&view, 60, 12);
    let rows = screen_rows(&terminal);
    let shown = rows.iter().find(|row| row.contains("✗ error")).unwrap();
    assert!(shown.trim_end().ends_with('…'), "{rows:#?}");
}

#[test]
fn a_call_shows_while_its_arguments_arrive() {
    let mut view = base_view();
    view.conversation
        .items
        .push(Item::User("write it down".into()));
    view.conversation.arriving.push("write_file".into());
    view.busy = Some(Duration::from_secs(40));
    let terminal = screen(&view, 72, 10);
    let rows = screen_rows(&terminal).join("\n");
    assert_contains!(rows, "⚙ write_file");
    assert_contains!(rows, "its arguments are arriving");
}

#[test]
fn an_attempt_that_broke_off_is_shown_as_withdrawn_and_retries_share_a_line() {
    let mut view = base_view();
    // Folded from the agent's events, as the chat folds them.
    let redactor = reprise_redact::Redactor::new();
    let delta = |text: &str| AgentEvent::TextDelta {
        agent: DEFAULT_AGENT_NAME.into(),
        text: text.into(),
    };
    let retry = |attempt| AgentEvent::Retrying {
        agent: DEFAULT_AGENT_NAME.into(),
        attempt,
        reason: "the stream was cut".into(),
        delay: Duration::ZERO,
    };
    let reply = Entry::message(Message::assistant("The real answer."));
    for event in [
        delta("Half of a first"),
        retry(2),
        retry(3),
        delta("The real answer."),
        AgentEvent::MessageRecorded {
            agent: DEFAULT_AGENT_NAME.into(),
            key: SessionKey::session(&reply.uuid.to_string()).unwrap(),
            uuid: reply.uuid,
            message: Message::assistant("The real answer."),
        },
    ] {
        view.conversation.apply(&event, &redactor);
    }
    assert_eq!(
        view.conversation.items,
        [
            Item::Notice(
                "Half of a first … (withdrawn: this reply broke off and is asked for again)".into()
            ),
            Item::Notice("(retrying, attempt 3: the stream was cut)".into()),
            Item::Assistant("The real answer.".into()),
        ]
    );
}

#[test]
fn the_status_line_is_as_the_chat_guide_shows_it() {
    let mut view = base_view();
    view.model = "qwen2.5:7b".into();
    view.context = Some((1_234, 8_192));
    view.conversation.usage = Some(Usage {
        prompt_tokens: 812,
        completion_tokens: 64,
        total_tokens: 876,
        cached_tokens: None,
    });
    let terminal = screen(&view, 100, 6);
    let status = row_text(&terminal, 2);
    let guide =
        std::fs::read_to_string(reprise_testkit::workspace_root().join("docs/chat.md")).unwrap();
    let shown = status.trim();
    assert!(
        guide.contains(&format!("`{shown}`")),
        "docs/chat.md does not show the status line `{shown}`"
    );
}
