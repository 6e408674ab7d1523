//! Damaged or left-over state in a runs directory never blocks a run: metadata is
//! rebuilt from the conversation, leftovers of killed processes are removed, and
//! errors say what happened.

use std::fs;
use std::path::{Path, PathBuf};

use reprise_runs::{
    RunFolder, UNUSED_GRACE, create_run_folder, create_run_store, list_runs,
    remove_unused_run_folder, unused_run_folders,
};
use reprise_session::{Entry, Message, SessionKey, SessionStore, StoreError};

async fn run_with_messages(runs: &Path, count: usize) -> PathBuf {
    let folder = create_run_folder(runs).unwrap();
    let key = SessionKey::session("sess-1").unwrap();
    let entries: Vec<Entry> = (0..count)
        .map(|i| Entry::message(Message::user(format!("message {i}"))))
        .collect();
    create_run_store(&folder.dir)
        .append(&key, &entries)
        .await
        .unwrap();
    folder.dir
}

fn session_json(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(dir.join("session.json")).unwrap()).unwrap()
}

#[tokio::test]
async fn a_corrupt_session_json_is_rebuilt_from_the_conversation() {
    let runs = tempfile::tempdir().unwrap();
    let dir = run_with_messages(runs.path(), 6).await;
    fs::write(
        dir.join("session.json"),
        "{\"sessionId\": \"sess-1\", \"subag",
    )
    .unwrap();
    let folder = RunFolder::open(&dir).unwrap();
    assert_eq!(folder.session_id.as_deref(), Some("sess-1"));
    assert_eq!(folder.warnings.len(), 1);
    assert_eq!(folder.warnings[0].path, dir.join("session.json"));
    assert!(
        folder.warnings[0].message.contains("rebuilt"),
        "{:?}",
        folder.warnings
    );
    let meta = session_json(&dir);
    assert_eq!(meta["sessionId"], "sess-1");
    // The listing fields go to a new summary, not to session.json.
    assert!(meta.get("messageCount").is_none(), "{meta}");
    let listed = list_runs(runs.path()).unwrap();
    assert_eq!(listed.runs[0].message_count, 6);
    assert_eq!(listed.runs[0].last_message.as_deref(), Some("message 5"));
    // The run is usable again: loaded, appended to, listed.
    let store = create_run_store(&dir);
    let key = SessionKey::session("sess-1").unwrap();
    assert_eq!(store.load(&key).await.unwrap().unwrap().entries.len(), 6);
    store
        .append(&key, &[Entry::message(Message::user("again"))])
        .await
        .unwrap();
    let list = list_runs(runs.path()).unwrap();
    assert_eq!(list.runs[0].message_count, 7);
}

#[tokio::test]
async fn a_missing_session_json_and_summary_are_rebuilt_under_a_new_id() {
    let runs = tempfile::tempdir().unwrap();
    let dir = run_with_messages(runs.path(), 3).await;
    fs::remove_file(dir.join("session.json")).unwrap();
    fs::remove_file(dir.join(".summary.json")).unwrap();
    // Not listed while it has no session.json.
    assert!(list_runs(runs.path()).unwrap().runs.is_empty());
    let folder = RunFolder::open(&dir).unwrap();
    let id = folder.session_id.clone().unwrap();
    assert_ne!(id, "sess-1");
    assert!(
        folder.warnings[0].message.starts_with("missing"),
        "{:?}",
        folder.warnings
    );
    let list = list_runs(runs.path()).unwrap();
    assert_eq!(list.runs.len(), 1);
    assert_eq!(list.runs[0].session_id, id);
    assert_eq!(list.runs[0].message_count, 3);
}

#[tokio::test]
async fn a_new_run_without_a_conversation_needs_no_repair() {
    let runs = tempfile::tempdir().unwrap();
    let folder = create_run_folder(runs.path()).unwrap();
    let opened = RunFolder::open(&folder.dir).unwrap();
    assert_eq!(opened.session_id, None);
    assert!(opened.warnings.is_empty());
    assert!(!folder.dir.join("session.json").exists());
}

#[tokio::test]
async fn a_damaged_session_json_of_a_held_run_is_not_rewritten() {
    let runs = tempfile::tempdir().unwrap();
    let dir = run_with_messages(runs.path(), 2).await;
    let holder = create_run_store(&dir);
    let _lock = holder.lock("sess-1").await.unwrap();
    fs::write(dir.join("session.json"), "garbage").unwrap();
    let folder = RunFolder::open(&dir).unwrap();
    assert_eq!(folder.session_id.as_deref(), Some("sess-1"));
    assert!(
        folder.warnings[0].message.contains("in use"),
        "{:?}",
        folder.warnings
    );
    assert_eq!(
        fs::read_to_string(dir.join("session.json")).unwrap(),
        "garbage"
    );
}

/// The pid of a process that has exited.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

#[tokio::test]
async fn staging_folders_of_dead_forks_are_removed_by_listings_and_starts() {
    let runs = tempfile::tempdir().unwrap();
    run_with_messages(runs.path(), 1).await;
    let dead = dead_pid();
    let staged = |n: u32| {
        let path = runs
            .path()
            .join(format!(".2026-01-01T00-00-00-000Z.fork-{dead}-{n}"));
        fs::create_dir(&path).unwrap();
        fs::write(path.join("conversation.jsonl"), "{}\n").unwrap();
        path
    };
    let live = runs.path().join(format!(
        ".2026-01-01T00-00-00-000Z.fork-{}-0",
        std::process::id()
    ));
    fs::create_dir(&live).unwrap();
    let temp = runs.path().join(format!(".list-cache.{dead}.4.tmp"));
    fs::write(&temp, "{").unwrap();

    let first = staged(0);
    list_runs(runs.path()).unwrap();
    assert!(!first.exists());
    assert!(!temp.exists());
    assert!(live.exists(), "a live process's fork is left alone");

    let second = staged(1);
    create_run_folder(runs.path()).unwrap();
    assert!(!second.exists());
    assert!(live.exists());
}

#[tokio::test]
async fn temporary_files_of_dead_writers_in_a_run_folder_are_removed_on_open() {
    let runs = tempfile::tempdir().unwrap();
    let run = run_with_messages(runs.path(), 1).await;
    let dead = run.join(format!(".session.json.tmp-{}-0", dead_pid()));
    fs::write(&dead, "{").unwrap();
    let live = run.join(format!(".session.json.tmp-{}-7", std::process::id()));
    fs::write(&live, "{").unwrap();
    let folder = RunFolder::open(&run).unwrap();
    assert!(!dead.exists());
    assert!(
        live.exists(),
        "a live writer's temporary file is left alone"
    );
    assert_eq!(folder.session_id.as_deref(), Some("sess-1"));
    assert!(folder.warnings.is_empty(), "{:?}", folder.warnings);
}

#[tokio::test]
async fn only_an_unused_run_folder_is_removed() {
    let runs = tempfile::tempdir().unwrap();
    let fresh = create_run_folder(runs.path()).unwrap();
    assert!(remove_unused_run_folder(&fresh).unwrap());
    assert!(!fresh.dir.exists());
    let used = run_with_messages(runs.path(), 1).await;
    assert!(!remove_unused_run_folder(&RunFolder::open(&used).unwrap()).unwrap());
    assert!(used.join("conversation.jsonl").exists());
}

/// Sets the modification time of `dir` and of everything in it to `age` ago.
fn age(dir: &Path, age: std::time::Duration) {
    let when = std::time::SystemTime::now() - age;
    for entry in fs::read_dir(dir).unwrap() {
        fs::File::open(entry.unwrap().path())
            .unwrap()
            .set_modified(when)
            .unwrap();
    }
    fs::File::open(dir).unwrap().set_modified(when).unwrap();
}

fn names(folders: &[RunFolder]) -> Vec<String> {
    folders.iter().map(|f| f.name().to_owned()).collect()
}

#[tokio::test]
async fn folders_with_nothing_written_are_offered_once_old_and_removed_unless_held() {
    let runs = tempfile::tempdir().unwrap();
    let old = UNUSED_GRACE + std::time::Duration::from_secs(60);
    // What a fork killed after taking its target's lock left.
    let killed_fork = create_run_folder(runs.path()).unwrap();
    fs::write(killed_fork.dir.join(".lock"), "4242      \n").unwrap();
    // What a start that resumed another run left.
    let resumed = create_run_folder(runs.path()).unwrap();
    fs::write(
        resumed.dir.join("session.log"),
        "(resumed run 2026-01-01T00-00-00-000Z)\n",
    )
    .unwrap();
    let written = create_run_folder(runs.path()).unwrap();
    fs::write(written.dir.join("session.log"), "› hello\n").unwrap();
    let used = run_with_messages(runs.path(), 1).await;
    for dir in [&killed_fork.dir, &resumed.dir, &written.dir, &used] {
        age(dir, old);
    }
    let starting = create_run_folder(runs.path()).unwrap();
    let offered = unused_run_folders(runs.path(), std::time::SystemTime::now()).unwrap();
    assert_eq!(
        names(&offered),
        [killed_fork.name(), resumed.name()],
        "a folder written to, a run and one made a moment ago are not offered"
    );
    assert!(starting.dir.exists());

    // A chat holding the folder keeps it.
    let held = reprise_session::parts::acquire(runs.path(), &resumed.dir.join(".lock"), "resumed")
        .unwrap();
    let other_process = std::thread::spawn({
        let folder = resumed.clone();
        move || remove_unused_run_folder(&folder).unwrap()
    });
    // The lock is per open file: from this process it is held too.
    assert!(!other_process.join().unwrap());
    drop(held);
    assert!(resumed.dir.exists());
    for folder in &offered {
        assert!(remove_unused_run_folder(folder).unwrap());
        assert!(!folder.dir.exists());
    }
    assert!(written.dir.exists() && used.exists());
}

#[test]
fn a_file_given_as_the_runs_dir_is_named_as_such() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("runs");
    fs::write(&file, "x").unwrap();
    let error = create_run_folder(&file).unwrap_err();
    let mut shown = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        shown = format!("{shown}: {cause}");
        source = cause.source();
    }
    assert!(shown.contains(&file.display().to_string()), "{shown}");
    assert!(shown.contains("a file is in the way"), "{shown}");
    assert!(!shown.contains("File exists"), "{shown}");
}

#[tokio::test]
async fn a_lock_refusal_waits_for_the_holders_pid() {
    use std::io::Write;
    let runs = tempfile::tempdir().unwrap();
    let dir = run_with_messages(runs.path(), 1).await;
    // A holder that has the lock and writes its pid a moment later.
    let lock_path = dir.join(".lock");
    fs::write(&lock_path, "").unwrap();
    let holder = fs::OpenOptions::new().write(true).open(&lock_path).unwrap();
    holder.try_lock().unwrap();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(10));
        (&holder).write_all(b"4242\n").unwrap();
        holder
    });
    let error = create_run_store(&dir).lock("sess-1").await.unwrap_err();
    let holder = writer.join().unwrap();
    match error {
        StoreError::Locked { pid, .. } => assert_eq!(pid, Some(4242)),
        other => panic!("expected Locked, got {other:?}"),
    }
    drop(holder);
}

#[tokio::test]
async fn an_emptied_conversation_is_not_listed_with_stale_counts() {
    let runs = tempfile::tempdir().unwrap();
    let dir = run_with_messages(runs.path(), 6).await;
    // Listed once, so the listing cache holds the run.
    assert_eq!(list_runs(runs.path()).unwrap().runs[0].message_count, 6);
    fs::write(dir.join("conversation.jsonl"), "").unwrap();
    let list = list_runs(runs.path()).unwrap();
    assert_eq!(list.runs[0].message_count, 0);
    assert_eq!(list.runs[0].last_message, None);
    // Cut to a shorter conversation: recounted too.
    let store = create_run_store(&dir);
    let key = SessionKey::session("sess-1").unwrap();
    store
        .append(
            &key,
            &[
                Entry::message(Message::user("one")),
                Entry::message(Message::user("two")),
            ],
        )
        .await
        .unwrap();
    assert_eq!(list_runs(runs.path()).unwrap().runs[0].message_count, 2);
    let text = fs::read_to_string(dir.join("conversation.jsonl")).unwrap();
    let first_line = text.lines().next().unwrap();
    fs::write(dir.join("conversation.jsonl"), format!("{first_line}\n")).unwrap();
    let list = list_runs(runs.path()).unwrap();
    assert_eq!(list.runs[0].message_count, 1);
    assert_eq!(list.runs[0].last_message.as_deref(), Some("one"));
}
