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
