//! The conformance suite every [`SessionStore`] passes, written once.
//!
//! Enabled by the `conformance` cargo feature. A new store (SQLite, PostgreSQL, …)
//! runs it from one of its own tests:
//!
//! ```text
//! use reprise_session::conformance::{Capabilities, Subject, run_all};
//!
//! #[tokio::test]
//! async fn my_store_conforms() {
//!     run_all(
//!         &|| Subject { store: Arc::new(MyStore::new(fresh_db())), reopen: None },
//!         Capabilities::FULL,
//!     )
//!     .await;
//! }
//! ```
//!
//! Each check takes a fresh, empty store from the factory and panics (with the check's
//! name) when the store does not behave as [`SessionStore`] documents.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use reprise_message::{Entry, Message};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::store::id::SessionKey;
use crate::store::session_store::{
    AppendReport, ForkOrigin, SessionFork, SessionStore, StoreError,
};

/// A store to check, with a way to open a second, independent handle on its data.
pub struct Subject {
    /// A new, empty store.
    pub store: Arc<dyn SessionStore>,
    /// Opens another store instance over the same data: a second writer, and a check
    /// that data outlives the instance that wrote it. `None` for stores whose data lives
    /// in the instance (in-memory).
    pub reopen: Option<Arc<dyn Fn() -> Arc<dyn SessionStore> + Send + Sync>>,
}

/// What a store's layout allows; a check that needs more asserts the clear refusal.
#[derive(Clone, Copy, Debug)]
pub struct Capabilities {
    /// Holds more than one session (a run folder holds one).
    pub many_sessions: bool,
    /// Implements [`SessionStore::fork`] (a run folder forks with `fork_run`).
    pub fork: bool,
}

impl Capabilities {
    /// Every capability.
    pub const FULL: Capabilities = Capabilities {
        many_sessions: true,
        fork: true,
    };
}

/// Runs every check, each on a fresh store from `make`.
pub async fn run_all(make: &(dyn Fn() -> Subject + Sync), caps: Capabilities) {
    append_then_load_in_order(make()).await;
    load_of_missing_is_none(make()).await;
    duplicate_uuids_are_skipped(make()).await;
    unknown_fields_survive(make()).await;
    start_records_tell_started_calls_from_the_others(make()).await;
    approval_records_read_back_after_a_reopen(make()).await;
    concurrent_appends_all_land(make()).await;
    subkeys_are_listed_loaded_and_create_the_session(make()).await;
    list_sessions_shows_each_session(make(), caps).await;
    delete_subkey_then_session(make()).await;
    second_lock_fails_and_holder_writes(make()).await;
    invalid_ids_are_refused(make()).await;
    data_outlives_the_instance(make()).await;
    second_session_per_store(make(), caps).await;
    fork_whole_and_prefix(make(), caps).await;
}

fn key(id: &str) -> SessionKey {
    SessionKey::session(id).unwrap()
}

fn sub(id: &str, name: &str) -> SessionKey {
    SessionKey::subagent(id, name).unwrap()
}

fn user(text: &str) -> Entry {
    Entry::message(Message::user(text))
}

fn entries(n: usize, tag: &str) -> Vec<Entry> {
    (0..n).map(|i| user(&format!("{tag} {i}"))).collect()
}

async fn loaded(store: &dyn SessionStore, key: &SessionKey) -> Vec<Entry> {
    store
        .load(key)
        .await
        .unwrap_or_else(|error| panic!("load {key}: {error}"))
        .unwrap_or_else(|| panic!("load {key}: missing"))
        .entries
}

/// Entries come back in the order appended, across batches.
pub async fn append_then_load_in_order(subject: Subject) {
    let store = subject.store;
    let all = entries(5, "order");
    let first = store.append(&key("s1"), &all[..2]).await.unwrap();
    assert_eq!(
        first,
        AppendReport {
            written: 2,
            skipped: 0
        }
    );
    store.append(&key("s1"), &all[2..]).await.unwrap();
    assert_eq!(loaded(&*store, &key("s1")).await, all);
    store.append(&key("s1"), &[]).await.unwrap();
    assert_eq!(loaded(&*store, &key("s1")).await, all);
}

/// A session never written loads as `None`.
pub async fn load_of_missing_is_none(subject: Subject) {
    let store = subject.store;
    assert!(store.load(&key("missing")).await.unwrap().is_none());
    assert!(store.load(&sub("missing", "a")).await.unwrap().is_none());
    assert!(store.list_subkeys("missing").await.unwrap().is_empty());
}

/// Appending a uuid the transcript holds is a no-op, within a batch and across them.
pub async fn duplicate_uuids_are_skipped(subject: Subject) {
    let store = subject.store;
    let [a, b, c] = [user("a"), user("b"), user("c")];
    store
        .append(&key("s1"), &[a.clone(), b.clone()])
        .await
        .unwrap();
    let report = store
        .append(&key("s1"), &[b.clone(), c.clone(), c.clone(), a.clone()])
        .await
        .unwrap();
    assert_eq!(
        report,
        AppendReport {
            written: 1,
            skipped: 3
        }
    );
    assert_eq!(loaded(&*store, &key("s1")).await, vec![a, b, c]);
}

/// Fields the types do not name, and entries of other kinds, come back unchanged.
pub async fn unknown_fields_survive(subject: Subject) {
    let store = subject.store;
    let mut message = Message::assistant("hi");
    message
        .extra
        .insert("reasoning_content".into(), json!("thinking…"));
    let mut entry = Entry::message(message);
    entry.extra.insert("vendor".into(), json!({"x": [1, 2]}));
    let mut fields = Map::new();
    fields.insert("summary".into(), Value::String("so far".into()));
    let other = Entry::other("compaction", fields);
    let parts: Message = serde_json::from_value(json!({
        "role": "user",
        "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "x"}}]
    }))
    .unwrap();
    let all = vec![entry, other, Entry::message(parts)];
    store.append(&key("s1"), &all).await.unwrap();
    assert_eq!(loaded(&*store, &key("s1")).await, all);
}

/// A turn cut between a call's start record and its result reads back as cut, with
/// the started call told from the one that never started, after a reopen too.
pub async fn start_records_tell_started_calls_from_the_others(subject: Subject) {
    let reply = Entry::message(Message::assistant_tool_calls(
        None,
        vec![
            crate::ToolCall::function("c1", "pay", "{}"),
            crate::ToolCall::function("c2", "pay", "{}"),
        ],
    ));
    let record = crate::tool_start_entry(&[crate::StartedCall {
        entry: reply.uuid,
        tool_call_id: "c1".into(),
        tool: "pay".into(),
        allowed_by: "--yes".into(),
        idempotency_key: "k1".into(),
        rerun: false,
    }]);
    let all = vec![user("pay"), reply.clone(), record];
    subject.store.append(&key("s1"), &all).await.unwrap();
    let check = |history: Vec<Entry>| {
        assert_eq!(history, all);
        assert_eq!(crate::cut_turn(&history), Some(reply.uuid));
        assert!(crate::was_started(&history, reply.uuid, "c1"));
        assert!(!crate::was_started(&history, reply.uuid, "c2"));
    };
    check(loaded(&*subject.store, &key("s1")).await);
    if let Some(reopen) = subject.reopen {
        drop(subject.store);
        check(loaded(&*reopen(), &key("s1")).await);
    }
}

/// A turn stopped with a call waiting for a decision, and the decision recorded by a
/// second writer, read back as they were written: the turn is still the cut one,
/// the call and its decision readable, after a reopen too.
pub async fn approval_records_read_back_after_a_reopen(subject: Subject) {
    let arguments = r#"{"amount":5}"#;
    let reply = Entry::message(Message::assistant_tool_calls(
        None,
        vec![crate::ToolCall::function("c1", "pay", arguments)],
    ));
    let waiting = crate::approval_pending_entry(&[crate::AwaitingCall {
        entry: reply.uuid,
        tool_call_id: "c1".into(),
        tool: "pay".into(),
        arguments_hash: crate::arguments_hash(arguments),
    }]);
    let first = vec![user("pay"), reply.clone(), waiting];
    subject.store.append(&key("s1"), &first).await.unwrap();
    let decided = crate::DecidedCall {
        entry: reply.uuid,
        tool_call_id: "c1".into(),
        arguments_hash: crate::arguments_hash(arguments),
        decided_by: "ops".into(),
        decision: crate::CallDecision::Allow,
    };
    let decision = crate::approval_decision_entry(&decided);
    let second = match &subject.reopen {
        Some(reopen) => reopen(),
        None => Arc::clone(&subject.store),
    };
    second
        .append(&key("s1"), std::slice::from_ref(&decision))
        .await
        .unwrap();
    let mut all = first;
    all.push(decision);
    let check = |history: Vec<Entry>| {
        assert_eq!(history, all);
        assert_eq!(crate::cut_turn(&history), Some(reply.uuid));
        assert_eq!(crate::awaiting_calls(&history[2])[0].tool_call_id, "c1");
        assert_eq!(crate::decided_call(&history[3]).as_ref(), Some(&decided));
    };
    check(loaded(&*subject.store, &key("s1")).await);
    if let Some(reopen) = subject.reopen {
        drop(subject.store);
        check(loaded(&*reopen(), &key("s1")).await);
    }
}

/// Appends racing on one store all land, once each.
pub async fn concurrent_appends_all_land(subject: Subject) {
    let store = subject.store;
    let all = entries(16, "race");
    let tasks = all.iter().map(|entry| {
        let store = Arc::clone(&store);
        let entry = entry.clone();
        async move { store.append(&key("s1"), &[entry]).await }
    });
    for result in futures_join_all(tasks).await {
        result.unwrap();
    }
    let mut got = loaded(&*store, &key("s1")).await;
    got.sort_by_key(|entry| entry.uuid);
    let mut want = all;
    want.sort_by_key(|entry| entry.uuid);
    assert_eq!(got, want);
}

async fn futures_join_all<F: std::future::Future>(
    futures: impl Iterator<Item = F>,
) -> Vec<F::Output> {
    // Polls every future to completion concurrently without a runtime dependency.
    let mut pinned: Vec<_> = futures.map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = pinned.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in pinned.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    std::task::Poll::Ready(value) => *output = Some(value),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().map(Option::unwrap).collect()
}

/// Subagent transcripts are separate, listed sorted, and their first append creates
/// the session (with an empty main transcript).
pub async fn subkeys_are_listed_loaded_and_create_the_session(subject: Subject) {
    let store = subject.store;
    let for_b = entries(2, "b");
    let for_a = entries(1, "a");
    store.append(&sub("s1", "worker-b"), &for_b).await.unwrap();
    store.append(&sub("s1", "worker-a"), &for_a).await.unwrap();
    assert_eq!(
        store.list_subkeys("s1").await.unwrap(),
        vec![sub("s1", "worker-a"), sub("s1", "worker-b")]
    );
    assert_eq!(loaded(&*store, &sub("s1", "worker-b")).await, for_b);
    assert_eq!(loaded(&*store, &sub("s1", "worker-a")).await, for_a);
    assert!(loaded(&*store, &key("s1")).await.is_empty());
    let ids: Vec<String> = store
        .list_sessions()
        .await
        .unwrap()
        .into_iter()
        .map(|info| info.id)
        .collect();
    assert_eq!(ids, vec!["s1".to_owned()]);
}

/// Every session shows up in `list_sessions`, with sane times.
pub async fn list_sessions_shows_each_session(subject: Subject, caps: Capabilities) {
    let store = subject.store;
    assert!(store.list_sessions().await.unwrap().is_empty());
    let ids: &[&str] = if caps.many_sessions {
        &["s1", "s2", "s3"]
    } else {
        &["s1"]
    };
    for id in ids {
        store.append(&key(id), &entries(1, id)).await.unwrap();
    }
    let mut infos = store.list_sessions().await.unwrap();
    infos.sort_by(|a, b| a.id.cmp(&b.id));
    let listed: Vec<&str> = infos.iter().map(|info| info.id.as_str()).collect();
    assert_eq!(listed, ids);
    for info in &infos {
        assert!(info.updated_at >= info.created_at, "{info:?}");
        assert_eq!(info.forked_from, None);
    }
}

/// Deleting a subkey leaves the rest; deleting the session removes its subkeys too.
pub async fn delete_subkey_then_session(subject: Subject) {
    let store = subject.store;
    let main = entries(2, "main");
    store.append(&key("s1"), &main).await.unwrap();
    store
        .append(&sub("s1", "x"), &entries(1, "x"))
        .await
        .unwrap();
    store
        .append(&sub("s1", "y"), &entries(1, "y"))
        .await
        .unwrap();
    store.delete(&sub("s1", "x")).await.unwrap();
    assert!(store.load(&sub("s1", "x")).await.unwrap().is_none());
    assert_eq!(
        store.list_subkeys("s1").await.unwrap(),
        vec![sub("s1", "y")]
    );
    assert_eq!(loaded(&*store, &key("s1")).await, main);

    store.delete(&key("s1")).await.unwrap();
    assert!(store.load(&key("s1")).await.unwrap().is_none());
    assert!(store.load(&sub("s1", "y")).await.unwrap().is_none());
    assert!(store.list_subkeys("s1").await.unwrap().is_empty());
    assert!(store.list_sessions().await.unwrap().is_empty());
    // A deleted session starts over empty, uuids included.
    store.append(&key("s1"), &main[..1]).await.unwrap();
    assert_eq!(loaded(&*store, &key("s1")).await, main[..1].to_vec());
    // Deleting what is not there is not an error.
    store.delete(&key("never")).await.unwrap();
}

/// One writer: a second lock fails at once naming the session; the holder still
/// appends; another instance can neither lock nor append until the guard drops.
pub async fn second_lock_fails_and_holder_writes(subject: Subject) {
    let store = subject.store;
    let guard = store.lock("s1").await.unwrap();
    match store.lock("s1").await {
        Err(StoreError::Locked { session, .. }) => assert_eq!(session, "s1"),
        other => panic!("second lock: expected Locked, got {other:?}"),
    }
    let mine = entries(1, "holder");
    store.append(&key("s1"), &mine).await.unwrap();
    if let Some(reopen) = &subject.reopen {
        let other = reopen();
        match other.lock("s1").await {
            Err(StoreError::Locked { session, pid, .. }) => {
                assert_eq!(session, "s1");
                assert_eq!(pid, Some(std::process::id()));
            }
            result => panic!("lock from another instance: expected Locked, got {result:?}"),
        }
        let theirs = entries(1, "intruder");
        assert!(matches!(
            other.append(&key("s1"), &theirs).await,
            Err(StoreError::Locked { .. })
        ));
        // Readers never lock.
        assert_eq!(loaded(&*other, &key("s1")).await, mine);
        drop(guard);
        let guard = other.lock("s1").await.unwrap();
        other.append(&key("s1"), &theirs).await.unwrap();
        drop(guard);
    } else {
        drop(guard);
    }
    // Released: a new lock succeeds.
    drop(store.lock("s1").await.unwrap());
}

/// Ids that could climb out of a directory are refused before anything happens.
pub async fn invalid_ids_are_refused(subject: Subject) {
    let store = subject.store;
    let long = "a".repeat(200);
    for bad in ["../x", "/abs", "", long.as_str(), "a/b", ".hidden", "a\0b"] {
        assert!(
            matches!(store.list_subkeys(bad).await, Err(StoreError::InvalidId(_))),
            "list_subkeys({bad:?})"
        );
        assert!(
            matches!(store.lock(bad).await, Err(StoreError::InvalidId(_))),
            "lock({bad:?})"
        );
        assert!(
            matches!(
                store.fork(SessionFork::whole(bad, "ok")).await,
                Err(StoreError::InvalidId(_))
            ),
            "fork from {bad:?}"
        );
        assert!(
            matches!(
                store.fork(SessionFork::whole("ok", bad)).await,
                Err(StoreError::InvalidId(_))
            ),
            "fork to {bad:?}"
        );
        assert!(SessionKey::session(bad).is_err(), "key {bad:?}");
        assert!(SessionKey::subagent("ok", bad).is_err(), "subkey {bad:?}");
    }
    assert!(store.list_sessions().await.unwrap().is_empty());
}

/// What one instance wrote, another reads (stores whose data outlives an instance).
pub async fn data_outlives_the_instance(subject: Subject) {
    let Some(reopen) = subject.reopen else { return };
    let all = entries(3, "durable");
    subject.store.append(&key("s1"), &all).await.unwrap();
    subject
        .store
        .append(&sub("s1", "w"), &all[..1])
        .await
        .unwrap();
    drop(subject.store);
    let again = reopen();
    assert_eq!(loaded(&*again, &key("s1")).await, all);
    assert_eq!(loaded(&*again, &sub("s1", "w")).await, all[..1].to_vec());
    // The reopened store still de-duplicates against what is on disk.
    let report = again.append(&key("s1"), &all).await.unwrap();
    assert_eq!(
        report,
        AppendReport {
            written: 0,
            skipped: 3
        }
    );
}

/// Sessions are separate; a store that holds one session refuses a second clearly.
pub async fn second_session_per_store(subject: Subject, caps: Capabilities) {
    let store = subject.store;
    let one = entries(1, "one");
    let two = entries(1, "two");
    store.append(&key("s1"), &one).await.unwrap();
    if caps.many_sessions {
        store.append(&key("s2"), &two).await.unwrap();
        assert_eq!(loaded(&*store, &key("s1")).await, one);
        assert_eq!(loaded(&*store, &key("s2")).await, two);
    } else {
        match store.append(&key("s2"), &two).await {
            Err(StoreError::Unsupported(message)) => {
                assert!(
                    message.contains("s1") && message.contains("s2"),
                    "{message}"
                );
            }
            other => panic!("second session: expected Unsupported, got {other:?}"),
        }
        assert!(store.load(&key("s2")).await.unwrap().is_none());
        assert_eq!(loaded(&*store, &key("s1")).await, one);
    }
}

/// Fork copies all or a prefix, records where from, leaves the source alone and
/// never overwrites.
pub async fn fork_whole_and_prefix(subject: Subject, caps: Capabilities) {
    let store = subject.store;
    let all = entries(4, "src");
    store.append(&key("src"), &all).await.unwrap();
    store.append(&sub("src", "w"), &all[..1]).await.unwrap();
    if !caps.fork {
        match store.fork(SessionFork::whole("src", "copy")).await {
            Err(StoreError::Unsupported(message)) => assert!(message.contains("fork")),
            other => panic!("fork: expected Unsupported, got {other:?}"),
        }
        return;
    }
    store
        .fork(SessionFork::whole("src", "whole"))
        .await
        .unwrap();
    assert_eq!(loaded(&*store, &key("whole")).await, all);
    assert_eq!(loaded(&*store, &sub("whole", "w")).await, all[..1].to_vec());
    let cut = all[1].uuid;
    store
        .fork(SessionFork::up_to("src", "part", cut))
        .await
        .unwrap();
    assert_eq!(loaded(&*store, &key("part")).await, all[..2].to_vec());
    assert_eq!(loaded(&*store, &key("src")).await, all);

    let infos = store.list_sessions().await.unwrap();
    let origin = |id: &str| {
        infos
            .iter()
            .find(|info| info.id == id)
            .unwrap_or_else(|| panic!("{id} not listed"))
            .forked_from
            .clone()
    };
    assert_eq!(
        origin("whole"),
        Some(ForkOrigin {
            session: "src".into(),
            entry: None
        })
    );
    assert_eq!(
        origin("part"),
        Some(ForkOrigin {
            session: "src".into(),
            entry: Some(cut)
        })
    );
    assert_eq!(origin("src"), None);

    assert!(matches!(
        store.fork(SessionFork::whole("src", "part")).await,
        Err(StoreError::AlreadyExists { .. })
    ));
    assert_eq!(loaded(&*store, &key("part")).await, all[..2].to_vec());
    assert!(matches!(
        store.fork(SessionFork::whole("nothing", "n2")).await,
        Err(StoreError::NotFound { .. })
    ));
    let unknown = Uuid::now_v7();
    assert!(matches!(
        store.fork(SessionFork::up_to("src", "n3", unknown)).await,
        Err(StoreError::EntryNotFound { entry, .. }) if entry == unknown
    ));
    assert!(store.load(&key("n3")).await.unwrap().is_none());
    // The fork is its own session from here on.
    let more = entries(1, "more");
    store.append(&key("part"), &more).await.unwrap();
    assert_eq!(loaded(&*store, &key("src")).await, all);
}
