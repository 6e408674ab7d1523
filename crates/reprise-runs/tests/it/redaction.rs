//! The whole secret corpus through every run-folder file that must not keep secrets:
//! `session.log`, `history.jsonl`, the listing's last message (`.summary.json`,
//! `session.json`, `.list-cache.json`). For every case the redactor masks when given
//! the text alone, what it masked must not reach the file.

use std::collections::HashMap;
use std::fs;
use std::path::Path;

use reprise_redact::{MASK, Redactor};
use reprise_runs::{
    LIST_CACHE, RUN_SUMMARY, SESSION_JSON, SessionLog, append_history, create_run_folder,
    create_run_store, list_runs, read_history,
};
use reprise_session::{Durability, Entry, Message, SessionKey, SessionStore};
use reprise_testkit::secret_corpus::{CorpusCase, corpus_cases, masked_pieces};
use serde_json::Value;

/// A case the redactor catches alone, with what it masks.
struct Caught {
    case: u64,
    text: String,
    /// The masked parts that the redacted text does not show anyway.
    secrets: Vec<String>,
}

/// The corpus cases that `redactor` masks something in.
fn caught(redactor: &Redactor) -> Vec<Caught> {
    let cases: Vec<CorpusCase> = corpus_cases();
    assert_eq!(cases.len(), 855);
    let caught: Vec<Caught> = cases
        .into_iter()
        .filter_map(|case| {
            let redacted = redactor.redact(&case.text);
            let secrets: Vec<String> = masked_pieces(&case.text, &redacted, MASK)
                .into_iter()
                .filter(|piece| !redacted.contains(piece.as_str()))
                .collect();
            (!secrets.is_empty()).then_some(Caught {
                case: case.case,
                text: case.text,
                secrets,
            })
        })
        .collect();
    // Most of the corpus holds a secret the patterns know (the redactor's own corpus
    // test holds the exact figures).
    assert!(caught.len() > 550, "only {} cases caught", caught.len());
    caught
}

/// The secrets of `case` that `shown` lets through.
fn leaks<'a>(case: &'a Caught, shown: &str) -> Vec<&'a str> {
    case.secrets
        .iter()
        .map(String::as_str)
        .filter(|secret| shown.contains(secret))
        .collect()
}

fn assert_no_leaks(what: &str, leaked: Vec<String>) {
    assert!(
        leaked.is_empty(),
        "{what}: {} cases leaked a secret:\n{}",
        leaked.len(),
        leaked.join("\n")
    );
}

#[test]
fn session_log_keeps_no_secret_of_the_corpus() {
    let redactor = Redactor::new();
    let cases = caught(&redactor);
    let tmp = tempfile::tempdir().unwrap();
    let run = create_run_folder(tmp.path()).unwrap();
    let mut log = SessionLog::open(&run.dir)
        .unwrap()
        .with_redactor(redactor.clone());
    for case in &cases {
        log.write_line(&format!("=== case {} ===", case.case))
            .unwrap();
        // As a streamed reply: in small pieces, so that secrets are split across
        // writes, then the end of the turn.
        let chars: Vec<char> = case.text.chars().collect();
        for piece in chars.chunks(7) {
            log.write(&piece.iter().collect::<String>()).unwrap();
        }
        log.write("\n").unwrap();
        log.flush().unwrap();
        // As a whole line (a prompt echo, an error).
        log.write_line(&case.text).unwrap();
    }
    log.sync().unwrap();
    drop(log);
    let text = fs::read_to_string(run.dir.join("session.log")).unwrap();
    let mut leaked = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let start_mark = format!("=== case {} ===\n", case.case);
        let start = text.find(&start_mark).unwrap() + start_mark.len();
        let end = cases.get(i + 1).map_or(text.len(), |next| {
            text.find(&format!("=== case {} ===\n", next.case)).unwrap()
        });
        let section = &text[start..end];
        let found = leaks(case, section);
        if !found.is_empty() {
            leaked.push(format!("case {}: {found:?} in {section:?}", case.case));
        }
    }
    assert_no_leaks("session.log", leaked);
}

#[test]
fn history_keeps_no_secret_of_the_corpus() {
    let redactor = Redactor::new();
    let cases = caught(&redactor);
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("history.jsonl");
    for case in &cases {
        append_history(&path, &case.text, &format!("run-{}", case.case)).unwrap();
    }
    let history = read_history(&path).unwrap();
    assert!(history.warnings.is_empty(), "{:?}", history.warnings);
    assert_eq!(history.entries.len(), cases.len());
    let mut leaked = Vec::new();
    for (case, entry) in cases.iter().zip(&history.entries) {
        assert_eq!(entry.run, format!("run-{}", case.case));
        let found = leaks(case, &entry.text);
        if !found.is_empty() {
            leaked.push(format!("case {}: {found:?}", case.case));
        }
    }
    assert_no_leaks("history.jsonl", leaked);
    // Each line of the file itself, as JSON text (escaped), holds them as little.
    let raw = fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = raw.lines().collect();
    assert_eq!(lines.len(), cases.len());
    for (case, line) in cases.iter().zip(lines) {
        for secret in &case.secrets {
            let escaped = serde_json::to_string(secret).unwrap();
            let escaped = &escaped[1..escaped.len() - 1];
            if escaped.len() >= 6 {
                assert!(!line.contains(escaped), "case {}: {escaped}", case.case);
            }
        }
    }
}

/// Runs made through the run store, one per caught case, the case as the person's
/// last message. Returns run name → case index.
async fn runs_of(runs_dir: &Path, cases: &[Caught]) -> HashMap<String, usize> {
    let mut names = HashMap::new();
    for (i, case) in cases.iter().enumerate() {
        let dir = runs_dir.join(format!("2026-01-01T00-00-00-000Z-{}", case.case));
        let store = reprise_runs::RunStore::with_durability(&dir, Durability::None);
        let key = SessionKey::session(&format!("session-{}", case.case)).unwrap();
        store
            .append(
                &key,
                &[
                    Entry::message(Message::user(case.text.clone())),
                    Entry::message(Message::assistant("noted")),
                ],
            )
            .await
            .unwrap();
        names.insert(dir.file_name().unwrap().to_string_lossy().into_owned(), i);
    }
    names
}

#[tokio::test]
async fn the_listing_keeps_no_secret_of_the_corpus() {
    let redactor = Redactor::new();
    let cases = caught(&redactor);
    let tmp = tempfile::tempdir().unwrap();
    let runs_dir = tmp.path();
    let names = runs_of(runs_dir, &cases).await;
    let mut leaked = Vec::new();
    let mut check = |what: &str, name: &str, shown: &str| {
        let case = &cases[names[name]];
        let found = leaks(case, shown);
        if !found.is_empty() {
            leaked.push(format!("{what} of case {}: {found:?}", case.case));
        }
    };
    // The last message as each file holds it (the files' other fields, such as
    // times and hashes, change from run to run and are not the person's text).
    let last_message = |json: &str| -> String {
        let value: Value = serde_json::from_str(json).unwrap();
        value["lastMessage"].as_str().unwrap_or_default().to_owned()
    };
    for name in names.keys() {
        let dir = runs_dir.join(name);
        let summary = fs::read_to_string(dir.join(RUN_SUMMARY)).unwrap();
        check(
            RUN_SUMMARY,
            name,
            &last_message(summary.lines().next().unwrap()),
        );
        check(
            SESSION_JSON,
            name,
            &last_message(&fs::read_to_string(dir.join(SESSION_JSON)).unwrap()),
        );
    }
    // The list cache keeps only files older than a second: let them age, then list.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let list = list_runs(runs_dir).unwrap();
    assert_eq!(list.runs.len(), cases.len());
    for run in &list.runs {
        check(
            "list_runs",
            run.name(),
            run.last_message.as_deref().unwrap(),
        );
    }
    let cached = crate::list_cache_file::cached_entries(runs_dir);
    assert_eq!(cached.len(), cases.len());
    for run in &cached {
        check(LIST_CACHE, &run.name, run.last_message.as_deref().unwrap());
    }
    assert_no_leaks("the listing", leaked);
}

#[tokio::test]
async fn known_values_are_masked_in_the_log_the_history_and_the_listing() {
    let secret = "opaque-run-time-value-4821";
    let redactor = Redactor::new().with_secret(secret);
    let tmp = tempfile::tempdir().unwrap();
    let run = create_run_folder(tmp.path()).unwrap();
    let text = format!("my key is {secret}, keep it safe");

    let mut log = SessionLog::open(&run.dir)
        .unwrap()
        .with_redactor(redactor.clone());
    log.write_line(&format!("› {text}")).unwrap();
    log.write(&text[..14]).unwrap();
    log.write(&text[14..]).unwrap();
    drop(log);
    let logged = fs::read_to_string(run.dir.join("session.log")).unwrap();
    assert_eq!(
        logged,
        format!("› my key is {MASK}, keep it safe\nmy key is {MASK}, keep it safe")
    );

    let history = tmp.path().join("history.jsonl");
    reprise_runs::append_history_with(&history, &text, run.name(), &redactor).unwrap();
    assert!(!fs::read_to_string(&history).unwrap().contains(secret));

    let store = create_run_store(&run.dir).with_redactor(redactor);
    let key = SessionKey::session("s1").unwrap();
    store
        .append(&key, &[Entry::message(Message::user(text.clone()))])
        .await
        .unwrap();
    let listed = list_runs(tmp.path()).unwrap();
    assert_eq!(
        listed.runs[0].last_message.as_deref(),
        Some(format!("my key is {MASK}, keep it safe").as_str())
    );
    for file in [RUN_SUMMARY, SESSION_JSON] {
        let path = run.dir.join(file);
        if path.exists() {
            assert!(
                !fs::read_to_string(&path).unwrap().contains(secret),
                "{file}"
            );
        }
    }
    // The conversation is the model's history: kept exactly as sent.
    let conversation = fs::read_to_string(run.dir.join("conversation.jsonl")).unwrap();
    assert!(conversation.contains(secret));
}

#[test]
fn a_reply_longer_than_the_pending_limit_is_written_in_parts() {
    let tmp = tempfile::tempdir().unwrap();
    let run = create_run_folder(tmp.path()).unwrap();
    let mut log = SessionLog::open(&run.dir).unwrap();
    let line = "x".repeat(1000) + "\n";
    let lines = reprise_runs::MAX_PENDING / line.len() + 2;
    for _ in 0..lines {
        log.write(&line).unwrap();
    }
    // Written already, without a flush: the log holds back at most the limit.
    let written = fs::metadata(run.dir.join("session.log")).unwrap().len() as usize;
    assert!(
        written > 0 && written.is_multiple_of(line.len()),
        "{written}"
    );
    assert!(lines * line.len() - written <= reprise_runs::MAX_PENDING);
    drop(log);
    let written = fs::metadata(run.dir.join("session.log")).unwrap().len() as usize;
    assert_eq!(written, lines * line.len());
}

#[test]
fn a_secret_running_to_the_end_of_a_block_keeps_its_line_end() {
    let tmp = tempfile::tempdir().unwrap();
    let run = create_run_folder(tmp.path()).unwrap();
    let mut log = SessionLog::open(&run.dir).unwrap();
    // A private key without its END line: the pattern runs to the end of the text.
    log.write("key:\n-----BEGIN PRIVATE KEY-----\nyabba dabba doo\n")
        .unwrap();
    log.write_line("› next prompt").unwrap();
    drop(log);
    let text = fs::read_to_string(run.dir.join("session.log")).unwrap();
    assert_eq!(
        text,
        format!("key:\n-----BEGIN PRIVATE KEY-----{MASK}\n› next prompt\n")
    );
}
