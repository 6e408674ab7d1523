//! A database written by an earlier schema reads the same after the newer migrations,
//! and what is appended afterwards comes after what was there.

use std::time::Duration;

use reprise_session::{Entry, Message, SessionKey, SessionStore};

use crate::support::{StoreOn, TestDb};

fn key(id: &str) -> SessionKey {
    SessionKey::session(id).unwrap()
}

fn text(entry: &Entry) -> String {
    entry.as_message().unwrap().text()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_written_before_the_shared_appends_migration_stay_first_and_whole() {
    let db = TestDb::fresh().await;
    let mut connection = db.connection().await;
    // The schema as the first two migrations left it, written through its own
    // append function: seq counted per transcript.
    reprise_postgres::MIGRATOR
        .run_to(2, &mut connection)
        .await
        .unwrap();
    let old: Vec<Entry> = ["one", "two", "three"]
        .iter()
        .map(|text| Entry::message(Message::user(*text)))
        .collect();
    for (session, subagent) in [("a", ""), ("b", ""), ("a", "helper")] {
        let bodies: Vec<String> = old
            .iter()
            .map(|entry| serde_json::to_string(entry).unwrap())
            .collect();
        let uuids: Vec<uuid::Uuid> = old.iter().map(|entry| entry.uuid).collect();
        sqlx::query("SELECT * FROM reprise_append($1, $2, NULL, '{}', $3, $4, $5, 'three')")
            .bind(session)
            .bind(subagent)
            .bind(&uuids)
            .bind(&bodies)
            .bind([true, true, true])
            .execute(&mut connection)
            .await
            .unwrap();
    }

    let store = db.store(Duration::from_secs(30)).await;
    let later = Entry::message(Message::user("four"));
    let report = store
        .append(&key("a"), std::slice::from_ref(&later))
        .await
        .unwrap();
    assert_eq!(report.written, 1);
    // The old uuids are still known: a repeat writes nothing.
    let report = store.append(&key("b"), &old).await.unwrap();
    assert_eq!((report.written, report.skipped), (0, 3));

    let loaded = store.load(&key("a")).await.unwrap().unwrap();
    let texts: Vec<String> = loaded.entries.iter().map(text).collect();
    assert_eq!(texts, ["one", "two", "three", "four"]);
    assert!(loaded.warnings.is_empty());
    let helper = SessionKey::subagent("a", "helper").unwrap();
    assert_eq!(store.load(&helper).await.unwrap().unwrap().entries, old);
    assert_eq!(store.list_subkeys("a").await.unwrap(), vec![helper.clone()]);
    let summary = store.summary("a").await.unwrap().unwrap();
    assert_eq!(summary.message_count, 4);
    assert_eq!(summary.last_message.as_deref(), Some("four"));

    // Deleting still takes the transcripts' entries with them.
    store.delete(&helper).await.unwrap();
    assert!(store.load(&helper).await.unwrap().is_none());
    store.delete(&key("a")).await.unwrap();
    assert!(store.load(&key("a")).await.unwrap().is_none());
    let left: i64 =
        sqlx::query_scalar("SELECT count(*) FROM reprise_entries WHERE session_id = 'a'")
            .fetch_one(&mut connection)
            .await
            .unwrap();
    assert_eq!(left, 0);
    assert_eq!(store.load(&key("b")).await.unwrap().unwrap().entries, old);
}

/// What the previous release's append of one entry (`reprise_append_entry`, without a
/// lease) answers for a message of `text` to `session`: written, holder host and pid.
async fn append_as_before(
    connection: &mut sqlx::PgConnection,
    session: &str,
    text: &str,
) -> (Option<i32>, Option<String>, Option<i32>) {
    let entry = Entry::message(Message::user(text));
    sqlx::query_as(
        "SELECT written, holder_host, holder_pid \
         FROM reprise_append_entry($1, '', NULL, '{}', $2, $3, true, $4)",
    )
    .bind(session)
    .bind(entry.uuid)
    .bind(serde_json::to_string(&entry).unwrap())
    .bind(text)
    .fetch_one(connection)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_listed_before_the_listing_index_changed_keep_their_order() {
    let db = TestDb::fresh().await;
    let mut connection = db.connection().await;
    reprise_postgres::MIGRATOR
        .run_to(5, &mut connection)
        .await
        .unwrap();
    // Written by the previous release's append, at times set apart by less and by
    // more than a hundredth of a second.
    for (id, us) in [("old-a", 3_000), ("old-b", 1_000), ("old-c", 12_000)] {
        append_as_before(&mut connection, id, id).await;
        sqlx::query(
            "UPDATE reprise_sessions SET updated_at = \
             timestamptz '2026-06-01 12:00:00+00' + $2 * interval '1 microsecond' WHERE id = $1",
        )
        .bind(id)
        .bind(us)
        .execute(&mut connection)
        .await
        .unwrap();
    }

    let store = db.store(Duration::from_secs(30)).await;
    crate::support::assert_listing_times_agree(&db).await;
    let listed = crate::support::listed_ids(&store).await;
    assert_eq!(listed, ["old-c", "old-a", "old-b"]);

    // A worker of the previous release still appends through the function it knows
    // (a rolling upgrade): its appends keep the listing in order and are still fenced.
    let (written, host, _) = append_as_before(&mut connection, "old-b", "later").await;
    assert_eq!((written, host), (Some(1), None));
    crate::support::assert_listing_times_agree(&db).await;
    assert_eq!(store.list_sessions().await.unwrap()[0].id, "old-b");
    let summary = store.summary("old-b").await.unwrap().unwrap();
    assert_eq!(summary.message_count, 2);
    assert_eq!(summary.last_message.as_deref(), Some("later"));

    let _held = store.lock("old-a").await.unwrap();
    let (written, host, pid) = append_as_before(&mut connection, "old-a", "refused").await;
    assert_eq!(written, None);
    assert!(host.is_some());
    assert_eq!(pid, Some(i32::try_from(std::process::id()).unwrap()));
    let loaded = store.load(&key("old-a")).await.unwrap().unwrap();
    assert_eq!(loaded.entries.len(), 1);
}
