//! `.run/history.jsonl`: prompt history for up/down.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Barrier};

use reprise_runs::{append_history, read_history};

#[test]
fn appended_prompts_read_back_newest_last_in_a_private_file() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(".run/history.jsonl");
    let first = append_history(&path, "hello", "2026-01-01T00-00-00-000Z").unwrap();
    append_history(&path, "second\nwith a newline", "2026-01-01T00-00-00-000Z").unwrap();
    append_history(&path, "third", "2026-01-02T00-00-00-000Z").unwrap();
    let mode = |p: &std::path::Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(path.parent().unwrap()), 0o700);
    let history = read_history(&path).unwrap();
    assert!(history.warnings.is_empty());
    let texts: Vec<_> = history.entries.iter().map(|e| e.text.as_str()).collect();
    assert_eq!(texts, ["hello", "second\nwith a newline", "third"]);
    assert_eq!(history.entries[0], first);
    assert_eq!(history.entries[2].run, "2026-01-02T00-00-00-000Z");
    // On disk: one line per prompt, with the fields SPEC names.
    let raw = fs::read_to_string(&path).unwrap();
    assert_eq!(raw.lines().count(), 3);
    let value: serde_json::Value = serde_json::from_str(raw.lines().next().unwrap()).unwrap();
    let keys: Vec<_> = value.as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, ["ts", "text", "run"]);
    assert!(value["ts"].as_str().unwrap().ends_with('Z'));
}

#[test]
fn consecutive_repeats_collapse_for_up_and_down() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("history.jsonl");
    for text in ["ls", "ls", "ls", "cat", "ls", "cat", "cat"] {
        append_history(&path, text, "r").unwrap();
    }
    let history = read_history(&path).unwrap();
    assert_eq!(history.entries.len(), 7, "the file keeps every submission");
    assert_eq!(history.prompts(), ["ls", "cat", "ls", "cat"]);
}

#[test]
fn corrupt_lines_and_a_torn_tail_are_skipped_and_later_appends_survive() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("history.jsonl");
    append_history(&path, "before", "r").unwrap();
    {
        let mut file = fs::OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"not json at all\n{\"ts\":\"2026-01-01T00:00:00.000Z\",\"te")
            .unwrap();
    }
    let torn = read_history(&path).unwrap();
    assert_eq!(torn.entries.len(), 1);
    assert_eq!(torn.warnings.len(), 2);
    assert_eq!(torn.warnings[0].line, 2);
    assert!(torn.warnings[1].message.contains("torn"));
    // A crash left a torn line; the next append must still be a line of its own.
    append_history(&path, "after", "r").unwrap();
    let history = read_history(&path).unwrap();
    let texts: Vec<_> = history.entries.iter().map(|e| e.text.as_str()).collect();
    assert_eq!(texts, ["before", "after"]);
    let lines: Vec<_> = history.warnings.iter().map(|w| w.line).collect();
    assert_eq!(lines, [2, 3], "the torn fragment is now a skipped line");
}

#[test]
fn a_missing_history_is_empty() {
    let tmp = tempfile::tempdir().unwrap();
    let history = read_history(&tmp.path().join("none.jsonl")).unwrap();
    assert!(history.entries.is_empty() && history.warnings.is_empty());
}

#[test]
fn concurrent_appends_from_several_runs_are_all_kept_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("history.jsonl");
    let barrier = Arc::new(Barrier::new(6));
    let handles: Vec<_> = (0..6)
        .map(|t| {
            let path = path.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                for i in 0..40 {
                    let text = format!("run {t} prompt {i} {}", "x".repeat(200));
                    append_history(&path, &text, &format!("run-{t}")).unwrap();
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    let history = read_history(&path).unwrap();
    assert!(history.warnings.is_empty(), "{:?}", history.warnings);
    assert_eq!(history.entries.len(), 240);
    for t in 0..6 {
        let mine: Vec<_> = history
            .entries
            .iter()
            .filter(|e| e.run == format!("run-{t}"))
            .map(|e| e.text.clone())
            .collect();
        let expected: Vec<_> = (0..40)
            .map(|i| format!("run {t} prompt {i} {}", "x".repeat(200)))
            .collect();
        assert_eq!(mine, expected, "run {t}'s prompts out of order or lost");
    }
}
