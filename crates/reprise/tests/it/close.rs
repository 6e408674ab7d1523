//! `Agent::close` on PostgreSQL: a process that closes its agent and exits at once
//! leaves the session free for the next process, with no lease left to expire.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use reprise::postgres::{PgSessionStore, PgStoreOptions};
use reprise::prelude::*;
use reprise_testkit::postgres::TestDb;

const ROLE: &str = "REPRISE_TEST_CHILD_ROLE";
/// Far longer than the test: a lease left behind would hold the session throughout.
const LEASE: Duration = Duration::from_secs(600);

async fn store(db: &TestDb) -> PgSessionStore {
    PgSessionStore::connect(
        &db.url_with_schema(),
        PgStoreOptions::default().with_lease(LEASE),
    )
    .await
    .unwrap()
}

/// The child's side: opens the session, closes the agent and exits right away,
/// without closing the store. Run directly (no role set) it does nothing.
#[test]
fn child_role() {
    if std::env::var(ROLE).as_deref() != Ok("close-and-exit") {
        return;
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = store(&TestDb::from_env()).await;
        let provider = Arc::new(OpenAiProvider::new(OpenAiConfig::new("unused")).unwrap());
        let agent = Agent::builder(provider)
            .store(Arc::new(store))
            .session_id("handed-over")
            .build()
            .await
            .unwrap();
        agent.close().await.unwrap();
    });
    std::process::exit(0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_that_closes_its_agent_and_exits_leaves_the_session_free() {
    let db = TestDb::fresh().await;
    let status = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "close::child_role", "--test-threads=1"])
        .env(ROLE, "close-and-exit")
        .envs(db.env())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .status()
        .await
        .unwrap();
    assert!(status.success());
    // At once: no waiting for the child's lease to run out.
    let store = store(&db).await;
    let lock = store.lock("handed-over").await;
    assert!(lock.is_ok(), "{:?}", lock.err());
    lock.unwrap().release().await.unwrap();
    store.close().await.unwrap();
}
