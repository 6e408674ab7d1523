//! Every string the run folders keep round-trips through the database exactly: a
//! message, the listing's first and last messages, a title and tags holding U+0000
//! (which a PostgreSQL `text` value cannot hold) or anything else.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use reprise_postgres::{PgRunCatalog, PgSessionStore};
use reprise_redact::Redactor;
use reprise_runs::{RunCatalog, RunSearch, SearchQuery, clean_tag, clean_title, last_message_text};
use reprise_session::{Entry, Message, SessionKey, SessionStore};

use crate::support::{StoreOn, TestDb};

fn key(id: &str) -> SessionKey {
    SessionKey::session(id).unwrap()
}

/// Strings rich in U+0000, in the noncharacter the store escapes it with, and in
/// what follows that escape, besides any string at all.
fn hostile_text() -> impl Strategy<Value = String> {
    let tricky = prop_oneof![
        Just('\0'),
        Just('\u{FDD0}'),
        Just('0'),
        Just(' '),
        Just('\\'),
        any::<char>()
    ];
    prop_oneof![
        any::<String>(),
        proptest::collection::vec(tricky, 0..24).prop_map(String::from_iter),
    ]
}

/// Writes `text` as a message, a title and a tag of session `id`, and checks that
/// each reads back as the run folders keep it.
async fn round_trip(store: &PgSessionStore, id: &str, text: &str) {
    let message = Entry::message(Message::user(text));
    store
        .append(&key(id), std::slice::from_ref(&message))
        .await
        .unwrap();
    let loaded = store.load(&key(id)).await.unwrap().unwrap();
    assert_eq!(loaded.entries, vec![message]);

    let summary = store.summary(id).await.unwrap().unwrap();
    let listed =
        (!text.trim().is_empty()).then(|| last_message_text(&Redactor::new().redact(text)));
    assert_eq!(summary.first_message, listed);
    assert_eq!(summary.last_message, listed);

    let named = store.set_title(id, text).await.unwrap().unwrap();
    assert_eq!(named.title, clean_title(text));
    let titles = store.titles().await.unwrap();
    let title = titles
        .iter()
        .find(|(run, _)| run == id)
        .map(|(_, t)| t.clone());
    assert_eq!(title, clean_title(text));

    if let Ok(tag) = clean_tag(text) {
        let tagged = store
            .change_tags(id, std::slice::from_ref(&tag), &[])
            .await
            .unwrap()
            .unwrap();
        assert_eq!(tagged.tags, std::slice::from_ref(&tag));
        let untagged = store.change_tags(id, &[], &[tag]).await.unwrap().unwrap();
        assert!(untagged.tags.is_empty());
    }
}

#[test]
fn any_string_round_trips_through_the_database() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let db = runtime.block_on(TestDb::fresh());
    let store = runtime.block_on(db.store(Duration::from_secs(30)));
    let sessions = AtomicUsize::new(0);
    let config = ProptestConfig {
        cases: 96,
        ..ProptestConfig::default()
    };
    proptest!(config, |(text in hostile_text())| {
        let id = format!("s{}", sessions.fetch_add(1, Ordering::Relaxed));
        runtime.block_on(round_trip(&store, &id, &text));
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_and_a_title_with_nul_are_listed_found_and_exported() {
    let db = TestDb::fresh().await;
    let store = db.store(Duration::from_secs(30)).await;
    let text = "before\0after \u{FDD0}0";
    let message = Entry::message(Message::user(text));
    store
        .append(&key("nul"), std::slice::from_ref(&message))
        .await
        .unwrap();
    store.set_title("nul", "a\0title").await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let catalog = PgRunCatalog::new(dir.path().join("runs"), store.clone());
    let runs = catalog.list().await.unwrap().runs;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].first_message.as_deref(), Some(text));
    assert_eq!(runs[0].last_message.as_deref(), Some(text));
    assert_eq!(runs[0].title.as_deref(), Some("a\0title"));

    // Found by its title and by a search for text around the NUL.
    let found = catalog.find("a\0title").await.unwrap();
    assert_eq!(found.name(), "nul");
    for pattern in ["\0after", "after \u{FDD0}0", "E\0A"] {
        let query = SearchQuery {
            ignore_case: pattern == "E\0A",
            ..SearchQuery::literal(pattern)
        };
        let hits = catalog.search(RunSearch::new(&runs, &query)).await.unwrap();
        assert_eq!(hits.len(), 1, "{pattern:?}");
    }
    assert!(
        catalog
            .search(RunSearch::new(&runs, &SearchQuery::literal("before\0\0")))
            .await
            .unwrap()
            .is_empty()
    );

    // An export reads the same title and message.
    let record = catalog.record(&found).await.unwrap();
    assert_eq!(record.session["title"], "a\0title");
    assert_eq!(record.main, vec![message]);
}
