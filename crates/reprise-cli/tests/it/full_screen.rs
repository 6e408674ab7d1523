//! The full-screen chat end to end: the real binary in a pseudo-terminal, against a
//! scripted OpenAI-compatible server.

use reprise_testkit::assert_contains;
use std::time::Duration;

use crate::support::{Sandbox, roles_and_texts};
use reprise_testkit::pty::{CursorAnswers, Pty};
use reprise_testkit::{Reply, ScriptedCall, ScriptedServer};

const UP: &str = "\x1b[A";
const DOWN: &str = "\x1b[B";
const CTRL_C: &str = "\x03";
const CTRL_D: &str = "\x04";

fn chat(sandbox: &Sandbox, server: &ScriptedServer, extra: &[&str]) -> Pty {
    let base_url = server.base_url();
    let mut args = vec!["--base-url", base_url.as_str(), "--model", "test-model"];
    args.extend_from_slice(extra);
    sandbox.pty(&args)
}

fn texts_of(body: &serde_json::Value) -> Vec<String> {
    roles_and_texts(body).into_iter().map(|(_, t)| t).collect()
}

async fn two_turns(sandbox: &Sandbox, server: &ScriptedServer) {
    std::fs::write(sandbox.path().join("notes.txt"), "buy milk\n").unwrap();
    server.push_all([
        Reply::tool_call("call_1", "read_file", r#"{"path":"notes.txt"}"#),
        Reply::text("The note says **buy milk**.").with_usage(120, 8),
        Reply::text("You are welcome."),
    ]);
    let mut pty = chat(sandbox, server, &["--yes"]);
    pty.wait_text("/help · /resume").await;
    pty.line("what do my notes say?");
    pty.wait_text("The note says buy milk.").await;
    pty.wait_text("⚙ read_file").await;
    pty.wait_text("↳ buy milk").await;
    pty.wait_text("120 in · 8 out tokens").await;
    pty.line("thanks");
    pty.wait_text("You are welcome.").await;
    pty.wait_for("the turn to end", |s| !s.contains("working"))
        .await;
    pty.send(CTRL_D);
    assert!(pty.wait_exit().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_turn_chat_then_continue_redraws_and_sends_everything() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    two_turns(&sandbox, &server).await;
    assert_eq!(server.request_count(), 3);
    let run = sandbox.conversations().remove(0);
    let log = std::fs::read_to_string(run.join("session.log")).unwrap();
    assert!(
        log.contains("› what do my notes say?") && log.contains("You are welcome."),
        "{log}"
    );
    assert!(
        !log.contains('\u{1b}'),
        "escape codes in session.log: {log:?}"
    );

    server.push(Reply::text("Still here."));
    let mut pty = chat(&sandbox, &server, &["--continue", "--yes"]);
    pty.wait_text("(resumed the conversation of").await;
    let screen = pty.contents();
    let asked = screen.find("› what do my notes say?").expect(&screen);
    let answered = screen.find("You are welcome.").expect(&screen);
    let resumed = screen.find("(resumed the conversation of").unwrap();
    assert!(asked < answered && answered < resumed, "{screen}");
    pty.line("one more thing");
    pty.wait_text("Still here.").await;
    let body = server.request_bodies().pop().unwrap();
    assert_eq!(
        texts_of(&body)[1..],
        [
            "what do my notes say?",
            "",
            "buy milk\n",
            "The note says **buy milk**.",
            "thanks",
            "You are welcome.",
            "one more thing"
        ]
    );
    server.assert_tool_call_pairing();
    pty.send(CTRL_D);
    assert!(pty.wait_exit().await);
}

async fn two_runs(sandbox: &Sandbox, server: &ScriptedServer) {
    server.push_all([Reply::text("About bread."), Reply::text("About bikes.")]);
    for topic in ["bake bread", "fix the bike"] {
        let out = sandbox.chat(&server.base_url(), &[topic], "").await;
        assert_eq!(out.status, 0, "{}", out.stderr);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_picks_the_older_of_two_runs_with_the_arrow_keys() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    two_runs(&sandbox, &server).await;
    server.push(Reply::text("Back to bread."));
    let mut pty = chat(&sandbox, &server, &[]);
    pty.wait_text("/help · /resume").await;
    pty.line("/resume");
    pty.wait_text("resume a run").await;
    pty.wait_text("bake bread").await;
    pty.send(DOWN);
    pty.send(DOWN);
    pty.send(UP);
    pty.send(DOWN);
    pty.send("\r");
    pty.wait_text("(resumed the conversation of").await;
    pty.wait_text("About bread.").await;
    pty.line("more on that");
    pty.wait_text("Back to bread.").await;
    let body = server.request_bodies().pop().unwrap();
    assert_eq!(
        texts_of(&body)[1..],
        ["bake bread", "About bread.", "more on that"]
    );
    pty.send(CTRL_D);
    assert!(pty.wait_exit().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn esc_cancels_the_resume_picker() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    two_runs(&sandbox, &server).await;
    server.push(Reply::text("A fresh start."));
    let mut pty = chat(&sandbox, &server, &[]);
    pty.wait_text("/help · /resume").await;
    pty.line("/resume");
    pty.wait_text("resume a run").await;
    pty.send("\x1b");
    pty.wait_for("the picker to close", |s| !s.contains("resume a run"))
        .await;
    pty.line("hello");
    pty.wait_text("A fresh start.").await;
    let body = server.request_bodies().pop().unwrap();
    assert_eq!(texts_of(&body)[1..], ["hello"]);
    pty.send(CTRL_D);
    assert!(pty.wait_exit().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_typed_during_a_turn_is_sent_after_it() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::text("The first answer, slowly.")
            .chunk_chars(5)
            .stall_after(2, Duration::from_secs(4)),
        Reply::text("The second answer."),
    ]);
    let mut pty = chat(&sandbox, &server, &[]);
    pty.wait_text("/help · /resume").await;
    pty.line("first");
    pty.wait_text("working").await;
    pty.line("second");
    pty.wait_text("1 queued").await;
    pty.wait_text("The second answer.").await;
    let bodies = server.request_bodies();
    assert_eq!(bodies.len(), 2);
    assert_eq!(
        texts_of(&bodies[1])[1..],
        ["first", "The first answer, slowly.", "second"]
    );
    pty.send(CTRL_D);
    assert!(pty.wait_exit().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_mid_stream_stops_the_turn_not_the_program() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::text("This will never finish streaming")
            .chunk_chars(4)
            .stall_after(3, Duration::from_secs(60)),
        Reply::text("Fine, next."),
    ]);
    let mut pty = chat(&sandbox, &server, &[]);
    pty.wait_text("/help · /resume").await;
    pty.line("tell me a long story");
    pty.wait_text("This").await;
    pty.send(CTRL_C);
    pty.wait_text("(cancelled)").await;
    assert!(
        pty.child.try_wait().unwrap().is_none(),
        "the program exited"
    );
    pty.line("something else");
    pty.wait_text("Fine, next.").await;
    let body = server.request_bodies().pop().unwrap();
    // The half-streamed answer is not part of the history sent.
    assert_eq!(
        texts_of(&body)[1..],
        ["tell me a long story", "something else"]
    );
    pty.send(CTRL_D);
    assert!(pty.wait_exit().await);

    // The session is resumable.
    server.push(Reply::text("Resumed fine."));
    let out = sandbox
        .chat(&server.base_url(), &["-c"], "and now?\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(out.stdout.contains("Resumed fine."));
    server.assert_tool_call_pairing();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_turn_then_continue_loses_nothing_shown_as_complete() {
    let sandbox = Sandbox::new();
    std::fs::write(sandbox.path().join("notes.txt"), "buy milk\n").unwrap();
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::tool_call("call_1", "read_file", r#"{"path":"notes.txt"}"#),
        Reply::text("Your note says to buy milk, and")
            .chunk_chars(4)
            .stall_after(3, Duration::from_secs(60)),
    ]);
    let mut pty = chat(&sandbox, &server, &["--yes"]);
    pty.wait_text("/help · /resume").await;
    pty.line("what do my notes say?");
    pty.wait_text("↳ buy milk").await;
    pty.wait_text("Your").await;
    let pid = pty.child.process_id().unwrap();
    // SIGKILL: no chance to clean up anything.
    let status = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    pty.wait_exit().await;

    // The cut turn is finished first (its result is there, the reply is not), then
    // the next prompt.
    server.push_all([Reply::text("Picking up again."), Reply::text("Going on.")]);
    let out = sandbox
        .chat(&server.base_url(), &["--continue"], "go on\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("› what do my notes say?"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.contains("Picking up again."), "{}", out.stdout);
    let mut bodies = server.request_bodies();
    let last = bodies.pop().unwrap();
    let body = bodies.pop().unwrap();
    let messages = crate::support::messages(&body);
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool"]);
    assert_eq!(messages[2]["tool_calls"][0]["id"], "call_1");
    assert_eq!(messages[3]["content"], "buy milk\n");
    let roles: Vec<String> = crate::support::messages(&last)
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "assistant", "user"]
    );
    server.assert_tool_call_pairing();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_mode_keeps_the_shell_text_and_prints_the_conversation_below_it() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    two_runs(&sandbox, &server).await;
    server.push(Reply::text("Inline answer."));
    let mut pty = chat(&sandbox, &server, &["--inline", "--continue"]);
    pty.wait_text("(resumed the conversation of").await;
    pty.wait_text("fix the bike").await;
    pty.line("and the tyres?");
    pty.wait_text("Inline answer.").await;
    let body = server.request_bodies().pop().unwrap();
    assert_eq!(
        texts_of(&body)[1..],
        ["fix the bike", "About bikes.", "and the tyres?"]
    );
    pty.send(CTRL_D);
    assert!(pty.wait_exit().await);
}

/// An inline chat in a terminal answering cursor-position queries as `answers`
/// says: one turn, then Ctrl-D.
async fn inline_turn(answers: CursorAnswers) {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    server.push(Reply::text("Inline answer."));
    let base_url = server.base_url();
    let mut pty = sandbox.pty_answering(
        &["--inline", "--base-url", &base_url, "--model", "test-model"],
        &[],
        answers,
    );
    pty.wait_text("/help · /resume").await;
    pty.line("hello");
    pty.wait_text("Inline answer.").await;
    pty.wait_for("the turn to end", |s| !s.contains("working"))
        .await;
    pty.send(CTRL_D);
    assert!(pty.wait_exit().await, "{}", pty.contents());
    // The last bytes may reach the screen a moment after the exit.
    pty.wait_text("continue it with: reprise --resume").await;
    let screen = pty.contents();
    assert!(!screen.contains("could not be read"), "{screen}");
    assert_eq!(sandbox.conversations().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_mode_works_in_a_terminal_that_never_says_where_the_cursor_is() {
    inline_turn(CursorAnswers::Never).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_mode_works_in_a_terminal_that_says_where_the_cursor_is_late() {
    inline_turn(CursorAnswers::After(Duration::from_secs(3))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_without_a_run_opens_the_picker_at_start() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    two_runs(&sandbox, &server).await;
    server.push(Reply::text("Bikes again."));
    let mut pty = chat(&sandbox, &server, &["--resume"]);
    pty.wait_text("resume a run").await;
    pty.send("bike");
    pty.wait_text("filter: bike").await;
    pty.wait_for("bread to be filtered out", |s| !s.contains("bake bread"))
        .await;
    pty.send("\r");
    pty.wait_text("(resumed the conversation of").await;
    pty.line("and the chain?");
    pty.wait_text("Bikes again.").await;
    let body = server.request_bodies().pop().unwrap();
    assert_eq!(
        texts_of(&body)[1..],
        ["fix the bike", "About bikes.", "and the chain?"]
    );
    pty.send(CTRL_D);
    assert!(pty.wait_exit().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gate_asks_in_a_box_and_ctrl_c_at_an_empty_prompt_exits() {
    let sandbox = Sandbox::new();
    std::fs::write(sandbox.path().join("notes.txt"), "buy milk\n").unwrap();
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::tool_call(
            "call_1",
            "write_file",
            r#"{"path":"notes.txt","content":"tea"}"#,
        ),
        Reply::text("Not allowed, fine."),
        Reply::tool_call(
            "call_2",
            "write_file",
            r#"{"path":"notes.txt","content":"tea"}"#,
        ),
        Reply::text("Wrote it."),
    ]);
    let mut pty = chat(&sandbox, &server, &[]);
    pty.wait_text("/help · /resume").await;
    pty.line("read my notes");
    pty.wait_text("the step gate asks").await;
    pty.wait_text("[a] always for this run").await;
    pty.send("n");
    pty.wait_text("Not allowed, fine.").await;
    pty.wait_text("✗ error: the call to write_file was not allowed")
        .await;
    assert_eq!(
        std::fs::read_to_string(sandbox.path().join("notes.txt")).unwrap(),
        "buy milk\n"
    );
    pty.line("please");
    pty.wait_text("the step gate asks").await;
    pty.send("y");
    pty.wait_text("Wrote it.").await;
    pty.wait_text("↳ wrote notes.txt (3 bytes)").await;
    pty.wait_for("the turn to end", |s| !s.contains("working"))
        .await;
    pty.send(CTRL_C);
    assert!(pty.wait_exit().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_at_the_gate_ends_the_whole_turn_and_closes_every_call() {
    let sandbox = Sandbox::new();
    std::fs::write(sandbox.path().join("notes.txt"), "buy milk\n").unwrap();
    let server = ScriptedServer::start().await;
    server.push_all([Reply::tool_calls([
        ScriptedCall::new(
            "call_1",
            "write_file",
            r#"{"path":"notes.txt","content":"x"}"#,
        ),
        ScriptedCall::new(
            "call_2",
            "write_file",
            r#"{"path":"other.txt","content":"x"}"#,
        ),
    ])]);
    let mut pty = chat(&sandbox, &server, &[]);
    pty.wait_text("/help · /resume").await;
    pty.line("read my notes");
    pty.wait_text("the step gate asks").await;
    // The call asked about waits for the person, and so does the clock.
    pty.wait_text("… waiting for your answer").await;
    pty.wait_text("s  paused").await;
    assert!(!pty.contents().contains("… running"), "{}", pty.contents());
    pty.send(CTRL_C);
    pty.wait_text("(cancelled)").await;
    pty.wait_for("the turn to end", |s| !s.contains("working"))
        .await;
    // No second question, no further model request.
    assert!(
        !pty.contents().contains("the step gate asks"),
        "{}",
        pty.contents()
    );
    assert_eq!(server.request_count(), 1);
    pty.send(CTRL_D);
    assert!(pty.wait_exit().await);
    // Both calls are closed in the conversation, neither was run.
    let run = sandbox.conversations().remove(0);
    let lines = crate::support::jsonl(&run.join("conversation.jsonl"));
    let results: Vec<(&str, &str)> = lines
        .iter()
        .filter(|line| line["message"]["role"] == "tool")
        .map(|line| {
            (
                line["message"]["tool_call_id"].as_str().unwrap(),
                line["message"]["content"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        results,
        [
            ("call_1", reprise_agent::CANCELLED_BY_USER),
            ("call_2", reprise_agent::CANCELLED_BY_USER)
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rm_refuses_a_run_that_a_chat_has_open() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    two_runs(&sandbox, &server).await;
    let mut pty = chat(&sandbox, &server, &["--continue"]);
    pty.wait_text("(resumed the conversation of").await;
    let out = sandbox.run(&["rm", "last", "--yes"], "").await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "is in use");
    // The error names the process that holds the run.
    let holder = pty.child.process_id().unwrap().to_string();
    assert_contains!(out.stderr, &holder);
    assert_eq!(sandbox.conversations().len(), 2);
    pty.send(CTRL_D);
    assert!(pty.wait_exit().await);
    let out = sandbox.run(&["rm", "last", "--yes"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(sandbox.conversations().len(), 1);
}

/// A run of `pairs` questions and answers, written through the library.
async fn long_run(sandbox: &Sandbox, pairs: usize) {
    use reprise_session::{Entry, Message, SessionKey, SessionStore};
    let folder = reprise_runs::create_run_folder(&sandbox.runs_dir()).unwrap();
    let store = reprise_runs::create_run_store(&folder.dir);
    let key = SessionKey::session("0193c0de-0000-7000-8000-0000000000bb").unwrap();
    let entries: Vec<Entry> = (0..pairs)
        .flat_map(|i| {
            [
                Entry::message(Message::user(format!("question {i}"))),
                Entry::message(Message::assistant(format!("answer {i}"))),
            ]
        })
        .collect();
    store.append(&key, &entries).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_very_long_run_is_redrawn_from_its_end_with_a_count_of_the_rest() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    let pairs = 600;
    long_run(&sandbox, pairs).await;
    // Full screen: the last REDRAWN_MESSAGES messages, and a notice counting the rest.
    let redrawn = reprise_cli::screens::tui::app::REDRAWN_MESSAGES;
    let earlier = 2 * pairs - redrawn;
    let mut pty = chat(&sandbox, &server, &["--continue"]);
    pty.wait_text("(resumed the conversation of").await;
    pty.wait_text(&format!("answer {}", pairs - 1)).await;
    pty.send(CTRL_D);
    assert!(pty.wait_exit().await);
    // The notice is the first item: page up to it.
    let mut pty = chat(&sandbox, &server, &["--continue"]);
    pty.wait_text("(resumed the conversation of").await;
    let notice = format!("({earlier} earlier messages; reprise show");
    for _ in 0..60 {
        if pty.contents().contains(&notice) {
            break;
        }
        let before = pty.contents();
        for _ in 0..25 {
            pty.send("\x1b[5~");
        }
        // More keys only once the screen moved: keys queued behind slow redraws would
        // hold back the Ctrl-D below.
        pty.wait_for("the screen to scroll", |screen| screen != before)
            .await;
    }
    pty.wait_text(&notice).await;
    pty.wait_text(&format!("question {}", earlier / 2)).await;
    assert!(
        !pty.contents()
            .contains(&format!("answer {}\n", earlier / 2 - 1)),
        "{}",
        pty.contents()
    );
    pty.send(CTRL_D);
    assert!(pty.wait_exit().await);
    // Plain mode: a screenful, and the count of the rest.
    let out = sandbox.chat(&server.base_url(), &["--continue"], "").await;
    assert_contains!(out.stderr, "earlier messages; reprise show");
    assert_contains!(out.stderr, &format!("answer {}", pairs - 1));
    assert!(!out.stderr.contains("question 0\n"), "{}", out.stderr);
    assert_eq!(server.request_count(), 0);
}
