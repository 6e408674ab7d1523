//! One session that wrote a file, ran a command, was rewound in the chat and
//! resumed: `show` (text and JSON), the exports and both screens agree on it, and
//! a fork that ends on a call says so when it is resumed.

use crate::support::Sandbox;
use reprise_testkit::assert_contains;
use reprise_testkit::{Reply, ScriptedServer};

/// The number before `words` in `text`.
fn count_before(text: &str, words: &str) -> usize {
    let at = text
        .find(words)
        .unwrap_or_else(|| panic!("{words:?} in {text}"));
    text[..at]
        .split_whitespace()
        .next_back()
        .and_then(|word| word.trim_start_matches('(').parse().ok())
        .unwrap_or_else(|| panic!("a count before {words:?} in {text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_the_exports_and_the_screens_agree_on_a_rewound_session() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    let base = server.base_url();
    server.push_all([
        Reply::tool_call(
            "call_1",
            "write_file",
            r#"{"path":"a.txt","content":"one\n"}"#,
        )
        .with_usage(100, 10),
        Reply::text("written").with_usage(120, 5),
        Reply::tool_call("call_2", "run_command", r#"{"command":"cat a.txt"}"#).with_usage(200, 20),
        Reply::text("ran it").with_usage(250, 7),
    ]);
    let out = sandbox.chat(&base, &["--yes"], "write\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let out = sandbox.chat(&base, &["--yes", "--continue"], "run\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    // To just before message 2, the conversation only.
    let out = sandbox
        .chat(&base, &["--yes", "--continue"], "/rewind\n2\n2\ny\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let said = format!("{}{}", out.stdout, out.stderr);
    let left = count_before(&said, "messages left the model's view");
    assert_eq!(
        left, 4,
        "the person's message, the call, its result, the reply"
    );

    // `show` counts what left the view as the chat did, and marks every line of it.
    let out = sandbox.run(&["show", "last"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(count_before(&out.stdout, "messages) ──"), left);
    insta::assert_snapshot!("show_tools_of_a_rewound_run", out.stdout);
    let rewound_lines: Vec<&str> = out
        .stdout
        .lines()
        .skip_while(|line| !line.starts_with("── rewound"))
        .skip(1)
        .take_while(|line| !line.starts_with("── rewind to"))
        .filter(|line| !line.is_empty())
        .collect();
    assert!(
        rewound_lines.iter().all(|line| line.starts_with("│ ")),
        "{rewound_lines:?}"
    );
    assert!(
        rewound_lines
            .iter()
            .any(|line| line.starts_with("│ ⚙ run_command")),
        "{rewound_lines:?}"
    );

    // Its JSON marks the same rows, the call and its result among them.
    let out = sandbox
        .run(&["show", "last", "--json", "--tools"], "")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let rows: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let rewound: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["rewound"] == true)
        .map(|row| row["role"].as_str().unwrap())
        .collect();
    assert_eq!(rewound, ["user", "tool_call", "tool", "assistant"]);
    assert_eq!(rewound.len(), left);

    // The exports: records as the state of their calls, the rewind said and marked.
    for format in ["markdown", "html"] {
        let out = sandbox
            .run(&["export", "last", "--format", format], "")
            .await;
        assert_eq!(out.status, 0, "{}", out.stderr);
        for raw in ["toolStart", "idempotencyKey", "\"kind\"", "rewind\n{"] {
            assert!(
                !out.stdout.contains(raw),
                "{format}: {raw} in {}",
                out.stdout
            );
        }
        assert_contains!(out.stdout, "allowed by --yes");
        assert_eq!(
            count_before(&out.stdout, "messages marked “rewound” below"),
            left,
            "{format}"
        );
        assert_contains!(
            out.stdout,
            "rewind to just before “run”: the conversation only"
        );
        let marked = if format == "html" {
            "class=\"rewound\""
        } else {
            " · rewound"
        };
        assert_eq!(
            out.stdout.matches(marked).count(),
            3,
            "{format}: the message and the two replies"
        );
    }

    // The full screen's totals count every call, the rewound ones too.
    let pty = sandbox.pty(&[
        "--base-url",
        &base,
        "--model",
        "test-model",
        "--yes",
        "--continue",
    ]);
    pty.wait_text("(resumed the conversation of").await;
    pty.wait_text("670 in · 42 out tokens").await;
    drop(pty);

    // A fork whose copy ends on the command's call is not a crash.
    let run = sandbox.conversations().remove(0);
    let uuid = crate::support::uuid_of_call(&run, "call_2");
    let out = sandbox.run(&["fork", "last", "--at", &uuid], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let fork = crate::support::resume_id(&out.stdout);
    server.push(Reply::text("after the fork"));
    let out = sandbox.chat(&base, &["--yes", "--resume", &fork], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let said = format!("{}{}", out.stdout, out.stderr);
    assert_contains!(said, reprise_chat::session::RESUMING_FORK_TURN);
    assert!(!said.contains("crash"), "{said}");
    assert_contains!(said, "after the fork");
}

/// A Claude Code session whose last lines in the person's name are a slash
/// command's expansion and a blank message, neither typed by the person.
fn session_ending_on_an_expansion() -> String {
    let line = |uuid: &str, parent: Option<&str>, role: &str, content: &str, meta: bool| {
        let mut message =
            serde_json::json!({"role": role, "content": [{"type": "text", "text": content}]});
        if role == "assistant" {
            message["id"] = format!("msg_{uuid}").into();
            message["type"] = "message".into();
            message["model"] = "claude-sonnet-4-20250514".into();
            message["stop_reason"] = "end_turn".into();
        }
        let mut record = serde_json::json!({
            "type": role,
            "timestamp": "2025-07-01T10:00:00.000Z",
            "parentUuid": parent,
            "isSidechain": false,
            "sessionId": "s1",
            "uuid": uuid,
            "message": message,
        });
        if meta {
            record["isMeta"] = true.into();
        }
        format!("{record}\n")
    };
    [
        line("u1", None, "user", "Start here", false),
        line("a1", Some("u1"), "assistant", "Ready", false),
        line("u2", Some("a1"), "user", "Review the parser please", false),
        line(
            "u3",
            Some("u2"),
            "user",
            "<command-message>review</command-message>\nReview the changes on this branch.",
            true,
        ),
        line("a2", Some("u3"), "assistant", "Reviewed", false),
        line("u4", Some("a2"), "user", "  \n", false),
    ]
    .concat()
}

/// The listing the picker draws and `show` take the same message for the person's
/// last: not a slash command's expansion, nor a blank message after it.
#[tokio::test]
async fn the_listing_and_show_name_the_same_last_message() {
    let sandbox = Sandbox::new();
    let file = sandbox.path().join("ends-on-an-expansion.jsonl");
    std::fs::write(&file, session_ending_on_an_expansion()).unwrap();
    let out = sandbox.run(&["import", file.to_str().unwrap()], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);

    let out = sandbox.run(&["runs", "--json"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let listed: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let listed_last = listed[0]["lastMessage"].as_str().unwrap().to_owned();

    let out = sandbox.run(&["show", "last", "--json"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let rows: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let shown_last = rows
        .as_array()
        .unwrap()
        .iter()
        .rfind(|row| row["role"] == "user")
        .and_then(|row| row["text"].as_str())
        .unwrap()
        .to_owned();
    assert_eq!(listed_last, shown_last);
    assert_eq!(shown_last, "Review the parser please");
    assert_eq!(listed[0]["firstMessage"], "Start here");

    let out = sandbox.run(&["show", "last"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "Review the parser please");
    assert!(!out.stdout.contains("<command-message>"), "{}", out.stdout);
}
