//! The store conformance suite (`reprise_session::conformance`) run against the
//! store of a run folder.

use std::sync::Arc;

use reprise_runs::create_run_store;
use reprise_session::SessionStore;
use reprise_session::conformance::{Capabilities, Subject, run_all};

/// Temp dirs kept alive until the test ends.
fn keep(dirs: &std::sync::Mutex<Vec<tempfile::TempDir>>) -> std::path::PathBuf {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    dirs.lock().unwrap().push(dir);
    path
}

// The run store runs short appends in the calling task, longer work on the blocking
// pool: it is run through the suite on a multi-threaded and on a current-thread
// runtime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_store_conforms() {
    run_store_suite().await;
}

#[tokio::test(flavor = "current_thread")]
async fn run_store_conforms_on_a_current_thread_runtime() {
    run_store_suite().await;
}

async fn run_store_suite() {
    let dirs = std::sync::Mutex::new(Vec::new());
    run_all(
        &|| {
            let dir = keep(&dirs).join("2026-11-30T10-00-00-000Z");
            let reopen_dir = dir.clone();
            Subject {
                store: Arc::new(create_run_store(dir)),
                reopen: Some(Arc::new(move || -> Arc<dyn SessionStore> {
                    Arc::new(create_run_store(reopen_dir.clone()))
                })),
            }
        },
        Capabilities {
            many_sessions: false,
            fork: false,
        },
    )
    .await;
}
