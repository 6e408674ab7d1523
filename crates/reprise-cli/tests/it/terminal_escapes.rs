//! Control characters and escape sequences from the model, tools and run folders
//! reach the terminal only as visible escapes: plain mode, `show`, `runs`, errors,
//! the full screen and its picker.

use std::path::Path;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use reprise_chat::start::PickerRow;
use reprise_cli::screens::tui::render::draw;
use reprise_cli::screens::tui::view::{ChatView, Item, Picker, ToolResultView, ToolView};
use reprise_runs::{create_run_folder, create_run_store};
use reprise_session::{Entry, Message, SessionKey, SessionStore};
use reprise_testkit::assert_contains;
use reprise_testkit::{Reply, ScriptedServer};
use serde_json::Value;

use crate::support::Sandbox;

/// A window title (OSC 0), a screen clear, an OSC 8 link, an OSC 52 clipboard write,
/// the 8-bit CSI, a bell, a backspace and a carriage return.
const HOSTILE: &str = "A\x1b]0;owned\x07 B\x1b[2J C\x1b]8;;https://evil.example/\x1b\\here\x1b]8;;\x1b\\ \
D\x1b]52;c;aGVsbG8=\x07 E\u{9b}31m F\x07 G\x08 H\rI";

/// How each of them must be shown.
const SHOWN: [&str; 8] = [
    "\\x1b]0;owned\\x07",
    "\\x1b[2J",
    "\\x1b]8;;https://evil.example/\\x1b\\here\\x1b]8;;\\x1b\\",
    "\\x1b]52;c;aGVsbG8=\\x07",
    "\\u{9b}31m",
    "F\\x07",
    "G\\x08",
    "H\\rI",
];

/// Control characters other than newline and tab in `text`.
fn raw_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|c| c.is_control() && *c != '\n' && *c != '\t')
        .collect()
}

fn assert_shown_escaped(text: &str) {
    assert!(
        raw_controls(text).is_empty(),
        "raw controls {:?} in {text:?}",
        raw_controls(text)
    );
    for shown in SHOWN {
        assert_contains!(text, shown);
    }
}

#[tokio::test]
async fn plain_mode_shows_controls_from_the_model_and_tools_as_escapes() {
    let sandbox = Sandbox::new();
    std::fs::write(sandbox.path().join("notes.txt"), HOSTILE).unwrap();
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::tool_call("call_1", "read_file", r#"{"path":"notes.txt"}"#),
        Reply::text(format!("The notes: {HOSTILE}")),
        Reply::status(400, format!("bad request {HOSTILE}")),
    ]);
    let out = sandbox
        .chat(&server.base_url(), &["--yes"], "read them\nagain\n")
        .await;
    // The tool result's first line, then the reply.
    assert_shown_escaped(&out.stdout);
    assert_contains!(out.stdout, "The notes: A\\x1b]0;owned\\x07");
    // The failed turn's error, with the server's text, on stderr.
    assert!(raw_controls(&out.stderr).is_empty(), "{:?}", out.stderr);
    // session.log strips them instead.
    let run = sandbox.conversations().remove(0);
    let log = std::fs::read_to_string(run.join("session.log")).unwrap();
    assert!(raw_controls(&log).is_empty(), "{log:?}");
    assert_contains!(log, "The notes: A B C");
}

/// A run whose conversation holds `HOSTILE` in the person's message and the reply.
async fn hostile_run(runs_dir: &Path) -> String {
    let folder = create_run_folder(runs_dir).unwrap();
    let store = create_run_store(&folder.dir);
    let key = SessionKey::session("0193c0de-0000-7000-8000-0000000000aa").unwrap();
    store
        .append(
            &key,
            &[
                Entry::message(Message::user(format!("ask {HOSTILE}"))),
                Entry::message(Message::assistant(format!("answer {HOSTILE}"))),
            ],
        )
        .await
        .unwrap();
    folder.name().to_owned()
}

#[tokio::test]
async fn show_and_runs_show_controls_from_run_folders_as_escapes() {
    let sandbox = Sandbox::new();
    let name = hostile_run(&sandbox.runs_dir()).await;

    let show = sandbox.run(&["show", &name], "").await;
    assert_eq!(show.status, 0, "{}", show.stderr);
    assert_shown_escaped(&show.stdout);
    assert_contains!(show.stdout, "› ask A\\x1b]0;owned");
    assert_contains!(show.stdout, "answer A\\x1b]0;owned");

    let runs = sandbox.run(&["runs"], "").await;
    assert_eq!(runs.status, 0, "{}", runs.stderr);
    assert!(raw_controls(&runs.stdout).is_empty(), "{:?}", runs.stdout);
    assert_contains!(runs.stdout, "ask A\\x1b]0;owned\\x07 B\\x1b[2J");

    // JSON: every control escaped, the text itself unchanged once parsed.
    for args in [["show", name.as_str(), "--json"], ["runs", "--json", ""]] {
        let args: Vec<&str> = args.into_iter().filter(|a| !a.is_empty()).collect();
        let out = sandbox.run(&args, "").await;
        assert_eq!(out.status, 0, "{}", out.stderr);
        assert!(raw_controls(&out.stdout).is_empty(), "{:?}", out.stdout);
        let value: Value = serde_json::from_str(&out.stdout).unwrap();
        assert!(value.to_string().contains("\\u001b]0;owned"), "{value}");
        let texts: Vec<&str> = value
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|row| row["text"].as_str().or(row["lastMessage"].as_str()))
            .collect();
        assert!(
            texts.contains(&format!("ask {HOSTILE}").as_str()),
            "{texts:?}"
        );
    }
}

#[tokio::test]
async fn errors_show_controls_from_run_folders_as_escapes() {
    let sandbox = Sandbox::new();
    let name = hostile_run(&sandbox.runs_dir()).await;
    // A conversation line that is not JSON, quoting the hostile text: the warning
    // names what was skipped.
    let conversation = sandbox.runs_dir().join(&name).join("conversation.jsonl");
    let mut text = std::fs::read_to_string(&conversation).unwrap();
    text.push_str(&format!("{HOSTILE}\n"));
    std::fs::write(&conversation, text).unwrap();
    let show = sandbox.run(&["show", &name], "").await;
    assert!(raw_controls(&show.stderr).is_empty(), "{:?}", show.stderr);
    assert!(raw_controls(&show.stdout).is_empty(), "{:?}", show.stdout);
    // A run name with controls is refused, and the refusal shows them escaped.
    let refused = sandbox.run(&["show", "bad\x1b]0;x\x07name"], "").await;
    assert_ne!(refused.status, 0);
    assert!(
        raw_controls(&refused.stderr).is_empty(),
        "{:?}",
        refused.stderr
    );
}

fn screen(view: &ChatView, width: u16, height: u16) -> Terminal<TestBackend> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|frame| draw(frame, view)).unwrap();
    terminal
}

/// The whole screen's text, row by row.
fn screen_text(terminal: &Terminal<TestBackend>) -> String {
    let buffer = terminal.backend().buffer();
    let mut text = String::new();
    for y in 0..buffer.area.height {
        for x in 0..buffer.area.width {
            text.push_str(buffer[(x, y)].symbol());
        }
        text.push('\n');
    }
    text
}

#[test]
fn the_full_screen_shows_controls_as_escapes() {
    let mut view = ChatView {
        model: "test-model".into(),
        run: "2026-11-30T09-38-04-123Z".into(),
        ..ChatView::default()
    };
    view.conversation
        .items
        .push(Item::User("clear\x1b[2J please".into()));
    view.conversation.items.push(Item::Assistant(
        "Title\x1b]0;owned\x07 and\ta link \x1b]8;;https://evil.example/\x1b\\here\x1b]8;;\x1b\\"
            .into(),
    ));
    view.conversation.items.push(Item::Tool(ToolView {
        id: "call_1".into(),
        agent: String::new(),
        name: "read_file".into(),
        arguments: "{\"path\": \"notes\\u001b.txt\"}".into(),
        arguments_len: None,
        result: Some(ToolResultView {
            folded_lines: 0,
            content: "clip\x1b]52;c;aGVsbG8=\x07\ncsi\u{9b}31m red\nback\x08 cr\rover".into(),
            is_error: false,
        }),
    }));
    view.conversation
        .items
        .push(Item::Error("server said: \x07bell\x1b[0m".into()));
    view.conversation.streaming = "streaming \x1b[1;1H\x1b[2J".into();
    let terminal = screen(&view, 72, 20);
    let text = screen_text(&terminal);
    for shown in [
        "\\x1b[2J please",
        "Title\\x1b]0;owned\\x07",
        "\\x1b]52;c;aGVsbG8=\\x07",
        "csi\\u{9b}31m",
        "back\\x08 cr\\rover",
        "\\x07bell\\x1b[0m",
        "streaming \\x1b[1;1H\\x1b[2J",
    ] {
        assert_contains!(text, shown);
    }
    insta::assert_snapshot!(terminal.backend());
}

#[test]
fn the_picker_shows_controls_from_run_folders_as_escapes() {
    let mut view = ChatView {
        model: "test-model".into(),
        run: "2026-11-30T09-38-04-123Z".into(),
        ..ChatView::default()
    };
    view.picker = Some(Picker {
        rows: vec![PickerRow {
            name: "2026-11-30T09-00-00-000Z".into(),
            date: "2026-11-30 09:00".into(),
            last_message: "hi\x1b]0;owned\x07 \u{9b}2J".into(),
            title: String::new(),
        }],
        ..Picker::default()
    });
    let terminal = screen(&view, 72, 10);
    assert_contains!(screen_text(&terminal), "hi\\x1b]0;owned\\x07 \\u{9b}2J");
    insta::assert_snapshot!(terminal.backend());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_mode_on_a_terminal_joins_a_line_end_split_between_two_chunks() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    // Chunks of four characters: "one\r" | "\ntwo" | "\r\nth" | "ree\r" | "four" | ...
    server.push_all([Reply::text("one\r\ntwo\r\nthree\rfour and five").chunk_chars(4)]);
    let base_url = server.base_url();
    let mut pty = sandbox.pty(&["--plain", "--base-url", &base_url, "--model", "test-model"]);
    pty.line("count");
    pty.wait_text("four and five").await;
    let screen = pty.contents();
    // The line ends are line ends; the lone carriage return, split from its text
    // by a chunk boundary as well, is still shown as an escape.
    assert_contains!(screen, "one\ntwo\nthree\\rfour and five");
    pty.line("/exit");
    assert!(pty.wait_exit().await, "{}", pty.contents());
}
