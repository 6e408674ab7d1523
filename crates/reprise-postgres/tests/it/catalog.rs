//! The catalog conformance suite (`reprise_runs::conformance`) on PostgreSQL.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use reprise_postgres::PgRunCatalog;
use reprise_runs::RunCatalog;
use reprise_runs::conformance::run_all;

use crate::support::{StoreOn, TestDb};

/// Runs an async setup step from the suite's synchronous factory.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(future))
}

/// A catalog on a fresh schema, with the schema and the runs directory it needs.
async fn fresh() -> (PgRunCatalog, TestDb, tempfile::TempDir) {
    let db = TestDb::fresh().await;
    let store = db.store(Duration::from_secs(30)).await;
    let dir = tempfile::tempdir().unwrap();
    (PgRunCatalog::new(dir.path().join("runs"), store), db, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_catalog_conforms() {
    let kept = Mutex::new(Vec::new());
    run_all(&|| -> Arc<dyn RunCatalog> {
        let (catalog, db, dir) = block_on(fresh());
        kept.lock().unwrap().push((db, dir));
        Arc::new(catalog)
    })
    .await;
}
