//! The catalog conformance suite (`reprise_runs::conformance`) on PostgreSQL, on a
//! multi-threaded runtime and on a current-thread one.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use reprise_postgres::PgRunCatalog;
use reprise_runs::RunCatalog;
use reprise_runs::conformance::run_all;

use crate::support::{StoreOn, TestDb};

/// A catalog on a fresh schema, with the schema and the runs directory it needs.
async fn fresh() -> (PgRunCatalog, TestDb, tempfile::TempDir) {
    let db = TestDb::fresh().await;
    let store = db.store(Duration::from_secs(30)).await;
    let dir = tempfile::tempdir().unwrap();
    (PgRunCatalog::new(dir.path().join("runs"), store), db, dir)
}

/// The suite over fresh schemas, kept until it ends.
async fn conforms() {
    let kept = Mutex::new(Vec::new());
    run_all(&|| {
        Box::pin(async {
            let (catalog, db, dir) = fresh().await;
            kept.lock().unwrap().push((db, dir));
            Arc::new(catalog) as Arc<dyn RunCatalog>
        })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_catalog_conforms() {
    conforms().await;
}

#[tokio::test(flavor = "current_thread")]
async fn pg_catalog_conforms_on_a_current_thread_runtime() {
    conforms().await;
}
