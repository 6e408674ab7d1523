//! The connection appends go on is kept from one append to the next, and never
//! keeps anything else waiting: not a store of one connection, not `close`, not a
//! store dropped after its runtime.

use std::time::Duration;

use reprise_postgres::PgSessionStore;
use reprise_session::{Entry, Message, SessionKey, SessionStore};

use crate::support::{TestDb, options};

fn key(id: &str) -> SessionKey {
    SessionKey::session(id).unwrap()
}

fn entry(text: &str) -> Entry {
    Entry::message(Message::user(text))
}

async fn entries_in(store: &PgSessionStore, id: &str) -> usize {
    store.load(&key(id)).await.unwrap().unwrap().entries.len()
}

/// A store whose connections carry `application_name` (to find them on the server),
/// with at most `max_connections`.
async fn store_named(db: &TestDb, name: &str, max_connections: u32) -> PgSessionStore {
    let connect = db.connect_options().application_name(name);
    let options = reprise_postgres::PgStoreOptions {
        max_connections,
        ..options(Duration::from_secs(30))
    };
    PgSessionStore::connect_with(connect, options)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_in_a_loop_go_on_one_connection() {
    let db = TestDb::fresh().await;
    let name = format!("{}-loop", db.schema);
    let store = store_named(&db, &name, 8).await;
    let _lock = store.lock("loop").await.unwrap();
    for n in 0..40 {
        store
            .append(&key("loop"), &[entry(&format!("message {n}"))])
            .await
            .unwrap();
    }
    assert_eq!(entries_in(&store, "loop").await, 40);

    // Each connection's last statement is on the server's list: only one of the
    // store's connections ever ran an append.
    let mut connection = db.connection().await;
    let appenders: Vec<(i32, String)> = sqlx::query_as(
        "SELECT pid, query FROM pg_stat_activity \
         WHERE application_name = $1 AND query LIKE '%reprise_append%'",
    )
    .bind(&name)
    .fetch_all(&mut connection)
    .await
    .unwrap();
    assert_eq!(appenders.len(), 1, "{appenders:?}");

    // It stays out of the pool between appends (one given back to the pool is there
    // again within moments, after a round trip that tests it).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let pool = store.pool();
    let out = pool.size() - u32::try_from(pool.num_idle()).unwrap();
    assert_eq!(out, 1, "connections out of the pool");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_of_one_connection_appends_locks_and_reads_without_waiting_for_itself() {
    let db = TestDb::fresh().await;
    let store = store_named(&db, &format!("{}-one", db.schema), 1).await;
    // Each step needs the one connection right after an append: kept, it would make
    // them wait until the acquire timeout (3 s in tests) and fail.
    let lock = store.lock("one").await.unwrap();
    store.append(&key("one"), &[entry("first")]).await.unwrap();
    assert_eq!(entries_in(&store, "one").await, 1);
    store.append(&key("one"), &[entry("second")]).await.unwrap();
    let summary = store.summary("one").await.unwrap().unwrap();
    assert_eq!(summary.message_count, 2);
    store.append(&key("one"), &[entry("third")]).await.unwrap();
    drop(lock);
    store.append(&key("one"), &[entry("fourth")]).await.unwrap();
    assert_eq!(store.list_sessions().await.unwrap().len(), 1);
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_gives_back_the_kept_connection_and_returns() {
    let db = TestDb::fresh().await;
    let store = store_named(&db, &format!("{}-close", db.schema), 8).await;
    store
        .append(&key("closing"), &[entry("hello")])
        .await
        .unwrap();
    // A pool waits for every connection to come back before it is closed.
    tokio::time::timeout(Duration::from_secs(30), store.close())
        .await
        .expect("close waited for the connection the appends keep")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_returns_while_another_task_appends() {
    let db = TestDb::fresh().await;
    let store = store_named(&db, &format!("{}-busy", db.schema), 8).await;
    let writer = {
        let store = store.clone();
        tokio::spawn(async move {
            let mut written = 0;
            // Until the closed pool refuses.
            while store
                .append(&key("busy"), &[entry(&format!("message {written}"))])
                .await
                .is_ok()
            {
                written += 1;
            }
            written
        })
    };
    // Appends under way, each keeping its connection for the next.
    while store.load(&key("busy")).await.unwrap().is_none() {
        tokio::task::yield_now().await;
    }
    tokio::time::timeout(Duration::from_secs(30), store.close())
        .await
        .expect("close waited for the connection the appends keep")
        .unwrap();
    let written = tokio::time::timeout(Duration::from_secs(30), writer)
        .await
        .expect("the writer stopped once the pool closed")
        .unwrap();
    assert!(written > 0);
}

#[test]
fn a_store_dropped_after_its_runtime_closes_the_kept_connection() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let store = runtime.block_on(async {
        let db = TestDb::fresh().await;
        let store = store_named(&db, &format!("{}-late", db.schema), 8).await;
        store.append(&key("late"), &[entry("hello")]).await.unwrap();
        store
    });
    drop(runtime);
    // Giving a connection back to its pool needs a runtime; this must not panic.
    drop(store);
}
