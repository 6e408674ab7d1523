//! What each converter makes of the shapes it meets, checked entry by entry.

use std::path::Path;

use reprise_import::{COMPACTION_KIND, Converted, ImportError, NOTE_KIND, convert, convert_file};
use reprise_session::{Entry, Role};
use reprise_testkit::testdata;
use serde_json::{Value, json};

fn messages(entries: &[Entry]) -> Vec<(String, String)> {
    entries
        .iter()
        .filter_map(|entry| entry.as_message())
        .map(|m| (m.role.as_str().to_owned(), m.text()))
        .collect()
}

fn lines(values: &[Value]) -> Vec<u8> {
    values
        .iter()
        .map(|v| format!("{v}\n"))
        .collect::<String>()
        .into_bytes()
}

#[test]
fn a_rewound_claude_code_session_imports_its_live_branch_and_says_so() {
    let converted = convert_file(&testdata(
        "claude_code/cc-synthetic_compact-boundary_after_rewind.jsonl",
    ))
    .unwrap();
    let texts: Vec<String> = messages(&converted.main)
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    assert_eq!(
        texts,
        [
            "Start",
            "Ready",
            "Second attempt",
            "Second answer",
            "Keep going",
            "Kept going",
            "After compaction",
            "Final answer"
        ]
    );
    assert_eq!(
        converted.report.skipped["lines off the live branch (rewound)"],
        2
    );
    let note = converted
        .main
        .iter()
        .find(|e| e.kind.as_deref() == Some(NOTE_KIND))
        .unwrap();
    assert!(
        note.extra["text"]
            .as_str()
            .unwrap()
            .contains("2 messages of abandoned branches were left out")
    );
    // The boundary and its summary message are one compaction marker, in place.
    let at = converted
        .main
        .iter()
        .position(|e| e.kind.as_deref() == Some(COMPACTION_KIND))
        .unwrap();
    let compaction = &converted.main[at];
    assert!(
        compaction.extra["summary"]
            .as_str()
            .unwrap()
            .contains("the user asked for a plan")
    );
    assert_eq!(compaction.extra["tokens_before"], 150000);
    assert_eq!(
        compaction.extra["through"],
        json!(converted.main[at - 1].uuid.to_string())
    );
    assert_eq!(
        converted.main[at + 1].as_message().unwrap().text(),
        "After compaction"
    );
}

#[test]
fn claude_code_parallel_calls_are_one_message_with_every_result_after_it() {
    let session = "ef958aa1-0e93-49f0-bb71-150f63befcd1";
    let dir = tempfile::tempdir().unwrap();
    let main = dir.path().join(format!("{session}.jsonl"));
    std::fs::copy(
        testdata("claude_code/cc-2.1.114_ef958aa1_main_with_subagents.jsonl"),
        &main,
    )
    .unwrap();
    let converted = convert_file(&main).unwrap();
    // No rewind in this session: the results of parallel calls hang off their calls.
    assert!(
        !converted
            .report
            .skipped
            .contains_key("lines off the live branch (rewound)")
    );
    assert_eq!(converted.report.interrupted, 0);
    let entries = &converted.main;
    let parallel = entries
        .iter()
        .position(|e| {
            e.as_message().is_some_and(|m| {
                m.calls()
                    .iter()
                    .any(|c| c.id == "toolu_016neBD9WjCCZqzRTP3afGDT")
            })
        })
        .unwrap();
    let ids: Vec<&str> = entries[parallel]
        .as_message()
        .unwrap()
        .calls()
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    // Three calls in a row without a result between them: one message, three calls.
    assert_eq!(
        ids,
        [
            "toolu_01GmrK6tgdD9D5xD6W5X9UUy",
            "toolu_016neBD9WjCCZqzRTP3afGDT",
            "toolu_01EaAN7bPNQrMTGoKhbEjVrx"
        ]
    );
    let answered: Vec<&str> = entries[parallel + 1..parallel + 1 + ids.len()]
        .iter()
        .map(|e| e.as_message().unwrap().tool_call_id.as_deref().unwrap())
        .collect();
    assert_eq!(answered, ids);
    // This version keeps only the signature of its thinking: counted, not converted.
    assert_eq!(
        converted.report.skipped["thinking blocks holding only a signature"],
        14
    );
}

#[test]
fn claude_code_thinking_becomes_reasoning_content() {
    let converted = convert_file(&testdata(
        "claude_code/cc-2.0.42_7acd37a8_thinking_queue-ops.jsonl",
    ))
    .unwrap();
    let with_reasoning = converted
        .main
        .iter()
        .filter_map(|e| e.as_message())
        .filter(|m| {
            m.extra
                .get("reasoning_content")
                .and_then(Value::as_str)
                .is_some_and(|t| !t.is_empty())
        })
        .count();
    assert!(with_reasoning > 10, "{with_reasoning}");
    assert_eq!(
        converted.report.skipped["queue-operation lines (Claude Code state)"],
        12
    );
}

#[test]
fn claude_code_inline_sidechains_become_subagents() {
    let converted = convert_file(&testdata(
        "claude_code/cc-1.0.98_fe5e1c67_summary_inline-sidechain-tasks.jsonl",
    ))
    .unwrap();
    assert!(!converted.subagents.is_empty());
    assert!(
        converted
            .subagents
            .iter()
            .all(|(name, _)| name.starts_with("sidechain-"))
    );
    let sidechain_messages: usize = converted
        .subagents
        .iter()
        .map(|(_, entries)| entries.iter().filter(|e| e.as_message().is_some()).count())
        .sum();
    assert!(sidechain_messages > 300, "{sidechain_messages}");
    // The main conversation holds no sidechain line.
    let main_users = messages(&converted.main)
        .iter()
        .filter(|(role, _)| role == "user")
        .count();
    assert!(main_users < 20, "{main_users}");
    assert!(converted.title.is_some());
}

#[test]
fn a_codex_rollout_keeps_calls_custom_calls_and_reasoning_and_counts_the_rest() {
    let converted = convert_file(&testdata(
        "codex/codex-synthetic_rollout_custom-tool-call_encrypted-reasoning_unknown-type.jsonl",
    ))
    .unwrap();
    assert_eq!(converted.session_id, "11111111-1111-4111-8111-111111111111");
    let calls: Vec<(String, String)> = converted
        .main
        .iter()
        .filter_map(|e| e.as_message())
        .flat_map(|m| m.calls().to_vec())
        .map(|c| (c.function.name, c.function.arguments.to_string()))
        .collect();
    assert_eq!(
        calls[0],
        (
            "exec_command".to_owned(),
            r#"{"cmd":"find . -maxdepth 1 -type f"}"#.to_owned()
        )
    );
    assert_eq!(calls[1].0, "apply_patch");
    let input: Value = serde_json::from_str(&calls[1].1).unwrap();
    assert!(
        input["input"]
            .as_str()
            .unwrap()
            .starts_with("*** Begin Patch")
    );
    let results: Vec<String> = converted
        .main
        .iter()
        .filter_map(|e| e.as_message())
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.text())
        .collect();
    assert_eq!(
        results,
        ["./alpha.txt\n./beta.txt", "Done!", "{\"status\":\"ok\"}"]
    );
    let reasoning = converted
        .main
        .iter()
        .filter_map(|e| e.as_message())
        .find_map(|m| m.extra.get("reasoning_content"))
        .unwrap();
    assert_eq!(reasoning, "I will inspect the synthetic directory.");
    assert_eq!(
        converted.report.skipped["lines of unknown type future_synthetic_record"],
        1
    );
    assert!(
        !serde_json::to_string(&converted.main)
            .unwrap()
            .contains("SYNTHETIC_ENCRYPTED_CONTENT")
    );
}

fn codex(lines_: &[Value]) -> Converted {
    convert(Path::new("rollout-test.jsonl"), &lines(lines_)).unwrap()
}

fn item(payload: Value) -> Value {
    json!({"timestamp": "2026-01-02T03:04:05.000Z", "type": "response_item", "payload": payload})
}

fn user(text: &str) -> Value {
    item(
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}),
    )
}

fn assistant(text: &str) -> Value {
    item(
        json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}),
    )
}

#[test]
fn a_codex_rollback_removes_the_turns_it_undid_and_a_rename_is_the_title() {
    let converted = codex(&[
        json!({"timestamp": "2026-01-02T03:04:05.000Z", "type": "session_meta", "payload": {"id": "s-1", "timestamp": "2026-01-02T03:04:05.000Z"}}),
        user("<environment_context>cwd</environment_context>"),
        user("first"),
        assistant("one"),
        user("second"),
        item(
            json!({"type": "function_call", "name": "shell", "arguments": "{\"cmd\":\"ls\"}", "call_id": "c1"}),
        ),
        item(json!({"type": "function_call_output", "call_id": "c1", "output": "a b"})),
        assistant("two"),
        json!({"timestamp": "2026-01-02T03:05:00.000Z", "type": "event_msg", "payload": {"type": "thread_rolled_back", "num_turns": 1}}),
        user("third"),
        item(
            json!({"type": "function_call", "name": "shell", "arguments": "not json", "call_id": "c2"}),
        ),
        json!({"timestamp": "2026-01-02T03:06:00.000Z", "type": "event_msg", "payload": {"type": "thread_name_updated", "thread_id": "s-1", "thread_name": "Listing files"}}),
        json!({"timestamp": "2026-01-02T03:07:00.000Z", "type": "compacted", "payload": {"message": "They listed files."}}),
        json!({"timestamp": "2026-01-02T03:08:00.000Z", "type": "brand_new_thing", "payload": {}}),
    ]);
    let texts: Vec<(String, String)> = messages(&converted.main);
    let roles: Vec<&str> = texts.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(
        roles,
        ["user", "user", "assistant", "user", "assistant", "tool"]
    );
    assert_eq!(texts[3].1, "third");
    assert!(!texts.iter().any(|(_, t)| t == "second" || t == "two"));
    assert_eq!(converted.report.skipped["entries undone by a rollback"], 4);
    assert_eq!(converted.title.as_deref(), Some("Listing files"));
    // The environment is the program's, not the person's.
    assert_eq!(converted.main[0].extra["isMeta"], true);
    // A call without output is answered "interrupted"; its arguments became an object.
    let call = converted
        .main
        .iter()
        .filter_map(|e| e.as_message())
        .flat_map(|m| m.calls().to_vec())
        .last()
        .unwrap();
    assert_eq!(call.function.arguments, r#"{"input":"not json"}"#);
    let last_message = converted
        .main
        .iter()
        .rev()
        .find(|e| e.as_message().is_some())
        .unwrap();
    assert_eq!(last_message.extra["interrupted"], true);
    assert_eq!(converted.report.interrupted, 1);
    assert!(
        converted
            .main
            .iter()
            .any(|e| e.kind.as_deref() == Some(COMPACTION_KIND)
                && e.extra["summary"] == "They listed files.")
    );
    assert_eq!(
        converted.report.skipped["lines of unknown type brand_new_thing"],
        1
    );
}

#[test]
fn a_result_without_its_call_is_kept_as_a_note() {
    let converted = codex(&[
        user("go"),
        item(
            json!({"type": "function_call_output", "call_id": "ghost", "output": "orphan output"}),
        ),
        assistant("done"),
    ]);
    assert_eq!(
        messages(&converted.main),
        [
            ("user".to_owned(), "go".to_owned()),
            ("assistant".to_owned(), "done".to_owned())
        ]
    );
    let note = converted
        .main
        .iter()
        .find(|e| e.kind.as_deref() == Some(NOTE_KIND))
        .unwrap();
    assert_eq!(note.extra["text"], "orphan output");
    assert_eq!(converted.report.notes["tool results without their call"], 1);
}

#[test]
fn an_opencode_export_pairs_its_tool_parts_and_answers_the_running_one() {
    let converted = convert_file(&testdata(
        "opencode/opencode-export_scripted_tools-image-error-running.json",
    ))
    .unwrap();
    assert_eq!(
        converted.title.as_deref(),
        Some("Find the deadline in the notes")
    );
    let roles: Vec<String> = messages(&converted.main)
        .into_iter()
        .map(|(r, _)| r)
        .collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "tool",
            "tool",
            "assistant",
            "user",
            "assistant",
            "tool"
        ]
    );
    let results: Vec<String> = converted
        .main
        .iter()
        .filter_map(|e| e.as_message())
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.text())
        .collect();
    assert!(results[0].contains("Friday: release"));
    assert_eq!(results[1], "Error: No such directory: /nope");
    assert!(results[2].contains("interrupted"));
    // The screenshot is an image part.
    let first =
        serde_json::to_value(converted.main.iter().find_map(|e| e.as_message()).unwrap()).unwrap();
    assert!(
        first["content"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["type"] == "image_url")
    );
}

#[test]
fn files_that_are_no_transcript_or_hold_no_conversation_are_refused_by_name() {
    let path = Path::new("notes.jsonl");
    assert!(matches!(
        convert(path, b"{\"hello\":1}\n"),
        Err(ImportError::Unrecognized { .. })
    ));
    let only_state = lines(&[json!({"type": "summary", "summary": "t", "leafUuid": "x"})]);
    assert!(matches!(
        convert(path, &only_state),
        Err(ImportError::Empty { .. })
    ));
}

fn claude(kind: &str, uuid: &str, parent: Option<&str>, message: Value) -> Value {
    json!({"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "s-img", "isSidechain": false,
           "timestamp": "2026-02-03T04:05:06.000Z", "message": message})
}

#[test]
fn claude_code_images_become_data_urls_and_what_a_tool_result_cannot_hold_is_counted() {
    let png = "iVBORw0KGgo=";
    let bytes = lines(&[
        json!({"type": "summary", "summary": "Looking at a picture", "leafUuid": "a2"}),
        claude(
            "user",
            "u1",
            None,
            json!({"role": "user", "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}},
            ]}),
        ),
        claude(
            "assistant",
            "a1",
            Some("u1"),
            json!({"id": "m1", "role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "Screenshot", "input": {}},
            ]}),
        ),
        claude(
            "user",
            "r1",
            Some("a1"),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": [
                    {"type": "text", "text": "captured"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}},
                ]},
            ]}),
        ),
        json!({"type": "system", "uuid": "s1", "parentUuid": "r1", "sessionId": "s-img", "content": "hook ran",
               "timestamp": "2026-02-03T04:05:07.000Z"}),
        claude(
            "assistant",
            "a2",
            Some("s1"),
            json!({"id": "m2", "role": "assistant", "content": [
                {"type": "text", "text": "A cat."},
            ]}),
        ),
    ]);
    let converted = convert(Path::new("s-img.jsonl"), &bytes).unwrap();
    assert_eq!(converted.title.as_deref(), Some("Looking at a picture"));
    let first = serde_json::to_value(converted.main[0].as_message().unwrap()).unwrap();
    assert_eq!(
        first["content"][1]["image_url"]["url"],
        format!("data:image/png;base64,{png}")
    );
    let result = converted
        .main
        .iter()
        .filter_map(|e| e.as_message())
        .find(|m| m.role == Role::Tool)
        .unwrap();
    assert_eq!(
        result.text(),
        "captured\n[image not converted: image/png, 8 bytes]"
    );
    assert_eq!(
        converted.report.skipped["images in tool results (described in their text)"],
        1
    );
    assert_eq!(converted.report.images, 1);
    assert_eq!(converted.report.notes["system lines"], 1);
    let roles: Vec<String> = messages(&converted.main)
        .into_iter()
        .map(|(r, _)| r)
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
}

#[test]
fn claude_code_token_counts_are_kept_on_each_reply_once() {
    let usage = |input: u64, cached: u64, output: u64| {
        json!({"input_tokens": input, "cache_creation_input_tokens": 0,
               "cache_read_input_tokens": cached, "output_tokens": output})
    };
    let bytes = lines(&[
        claude(
            "user",
            "u1",
            None,
            json!({"role": "user", "content": "Hello?"}),
        ),
        // One reply over two lines (text, then a call), its counts on both: the
        // later, completed ones are kept, once.
        claude(
            "assistant",
            "a1",
            Some("u1"),
            json!({"id": "m1", "role": "assistant", "usage": usage(10, 100, 3),
                   "content": [{"type": "text", "text": "Looking."}]}),
        ),
        claude(
            "assistant",
            "a2",
            Some("a1"),
            json!({"id": "m1", "role": "assistant", "usage": usage(10, 100, 25),
                   "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]}),
        ),
        claude(
            "user",
            "r1",
            Some("a2"),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "read"}]}),
        ),
        claude(
            "assistant",
            "a3",
            Some("r1"),
            json!({"id": "m2", "role": "assistant", "usage": usage(5, 140, 7),
                   "content": [{"type": "text", "text": "Done."}]}),
        ),
    ]);
    let converted = convert(Path::new("s-usage.jsonl"), &bytes).unwrap();
    let counted: Vec<(u64, u64, u64)> = converted
        .main
        .iter()
        .filter(|entry| {
            entry
                .as_message()
                .is_some_and(|m| m.role == Role::Assistant)
        })
        .map(|entry| {
            let usage = entry.usage.as_ref().unwrap().to_value();
            (
                usage["prompt_tokens"].as_u64().unwrap(),
                usage["completion_tokens"].as_u64().unwrap(),
                usage["total_tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(counted, [(110, 25, 135), (145, 7, 152)]);
}

fn claude_line(kind: &str, uuid: &str, parent: Option<&str>, message: Value) -> Value {
    json!({"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "s-order", "isSidechain": false,
           "timestamp": "2026-02-03T04:05:06.000Z", "message": message})
}

fn tool_use(message_id: &str, call: &str) -> Value {
    json!({"id": message_id, "role": "assistant", "content": [
        {"type": "tool_use", "id": call, "name": "Edit", "input": {"file": call}},
    ]})
}

fn tool_result(call: &str, text: &str) -> Value {
    json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": call, "content": text},
    ]})
}

#[test]
fn claude_code_results_written_before_their_call_are_paired_with_it() {
    // Claude Code orders lines by their parent: here both results stand before the
    // calls they answer, the first one off the parent chain (a parallel call).
    let bytes = lines(&[
        claude_line(
            "user",
            "u1",
            None,
            json!({"role": "user", "content": "edit both"}),
        ),
        claude_line("user", "r1", Some("a1"), tool_result("t1", "edited t1")),
        claude_line("user", "r2", Some("a1b"), tool_result("t2", "edited t2")),
        claude_line("assistant", "a1", Some("u1"), tool_use("m1", "t1")),
        claude_line("assistant", "a1b", Some("a1"), tool_use("m1", "t2")),
        claude_line(
            "assistant",
            "a2",
            Some("r2"),
            json!({"id": "m2", "role": "assistant", "content": [{"type": "text", "text": "Both done."}]}),
        ),
    ]);
    let converted = convert(Path::new("s-order.jsonl"), &bytes).unwrap();
    assert_eq!(
        messages(&converted.main),
        [
            ("user".to_owned(), "edit both".to_owned()),
            ("assistant".to_owned(), String::new()),
            ("tool".to_owned(), "edited t1".to_owned()),
            ("tool".to_owned(), "edited t2".to_owned()),
            ("assistant".to_owned(), "Both done.".to_owned()),
        ]
    );
    assert_eq!(converted.report.interrupted, 0, "{}", converted.report);
    assert_eq!(converted.report.tool_calls, 2);
    assert!(converted.report.notes.is_empty(), "{}", converted.report);
    assert_eq!(converted.report.skipped_total(), 0, "{}", converted.report);
}

#[test]
fn a_codex_result_before_its_call_is_paired_with_it() {
    let converted = codex(&[
        user("go"),
        item(json!({"type": "function_call_output", "call_id": "c1", "output": "ran"})),
        item(json!({"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"})),
        assistant("done"),
    ]);
    assert_eq!(
        messages(&converted.main),
        [
            ("user".to_owned(), "go".to_owned()),
            ("assistant".to_owned(), String::new()),
            ("tool".to_owned(), "ran".to_owned()),
            ("assistant".to_owned(), "done".to_owned()),
        ]
    );
    assert_eq!(converted.report.interrupted, 0);
}

#[test]
fn claude_code_system_lines_without_content_keep_what_they_hold() {
    let bytes = lines(&[
        claude_line("user", "u1", None, json!({"role": "user", "content": "hi"})),
        json!({"type": "system", "subtype": "stop_hook_summary", "uuid": "s1", "parentUuid": "u1",
               "sessionId": "s-order", "isSidechain": false, "timestamp": "2026-02-03T04:05:07.000Z",
               "hookCount": 1, "hookInfos": [{"command": "notify idle", "durationMs": 102}],
               "hookErrors": [], "preventedContinuation": false, "stopReason": ""}),
        json!({"type": "system", "subtype": "api_error", "uuid": "s2", "parentUuid": "s1",
               "sessionId": "s-order", "isSidechain": false, "timestamp": "2026-02-03T04:05:08.000Z",
               "error": {"status": 529, "error": {"type": "overloaded_error"}},
               "retryInMs": 1000, "retryAttempt": 1, "maxRetries": 10}),
    ]);
    let converted = convert(Path::new("s-order.jsonl"), &bytes).unwrap();
    let notes: Vec<(String, String)> = converted
        .main
        .iter()
        .filter(|e| e.kind.as_deref() == Some(NOTE_KIND))
        .map(|e| {
            (
                e.extra["from"].as_str().unwrap().to_owned(),
                e.extra["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert_eq!(notes[0].0, "system lines (stop_hook_summary)");
    let hook: Value = serde_json::from_str(&notes[0].1).unwrap();
    assert_eq!(hook["hookInfos"][0]["command"], "notify idle");
    assert!(hook.get("sessionId").is_none(), "{hook}");
    assert_eq!(notes[1].0, "system lines (api_error)");
    let error: Value = serde_json::from_str(&notes[1].1).unwrap();
    assert_eq!(error["error"]["error"]["type"], "overloaded_error");
    assert_eq!(error["retryAttempt"], 1);
}

#[test]
fn a_claude_code_file_whose_first_line_is_long_is_recognised() {
    for size in [128 * 1024, 256 * 1024, 1024 * 1024] {
        let bytes = lines(&[
            claude_line(
                "user",
                "u1",
                None,
                json!({"role": "user", "content": "x".repeat(size)}),
            ),
            claude_line(
                "assistant",
                "a1",
                Some("u1"),
                json!({"id": "m1", "role": "assistant", "content": [{"type": "text", "text": "ok"}]}),
            ),
        ]);
        assert_eq!(
            reprise_import::detect(&bytes),
            Some(reprise_import::SourceTool::ClaudeCode),
            "first line of {size} bytes"
        );
        let converted = convert(Path::new("long.jsonl"), &bytes).unwrap();
        assert_eq!(messages(&converted.main)[0].1.len(), size);
    }
}

#[test]
fn codex_output_parts_are_joined_as_written_and_images_are_described_and_counted() {
    let png = "iVBORw0KGgo=";
    let converted = codex(&[
        json!({"timestamp": "2026-01-02T03:04:05.000Z", "type": "response_item", "payload": {
        "type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "look"},
            {"type": "input_image", "image_url": format!("data:image/png;base64,{png}")},
        ]}}),
        item(json!({"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"})),
        item(
            json!({"type": "function_call_output", "call_id": "c1", "output": [
                {"type": "input_text", "text": "line one\n"},
                {"type": "input_text", "text": "line two\n"},
                {"type": "input_text", "text": "tail"},
                {"type": "input_text", "text": "end"},
            ]}),
        ),
        item(
            json!({"type": "function_call", "call_id": "c2", "name": "view_image", "arguments": "{\"path\":\"a.png\"}"}),
        ),
        item(
            json!({"type": "function_call_output", "call_id": "c2", "output": [
                {"type": "input_image", "image_url": format!("data:image/png;base64,{png}")},
            ]}),
        ),
        assistant("seen"),
    ]);
    let results: Vec<String> = converted
        .main
        .iter()
        .filter_map(|e| e.as_message())
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.text())
        .collect();
    assert_eq!(results[0], "line one\nline two\ntail\nend");
    assert_eq!(results[1], "[image not converted: image/png, 8 bytes]");
    assert_eq!(
        converted.report.skipped["images in tool results (described in their text)"],
        1
    );
    assert_eq!(converted.report.images, 1);
    assert!(converted.report.to_string().contains("1 images"));
}

#[test]
fn codex_token_counts_go_on_the_replies_and_add_up_to_codex_own_total() {
    let path = testdata("codex/codex-0.58.0_rollout-2025-11-17_019a93b9_function-calls.jsonl");
    let bytes = std::fs::read(&path).unwrap();
    let converted = convert(&path, &bytes).unwrap();
    // Codex's running total at the end of the rollout, as it recorded it.
    let last_total = bytes
        .split(|b| *b == b'\n')
        .filter_map(|line| serde_json::from_slice::<Value>(line).ok())
        .filter(|line| line["payload"]["type"] == "token_count")
        .filter_map(|line| {
            line["payload"]["info"]["total_token_usage"]
                .as_object()
                .cloned()
        })
        .next_back()
        .unwrap();
    let mut sums = (0, 0, 0, 0);
    for entry in &converted.main {
        let Some(usage) = entry.usage.as_ref().map(|u| u.to_value()) else {
            continue;
        };
        assert_eq!(entry.as_message().unwrap().role, Role::Assistant);
        assert_eq!(entry.extra["model"], "gpt-5.1-codex");
        sums.0 += usage["prompt_tokens"].as_u64().unwrap();
        sums.1 += usage["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap();
        sums.2 += usage["completion_tokens"].as_u64().unwrap();
        sums.3 += 1;
    }
    let count = |key: &str| last_total[key].as_u64().unwrap();
    assert_eq!(
        (sums.0, sums.1, sums.2),
        (
            count("input_tokens"),
            count("cached_input_tokens"),
            count("output_tokens")
        )
    );
    assert_eq!(sums.0 + sums.2, count("total_tokens"));
    // One per model call: the totals changed 39 times.
    assert_eq!(sums.3, 39);
}
