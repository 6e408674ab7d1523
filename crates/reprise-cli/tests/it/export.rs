//! `reprise export`: Markdown (snapshot), JSON with every entry, one HTML file that
//! a real browser opens without scripts or network; secrets masked unless
//! `--no-redact`; nothing from a message can inject markup.

use std::path::{Path, PathBuf};

use jiff::Timestamp;
use reprise_runs::{create_run_folder, create_run_store};
use reprise_session::{Entry, Message, SessionKey, SessionStore, ToolCall};
use reprise_testkit::testdata;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::support::Sandbox;
use reprise_testkit::assert_contains;

/// A GitHub token in the shape the redactor knows.
const TOKEN: &str = "ghp_R2d2C3poL8k5Xw9Qv1Zt7Ym4Nb6Jh0Fs3Ea1";

fn at(n: i64, message: Option<Message>, kind: Option<&str>, extra: Value) -> Entry {
    let extra: Map<String, Value> = extra.as_object().cloned().unwrap_or_default();
    Entry {
        uuid: Uuid::from_u128(0x0193_0000_0000_7000_8000_0000_0000_0000 + n as u128),
        ts: Timestamp::from_second(1_764_495_484 + n * 60).unwrap(),
        kind: kind.map(str::to_owned),
        message,
        usage: None,
        extra: extra.into(),
    }
}

/// A run that holds everything an export shows: markup and a secret in messages,
/// reasoning, a code block, a tool call and its result, one call without a result,
/// a compaction and a subagent.
async fn hostile_run(runs_dir: &Path) -> PathBuf {
    let folder = create_run_folder(runs_dir).unwrap();
    let store = create_run_store(&folder.dir);
    let session = "0193c0de-7d1a-7c3e-9a51-2f4b8e0c1d2a";
    let key = SessionKey::session(session).unwrap();
    let mut answer = Message::assistant_tool_calls(
        Some("Reading it now.".to_owned()),
        vec![
            ToolCall::function(
                "call_1",
                "read_file",
                r#"{"path":"</details><script>alert(2)</script>"}"#,
            ),
            ToolCall::function("call_2", "shell", r#"{"cmd":"sleep 100"}"#),
        ],
    );
    answer.extra.insert(
        "reasoning_content".into(),
        json!("The file may hold the <b>key</b>."),
    );
    let entries = vec![
        at(
            0,
            Some(Message::user(format!(
                "Find the Silver Key. <script>alert(1)</script> <img src=x onerror=alert(1)> \
             [click](javascript:alert(3)) my token is {TOKEN}"
            ))),
            None,
            json!({}),
        ),
        at(1, Some(answer), None, json!({})),
        at(
            2,
            Some(Message::tool(
                "call_1",
                "The key is under the <mat>. ]]> --> </pre>",
            )),
            None,
            json!({}),
        ),
        at(
            3,
            None,
            Some("compaction"),
            json!({
                "summary": "The person looks for the **Silver Key**; it is under the mat.",
                "through": "01930000-0000-7000-8000-000000000002", "tokens_before": 4200, "tokens_after": 310,
            }),
        ),
        at(
            4,
            Some(Message::assistant(
                "Here is how to open it:\n\n```rust\nfn open(door: &str) -> bool { door == \"cave\" } // <- checks\n```\n\n| step | what |\n|---|---|\n| 1 | lift the mat |",
            )),
            None,
            json!({}),
        ),
    ];
    store.append(&key, &entries).await.unwrap();
    let scout = SessionKey::subagent(session, "scout").unwrap();
    store
        .append(
            &scout,
            &[
                at(
                    10,
                    Some(Message::user("Look under the mat.")),
                    None,
                    json!({}),
                ),
                at(
                    11,
                    Some(Message::assistant("Found a silver key under the mat.")),
                    None,
                    json!({}),
                ),
            ],
        )
        .await
        .unwrap();
    folder.dir
}

fn name(dir: &Path) -> String {
    dir.file_name().unwrap().to_string_lossy().into_owned()
}

#[tokio::test]
async fn markdown_of_a_run_reads_as_a_conversation() {
    let sandbox = Sandbox::new();
    let run = hostile_run(&sandbox.runs_dir()).await;
    let out = sandbox.run(&["export", &name(&run)], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let markdown = out.stdout.replace(&name(&run), "<RUN>");
    insta::assert_snapshot!("export_markdown_hostile_run", markdown);
}

#[tokio::test]
async fn markdown_of_imported_sessions_keeps_compaction_notes_and_tool_calls() {
    let sandbox = Sandbox::new();
    for file in [
        "claude_code/cc-synthetic_compact-boundary_after_rewind.jsonl",
        "opencode/opencode-export_scripted_tools-image-error-running.json",
    ] {
        let path = testdata(file);
        let out = sandbox.run(&["import", path.to_str().unwrap()], "").await;
        assert_eq!(out.status, 0, "{}", out.stderr);
    }
    for (run, snapshot) in [
        (
            "2025-07-01T10-00-00-000Z",
            "export_markdown_imported_claude_code",
        ),
        (
            "2026-01-01T09-00-00-000Z",
            "export_markdown_imported_opencode",
        ),
    ] {
        let out = sandbox
            .run(&["export", run, "--format", "markdown"], "")
            .await;
        assert_eq!(out.status, 0, "{}", out.stderr);
        let meta: Value = serde_json::from_slice(
            &std::fs::read(sandbox.runs_dir().join(run).join("session.json")).unwrap(),
        )
        .unwrap();
        let markdown = out
            .stdout
            .replace(meta["sessionId"].as_str().unwrap(), "<SESSION>")
            .replace(testdata("").to_str().unwrap(), "<TESTDATA>");
        insta::assert_snapshot!(snapshot, markdown);
    }
}

#[tokio::test]
async fn secrets_are_masked_in_every_format_unless_no_redact() {
    let sandbox = Sandbox::new();
    let run = hostile_run(&sandbox.runs_dir()).await;
    for format in ["markdown", "html", "json"] {
        let masked = sandbox
            .run(&["export", "last", "--format", format], "")
            .await;
        assert_eq!(masked.status, 0, "{}", masked.stderr);
        assert!(
            !masked.stdout.contains(TOKEN),
            "{format}: the token is shown"
        );
        assert!(masked.stdout.contains("[REDACTED]"), "{format}: no mask");
        let file = sandbox.path().join(format!("out.{format}"));
        let kept = sandbox
            .run(
                &[
                    "export",
                    &name(&run),
                    "--format",
                    format,
                    "--no-redact",
                    "-o",
                    file.to_str().unwrap(),
                ],
                "",
            )
            .await;
        assert_eq!(kept.status, 0, "{}", kept.stderr);
        assert!(kept.stdout.is_empty());
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains(TOKEN), "{format}: --no-redact lost the token");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
}

#[tokio::test]
async fn json_holds_every_entry_of_the_conversation_and_its_subagents() {
    let sandbox = Sandbox::new();
    let run = hostile_run(&sandbox.runs_dir()).await;
    let out = sandbox
        .run(
            &["export", &name(&run), "--format", "json", "--no-redact"],
            "",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let value: Value = serde_json::from_str(&out.stdout).unwrap();
    let conversation: Vec<Value> = std::fs::read_to_string(run.join("conversation.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(value["entries"].as_array().unwrap(), &conversation);
    assert_eq!(value["entries"][3]["kind"], "compaction");
    assert_eq!(value["subagents"]["scout"].as_array().unwrap().len(), 2);
    assert_eq!(
        value["session"]["sessionId"],
        "0193c0de-7d1a-7c3e-9a51-2f4b8e0c1d2a"
    );
}

/// Runs Debian's chromium headless on `file` with `args`; `(status, stdout, stderr)`.
fn chromium(file: &Path, args: &[&str]) -> (i32, String, String) {
    let binary = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|name| {
            std::process::Command::new(name)
                .arg("--version")
                .output()
                .is_ok()
        })
        .unwrap_or_else(|| {
            panic!("chromium is needed for the HTML export test: run scripts/install-test-deps.sh")
        });
    let profile = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(binary)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--enable-logging=stderr",
            "--v=0",
            &format!("--user-data-dir={}", profile.path().display()),
        ])
        .args(args)
        .arg(format!("file://{}", file.display()))
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn html_escapes_everything_and_a_headless_browser_shows_the_conversation() {
    let sandbox = Sandbox::new();
    let run = hostile_run(&sandbox.runs_dir()).await;
    let file = sandbox.path().join("run.html");
    let out = sandbox
        .run(
            &[
                "export",
                &name(&run),
                "--format",
                "html",
                "-o",
                file.to_str().unwrap(),
            ],
            "",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let html = std::fs::read_to_string(&file).unwrap();
    // Nothing from the run became markup.
    let lower = html.to_ascii_lowercase();
    assert!(!lower.contains("<script"), "a script tag got through");
    assert!(!lower.contains("<img src=x"), "an image tag got through");
    assert!(
        !lower.contains("javascript:"),
        "a javascript link got through"
    );
    assert!(!lower.contains("<mat>"));
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(
        html.contains("default-src 'none'"),
        "no content security policy"
    );
    // Calls fold, code is highlighted without scripts.
    assert!(html.contains("<details class=\"tool\">"));
    assert!(html.contains("<span class=\"k\">fn</span>"));

    let (status, dom, stderr) = chromium(&file, &["--dump-dom"]);
    assert_eq!(status, 0, "chromium failed: {stderr}");
    for line in stderr.lines() {
        assert!(
            !line.contains("Uncaught") && !line.contains("Refused to") && !line.contains("CONSOLE"),
            "the page logged an error: {line}"
        );
    }
    for text in [
        "Find the Silver Key.",
        "Reading it now.",
        "The key is under the &lt;mat&gt;.",
        "Found a silver key under the mat.",
        "Compacted (4200 → 310 tokens)",
        "lift the mat",
    ] {
        assert!(dom.contains(text), "the rendered page lacks {text:?}");
    }
    assert!(!dom.to_ascii_lowercase().contains("<script"));

    let shot = sandbox.path().join("shot.png");
    let (status, _, stderr) = chromium(
        &file,
        &[
            "--window-size=1000,800",
            &format!("--screenshot={}", shot.display()),
        ],
    );
    assert_eq!(status, 0, "chromium failed: {stderr}");
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size()];
    let frame = reader.next_frame(&mut pixels).unwrap();
    let bytes = &pixels[..frame.buffer_size()];
    let channels = frame.color_type.samples();
    let mut colours = std::collections::HashSet::new();
    let mut dark = 0usize;
    for pixel in bytes.chunks(channels) {
        colours.insert(pixel[..3.min(channels)].to_vec());
        if pixel[..3.min(channels)].iter().all(|&c| c < 100) {
            dark += 1;
        }
    }
    assert_eq!((frame.width, frame.height), (1000, 800));
    // Text in several colours on a light page: not a blank screenshot.
    assert!(
        colours.len() > 50,
        "only {} colours: a blank page",
        colours.len()
    );
    assert!(dark > 1000, "only {dark} dark pixels: no text drawn");
}

#[tokio::test]
async fn the_masked_json_keeps_ids_so_calls_still_match_their_results() {
    let sandbox = Sandbox::new();
    let run = hostile_run(&sandbox.runs_dir()).await;
    let out = sandbox
        .run(&["export", &name(&run), "--format", "json"], "")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(!out.stdout.contains(TOKEN));
    let value: Value = serde_json::from_str(&out.stdout).unwrap();
    let conversation: Vec<Value> = std::fs::read_to_string(run.join("conversation.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let entries = value["entries"].as_array().unwrap();
    for (exported, kept) in entries.iter().zip(&conversation) {
        assert_eq!(exported["uuid"], kept["uuid"]);
    }
    assert_eq!(entries[1]["message"]["tool_calls"][0]["id"], "call_1");
    assert_eq!(entries[2]["message"]["tool_call_id"], "call_1");
    assert_eq!(
        entries[3]["through"],
        "01930000-0000-7000-8000-000000000002"
    );
    assert_eq!(
        value["session"]["sessionId"],
        "0193c0de-7d1a-7c3e-9a51-2f4b8e0c1d2a"
    );
}

#[tokio::test]
async fn export_takes_a_title_heads_with_it_takes_md_and_stops_quietly_when_the_reader_goes() {
    let sandbox = Sandbox::new();
    let run = hostile_run(&sandbox.runs_dir()).await;
    let renamed = sandbox
        .run(&["rename", &name(&run), "Where", "the", "key", "is"], "")
        .await;
    assert_eq!(renamed.status, 0, "{}", renamed.stderr);
    let out = sandbox
        .run(&["export", "where the key is", "--format", "md"], "")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(out.stdout.lines().next(), Some("# Where the key is"));

    // A reader that takes one line and leaves.
    let mut command = sandbox.command(&["export", "last"]);
    command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    drop(child.stdout.take());
    let done = child.wait_with_output().await.unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
    assert_eq!(done.status.code(), Some(0), "{stderr}");
}

#[tokio::test]
async fn a_huge_run_name_is_cut_in_the_error() {
    let sandbox = Sandbox::new();
    hostile_run(&sandbox.runs_dir()).await;
    for spec in ["x".repeat(100_000), "x ".repeat(50_000)] {
        let out = sandbox.run(&["show", &spec], "").await;
        assert_eq!(out.status, 1);
        assert!(out.stderr.len() < 1_000, "{} bytes", out.stderr.len());
        assert!(
            out.stderr.contains("x…") || out.stderr.contains("x … ("),
            "{}",
            out.stderr
        );
    }
}

/// A run whose items need what comes after them: calls answered, waiting, denied,
/// allowed after a wait, started without a result, a result without its call, a
/// compaction, two rewinds and the undo of one, a note, a stopped turn; and a
/// subagent's transcript.
async fn run_of_every_state(runs_dir: &Path) -> PathBuf {
    use reprise_session::{
        AwaitingCall, CallDecision, Compaction, DecidedCall, Rewind, StartedCall,
        approval_decision_entry, approval_pending_entry, tool_start_entry, turn_stopped_entry,
    };
    let folder = create_run_folder(runs_dir).unwrap();
    let store = create_run_store(&folder.dir);
    let session = "0193c0de-7d1a-7c3e-9a51-2f4b8e0c1d2b";
    let key = SessionKey::session(session).unwrap();
    let ask = Entry::message(Message::user("Fix the tests, please."));
    let reply = Entry::message(Message::assistant_tool_calls(
        Some("Looking.".to_owned()),
        ["c1", "c2", "c3", "c4", "c5"]
            .iter()
            .map(|id| ToolCall::function(*id, "run_command", r#"{"command":"cargo test"}"#))
            .collect(),
    ));
    let started = |id: &str| StartedCall {
        entry: reply.uuid,
        tool_call_id: id.to_owned(),
        tool: "run_command".to_owned(),
        allowed_by: "--yes".to_owned(),
        idempotency_key: format!("key-{id}"),
        rerun: id == "c4",
    };
    let awaiting = |id: &str| AwaitingCall {
        entry: reply.uuid,
        tool_call_id: id.to_owned(),
        tool: "run_command".to_owned(),
        arguments_hash: reprise_session::arguments_hash(r#"{"command":"cargo test"}"#),
    };
    let decided = |id: &str, decision: CallDecision| DecidedCall {
        entry: reply.uuid,
        tool_call_id: id.to_owned(),
        arguments_hash: reprise_session::arguments_hash(r#"{"command":"cargo test"}"#),
        decided_by: "the person".to_owned(),
        decision,
    };
    let first_result = Entry::message(Message::tool("c1", "ok: 12 passed\nsecond line"));
    let second = Entry::message(Message::user("Now the docs."));
    let third = Entry::message(Message::user("Or the README."));
    let back_to_third = Rewind {
        to: Some(third.uuid),
        files: None,
        undo: None,
        undoes: None,
    }
    .to_entry();
    let mut entries = vec![
        ask,
        reply.clone(),
        tool_start_entry(&[started("c1"), started("c4"), started("c5")]),
        approval_pending_entry(&[awaiting("c2"), awaiting("c3"), awaiting("c5")]),
        approval_decision_entry(&decided(
            "c3",
            CallDecision::Deny {
                reason: "not now".to_owned(),
            },
        )),
        approval_decision_entry(&decided("c5", CallDecision::Allow)),
        first_result.clone(),
        Entry::message(Message::tool("c5", "ok")),
        Entry::message(Message::tool("c9", "a result of no call")),
        Compaction {
            summary: "The tests were fixed.".to_owned(),
            through: first_result.uuid,
            tokens_before: 900,
            tokens_after: 90,
        }
        .to_entry(),
        second.clone(),
        Entry::message(Message::assistant("The docs say so.")),
        Rewind {
            to: Some(second.uuid),
            files: Some("abc".to_owned()),
            undo: Some("def".to_owned()),
            undoes: None,
        }
        .to_entry(),
        third,
        Entry::message(Message::assistant("The README too.")),
        back_to_third.clone(),
        Rewind {
            undoes: Some(back_to_third.uuid),
            ..Rewind::default()
        }
        .to_entry(),
        turn_stopped_entry("cancelled"),
    ];
    entries.push(Entry::other(
        "note",
        json!({"text": "kept by an import", "from": "codex"})
            .as_object()
            .cloned()
            .unwrap(),
    ));
    store.append(&key, &entries).await.unwrap();
    let helper = SessionKey::subagent(session, "helper").unwrap();
    let call = Entry::message(Message::assistant_tool_calls(
        None,
        vec![ToolCall::function("h1", "read_file", r#"{"path":"a.txt"}"#)],
    ));
    store
        .append(
            &helper,
            &[
                Entry::message(Message::user("Read a.txt.")),
                call,
                Entry::message(Message::tool("h1", "one")),
            ],
        )
        .await
        .unwrap();
    folder.dir
}

#[tokio::test]
async fn exports_and_show_read_as_they_go_write_what_the_whole_run_shows() {
    use reprise_cli::export::{Masker, html, markdown, view_of};
    let sandbox = Sandbox::new();
    let run = run_of_every_state(&sandbox.runs_dir()).await;
    let record = reprise_runs::read_run_record(&run).unwrap();
    let mask = Masker::new(false);
    let view = view_of(&record, None, &mask);
    let expected = [
        ("markdown", markdown::render(&view)),
        ("html", html::render(&view)),
        (
            "json",
            reprise_cli::commands::export::json_export(&record, &mask).unwrap(),
        ),
    ];
    for (format, whole) in expected {
        let file = sandbox.path().join(format!("out.{format}"));
        let out = sandbox
            .run(
                &[
                    "export",
                    &name(&run),
                    "--no-redact",
                    "--format",
                    format,
                    "-o",
                    file.to_str().unwrap(),
                ],
                "",
            )
            .await;
        assert_eq!(out.status, 0, "{}", out.stderr);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), whole, "{format}");
    }
    let markdown = std::fs::read_to_string(sandbox.path().join("out.markdown")).unwrap();
    for said in [
        "waiting for a decision",
        "denied: not now",
        "started, no result recorded",
        "waited for a decision: allowed",
        "Tool result for <code>c9</code>",
        "**Compacted**",
        "Rewound: the 2 messages",
        "undo of the last rewind",
        "Subagent `helper`",
    ] {
        assert_contains!(markdown, said);
    }
    // `show` without the subagents reads the run as it goes; with them, whole.
    for extra in [&[][..], &["--json"][..]] {
        let mut streamed = vec!["show", "last", "--tools"];
        streamed.extend(extra);
        let mut whole = streamed.clone();
        whole.push("--subagents");
        let streamed = sandbox.run(&streamed, "").await;
        let whole = sandbox.run(&whole, "").await;
        assert_eq!(streamed.status, 0, "{}", streamed.stderr);
        assert_eq!(streamed.stdout, whole.stdout);
        assert_contains!(streamed.stdout, "rewound");
    }
}

#[tokio::test]
async fn an_export_to_a_file_replaces_it_whole_and_one_to_a_device_writes_through() {
    let sandbox = Sandbox::new();
    let run = hostile_run(&sandbox.runs_dir()).await;
    let out_dir = sandbox.path().join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let target = out_dir.join("run.md");
    std::fs::write(&target, "what was here before\n").unwrap();
    let done = sandbox
        .run(&["export", &name(&run), "-o", target.to_str().unwrap()], "")
        .await;
    assert_eq!(done.status, 0, "{}", done.stderr);
    let written = std::fs::read_to_string(&target).unwrap();
    assert!(written.starts_with("# "), "{written}");
    assert!(!written.contains("what was here before"), "{written}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&target).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let left: Vec<_> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert_eq!(
        left,
        [std::ffi::OsString::from("run.md")],
        "nothing else is left"
    );

    // A device is written through, not replaced by a file.
    let done = sandbox
        .run(&["export", &name(&run), "-o", "/dev/null"], "")
        .await;
    assert_eq!(done.status, 0, "{}", done.stderr);
    let null = std::fs::symlink_metadata("/dev/null").unwrap();
    use std::os::unix::fs::FileTypeExt;
    assert!(null.file_type().is_char_device());
}
