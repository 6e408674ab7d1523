//! The server side failing under a store: a connection cut in the middle of an
//! append's transaction, and a restart while a store is open.

use std::time::Duration;

use reprise_session::{Entry, Message, SessionKey, SessionStore, StoreError};
use sqlx::Connection;

use crate::support::cluster::Cluster;
use crate::support::{StoreOn, TestDb, with_causes};

fn key(id: &str) -> SessionKey {
    SessionKey::session(id).unwrap()
}

/// The operating system's reason (the socket is gone, or refuses connections), not
/// the pool's wait that ran out.
fn assert_says_why_it_cannot_connect(error: &StoreError) {
    let text = with_causes(error);
    assert!(text.contains("(os error"), "{text}");
    assert!(!text.contains("timed out"), "{text}");
}

fn entries(n: usize, tag: &str) -> Vec<Entry> {
    (0..n)
        .map(|i| Entry::message(Message::user(format!("{tag} {i}"))))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_cut_mid_transaction_stores_nothing_of_the_batch() {
    let db = TestDb::fresh().await;
    let store = db.store(Duration::from_secs(30)).await;
    let first = entries(2, "first");
    store.append(&key("s"), &first).await.unwrap();

    // Another transaction inserts, without committing, a row with the uuid of the
    // batch's last entry: the append writes the batch's first rows, then waits on
    // that row, in the middle of its transaction.
    let batch = entries(50, "cut");
    let mut blocker = db.connection().await;
    let mut open = blocker.begin().await.unwrap();
    sqlx::query(
        "INSERT INTO reprise_entries (session_id, subagent, seq, uuid, body) \
         VALUES ('s', '', 1000000, $1, '{}')",
    )
    .bind(batch[49].uuid)
    .execute(&mut *open)
    .await
    .unwrap();

    let appending = {
        let store = store.clone();
        let batch = batch.clone();
        tokio::spawn(async move { store.append(&key("s"), &batch).await })
    };
    let mut watcher = db.connection().await;
    let backend: i32 = loop {
        let waiting: Option<i32> = sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity \
             WHERE query LIKE '%reprise_append%' AND wait_event_type = 'Lock' \
               AND pid <> pg_backend_pid()",
        )
        .fetch_optional(&mut watcher)
        .await
        .unwrap();
        if let Some(pid) = waiting {
            break pid;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let terminated: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(backend)
        .fetch_one(&mut watcher)
        .await
        .unwrap();
    assert!(terminated);
    open.rollback().await.unwrap();

    match appending.await.unwrap() {
        Err(StoreError::Backend { context, .. }) => {
            assert!(context.contains("appending to s"), "{context}");
        }
        other => panic!("expected a backend error, got {other:?}"),
    }
    let loaded = store.load(&key("s")).await.unwrap().unwrap();
    assert_eq!(loaded.entries, first, "nothing of the cut batch is stored");

    // The pool replaces the dead connection: the same batch goes in whole.
    let report = store.append(&key("s"), &batch).await.unwrap();
    assert_eq!(report.written, 50);
    let loaded = store.load(&key("s")).await.unwrap().unwrap();
    assert_eq!(loaded.entries, [first, batch].concat());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_gives_a_clear_error_then_the_store_goes_on() {
    // A cluster of its own: restarting the shared one would disturb other tests.
    let cluster = Cluster::start();
    let db = TestDb::fresh_on(&cluster.url()).await;
    let store = db.store(Duration::from_secs(30)).await;
    let guard = store.lock("s").await.unwrap();
    let before = entries(2, "before");
    store.append(&key("s"), &before).await.unwrap();

    cluster.stop_server();
    let down = entries(1, "down");
    match store.append(&key("s"), &down).await {
        Err(error @ StoreError::Backend { .. }) => {
            let text = error.to_string();
            let socket = cluster.socket_dir().display().to_string();
            assert!(
                text.contains("appending to s on PostgreSQL at") && text.contains(&socket),
                "{text}"
            );
            assert_says_why_it_cannot_connect(&error);
        }
        other => panic!("expected a backend error while the server is down, got {other:?}"),
    }
    match store.load(&key("s")).await {
        Err(error @ StoreError::Backend { .. }) => assert_says_why_it_cannot_connect(&error),
        other => panic!("expected a backend error while the server is down, got {other:?}"),
    }

    cluster.start_server();
    // The lease survived the restart: the holder goes on writing.
    let after = entries(2, "after");
    store.append(&key("s"), &after).await.unwrap();
    let loaded = store.load(&key("s")).await.unwrap().unwrap();
    assert_eq!(loaded.entries, [before, after].concat());
    drop(guard);
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_the_server_dropped_while_idle_is_replaced_before_use() {
    let db = TestDb::fresh().await;
    let name = format!("idle-{}", db.schema);
    let store = reprise_postgres::PgSessionStore::connect_with(
        db.connect_options().application_name(&name),
        crate::support::options(Duration::from_secs(30)),
    )
    .await
    .unwrap();
    store
        .append(&key("s"), &entries(1, "before"))
        .await
        .unwrap();

    // The server ends every connection of the store (an administrator, a proxy's idle
    // timeout, a failover).
    let mut admin = db.connection().await;
    let ended: i64 = sqlx::query_scalar(
        // OFFSET 0 keeps the filter first: ending only this store's connections.
        "SELECT count(pg_terminate_backend(pid)) FROM \
         (SELECT pid FROM pg_stat_activity WHERE application_name = $1 OFFSET 0) AS own",
    )
    .bind(&name)
    .fetch_one(&mut admin)
    .await
    .unwrap();
    assert!(ended >= 1);
    // Idle past the store's threshold, so its connections are checked before use.
    tokio::time::sleep(Duration::from_millis(300)).await;

    store.append(&key("s"), &entries(1, "after")).await.unwrap();
    let loaded = store.load(&key("s")).await.unwrap().unwrap();
    assert_eq!(loaded.entries.len(), 2);
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_error_is_said_once_without_the_servers_source_line() {
    let db = TestDb::fresh().await;
    let store = db.store(Duration::from_secs(30)).await;
    store.append(&key("s"), &entries(1, "x")).await.unwrap();
    let mut connection = db.connection().await;
    sqlx::query("ALTER TABLE reprise_sessions ADD CONSTRAINT no_titles CHECK (title IS NULL)")
        .execute(&mut connection)
        .await
        .unwrap();
    let error = store.set_title("s", "named").await.unwrap_err();
    let text = with_causes(&error);
    assert!(text.starts_with("naming s on PostgreSQL at"), "{text}");
    assert_eq!(
        text.matches("violates check constraint").count(),
        1,
        "{text}"
    );
    assert!(!text.contains(" at line "), "{text}");
    connection.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_of_another_database_is_refused_without_repeating_it() {
    for (url, named) in [
        ("mysql://app:hunter2@db.internal/agents", "not mysql://"),
        ("db.internal:5432/agents", "postgres://"),
    ] {
        let error = reprise_postgres::PgSessionStore::connect(url, Default::default())
            .await
            .err()
            .expect("refused");
        let text = with_causes(&error);
        assert!(text.contains(named), "{text}");
        assert!(
            !text.contains("hunter2") && !text.contains("db.internal"),
            "{text}"
        );
    }
}
