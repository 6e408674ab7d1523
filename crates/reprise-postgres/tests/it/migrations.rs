//! A database written by an earlier schema reads the same after the newer migrations,
//! and what is appended afterwards comes after what was there.

use std::time::Duration;

use reprise_session::{Entry, Message, SessionFork, SessionKey, SessionStore, StoreError};

use crate::support::{StoreOn, TestDb, with_causes};

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

/// Applies, as a newer release would, a migration this library does not know:
/// `sql`, as version `version`.
async fn apply_newer_migration(connection: &mut sqlx::PgConnection, version: i64, sql: &str) {
    use sqlx::SqlSafeStr;
    use sqlx::migrate::{Migrate, Migration, MigrationType};
    let migration = Migration::new(
        version,
        format!("a newer release's {version}").into(),
        MigrationType::Simple,
        sqlx::AssertSqlSafe(sql.to_owned()).into_sql_str(),
        false,
    );
    connection
        .apply("_sqlx_migrations", &migration)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_release_reads_a_newer_schema_and_writes_while_the_schema_allows() {
    use reprise_runs::{RunCatalog, RunSearch, SearchQuery};
    let db = TestDb::fresh().await;
    let store = db.store(Duration::from_secs(30)).await;
    store
        .append(
            &key("s"),
            &[Entry::message(Message::user("written before"))],
        )
        .await
        .unwrap();
    store.close().await.unwrap();

    // A newer release adds a column, which this one does not know: it still opens
    // the database, reads and writes.
    let mut connection = db.connection().await;
    apply_newer_migration(
        &mut connection,
        1000,
        "ALTER TABLE reprise_sessions ADD COLUMN colour text",
    )
    .await;
    let store = db.store(Duration::from_secs(30)).await;
    store
        .append(&key("s"), &[Entry::message(Message::user("written after"))])
        .await
        .unwrap();
    store.set_title("s", "kept").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let catalog = reprise_postgres::PgRunCatalog::new(dir.path().join("runs"), store.clone());
    let runs = catalog.list().await.unwrap().runs;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].message_count, 2);
    let hits = catalog
        .search(RunSearch::new(&runs, &SearchQuery::literal("written")))
        .await
        .unwrap();
    assert_eq!(hits.len(), 2);
    store.close().await.unwrap();

    // A newer release whose change earlier ones must not write through: this one
    // reads (lists, shows, searches) and refuses every write, saying why.
    apply_newer_migration(
        &mut connection,
        1001,
        "UPDATE reprise_schema SET min_writer = 1001",
    )
    .await;
    let store = db.store(Duration::from_secs(30)).await;
    let catalog = reprise_postgres::PgRunCatalog::new(dir.path().join("runs"), store.clone());
    let runs = catalog.list().await.unwrap().runs;
    assert_eq!(runs[0].title.as_deref(), Some("kept"));
    let folder = catalog.find("s").await.unwrap();
    assert_eq!(
        catalog.conversation(&folder).await.unwrap().messages.len(),
        2
    );
    let hits = catalog
        .search(RunSearch::new(&runs, &SearchQuery::literal("after")))
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
    let refusals = [
        store
            .append(&key("s"), &[Entry::message(Message::user("refused"))])
            .await
            .map(|_| ()),
        store.lock("s").await.map(|_| ()),
        store.set_title("s", "renamed").await.map(|_| ()),
        store.fork(SessionFork::whole("s", "t")).await,
        store.delete(&key("s")).await,
    ];
    for refusal in refusals {
        let error = refusal.unwrap_err();
        let text = error.to_string();
        assert!(matches!(error, StoreError::Unsupported(_)), "{error:?}");
        assert!(
            text.contains("schema version 1001")
                && text.contains("schema version 1001 or later may write")
                && text.contains(&format!("knows up to {}", known_version())),
            "{text}"
        );
    }
    assert_eq!(
        store.load(&key("s")).await.unwrap().unwrap().entries.len(),
        2
    );
    store.close().await.unwrap();

    // One that earlier releases cannot even read: opening the database says so.
    apply_newer_migration(
        &mut connection,
        1002,
        "UPDATE reprise_schema SET min_reader = 1002",
    )
    .await;
    let error = reprise_postgres::PgSessionStore::connect_with(
        db.connect_options(),
        crate::support::options(Duration::from_secs(30)),
    )
    .await
    .err()
    .expect("refused");
    let text = with_causes(&error);
    assert!(
        text.contains("schema version 1002")
            && text.contains("knows schema version 1002 or later can read")
            && text.contains("upgrade it"),
        "{text}"
    );
}

/// The newest migration this library embeds.
fn known_version() -> i64 {
    reprise_postgres::MIGRATOR
        .iter()
        .map(|migration| migration.version)
        .max()
        .unwrap()
}
