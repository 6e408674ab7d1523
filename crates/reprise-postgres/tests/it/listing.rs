//! Listing in pages, and rows that do not decode.

use std::collections::HashSet;
use std::time::Duration;

use reprise_session::{Entry, Message, SessionKey, SessionStore};

use crate::support::TestDb;

fn key(id: &str) -> SessionKey {
    SessionKey::session(id).unwrap()
}

fn entry(text: &str) -> Entry {
    Entry::message(Message::user(text))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_listed_newest_first_in_pages() {
    let db = TestDb::fresh().await;
    let store = db.store(Duration::from_secs(30)).await;
    for id in ["a", "b", "c", "d", "e"] {
        store.append(&key(id), &[entry(id)]).await.unwrap();
    }
    // Touching `b` makes it the newest.
    store.append(&key("b"), &[entry("again")]).await.unwrap();

    let mut seen = Vec::new();
    let mut cursor = None;
    let mut pages = 0;
    loop {
        let (page, next) = store.list_sessions_page(2, cursor.as_ref()).await.unwrap();
        assert!(page.len() <= 2);
        seen.extend(page.into_iter().map(|info| info.id));
        pages += 1;
        match next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, ["b", "e", "d", "c", "a"]);
    assert!(pages >= 3);
    let all: Vec<String> = store
        .list_sessions()
        .await
        .unwrap()
        .into_iter()
        .map(|info| info.id)
        .collect();
    assert_eq!(all, seen);
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_that_does_not_decode_is_skipped_with_a_warning() {
    let db = TestDb::fresh().await;
    let store = db.store(Duration::from_secs(30)).await;
    let first = entry("first");
    store
        .append(&key("s"), std::slice::from_ref(&first))
        .await
        .unwrap();
    let mut connection = db.connection().await;
    sqlx::query(
        "INSERT INTO reprise_entries (session_id, subagent, seq, uuid, body) \
         VALUES ('s', '', 2, gen_random_uuid(), '{\"not\": \"an entry\"}')",
    )
    .execute(&mut connection)
    .await
    .unwrap();
    let last = entry("last");
    store
        .append(&key("s"), std::slice::from_ref(&last))
        .await
        .unwrap();

    let loaded = store.load(&key("s")).await.unwrap().unwrap();
    assert_eq!(loaded.entries, vec![first, last]);
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    let warning = &loaded.warnings[0];
    assert_eq!(warning.line, 2);
    assert_eq!(warning.file.to_str(), Some("postgres:s"));
}
