//! The catalog conformance suite (`reprise_runs::conformance`) run against run
//! folders, on a multi-threaded runtime and on a current-thread one.

use std::sync::{Arc, Mutex};

use reprise_runs::conformance::run_all;
use reprise_runs::{FolderCatalog, RunCatalog};

/// The suite over fresh runs directories, kept until it ends.
async fn conforms() {
    let dirs = Mutex::new(Vec::new());
    run_all(&|| {
        let dir = tempfile::tempdir().unwrap();
        let catalog = FolderCatalog::new(dir.path().join("runs"));
        dirs.lock().unwrap().push(dir);
        Box::pin(async move { Arc::new(catalog) as Arc<dyn RunCatalog> })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn folder_catalog_conforms() {
    conforms().await;
}

#[tokio::test(flavor = "current_thread")]
async fn folder_catalog_conforms_on_a_current_thread_runtime() {
    conforms().await;
}
