//! Listing in pages, and rows that do not decode.

use std::collections::HashSet;
use std::time::Duration;

use reprise_session::{Entry, Message, SessionFork, SessionKey, SessionStore, StoreError};
use serde_json::Map;

use crate::support::{StoreOn, TestDb};

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
    let all = crate::support::listed_ids(&store).await;
    assert_eq!(all, seen);
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 5);
}

/// Every page of `store`'s listing, `size` sessions at a time.
async fn listed_in_pages(store: &reprise_postgres::PgSessionStore, size: u32) -> Vec<String> {
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let (page, next) = store
            .list_sessions_page(size, cursor.as_ref())
            .await
            .unwrap();
        seen.extend(page.into_iter().map(|info| info.id));
        match next {
            Some(next) => cursor = Some(next),
            None => return seen,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_updated_within_one_hundredth_of_a_second_are_listed_by_their_time() {
    let db = TestDb::fresh().await;
    let store = db.store(Duration::from_secs(30)).await;
    // The listing index holds hundredths of a second: sessions in the same one are
    // put in order by their time, then by id; the hundredths either side stay apart.
    let mut connection = db.connection().await;
    sqlx::query(
        "INSERT INTO reprise_sessions (id, updated_at) SELECT t.id, \
             timestamptz '2026-06-01 12:00:00+00' + t.us * interval '1 microsecond' \
         FROM (VALUES ('d', 1000), ('b', 5000), ('c', 5000), ('a', 9999), \
                      ('e', 10000), ('f', -1), ('g', 20001)) AS t (id, us)",
    )
    .execute(&mut connection)
    .await
    .unwrap();
    let expected = ["g", "e", "a", "c", "b", "d", "f"];
    for size in [1, 2, 3, 50] {
        assert_eq!(
            listed_in_pages(&store, size).await,
            expected,
            "pages of {size}"
        );
    }
    let all = crate::support::listed_ids(&store).await;
    assert_eq!(all, expected);
    let newest: Vec<String> = store
        .list_summaries(Some(4))
        .await
        .unwrap()
        .into_iter()
        .map(|summary| summary.info.id)
        .collect();
    assert_eq!(newest, expected[..4]);

    // Whatever writes a session's row keeps the listing's hundredth with its time:
    // appends of one entry and of several, to the main transcript and a subagent's,
    // a new session, and a fork.
    store.append(&key("d"), &[entry("one")]).await.unwrap();
    store
        .append(&key("h"), &[entry("two"), entry("three")])
        .await
        .unwrap();
    let helper = SessionKey::subagent("f", "helper").unwrap();
    store.append(&helper, &[entry("four")]).await.unwrap();
    store.fork(SessionFork::whole("h", "i")).await.unwrap();
    crate::support::assert_listing_times_agree(&db).await;
    let listed = listed_in_pages(&store, 2).await;
    assert_eq!(listed[..4], ["i", "f", "h", "d"]);
    assert_eq!(listed.len(), 9);
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
         VALUES ('s', '', nextval('reprise_entry_seq'), gen_random_uuid(), \
                 '{\"not\": \"an entry\"}')",
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summaries_count_messages_and_keep_the_persons_last_message_redacted() {
    let db = TestDb::fresh().await;
    let secret = "tok-4f9a1c2e8b7d";
    let store = db
        .store(Duration::from_secs(30))
        .await
        .with_redactor(reprise_redact::Redactor::new().with_secret(secret.to_owned()));
    let batch = [
        entry(&format!("my token is {secret}")),
        Entry::message(Message::assistant("noted")),
    ];
    store.append(&key("chat"), &batch).await.unwrap();
    // A repeat of the same entries writes nothing and counts nothing.
    store.append(&key("chat"), &batch).await.unwrap();
    // A retry holding one entry already written counts only the other.
    let again = [
        batch[1].clone(),
        Entry::message(Message::assistant("and more")),
    ];
    let report = store.append(&key("chat"), &again).await.unwrap();
    assert_eq!((report.written, report.skipped), (1, 1));
    // So does an append of one entry, and its repeat.
    let single = [Entry::message(Message::assistant("one more"))];
    let report = store.append(&key("chat"), &single).await.unwrap();
    assert_eq!((report.written, report.skipped), (1, 0));
    let report = store.append(&key("chat"), &single).await.unwrap();
    assert_eq!((report.written, report.skipped), (0, 1));
    // Neither a subagent's messages nor a slash-command expansion are the person's.
    let sub = SessionKey::subagent("chat", "helper").unwrap();
    store.append(&sub, &[entry("subagent task")]).await.unwrap();
    let mut expansion = entry("expanded command text");
    reprise_runs::mark_command_expansion(&mut expansion);
    store.append(&key("chat"), &[expansion]).await.unwrap();
    store
        .append(&key("other"), &[entry("elsewhere")])
        .await
        .unwrap();

    let summary = store.summary("chat").await.unwrap().unwrap();
    assert_eq!(summary.message_count, 5);
    let last = summary.last_message.unwrap();
    assert!(last.starts_with("my token is "), "{last}");
    assert!(!last.contains(secret), "{last}");

    let listed = store.list_summaries(None).await.unwrap();
    let ids: Vec<&str> = listed.iter().map(|s| s.info.id.as_str()).collect();
    assert_eq!(ids, ["other", "chat"]);
    assert_eq!(listed[0].last_message.as_deref(), Some("elsewhere"));
    assert_eq!(store.list_summaries(Some(1)).await.unwrap().len(), 1);
    assert_eq!(store.summary("nobody").await.unwrap(), None);
    assert_eq!(store.ids_starting_with("ch", 10).await.unwrap(), ["chat"]);
    assert!(store.ids_starting_with("x", 10).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_starting_with_a_prefix_are_found_in_byte_order_whatever_the_locale() {
    // A database whose text sorts by an ICU locale, where "Ab" falls between "ab"
    // and "ac" and punctuation sorts apart from bytes: the ids must not.
    use sqlx::Connection;
    let url = reprise_testkit::postgres::server_url();
    let name = format!("t_icu_{}", std::process::id());
    let mut admin = sqlx::PgConnection::connect(url).await.unwrap();
    for statement in [
        format!("DROP DATABASE IF EXISTS {name}"),
        format!(
            "CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8' \
             LOCALE_PROVIDER icu ICU_LOCALE 'en' LOCALE 'C'"
        ),
    ] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
            .execute(&mut admin)
            .await
            .unwrap();
    }
    let options: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
    let store = reprise_postgres::PgSessionStore::connect_with(
        options.database(&name),
        crate::support::options(Duration::from_secs(30)),
    )
    .await
    .unwrap();

    for id in [
        "ab", "ab-1", "ab.2", "ab9", "abZ", "ab_x", "abz", "ac", "aa", "Ab", "b",
    ] {
        store.append(&key(id), &[entry(id)]).await.unwrap();
    }
    assert_eq!(
        store.ids_starting_with("ab", 100).await.unwrap(),
        ["ab", "ab-1", "ab.2", "ab9", "abZ", "ab_x", "abz"]
    );
    assert_eq!(
        store.ids_starting_with("ab", 2).await.unwrap(),
        ["ab", "ab-1"]
    );
    assert_eq!(store.ids_starting_with("abz", 100).await.unwrap(), ["abz"]);
    assert_eq!(store.ids_starting_with("A", 100).await.unwrap(), ["Ab"]);
    assert!(
        store
            .ids_starting_with("abc", 100)
            .await
            .unwrap()
            .is_empty()
    );
    // Nothing an id cannot hold matches, and an empty prefix matches nothing.
    assert!(store.ids_starting_with("a%", 100).await.unwrap().is_empty());
    assert!(store.ids_starting_with("", 100).await.unwrap().is_empty());

    store.close().await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE {name} WITH (FORCE)"
    )))
    .execute(&mut admin)
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_keeps_its_first_message_title_and_tags() {
    let db = TestDb::fresh().await;
    let store = db.store(Duration::from_secs(30)).await;
    store
        .append(&key("s"), &[entry("first  question"), entry("second")])
        .await
        .unwrap();
    store.append(&key("s"), &[entry("third")]).await.unwrap();
    let summary = store.summary("s").await.unwrap().unwrap();
    assert_eq!(summary.first_message.as_deref(), Some("first  question"));
    assert_eq!(summary.last_message.as_deref(), Some("third"));
    assert_eq!((summary.title, summary.tags.len()), (None, 0));

    let named = store
        .set_title("s", "  Bread \n notes ")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(named.title.as_deref(), Some("Bread notes"));
    let tagged = store
        .change_tags("s", &["b".into(), "a".into(), "b".into()], &[])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(tagged.tags, ["a", "b"]);
    let tagged = store
        .change_tags("s", &["c".into()], &["a".into()])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(tagged.tags, ["b", "c"]);
    assert!(matches!(
        store.change_tags("s", &["two words".into()], &[]).await,
        Err(StoreError::Unsupported(_))
    ));
    assert_eq!(
        store.titles().await.unwrap(),
        [("s".to_owned(), "Bread notes".to_owned())]
    );
    // Appending keeps them; an empty title removes it.
    store.append(&key("s"), &[entry("fourth")]).await.unwrap();
    let summary = store.summary("s").await.unwrap().unwrap();
    assert_eq!(summary.title.as_deref(), Some("Bread notes"));
    assert_eq!(summary.tags, ["b", "c"]);
    assert_eq!(summary.first_message.as_deref(), Some("first  question"));
    let cleared = store.set_title("s", " ").await.unwrap().unwrap();
    assert_eq!(cleared.title, None);
    assert!(store.titles().await.unwrap().is_empty());
    // No such session: nothing to name.
    assert_eq!(store.set_title("nobody", "x").await.unwrap(), None);
    assert_eq!(
        store
            .change_tags("nobody", &["x".into()], &[])
            .await
            .unwrap(),
        None
    );
}

fn texts(entries: &[Entry]) -> Vec<String> {
    entries
        .iter()
        .map(|entry| match entry.as_message() {
            Some(message) => message.text(),
            None => "(other)".to_owned(),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_with_repeats_counts_only_the_new_messages() {
    let db = TestDb::fresh().await;
    let store = db.store(Duration::from_secs(30)).await;
    let (a, b) = (entry("a"), entry("b"));
    store
        .append(&key("s"), std::slice::from_ref(&a))
        .await
        .unwrap();
    let note = Entry::other("note", Map::new());
    let report = store
        .append(&key("s"), &[note, a, b.clone(), entry("c")])
        .await
        .unwrap();
    assert_eq!((report.written, report.skipped), (3, 1));
    let summary = store.summary("s").await.unwrap().unwrap();
    assert_eq!(summary.message_count, 3);
    assert_eq!(summary.last_message.as_deref(), Some("c"));
    let loaded = store.load(&key("s")).await.unwrap().unwrap();
    assert_eq!(texts(&loaded.entries), ["a", "(other)", "b", "c"]);
    // Nothing new: nothing counted, the last message kept.
    store.append(&key("s"), &[b]).await.unwrap();
    let summary = store.summary("s").await.unwrap().unwrap();
    assert_eq!(summary.message_count, 3);
    assert_eq!(summary.last_message.as_deref(), Some("c"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_read_in_table_order_comes_back_in_entry_order() {
    let db = TestDb::fresh().await;
    let store = db.store(Duration::from_secs(30)).await;
    for text in ["one", "two", "three"] {
        store.append(&key("s"), &[entry(text)]).await.unwrap();
    }
    // Rewritten rows move to the end of the table: the table order is now
    // three, one, then a row that does not decode.
    let mut connection = db.connection().await;
    sqlx::query("UPDATE reprise_entries SET body = body WHERE seq = 1")
        .execute(&mut connection)
        .await
        .unwrap();
    sqlx::query("UPDATE reprise_entries SET body = '{broken' WHERE seq = 2")
        .execute(&mut connection)
        .await
        .unwrap();
    // A plan that reads the table in its order, whatever the planner would pick.
    let options = db
        .connect_options()
        .options([("enable_indexscan", "off"), ("enable_bitmapscan", "off")]);
    let reader = reprise_postgres::PgSessionStore::connect_with(
        options,
        crate::support::options(Duration::from_secs(30)),
    )
    .await
    .unwrap();
    let loaded = reader.load(&key("s")).await.unwrap().unwrap();
    assert_eq!(texts(&loaded.entries), ["one", "three"]);
    assert_eq!(loaded.warnings.len(), 1);
    assert_eq!(loaded.warnings[0].line, 2);
    assert_eq!(loaded, store.load(&key("s")).await.unwrap().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_is_listed_with_the_messages_it_copied() {
    let db = TestDb::fresh().await;
    let store = db.store(Duration::from_secs(30)).await;
    let answer = |text: &str| Entry::message(Message::assistant(text));
    let history = [
        entry("how do I bake bread?"),
        answer("With a starter."),
        entry("and the starter?"),
        answer("Feed it daily."),
    ];
    store.append(&key("source"), &history).await.unwrap();

    // A whole copy: the source's count and messages.
    store
        .fork(SessionFork::whole("source", "whole"))
        .await
        .unwrap();
    let whole = store.summary("whole").await.unwrap().unwrap();
    assert_eq!(whole.message_count, 4);
    assert_eq!(whole.first_message.as_deref(), Some("how do I bake bread?"));
    assert_eq!(whole.last_message.as_deref(), Some("and the starter?"));

    // A copy of the first two: counted from what it copied.
    store
        .fork(SessionFork::up_to("source", "part", history[1].uuid))
        .await
        .unwrap();
    let part = store.summary("part").await.unwrap().unwrap();
    assert_eq!(part.message_count, 2);
    assert_eq!(part.first_message.as_deref(), Some("how do I bake bread?"));
    assert_eq!(part.last_message.as_deref(), Some("how do I bake bread?"));
    assert_eq!(part.info.forked_from.unwrap().session, "source");

    // One more turn on the fork counts from there.
    store
        .append(&key("part"), &[entry("rye?"), answer("Yes.")])
        .await
        .unwrap();
    let part = store.summary("part").await.unwrap().unwrap();
    assert_eq!(part.message_count, 4);
    assert_eq!(part.last_message.as_deref(), Some("rye?"));
}
