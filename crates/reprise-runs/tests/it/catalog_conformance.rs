//! The catalog conformance suite (`reprise_runs::conformance`) run against run
//! folders.

use std::sync::{Arc, Mutex};

use reprise_runs::conformance::run_all;
use reprise_runs::{FolderCatalog, RunCatalog};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn folder_catalog_conforms() {
    let dirs = Mutex::new(Vec::new());
    run_all(&|| -> Arc<dyn RunCatalog> {
        let dir = tempfile::tempdir().unwrap();
        let catalog = FolderCatalog::new(dir.path().join("runs"));
        dirs.lock().unwrap().push(dir);
        Arc::new(catalog)
    })
    .await;
}
