//! Run folders: creation, listing newest first, and resolving a run by name.

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::{Arc, Barrier};

use jiff::Timestamp;
use reprise_runs::SESSION_JSON;
use reprise_runs::{
    RunError, RunFolder, create_run_folder, create_run_folder_at, find_run, list_runs,
};

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// A `session.json` with listing fields of its own, as earlier versions wrote it.
fn write_session_json(dir: &Path, session: &str, updated: Option<&str>, last: Option<&str>) {
    let mut meta = serde_json::json!({"sessionId": session, "messageCount": 3});
    if let Some(updated) = updated {
        meta["updatedAt"] = updated.into();
    }
    if let Some(last) = last {
        meta["lastMessage"] = last.into();
    }
    fs::write(dir.join(SESSION_JSON), serde_json::to_vec(&meta).unwrap()).unwrap();
}

fn names(runs_dir: &Path) -> Vec<String> {
    list_runs(runs_dir)
        .unwrap()
        .runs
        .iter()
        .map(|run| run.name().to_owned())
        .collect()
}

#[test]
fn a_new_run_is_a_private_folder_named_after_its_utc_start_holding_only_session_log() {
    let tmp = tempfile::tempdir().unwrap();
    let runs_dir = tmp.path().join("deep/.run");
    let start: Timestamp = "2026-09-29T10:15:00.042Z".parse().unwrap();
    let run = create_run_folder_at(&runs_dir, start).unwrap();
    assert_eq!(run.name(), "2026-09-29T10-15-00-042Z");
    assert_eq!(run.session_id, None);
    assert_eq!(mode(&runs_dir), 0o700);
    assert_eq!(mode(&tmp.path().join("deep")), 0o700);
    assert_eq!(mode(&run.dir), 0o700);
    let files: Vec<_> = fs::read_dir(&run.dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(files, ["session.log"]);
    assert_eq!(mode(&run.dir.join("session.log")), 0o600);
    assert_eq!(fs::metadata(run.dir.join("session.log")).unwrap().len(), 0);
}

#[test]
fn create_run_folder_uses_the_current_time() {
    let tmp = tempfile::tempdir().unwrap();
    let before = Timestamp::now();
    let run = create_run_folder(tmp.path()).unwrap();
    let after = Timestamp::now();
    let name = run.name();
    assert_eq!(name.len(), "2026-09-29T10-15-00-000Z".len(), "{name}");
    let back: Timestamp = format!(
        "{}T{}:{}:{}.{}Z",
        &name[..10],
        &name[11..13],
        &name[14..16],
        &name[17..19],
        &name[20..23]
    )
    .parse()
    .unwrap();
    let floor = Timestamp::from_millisecond(before.as_millisecond()).unwrap();
    assert!(
        floor <= back && back <= after,
        "{back} not in [{before}, {after}]"
    );
}

#[test]
fn concurrent_starts_in_the_same_millisecond_never_share_a_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let runs_dir = tmp.path().to_path_buf();
    let start: Timestamp = "2026-09-29T10:15:00Z".parse().unwrap();
    let threads = 24;
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let runs_dir = runs_dir.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                (0..4)
                    .map(|_| create_run_folder_at(&runs_dir, start).unwrap().dir)
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let dirs: Vec<_> = handles
        .into_iter()
        .flat_map(|handle| handle.join().unwrap())
        .collect();
    let unique: HashSet<_> = dirs.iter().collect();
    assert_eq!(unique.len(), threads * 4, "two starts shared a folder");
    let mut expected: HashSet<String> = (2..=threads * 4)
        .map(|n| format!("2026-09-29T10-15-00-000Z-{n}"))
        .collect();
    expected.insert("2026-09-29T10-15-00-000Z".to_owned());
    let got: HashSet<String> = dirs
        .iter()
        .map(|dir| dir.file_name().unwrap().to_str().unwrap().to_owned())
        .collect();
    assert_eq!(got, expected);
}

#[test]
fn concurrent_starts_at_the_real_clock_never_share_a_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let runs_dir = tmp.path().to_path_buf();
    let barrier = Arc::new(Barrier::new(8));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let runs_dir = runs_dir.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                (0..10)
                    .map(|_| create_run_folder(&runs_dir).unwrap().dir)
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let dirs: Vec<_> = handles
        .into_iter()
        .flat_map(|handle| handle.join().unwrap())
        .collect();
    let unique: HashSet<_> = dirs.iter().collect();
    assert_eq!(unique.len(), 80);
    assert_eq!(fs::read_dir(&runs_dir).unwrap().count(), 80);
}

#[test]
fn list_runs_shows_only_runs_with_session_json_newest_first() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path();
    let mk = |name: &str| {
        let dir = runs.join(name);
        fs::create_dir(&dir).unwrap();
        dir
    };
    let a = mk("2026-01-01T00-00-00-000Z");
    let b = mk("2026-01-02T00-00-00-000Z");
    let c = mk("2026-01-03T00-00-00-000Z");
    let _empty = mk("2026-01-04T00-00-00-000Z"); // never got a message
    let tie = mk("2026-01-05T00-00-00-000Z");
    // a was resumed last, so it is the newest even though it started first.
    write_session_json(&a, "s-a", Some("2026-03-01T00:00:00Z"), Some("from a"));
    write_session_json(&b, "s-b", Some("2026-01-02T00:00:01Z"), None);
    write_session_json(&c, "s-c", Some("2026-02-01T00:00:00Z"), Some("from c"));
    write_session_json(&tie, "s-t", Some("2026-02-01T00:00:00Z"), None);
    fs::write(runs.join("history.jsonl"), "{}\n").unwrap();
    let list = list_runs(runs).unwrap();
    assert!(list.warnings.is_empty(), "{:?}", list.warnings);
    assert_eq!(
        names(runs),
        [
            "2026-01-01T00-00-00-000Z",
            "2026-01-05T00-00-00-000Z",
            "2026-01-03T00-00-00-000Z",
            "2026-01-02T00-00-00-000Z"
        ]
    );
    let first = &list.runs[0];
    assert_eq!(first.session_id, "s-a");
    assert_eq!(first.last_message.as_deref(), Some("from a"));
    assert_eq!(first.message_count, 3);
    assert_eq!(first.updated_at, "2026-03-01T00:00:00Z".parse().unwrap());
    assert_eq!(first.dir, a);
}

#[test]
fn list_runs_falls_back_to_the_file_time_without_updated_at() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("2026-01-01T00-00-00-000Z");
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join(SESSION_JSON), r#"{"sessionId":"s1"}"#).unwrap();
    let before = Timestamp::now();
    let list = list_runs(tmp.path()).unwrap();
    assert_eq!(list.runs.len(), 1);
    let age = before.duration_since(list.runs[0].updated_at);
    assert!(
        age.as_secs() < 3600,
        "mtime not used: {}",
        list.runs[0].updated_at
    );
    assert_eq!(list.runs[0].last_message, None);
}

#[test]
fn a_corrupt_session_json_is_a_warning_not_a_failure() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path();
    for (name, content) in [
        ("2026-01-01T00-00-00-000Z", r#"{"sessionId":"good"}"#),
        ("2026-01-02T00-00-00-000Z", "{not json"),
        ("2026-01-03T00-00-00-000Z", r#"{"sessionId":"../../etc"}"#),
        ("2026-01-04T00-00-00-000Z", r#"{"subagents":{}}"#),
    ] {
        fs::create_dir(runs.join(name)).unwrap();
        fs::write(runs.join(name).join(SESSION_JSON), content).unwrap();
    }
    let list = list_runs(runs).unwrap();
    assert_eq!(list.runs.len(), 1);
    assert_eq!(list.runs[0].session_id, "good");
    let mut warned: Vec<_> = list
        .warnings
        .iter()
        .map(|warning| {
            warning
                .path
                .parent()
                .unwrap()
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    warned.sort();
    assert_eq!(
        warned,
        [
            "2026-01-02T00-00-00-000Z",
            "2026-01-03T00-00-00-000Z",
            "2026-01-04T00-00-00-000Z"
        ]
    );
}

#[test]
fn list_runs_of_a_missing_directory_is_empty() {
    let tmp = tempfile::tempdir().unwrap();
    let list = list_runs(&tmp.path().join("nothing-here")).unwrap();
    assert!(list.runs.is_empty() && list.warnings.is_empty());
}

#[test]
fn list_runs_reads_the_listing_fields_an_earlier_version_wrote_in_session_json() {
    let tmp = tempfile::tempdir().unwrap();
    let run = create_run_folder(tmp.path()).unwrap();
    let meta = serde_json::json!({
        "sessionId": "sess-1",
        "subagents": {"helper": "subagents/helper.jsonl"},
        "updatedAt": "2026-05-05T05:05:05.555Z",
        "lastMessage": "what now?",
        "messageCount": 12
    });
    fs::write(
        run.dir.join(SESSION_JSON),
        serde_json::to_vec_pretty(&meta).unwrap(),
    )
    .unwrap();
    let list = list_runs(tmp.path()).unwrap();
    let summary = &list.runs[0];
    assert_eq!(summary.session_id, "sess-1");
    assert_eq!(
        summary.updated_at,
        "2026-05-05T05:05:05.555Z"
            .parse::<jiff::Timestamp>()
            .unwrap()
    );
    assert_eq!(summary.last_message.as_deref(), Some("what now?"));
    assert_eq!(summary.message_count, 12);
    assert_eq!(
        summary.folder(),
        RunFolder {
            dir: run.dir.clone(),
            session_id: Some("sess-1".into()),
            warnings: Vec::new(),
        }
    );
    assert_eq!(RunFolder::open(&run.dir).unwrap(), summary.folder());
}

fn runs_for_find() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for (name, session, updated) in [
        (
            "2026-01-01T00-00-00-000Z",
            Some("s1"),
            "2026-01-01T00:00:00Z",
        ),
        (
            "2026-01-01T00-00-00-000Z-2",
            Some("s2"),
            "2026-01-01T00:00:01Z",
        ),
        (
            "2026-02-01T00-00-00-000Z",
            Some("s3"),
            "2026-02-01T00:00:00Z",
        ),
        ("2026-03-01T00-00-00-000Z", None, ""),
    ] {
        let dir = tmp.path().join(name);
        fs::create_dir(&dir).unwrap();
        if let Some(session) = session {
            write_session_json(&dir, session, Some(updated), None);
        }
    }
    tmp
}

#[test]
fn find_run_resolves_last_names_and_unique_prefixes() {
    let tmp = runs_for_find();
    let runs = tmp.path();
    let last = find_run(runs, "last").unwrap();
    assert_eq!(last.session_id.as_deref(), Some("s3"));
    let exact = find_run(runs, "2026-01-01T00-00-00-000Z").unwrap();
    assert_eq!(
        exact.session_id.as_deref(),
        Some("s1"),
        "exact name beats prefix"
    );
    let prefix = find_run(runs, "2026-02").unwrap();
    assert_eq!(prefix.dir, runs.join("2026-02-01T00-00-00-000Z"));
    let without_conversation = find_run(runs, "2026-03").unwrap();
    assert_eq!(without_conversation.session_id, None);
}

#[test]
fn a_prefix_does_not_count_folders_without_a_conversation_beside_a_run() {
    let tmp = runs_for_find();
    let runs = tmp.path();
    // Beside the run of February, a folder a start made and left empty.
    fs::create_dir(runs.join("2026-02-01T00-00-05-000Z")).unwrap();
    let found = find_run(runs, "2026-02").unwrap();
    assert_eq!(found.dir, runs.join("2026-02-01T00-00-00-000Z"));
    // Two empty folders and no run: still ambiguous, naming both.
    fs::create_dir(runs.join("2026-03-01T00-00-05-000Z")).unwrap();
    match find_run(runs, "2026-03") {
        Err(RunError::AmbiguousRun { candidates, .. }) => assert_eq!(
            candidates,
            ["2026-03-01T00-00-00-000Z", "2026-03-01T00-00-05-000Z"]
        ),
        other => panic!("expected ambiguity, got {other:?}"),
    }
}

#[test]
fn find_run_says_clearly_when_a_spec_is_ambiguous_or_unknown() {
    let tmp = runs_for_find();
    let runs = tmp.path();
    match find_run(runs, "2026-01") {
        Err(RunError::AmbiguousRun { candidates, .. }) => assert_eq!(
            candidates,
            ["2026-01-01T00-00-00-000Z", "2026-01-01T00-00-00-000Z-2"]
        ),
        other => panic!("expected ambiguity, got {other:?}"),
    }
    let error = find_run(runs, "2027").unwrap_err();
    assert!(matches!(error, RunError::NoSuchRun { .. }), "{error:?}");
    assert!(error.to_string().contains("2027"));
    let empty = tempfile::tempdir().unwrap();
    assert!(matches!(
        find_run(empty.path(), "last"),
        Err(RunError::NoRuns { .. })
    ));
}

#[test]
fn find_run_refuses_paths_that_leave_the_runs_directory() {
    let tmp = runs_for_find();
    let runs = tmp.path().join("inner");
    fs::create_dir(&runs).unwrap();
    // A run outside `inner` that a traversal would reach.
    for spec in [
        "../2026-02-01T00-00-00-000Z",
        "..",
        ".",
        "/etc",
        "",
        "a/b",
        "inner/../..",
        &"x".repeat(200),
        "-rf",
        ".hidden",
    ] {
        match find_run(&runs, spec) {
            Err(RunError::InvalidId(_)) => {}
            other => panic!("{spec:?} was not refused: {other:?}"),
        }
    }
}

#[test]
fn many_runs_are_all_listed_in_order() {
    // Enough runs for the listing to spread its reads over threads.
    let tmp = tempfile::tempdir().unwrap();
    let start: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    for n in 0..300i64 {
        let at = start + jiff::SignedDuration::from_secs(n * 7);
        let run = create_run_folder_at(tmp.path(), at).unwrap();
        // Every 10th run never got a message; every 50th has a broken session.json.
        if n % 10 == 0 {
            continue;
        }
        if n % 50 == 1 {
            fs::write(run.dir.join(SESSION_JSON), "{\"sessionId\":\"s").unwrap();
            continue;
        }
        let updated = (at + jiff::SignedDuration::from_secs(3)).to_string();
        write_session_json(&run.dir, &format!("s{n}"), Some(&updated), None);
    }
    let list = list_runs(tmp.path()).unwrap();
    assert_eq!(list.warnings.len(), 6);
    assert_eq!(list.runs.len(), 300 - 30 - 6);
    let ids: Vec<i64> = list
        .runs
        .iter()
        .map(|run| run.session_id[1..].parse().unwrap())
        .collect();
    let mut expected: Vec<i64> = (0..300).filter(|n| n % 10 != 0 && n % 50 != 1).collect();
    expected.reverse();
    assert_eq!(ids, expected);
}

#[test]
fn a_large_session_json_is_read_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let run = create_run_folder(tmp.path()).unwrap();
    let long = "ñ".repeat(40_000);
    write_session_json(&run.dir, "big", Some("2026-01-01T00:00:00Z"), Some(&long));
    let list = list_runs(tmp.path()).unwrap();
    assert!(list.warnings.is_empty(), "{:?}", list.warnings);
    assert_eq!(list.runs[0].last_message.as_deref(), Some(long.as_str()));
}
