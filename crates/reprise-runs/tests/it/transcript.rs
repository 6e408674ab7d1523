//! transcript.jsonl: tool calls and results, every string redacted first.
//!
//! These tests give the redactor each secret as a known value
//! (`Redactor::with_secret`) so they test what this crate owns: that every string of a
//! record, wherever it sits, passes the redactor before it is written.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use regex::Regex;
use reprise_redact::Redactor;
use reprise_runs::{Transcript, TranscriptRecord, create_run_folder};
use serde_json::{Value, json};

/// (case text, secret in it) for a few real cases of the shared test data.
fn secret_cases() -> Vec<(String, String)> {
    let wanted = [21, 47, 226, 227, 228, 498, 499, 501, 513];
    let secret =
        Regex::new(r"ghp_[A-Za-z0-9]{36}|AKIA[0-9A-Z]{16}|xoxb-[0-9A-Za-z-]{20,}").unwrap();
    let data = fs::read_to_string(reprise_testkit::testdata(
        "secrets/secret_detection_cases.jsonl",
    ))
    .unwrap();
    let cases: Vec<_> = data
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|case| wanted.contains(&case["case"].as_i64().unwrap()))
        .map(|case| {
            let text = case["text"].as_str().unwrap().to_owned();
            let found = secret.find(&text).unwrap().as_str().to_owned();
            (text, found)
        })
        .collect();
    assert_eq!(cases.len(), wanted.len());
    cases
}

fn lines(path: &std::path::Path) -> Vec<Value> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn records_have_the_fields_spec_names() {
    let tmp = tempfile::tempdir().unwrap();
    let run = create_run_folder(tmp.path()).unwrap();
    let transcript = Transcript::open(&run.dir, Redactor::new()).unwrap();
    transcript
        .record(
            &TranscriptRecord::tool_call("main", "call_1", "bash", r#"{"cmd":"ls -la"}"#)
                .with_decision("allow"),
        )
        .unwrap();
    transcript
        .record(&TranscriptRecord::tool_result(
            "main", "call_1", "bash", "total 0", false,
        ))
        .unwrap();
    transcript
        .record(
            &TranscriptRecord::tool_call("helper", "call_2", "rm", "not json {")
                .with_decision("deny")
                .with_field("reason", json!("outside the workspace"))
                .with_field("type", json!("overridden?")),
        )
        .unwrap();
    transcript
        .record(&TranscriptRecord::tool_result(
            "helper",
            "call_2",
            "rm",
            "denied by the gate",
            true,
        ))
        .unwrap();
    let path = run.dir.join("transcript.jsonl");
    assert_eq!(transcript.path(), path);
    assert_eq!(
        fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let records = lines(&path);
    assert_eq!(records.len(), 4);
    let keys = |value: &Value| {
        value
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        keys(&records[0]),
        ["ts", "agent", "type", "id", "name", "arguments", "decision"]
    );
    assert_eq!(
        keys(&records[1]),
        ["ts", "agent", "type", "id", "name", "content", "is_error"]
    );
    assert_eq!(records[0]["type"], "tool_call");
    assert_eq!(records[0]["arguments"], json!({"cmd": "ls -la"}));
    assert_eq!(records[0]["decision"], "allow");
    assert_eq!(records[1]["type"], "tool_result");
    assert_eq!(records[1]["is_error"], false);
    assert_eq!(records[2]["arguments"], "not json {", "kept as text");
    assert_eq!(
        records[2]["type"], "tool_call",
        "extra fields never replace SPEC's"
    );
    assert_eq!(records[2]["reason"], "outside the workspace");
    assert_eq!(records[3]["is_error"], true);
    assert_eq!(records[3]["agent"], "helper");
    let ts: jiff::Timestamp = records[0]["ts"].as_str().unwrap().parse().unwrap();
    assert!(ts <= jiff::Timestamp::now());
}

#[test]
fn no_secret_from_the_test_data_reaches_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let run = create_run_folder(tmp.path()).unwrap();
    let cases = secret_cases();
    let mut redactor = Redactor::new();
    for (_, secret) in &cases {
        redactor = redactor.with_secret(secret.clone());
    }
    let transcript = Transcript::open(&run.dir, redactor).unwrap();
    for (i, (text, secret)) in cases.iter().enumerate() {
        let id = format!("call_{i}");
        // In a JSON argument, nested in arrays and objects, and as a key.
        let arguments = json!({
            "command": text,
            "env": [{"name": "TOKEN", "value": secret}],
            secret.clone(): "as a key",
        })
        .to_string();
        transcript
            .record(&TranscriptRecord::tool_call("main", &id, "bash", arguments))
            .unwrap();
        // JSON-escaped in the arguments' text: found after unescaping.
        let escaped = format!(
            "{{\"x\":\"\\u{:04x}{}\"}}",
            secret.chars().next().unwrap() as u32,
            &secret[1..]
        );
        transcript
            .record(&TranscriptRecord::tool_call("main", &id, "bash", escaped))
            .unwrap();
        // Arguments that are not JSON, a result, and an extra field.
        transcript
            .record(&TranscriptRecord::tool_call(
                "main",
                &id,
                "bash",
                format!("raw {text}"),
            ))
            .unwrap();
        transcript
            .record(
                &TranscriptRecord::tool_result("main", &id, "bash", text.clone(), false)
                    .with_field("stderr", json!({ "lines": [text] })),
            )
            .unwrap();
    }
    let raw = fs::read_to_string(run.dir.join("transcript.jsonl")).unwrap();
    for (_, secret) in &cases {
        assert!(!raw.contains(secret.as_str()), "{secret} leaked:\n{raw}");
    }
    let records = lines(&run.dir.join("transcript.jsonl"));
    assert_eq!(records.len(), cases.len() * 4);
    for record in &records {
        assert!(
            record.to_string().contains("[REDACTED]"),
            "nothing redacted in {record}"
        );
    }
    assert_eq!(records[1]["arguments"], json!({"x": "[REDACTED]"}));
}

#[test]
fn a_value_is_redacted_in_the_context_of_its_key() {
    // Once parsed, `"password"` and its value are separate strings; the value is
    // still masked because of the key it sits under.
    let tmp = tempfile::tempdir().unwrap();
    let run = create_run_folder(tmp.path()).unwrap();
    let transcript = Transcript::open(&run.dir, Redactor::new()).unwrap();
    transcript
        .record(&TranscriptRecord::tool_call(
            "main",
            "c",
            "login",
            r#"{"user":"ana","password":"hunter2-correct-horse"}"#,
        ))
        .unwrap();
    let line = std::fs::read_to_string(transcript.path()).unwrap();
    assert!(!line.contains("hunter2"), "{line}");
    let record: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(record["arguments"]["user"], "ana");
    assert_eq!(record["arguments"]["password"], "[REDACTED]");
}

#[test]
fn the_redactors_own_patterns_keep_the_test_data_secrets_out() {
    // No known values: only the redactor's pattern table stands between the
    // secrets and the file.
    let tmp = tempfile::tempdir().unwrap();
    let run = create_run_folder(tmp.path()).unwrap();
    let transcript = Transcript::open(&run.dir, Redactor::new()).unwrap();
    let cases = secret_cases();
    for (i, (text, _)) in cases.iter().enumerate() {
        let id = format!("call_{i}");
        let arguments = json!({ "script": text, "lines": text.lines().collect::<Vec<_>>() });
        transcript
            .record(&TranscriptRecord::tool_call(
                "main",
                &id,
                "bash",
                arguments.to_string(),
            ))
            .unwrap();
        transcript
            .record(&TranscriptRecord::tool_result(
                "main",
                &id,
                "bash",
                text.clone(),
                false,
            ))
            .unwrap();
    }
    let raw = fs::read_to_string(run.dir.join("transcript.jsonl")).unwrap();
    for (_, secret) in &cases {
        assert!(!raw.contains(secret.as_str()), "{secret} leaked:\n{raw}");
    }
}

#[test]
fn the_file_appears_with_the_first_record_and_is_private() {
    let runs = tempfile::tempdir().unwrap();
    let dir = runs.path().join("run");
    fs::create_dir(&dir).unwrap();
    let transcript = Transcript::open(&dir, Redactor::new()).unwrap();
    assert!(
        !transcript.path().exists(),
        "a run with no tool call has no transcript file"
    );
    transcript
        .record(&TranscriptRecord::tool_call(
            "main",
            "c1",
            "read_file",
            "{}",
        ))
        .unwrap();
    let mode = fs::metadata(transcript.path())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn call_ids_are_kept_as_the_server_sent_them() {
    // llama.cpp's ids are 32 random letters and digits: the default redactor takes
    // such a string for a secret anywhere else.
    let id = "xAFl2kRTqZbbEnQaKuDQuXKqVh5PGaMw";
    let redactor = Redactor::new();
    let mut premise = json!({"id": id});
    redactor.redact_json(&mut premise);
    assert_eq!(premise["id"], "[REDACTED]", "the premise");
    let tmp = tempfile::tempdir().unwrap();
    let run = create_run_folder(tmp.path()).unwrap();
    let transcript = Transcript::open(&run.dir, redactor).unwrap();
    transcript
        .record(&TranscriptRecord::tool_call("main", id, "read_file", "{}"))
        .unwrap();
    transcript
        .record(
            &TranscriptRecord::tool_result("main", id, "read_file", "buy milk", false)
                .with_field("tool_call_id", Value::String(id.to_owned())),
        )
        .unwrap();
    let records = lines(&run.dir.join("transcript.jsonl"));
    assert_eq!(records[0]["id"], id);
    assert_eq!(records[1]["id"], id);
    assert_eq!(records[1]["tool_call_id"], id);
}
