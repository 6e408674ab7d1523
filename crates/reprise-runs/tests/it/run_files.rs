//! The files of run folders beside the file store's: permissions, ids in paths,
//! forks of run folders, and the listing each append keeps.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use reprise_runs::SessionJson;
use reprise_runs::{ForkedRun, create_run_store, fork_run};
use reprise_session::load_file;
use reprise_session::{
    Entry, FileSessionStore, ForkOrigin, Message, SessionFork, SessionKey, SessionStore,
    StoreError, ToolCall,
};

fn user(text: &str) -> Entry {
    Entry::message(Message::user(text))
}

fn key(id: &str) -> SessionKey {
    SessionKey::session(id).unwrap()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn stores_create_dirs_0700_and_files_0600() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("sessions");
    let store = FileSessionStore::new(&dir);
    store.append(&key("s"), &[user("hi")]).await.unwrap();
    let sub = SessionKey::subagent("s", "w").unwrap();
    store.append(&sub, &[user("sub")]).await.unwrap();
    let _guard = store.lock("s").await.unwrap();
    store.fork(SessionFork::whole("s", "f")).await.unwrap();
    for d in [
        dir.clone(),
        dir.join("s"),
        dir.join("s/subagents"),
        dir.join("f/subagents"),
    ] {
        assert_eq!(mode(&d), 0o700, "{}", d.display());
    }
    for f in [
        "s.jsonl",
        "s.meta.json",
        "s.lock",
        "s/subagents/w.jsonl",
        "f.jsonl",
        "f.meta.json",
        "f/subagents/w.jsonl",
    ] {
        assert_eq!(mode(&dir.join(f)), 0o600, "{f}");
    }

    let run = parent.path().join("runs/2026-11-30T10-00-00-000Z");
    let store = create_run_store(&run);
    store.append(&key("s"), &[user("hi")]).await.unwrap();
    store.append(&sub, &[user("sub")]).await.unwrap();
    drop(store.lock("s").await.unwrap());
    for d in [
        parent.path().join("runs"),
        run.clone(),
        run.join("subagents"),
    ] {
        assert_eq!(mode(&d), 0o700, "{}", d.display());
    }
    for f in [
        "conversation.jsonl",
        "session.json",
        ".lock",
        "subagents/w.jsonl",
    ] {
        assert_eq!(mode(&run.join(f)), 0o600, "{f}");
    }
    let forked = parent.path().join("runs/2026-11-30T11-00-00-000Z");
    let _forked = fork_run(&run, &forked, None).unwrap();
    assert_eq!(mode(&forked), 0o700);
    for f in ["conversation.jsonl", "session.json", "subagents/w.jsonl"] {
        assert_eq!(mode(&forked.join(f)), 0o600, "{f}");
    }
}

/// Every file under `dir`, relative.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for item in std::fs::read_dir(&d).unwrap() {
            let path = item.unwrap().path();
            out.push(path.strip_prefix(dir).unwrap().display().to_string());
            if path.is_dir() {
                stack.push(path);
            }
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn ids_that_escape_the_directory_are_refused_everywhere() {
    let long = "x".repeat(200);
    let bad = [
        "../x",
        "/abs",
        "",
        long.as_str(),
        "..",
        "a/../../b",
        "a\\b",
        " x",
    ];
    for id in bad {
        assert!(SessionKey::session(id).is_err(), "{id:?}");
        assert!(SessionKey::subagent("ok", id).is_err(), "{id:?}");
        assert!(SessionKey::with_subpath("ok", Some(&format!("subagents/{id}"))).is_err());
    }
    assert!(SessionKey::with_subpath("ok", Some("../x")).is_err());
    assert!(SessionKey::session(&"x".repeat(128)).is_ok());

    let parent = tempfile::tempdir().unwrap();
    let stores: Vec<(std::sync::Arc<dyn SessionStore>, &str)> = vec![
        (
            std::sync::Arc::new(FileSessionStore::new(parent.path().join("store"))),
            "file",
        ),
        (
            std::sync::Arc::new(create_run_store(parent.path().join("run"))),
            "run",
        ),
        (
            std::sync::Arc::new(reprise_session::MemoryStore::new()),
            "memory",
        ),
    ];
    for (store, name) in &stores {
        store.append(&key("ok"), &[user("hi")]).await.unwrap();
        for id in bad {
            let refused = |r: Result<(), StoreError>| matches!(r, Err(StoreError::InvalidId(_)));
            assert!(
                refused(store.list_subkeys(id).await.map(drop)),
                "{name} list_subkeys {id:?}"
            );
            assert!(
                refused(store.lock(id).await.map(drop)),
                "{name} lock {id:?}"
            );
            assert!(
                refused(store.fork(SessionFork::whole(id, "t")).await),
                "{name} fork from {id:?}"
            );
            assert!(
                refused(store.fork(SessionFork::whole("ok", id)).await),
                "{name} fork to {id:?}"
            );
        }
    }
    // Nothing was created outside the stores' own folders, and nothing odd inside.
    assert_eq!(
        tree(parent.path()),
        [
            "run",
            "run/.lock",
            "run/.summary.json",
            "run/conversation.jsonl",
            "run/session.json",
            "store",
            "store/ok.jsonl",
            "store/ok.lock",
            "store/ok.meta.json",
        ]
    );
}

#[tokio::test]
async fn fork_run_copies_a_run_into_a_new_or_fresh_run_folder() {
    let runs = tempfile::tempdir().unwrap();
    let source = runs.path().join("2026-11-30T10-00-00-000Z");
    let store = create_run_store(&source);
    let all = [
        user("first question"),
        Entry::message(Message::assistant("answer")),
        user("  second question \n"),
        Entry::message(Message::assistant("another")),
    ];
    store.append(&key("s1"), &all).await.unwrap();
    let sub = SessionKey::subagent("s1", "helper").unwrap();
    store.append(&sub, &[user("sub task")]).await.unwrap();
    let meta: SessionJson =
        serde_json::from_slice(&std::fs::read(source.join("session.json")).unwrap()).unwrap();
    assert_eq!(meta.session_id, "s1");
    assert_eq!(meta.subagents["helper"], "subagents/helper.jsonl");
    let source_listed = reprise_runs::summarize_run(&source).unwrap();
    assert_eq!(source_listed.message_count, 4);
    assert_eq!(
        source_listed.last_message.as_deref(),
        Some("second question")
    );

    // Into a folder that does not exist yet: the whole run.
    let whole = runs.path().join("2026-11-30T11-00-00-000Z");
    let ForkedRun {
        session_id: new_id,
        store: forked,
    } = fork_run(&source, &whole, None).unwrap();
    // The new folder's store owns the fork's data sync until it is closed.
    assert_eq!(forked.pending_fork_syncs(), 1);
    let probe = forked.clone();
    forked.clone().close().await.unwrap();
    assert_eq!(probe.pending_fork_syncs(), 0);
    assert_eq!(
        forked.session_id().unwrap().as_deref(),
        Some(new_id.as_str())
    );
    let got = forked.load(&key(&new_id)).await.unwrap().unwrap();
    assert_eq!(got.entries, all);
    let got_sub = forked
        .load(&SessionKey::subagent(&new_id, "helper").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got_sub.entries.len(), 1);
    let meta: SessionJson =
        serde_json::from_slice(&std::fs::read(whole.join("session.json")).unwrap()).unwrap();
    assert_eq!(
        meta.forked_from,
        Some(ForkOrigin {
            session: "s1".into(),
            entry: None
        })
    );
    // The fork has a summary of its own from the start.
    let fork_listed = reprise_runs::summarize_run(&whole).unwrap();
    assert_eq!(fork_listed.message_count, 4);
    assert_eq!(fork_listed.last_message.as_deref(), Some("second question"));
    assert!(whole.join(".summary.json").exists());

    // Into a fresh run folder (only session.log): up to an entry.
    let fresh = runs.path().join("2026-11-30T12-00-00-000Z");
    std::fs::create_dir(&fresh).unwrap();
    std::fs::write(fresh.join("session.log"), "started\n").unwrap();
    let id = fork_run(&source, &fresh, Some(all[1].uuid))
        .unwrap()
        .session_id;
    let got = create_run_store(&fresh)
        .load(&key(&id))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.entries, all[..2]);
    let meta: SessionJson =
        serde_json::from_slice(&std::fs::read(fresh.join("session.json")).unwrap()).unwrap();
    assert_eq!(meta.forked_from.unwrap().entry, Some(all[1].uuid));
    let part_listed = reprise_runs::summarize_run(&fresh).unwrap();
    assert_eq!(part_listed.message_count, 2);
    assert_eq!(part_listed.last_message.as_deref(), Some("first question"));
    assert_eq!(
        std::fs::read_to_string(fresh.join("session.log")).unwrap(),
        "started\n"
    );

    // A run that has a conversation is never overwritten; the source is unchanged.
    assert!(matches!(
        fork_run(&source, &whole, None),
        Err(StoreError::AlreadyExists { .. })
    ));
    assert!(matches!(
        fork_run(&source, &runs.path().join("x"), Some(uuid::Uuid::now_v7())),
        Err(StoreError::EntryNotFound { .. })
    ));
    assert!(!runs.path().join("x").exists());
    assert_eq!(store.load(&key("s1")).await.unwrap().unwrap().entries, all);
    // No staging folders are left behind.
    let names: Vec<String> = std::fs::read_dir(runs.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
}

fn message_entries(dir: &Path) -> u64 {
    load_file(&dir.join("conversation.jsonl"), "s1")
        .unwrap()
        .unwrap()
        .entries
        .iter()
        .filter(|entry| entry.as_message().is_some())
        .count() as u64
}

fn listed(runs: &Path) -> reprise_runs::RunSummary {
    let list = reprise_runs::list_runs(runs).unwrap();
    assert!(list.warnings.is_empty(), "{:?}", list.warnings);
    assert_eq!(list.runs.len(), 1);
    list.runs[0].clone()
}

fn inode_and_bytes(path: &Path) -> (u64, Vec<u8>) {
    use std::os::unix::fs::MetadataExt;
    (
        std::fs::metadata(path).unwrap().ino(),
        std::fs::read(path).unwrap(),
    )
}

#[tokio::test]
async fn every_append_updates_the_listing_and_session_json_is_written_once() {
    let runs = tempfile::tempdir().unwrap();
    let dir = runs.path().join("2026-11-30T10-00-00-000Z");
    let store = create_run_store(&dir);
    let k = key("s1");
    let _lock = store.lock("s1").await.unwrap();

    // A turn with a tool call, appended one entry at a time as the agent loop does.
    store
        .append(&k, &[user("  read the file \n")])
        .await
        .unwrap();
    let session_json = inode_and_bytes(&dir.join("session.json"));
    let started = listed(runs.path());
    assert_eq!(started.session_id, "s1");
    assert_eq!(started.message_count, 1);
    assert_eq!(started.last_message.as_deref(), Some("read the file"));

    let call = ToolCall::function("c1", "read_file", r#"{"path":"a"}"#);
    store
        .append(
            &k,
            &[Entry::message(Message::assistant_tool_calls(
                None,
                vec![call],
            ))],
        )
        .await
        .unwrap();
    store
        .append(&k, &[Entry::message(Message::tool("c1", "contents"))])
        .await
        .unwrap();
    // Mid-turn, the listing already counts every message.
    let mid = listed(runs.path());
    assert_eq!(mid.message_count, 3);
    assert!(mid.updated_at >= started.updated_at);
    assert_eq!(mid.last_message.as_deref(), Some("read the file"));

    store
        .append(&k, &[Entry::message(Message::assistant("it says hi"))])
        .await
        .unwrap();
    // Non-message entries are not counted.
    store
        .append(&k, &[Entry::other("compaction", Default::default())])
        .await
        .unwrap();
    let ended = listed(runs.path());
    assert_eq!(ended.message_count, 4);
    assert_eq!(ended.message_count, message_entries(&dir));
    assert_eq!(ended.last_message.as_deref(), Some("read the file"));
    // session.json was never replaced nor rewritten: appends write the summary only.
    assert_eq!(inode_and_bytes(&dir.join("session.json")), session_json);
    assert_eq!(mode(&dir.join(".summary.json")), 0o600);

    // session.json holds none of the listing fields: they would go stale there.
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("session.json")).unwrap()).unwrap();
    for field in ["updatedAt", "lastMessage", "messageCount"] {
        assert!(written.get(field).is_none(), "{field} in {written}");
    }

    // A summary torn by a crash in the middle of its write is not used: the listing
    // counts the conversation instead.
    let summary_path = dir.join(".summary.json");
    let mut torn = std::fs::read(&summary_path).unwrap();
    let half = torn.len() / 2;
    torn[half..].fill(b'x');
    std::fs::write(&summary_path, &torn).unwrap();
    let fallback = listed(runs.path());
    assert_eq!(fallback.session_id, "s1");
    assert_eq!(fallback.message_count, 4);
    assert_eq!(fallback.last_message.as_deref(), Some("read the file"));

    // A new writer that appends without loading counts the conversation first.
    std::fs::remove_file(&summary_path).unwrap();
    drop(_lock);
    drop(store);
    let appender = create_run_store(&dir);
    appender.append(&k, &[user("one more")]).await.unwrap();
    let counted = listed(runs.path());
    assert_eq!(counted.message_count, 5);
    assert_eq!(counted.last_message.as_deref(), Some("one more"));
    assert_eq!(counted.first_message.as_deref(), Some("read the file"));
    drop(appender);

    // A new writer heals the summary from the conversation when it loads the session.
    std::fs::write(&summary_path, &torn).unwrap();
    let reopened = create_run_store(&dir);
    let _lock = reopened.lock("s1").await.unwrap();
    reopened.load(&k).await.unwrap().unwrap();
    let healed = listed(runs.path());
    assert_eq!(healed.message_count, 5);
    assert_eq!(healed.last_message.as_deref(), Some("one more"));
    // One run's summary, as the chat shows it when resuming.
    assert_eq!(reprise_runs::summarize_run(&dir), Some(healed.clone()));

    // Deleting the session takes its summary too: the run is no longer listed.
    reopened.delete(&k).await.unwrap();
    assert!(!summary_path.exists());
    let list = reprise_runs::list_runs(runs.path()).unwrap();
    assert!(list.runs.is_empty(), "{:?}", list.runs);
    assert_eq!(reprise_runs::summarize_run(&dir), None);
}

#[tokio::test]
async fn a_writer_that_loads_rewrites_a_summary_only_when_it_disagrees() {
    let runs = tempfile::tempdir().unwrap();
    let dir = runs.path().join("2026-11-30T10-00-00-000Z");
    let k = key("s1");
    let store = create_run_store(&dir);
    let lock = store.lock("s1").await.unwrap();
    store
        .append(
            &k,
            &[user("first"), Entry::message(Message::assistant("ok"))],
        )
        .await
        .unwrap();
    store.append(&k, &[user("second")]).await.unwrap();
    drop(lock);
    drop(store);
    let summary_path = dir.join(".summary.json");
    let written = inode_and_bytes(&summary_path);

    let reopen_and_load = || async {
        let store = create_run_store(&dir);
        let lock = store.lock("s1").await.unwrap();
        store.load(&k).await.unwrap().unwrap();
        drop(lock);
    };
    // A summary that agrees with the conversation is left as it is: not even
    // written again (its time would change).
    let modified = || {
        std::fs::metadata(&summary_path)
            .unwrap()
            .modified()
            .unwrap()
    };
    let before = modified();
    std::thread::sleep(std::time::Duration::from_millis(20));
    reopen_and_load().await;
    assert_eq!(inode_and_bytes(&summary_path), written);
    assert_eq!(modified(), before);

    // The summary is a JSON line and its FNV-1a hash.
    let write_summary = |summary: &serde_json::Value| {
        let json = serde_json::to_vec(summary).unwrap();
        let hash = json.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, &byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
        });
        let mut bytes = json;
        bytes.extend_from_slice(format!("\n{hash:016x}\n").as_bytes());
        std::fs::write(&summary_path, bytes).unwrap();
    };
    // One without its last message (as an older version wrote it) is healed.
    let json_end = written.1.iter().position(|&byte| byte == b'\n').unwrap();
    let mut summary: serde_json::Value = serde_json::from_slice(&written.1[..json_end]).unwrap();
    summary.as_object_mut().unwrap().remove("lastMessage");
    write_summary(&summary);
    assert_eq!(listed(runs.path()).last_message, None);
    reopen_and_load().await;
    let healed = listed(runs.path());
    assert_eq!(healed.last_message.as_deref(), Some("second"));
    assert_eq!(healed.first_message.as_deref(), Some("first"));
    assert_eq!(healed.message_count, 3);

    // One that counts another number of messages is healed too.
    summary["messageCount"] = 7.into();
    summary["lastMessage"] = "second".into();
    write_summary(&summary);
    assert_eq!(listed(runs.path()).message_count, 7);
    reopen_and_load().await;
    assert_eq!(listed(runs.path()).message_count, 3);
}
