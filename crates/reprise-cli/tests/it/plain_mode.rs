//! The plain line mode end to end: the real binary, through pipes, against a scripted
//! OpenAI-compatible server.

use crate::support::{Sandbox, jsonl, roles_and_texts};
use reprise_testkit::assert_contains;
use reprise_testkit::{Reply, ScriptedCall, ScriptedServer, unreachable_base_url};

/// Secrets from the test corpus (`secret_detection_cases.jsonl`, cases 21 and 226).
const AWS_KEY: &str = "AKIADEADBEEFDEADBEEF";
const GITHUB_TOKEN: &str = "ghp_XIxB7KMNdAr3zqWtQqhE94qglHqOzn1D1stg";

fn write_notes(sandbox: &Sandbox) {
    std::fs::write(
        sandbox.path().join("notes.txt"),
        format!("buy milk\naws = {AWS_KEY}\nGITHUB_KEY={GITHUB_TOKEN}\n"),
    )
    .unwrap();
}

async fn two_turn_chat(sandbox: &Sandbox, server: &ScriptedServer) -> crate::support::Output {
    server.push_all([
        Reply::tool_call("call_1", "read_file", r#"{"path":"notes.txt"}"#),
        Reply::text("The note says **buy milk**.").with_usage(120, 8),
        Reply::text("You are welcome."),
    ]);
    sandbox
        .chat(
            &server.base_url(),
            &["--yes"],
            "what do my notes say?\nthanks\n",
        )
        .await
}

#[tokio::test]
async fn a_two_turn_chat_with_a_tool_call_is_shown_and_kept_in_the_run_folder() {
    let sandbox = Sandbox::new();
    write_notes(&sandbox);
    let server = ScriptedServer::start().await;
    let out = two_turn_chat(&sandbox, &server).await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    // Piped, stdout holds the replies and nothing else; the rest is on stderr.
    assert_eq!(
        out.stdout, "The note says **buy milk**.\nYou are welcome.\n",
        "stderr: {}",
        out.stderr
    );
    assert_contains!(out.stderr, "› what do my notes say?");
    assert_contains!(out.stderr, "⚙ read_file {\"path\":\"notes.txt\"}");
    assert_contains!(out.stderr, "↳ buy milk (+2 lines)");

    // The third request carries the whole conversation, tool call and result included.
    let bodies = server.request_bodies();
    assert_eq!(bodies.len(), 3);
    server.assert_tool_call_pairing();
    let roles: Vec<String> = roles_and_texts(&bodies[2])
        .into_iter()
        .map(|(r, _)| r)
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "assistant", "user"]
    );
    let tool_message = &bodies[2]["messages"][3];
    assert_eq!(tool_message["tool_call_id"], "call_1");
    assert!(
        tool_message["content"]
            .as_str()
            .unwrap()
            .contains("buy milk")
    );

    // One run folder, with everything SPEC lists.
    let runs = sandbox.conversations();
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    for file in [
        "session.log",
        "transcript.jsonl",
        "conversation.jsonl",
        "session.json",
    ] {
        assert!(run.join(file).exists(), "{file} missing");
    }
    let log = std::fs::read_to_string(run.join("session.log")).unwrap();
    assert_contains!(log, "› what do my notes say?");
    assert_contains!(log, "⚙ read_file");
    assert_contains!(log, "You are welcome.");
    assert!(
        !log.contains('\u{1b}'),
        "escape codes in session.log: {log:?}"
    );

    let transcript = jsonl(&run.join("transcript.jsonl"));
    let kinds: Vec<&str> = transcript
        .iter()
        .map(|r| r["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["tool_call", "tool_result"]);
    assert_eq!(transcript[0]["name"], "read_file");
    assert_eq!(transcript[1]["is_error"], false);
    assert!(
        transcript[1]["decision"]
            .as_str()
            .unwrap()
            .contains("allow")
    );
    let raw = std::fs::read_to_string(run.join("transcript.jsonl")).unwrap();
    assert!(raw.contains("buy milk"));
    assert!(!raw.contains(AWS_KEY), "AWS key in transcript: {raw}");
    assert!(
        !raw.contains(GITHUB_TOKEN),
        "GitHub token in transcript: {raw}"
    );

    let history = jsonl(&sandbox.runs_dir().join("history.jsonl"));
    let texts: Vec<&str> = history
        .iter()
        .map(|h| h["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["what do my notes say?", "thanks"]);
}

#[tokio::test]
async fn continue_redraws_and_sends_the_whole_history() {
    let sandbox = Sandbox::new();
    write_notes(&sandbox);
    let server = ScriptedServer::start().await;
    let first = two_turn_chat(&sandbox, &server).await;
    assert_eq!(first.status, 0, "{}", first.stderr);
    let run = sandbox.conversations().remove(0);
    let log_before = std::fs::read_to_string(run.join("session.log")).unwrap();

    server.push(Reply::text("Still here."));
    let out = sandbox
        .chat(
            &server.base_url(),
            &["--continue", "--yes"],
            "one more thing\n",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    // Only the new reply reaches stdout; the redraw is on stderr.
    assert_eq!(out.stdout, "Still here.\n", "{}", out.stderr);
    // The redraw: the person's messages and the replies, then the resumed line.
    let redraw_at = out
        .stderr
        .find("› what do my notes say?")
        .expect(&out.stderr);
    let reply_at = out.stderr.find("You are welcome.").expect(&out.stderr);
    let resumed_at = out
        .stderr
        .find("(resumed the conversation of ")
        .expect(&out.stderr);
    assert!(
        redraw_at < reply_at && reply_at < resumed_at,
        "{}",
        out.stderr
    );
    // The tool work between is redrawn as the live view shows it: the call, and its
    // result's first line (redacted) with the count of the others.
    let call_at = out
        .stderr
        .find("⚙ read_file {\"path\":\"notes.txt\"}\n  ↳ buy milk (+2 lines)\n")
        .expect(&out.stderr);
    assert!(
        redraw_at < call_at && call_at < resumed_at,
        "{}",
        out.stderr
    );

    let bodies = server.request_bodies();
    let last = roles_and_texts(bodies.last().unwrap());
    let roles: Vec<&str> = last.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant",
            "user"
        ]
    );
    assert_eq!(last[1].1, "what do my notes say?");
    assert_eq!(last[5].1, "thanks");
    assert_eq!(last[7].1, "one more thing");
    server.assert_tool_call_pairing();

    // The conversation stayed in its own run folder, whose log kept growing; the
    // start still made a folder of its own (holding only its session.log).
    assert_eq!(sandbox.conversations(), vec![run.clone()]);
    assert_eq!(sandbox.runs().len(), 2);
    let log_after = std::fs::read_to_string(run.join("session.log")).unwrap();
    assert!(log_after.starts_with(&log_before));
    assert!(log_after.contains("› one more thing"));
    assert!(log_after.contains("Still here."));
}

#[tokio::test]
async fn the_prompt_argument_is_sent_once_and_resume_by_number_picks_the_older_run() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    server.push_all([Reply::text("About bread."), Reply::text("About bikes.")]);
    let out = sandbox.chat(&server.base_url(), &["bake bread"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let out = sandbox
        .chat(&server.base_url(), &["fix the bike"], "")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(sandbox.conversations().len(), 2);

    server.push(Reply::text("Back to bread."));
    let out = sandbox
        .chat(&server.base_url(), &[], "/resume\n2\nmore on that\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    // Newest first: 1 is the bike, 2 the bread.
    let one = out.stderr.find("  1. ").unwrap();
    let two = out.stderr.find("  2. ").unwrap();
    assert!(
        out.stderr[one..two].contains("fix the bike"),
        "{}",
        out.stderr
    );
    assert!(out.stderr[two..].contains("bake bread"), "{}", out.stderr);
    assert!(out.stderr.contains("(resumed the conversation of "));

    let bodies = server.request_bodies();
    assert_eq!(bodies.len(), 3);
    let last = roles_and_texts(&bodies[2]);
    let texts: Vec<&str> = last.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(texts[1..], ["bake bread", "About bread.", "more on that"]);
}

#[tokio::test]
async fn resume_with_a_bad_number_asks_again_and_empty_cancels() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    server.push_all([Reply::text("One."), Reply::text("Two.")]);
    sandbox.chat(&server.base_url(), &["first"], "").await;
    let out = sandbox
        .chat(&server.base_url(), &[], "/resume\n7\n\nhello\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("type a number from 1 to 1"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("(cancelled)"), "{}", out.stderr);
    // Not resumed: the new message starts a conversation of its own.
    let bodies = server.request_bodies();
    let texts: Vec<String> = roles_and_texts(&bodies[1])
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    assert_eq!(texts[1..], ["hello".to_owned()]);
}

#[tokio::test]
async fn with_piped_input_the_gate_reads_no_line_and_says_how_to_allow() {
    let sandbox = Sandbox::new();
    write_notes(&sandbox);
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::tool_call(
            "call_1",
            "edit_file",
            r#"{"path":"notes.txt","old":"milk","new":"tea"}"#,
        ),
        Reply::text("I was not allowed."),
        Reply::tool_call("call_2", "fly", r#"{"to":"moon"}"#),
        Reply::text("No such tool."),
    ]);
    // "y" would have been taken as the gate's answer: it is the next prompt.
    let out = sandbox
        .chat(
            &server.base_url(),
            &[],
            "read it
y
",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(!out.stdout.contains("[y]es"), "{}", out.stdout);
    assert_contains!(out.stderr, "--yes");
    assert_contains!(out.stderr, "[gate] allow = [\"edit_file\"]");
    let bodies = server.request_bodies();
    assert_eq!(bodies.len(), 4);
    let denied = &bodies[1]["messages"][3];
    assert_eq!(denied["role"], "tool");
    assert!(
        denied["content"].as_str().unwrap().contains("not allowed"),
        "{denied}"
    );
    let second_prompt = &bodies[2]["messages"][5];
    assert_eq!(second_prompt["role"], "user");
    assert_eq!(second_prompt["content"], "y", "the line reached the model");
    // A tool that does not exist is answered without a question or a denial.
    let unknown = &bodies[3]["messages"][7];
    assert!(
        unknown["content"]
            .as_str()
            .unwrap()
            .contains("no such tool"),
        "{unknown}"
    );
    assert_eq!(
        out.stderr.matches("no one can approve it").count(),
        1,
        "{}",
        out.stderr
    );
    server.assert_tool_call_pairing();

    let run = sandbox.conversations().remove(0);
    let transcript = jsonl(&run.join("transcript.jsonl"));
    let decisions: Vec<&str> = transcript
        .iter()
        .filter_map(|r| r["decision"].as_str())
        .collect();
    assert_eq!(decisions, ["no-one-to-ask"]);
}

#[tokio::test]
async fn without_a_terminal_each_call_is_shown_with_its_result_and_the_model_told_why() {
    let sandbox = Sandbox::new();
    write_notes(&sandbox);
    let server = ScriptedServer::start().await;
    server.push_all([
        // Two calls in one reply: the first needs approval, the second reads.
        Reply::tool_calls([
            ScriptedCall::new("call_1", "write_file", r#"{"path":"a.txt","content":"A"}"#),
            ScriptedCall::new("call_2", "read_file", r#"{"path":"notes.txt"}"#),
        ]),
        Reply::tool_call("call_3", "write_file", r#"{"path":"b.txt","content":"B"}"#),
        Reply::text("Could not write."),
    ]);
    let out = sandbox
        .chat(&server.base_url(), &[], "write two files\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(!sandbox.path().join("a.txt").exists());
    assert!(!sandbox.path().join("b.txt").exists());

    // Call by call: each call's line, then its result, in the order of the calls.
    let lines: Vec<&str> = out
        .stderr
        .lines()
        .filter(|line| line.starts_with('⚙') || line.starts_with("  "))
        .collect();
    let why = "no one could approve: not a terminal; --yes allows";
    let expected = [
        r#"⚙ write_file {"path":"a.txt","content":"A"}"#.to_owned(),
        format!("  ✗ error: the call to write_file was not allowed: {why}"),
        r#"⚙ read_file {"path":"notes.txt"}"#.to_owned(),
        "  ↳ buy milk (+2 lines)".to_owned(),
        r#"⚙ write_file {"path":"b.txt","content":"B"}"#.to_owned(),
        format!("  ✗ error: the call to write_file was not allowed: {why}"),
    ];
    assert_eq!(lines, expected, "{}", out.stderr);
    // Said once, after the first call it held back.
    assert_eq!(
        out.stderr.matches("no one can approve it").count(),
        1,
        "{}",
        out.stderr
    );
    let said = out.stderr.find("no one can approve it").unwrap();
    assert!(
        out.stderr.find(&expected[1]).unwrap() < said,
        "{}",
        out.stderr
    );
    assert_contains!(out.stderr, "--yes");

    // The model is told what happened, not that someone declined.
    let bodies = server.request_bodies();
    let tool_texts: Vec<String> = roles_and_texts(&bodies[1])
        .into_iter()
        .filter(|(role, _)| role == "tool")
        .map(|(_, text)| text)
        .collect();
    assert_eq!(tool_texts.len(), 2, "{tool_texts:?}");
    assert_eq!(
        tool_texts[0],
        format!("error: the call to write_file was not allowed: {why}")
    );
    assert!(!tool_texts[0].contains("declined"));
    assert_contains!(tool_texts[1], "buy milk");
    server.assert_tool_call_pairing();
}

#[tokio::test]
async fn fork_continues_in_a_copy_and_keeps_the_original() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    server.push_all([Reply::text("A."), Reply::text("B in the fork.")]);
    let out = sandbox
        .chat(&server.base_url(), &[], "first\n/fork\nsecond\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(out.stderr.contains("(forked into run "), "{}", out.stderr);
    let runs = sandbox.conversations();
    assert_eq!(runs.len(), 2);
    // The copy is marked as a fork of the original in its title.
    let listed = sandbox.run(&["runs", "--json"], "").await;
    let listed: serde_json::Value = serde_json::from_str(&listed.stdout).unwrap();
    let original = runs[0].file_name().unwrap().to_str().unwrap().to_owned();
    let titles: Vec<serde_json::Value> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|run| run["title"].clone())
        .collect();
    assert!(
        titles.contains(&serde_json::Value::String(format!("fork of {original}"))),
        "{listed:#}"
    );
    // A titled run's fork is titled after it, as `reprise fork` titles it.
    let out = sandbox.run(&["rename", &original, "Letters"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    server.push(Reply::text("C."));
    let out = sandbox
        .chat(
            &server.base_url(),
            &["--resume", &original],
            "/fork\nthird\n",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let listed = sandbox.run(&["runs", "--json"], "").await;
    assert_contains!(listed.stdout, "\"title\": \"fork of Letters\"");
    let original = jsonl(&runs[0].join("conversation.jsonl"));
    let fork = jsonl(&runs[1].join("conversation.jsonl"));
    assert_eq!(original.len(), 2);
    assert_eq!(fork.len(), 4);
    assert_eq!(fork[0]["message"], original[0]["message"]);
    let texts: Vec<String> = roles_and_texts(&server.request_bodies()[1])
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    assert_eq!(texts[1..], ["first", "A.", "second"]);
}

#[tokio::test]
async fn no_server_gives_one_clear_message() {
    let sandbox = Sandbox::new();
    let url = unreachable_base_url();
    let out = sandbox.chat(&url, &[], "hello\n").await;
    assert_ne!(out.status, 0);
    let errors: Vec<&str> = out.stderr.lines().filter(|l| l.starts_with("✗")).collect();
    assert_eq!(errors.len(), 1, "{}", out.stderr);
    // Every attempt fails the same way: one line says it is tried again.
    assert!(
        out.stderr.matches("(retrying").count() <= 1,
        "{}",
        out.stderr
    );
    assert_contains!(out.stderr, &url);
    assert_contains!(out.stderr, "--base-url");
    assert_contains!(out.stderr, "--model");
    assert!(
        out.stderr.contains("http://localhost:11434/v1"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn help_and_unknown_commands_are_answered_without_the_model() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    let out = sandbox
        .chat(&server.base_url(), &[], "/help\n/bogus\n/exit\nnot sent\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stderr, "/resume");
    // The tools the model may call are listed too.
    assert_contains!(out.stderr, "Tools the model may call");
    assert_contains!(out.stderr, "  read_file    Read a text file");
    assert_contains!(out.stderr, "  list_dir     List the entries");
    assert_contains!(out.stderr, "  run_command  Run a shell command");
    assert!(
        out.stderr.contains("unknown command /bogus"),
        "{}",
        out.stderr
    );
    assert_eq!(server.request_count(), 0);
}

#[tokio::test]
async fn load_warnings_are_shown_when_resuming() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    server.push(Reply::text("First answer."));
    let out = sandbox.chat(&server.base_url(), &["first"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let run = sandbox.conversations().remove(0);
    let conversation = run.join("conversation.jsonl");
    let mut text = std::fs::read_to_string(&conversation).unwrap();
    text.push_str("this line is not json\n");
    text.push_str("{\"uuid\":\"0193c0de-0000-7000-8000-00000000000f\",\"ts\":\"2026-");
    std::fs::write(&conversation, text).unwrap();

    server.push(Reply::text("Second answer."));
    let out = sandbox.chat(&server.base_url(), &["-c"], "second\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let warnings: Vec<&str> = out.stderr.lines().filter(|l| l.starts_with("! ")).collect();
    assert_eq!(warnings.len(), 2, "{}", out.stderr);
    assert!(
        warnings.iter().any(|w| w.contains("conversation.jsonl:3")),
        "{warnings:?}"
    );
    assert!(
        warnings.iter().any(|w| w.contains("conversation.jsonl:4")),
        "{warnings:?}"
    );
    // The resumed history is the complete, valid part.
    let texts: Vec<String> = roles_and_texts(&server.request_bodies()[1])
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    assert_eq!(texts[1..], ["first", "First answer.", "second"]);
}

#[tokio::test]
async fn sigint_mid_turn_stops_the_turn_and_the_chat_goes_on() {
    use std::time::Duration;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::text("An endless story begins")
            .chunk_chars(4)
            .stall_after(3, Duration::from_secs(60)),
        Reply::text("Something else, then."),
    ]);
    let mut child = sandbox
        .command(&["--plain", "--base-url", &server.base_url(), "--model", "m"])
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    stdin.write_all(b"tell me a story\n").await.unwrap();
    // Wait for the reply to be under way (its first chunks sent, then it stalls).
    while server.request_count() == 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = child.id().unwrap();
    let status = std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).await.unwrap() > 0,
            "the chat exited"
        );
        if line.contains("(cancelled)") {
            break;
        }
    }
    stdin.write_all(b"something else\n").await.unwrap();
    drop(stdin);
    let mut rest = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut stdout, &mut rest)
        .await
        .unwrap();
    // The unfinished reply is not kept, so stdout never shows it.
    assert_eq!(rest, "Something else, then.\n");
    assert!(child.wait().await.unwrap().success());
    let texts: Vec<String> = roles_and_texts(&server.request_bodies()[1])
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    assert_eq!(texts[1..], ["tell me a story", "something else"]);
}

#[tokio::test]
async fn a_run_with_no_conversation_holds_only_its_session_log() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    sandbox.chat(&server.base_url(), &[], "").await;
    let runs = sandbox.runs();
    assert_eq!(runs.len(), 1);
    // Hidden files (the writer lock) are not part of what a run shows.
    let mut visible: Vec<String> = std::fs::read_dir(&runs[0])
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with('.'))
        .collect();
    visible.sort();
    assert_eq!(visible, ["session.log"]);
    assert!(server.request_bodies().is_empty());
}

#[tokio::test]
async fn stdout_holds_only_the_kept_reply_when_an_attempt_is_retried() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::text("Half of a first try that breaks")
            .chunk_chars(5)
            .cut_after(3),
        Reply::text("The real answer."),
    ]);
    let out = sandbox.chat(&server.base_url(), &[], "hello\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stderr, "retrying");
    assert_eq!(server.request_count(), 2);
    // Only what the conversation keeps reaches stdout: `reprise … > answer.txt`.
    assert!(!out.stdout.contains("Half"), "{}", out.stdout);
    assert_eq!(
        out.stdout
            .lines()
            .filter(|l| l.contains("The real answer."))
            .count(),
        1,
        "{}",
        out.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_at_the_gate_on_a_terminal_ends_the_turn_and_the_chat_goes_on() {
    let sandbox = Sandbox::new();
    std::fs::write(sandbox.path().join("notes.txt"), "buy milk\n").unwrap();
    let server = ScriptedServer::start().await;
    server.push_all([
        reprise_testkit::Reply::tool_calls([
            reprise_testkit::ScriptedCall::new("call_1", "write_file", r#"{"path":"notes.txt"}"#),
            reprise_testkit::ScriptedCall::new("call_2", "write_file", r#"{"path":"other.txt"}"#),
        ]),
        Reply::text("Here again."),
    ]);
    let base_url = server.base_url();
    let mut pty = sandbox.pty(&["--plain", "--base-url", &base_url, "--model", "test-model"]);
    pty.line("read my notes");
    pty.wait_text(r#"run write_file {"path":"notes.txt"}?"#)
        .await;
    // Ctrl-C on the terminal: SIGINT, as a person would send it.
    pty.send("\x03");
    pty.wait_text("(cancelled)").await;
    // The second call was not asked about, and no model call followed.
    assert!(
        !pty.contents().contains("other.txt\"}?"),
        "{}",
        pty.contents()
    );
    assert_eq!(server.request_count(), 1);
    // The chat goes on.
    pty.line("hello?");
    pty.wait_text("Here again.").await;
    pty.line("/exit");
    assert!(pty.wait_exit().await, "{}", pty.contents());

    // Both calls are closed as interrupted, neither was run; the next request pairs.
    let run = sandbox.conversations().remove(0);
    let results: Vec<(String, String)> = jsonl(&run.join("conversation.jsonl"))
        .iter()
        .filter(|line| line["message"]["role"] == "tool")
        .map(|line| {
            (
                line["message"]["tool_call_id"].as_str().unwrap().to_owned(),
                line["message"]["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        results,
        [
            (
                "call_1".to_owned(),
                reprise_agent::CANCELLED_BY_USER.to_owned()
            ),
            (
                "call_2".to_owned(),
                reprise_agent::CANCELLED_BY_USER.to_owned()
            )
        ]
    );
    server.assert_tool_call_pairing();
}

#[tokio::test]
async fn a_timeout_of_zero_is_no_limit_in_the_config_and_on_the_command_line() {
    let sandbox = Sandbox::new();
    let config = sandbox.path().join("config.toml");
    std::fs::write(&config, "request_timeout = \"0\"\nidle_timeout = 0\n").unwrap();
    let server = ScriptedServer::start().await;
    server.push_all([Reply::text("No hurry."), Reply::text("Still none.")]);
    let config = config.to_str().unwrap();
    let out = sandbox
        .chat(&server.base_url(), &["--config", config, "hello"], "")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "No hurry.");
    let out = sandbox
        .chat(
            &server.base_url(),
            &["--request-timeout", "0ms", "--idle-timeout", "0", "again"],
            "",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "Still none.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_terminal_a_retried_attempt_s_text_is_marked_withdrawn() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::text("Half of a first try that breaks")
            .chunk_chars(5)
            .cut_after(3),
        Reply::text("The real answer."),
    ]);
    let base_url = server.base_url();
    let mut pty = sandbox.pty(&["--plain", "--base-url", &base_url, "--model", "test-model"]);
    pty.line("hello");
    pty.wait_text("The real answer.").await;
    let screen = pty.contents();
    let half = screen.find("› Half of a").expect(&screen);
    let withdrawn = screen.find("(withdrawn: ").expect(&screen);
    let answer = screen.find("The real answer.").unwrap();
    assert!(half < withdrawn && withdrawn < answer, "{screen}");
    assert_eq!(screen.matches("The real answer.").count(), 1, "{screen}");
    pty.line("/exit");
    assert!(pty.wait_exit().await, "{}", pty.contents());
}

#[tokio::test]
async fn resume_does_not_offer_the_run_already_open() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    server.push_all([Reply::text("About bread."), Reply::text("About bikes.")]);
    let out = sandbox.chat(&server.base_url(), &["bake bread"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let out = sandbox
        .chat(&server.base_url(), &["fix the bike"], "/resume\n\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    // The bike's run is the one open: only the bread's is offered.
    assert_contains!(out.stderr, "  1. ");
    assert!(!out.stderr.contains("  2. "), "{}", out.stderr);
    let list = &out.stderr[out.stderr.find("  1. ").unwrap()..];
    assert!(list.starts_with("  1. ") && list.lines().next().unwrap().contains("bake bread"));
}

#[tokio::test]
async fn a_server_error_page_is_printed_once_as_text_cut_to_a_few_lines() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    let rows: String = (1..=40)
        .map(|i| format!("<p>detail line {i} of the error page</p>\n"))
        .collect();
    let page = format!(
        "<!DOCTYPE html>\n<html><head><title>501 Not Implemented</title>\
         <style>body {{ color: red; }}</style></head>\n<body>\n<h1>Not Implemented</h1>\n\
         <p>POST to /v1/chat/completions is not supported.</p>\n{rows}</body></html>\n"
    );
    for _ in 0..5 {
        server.push(Reply::status(501, page.clone()));
    }
    let out = sandbox.chat(&server.base_url(), &[], "hello\n").await;
    assert_eq!(out.status, 1, "{}", out.stderr);
    assert_eq!(
        out.stderr.matches("Not Implemented").count(),
        1,
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains('<'), "{}", out.stderr);
    assert!(!out.stderr.contains("color: red"), "{}", out.stderr);
    assert_contains!(out.stderr, "POST to /v1/chat/completions is not supported.");
    assert!(!out.stderr.contains("detail line 40"), "{}", out.stderr);
}
