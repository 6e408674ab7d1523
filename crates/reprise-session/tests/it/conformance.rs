//! The store conformance suite (`reprise_session::conformance`) run against every store
//! in this crate.

use std::sync::Arc;

use reprise_session::conformance::{Capabilities, Subject, run_all};
use reprise_session::{Durability, FileSessionStore, MemoryStore, SessionStore};

/// Temp dirs kept alive until the test ends.
fn keep(dirs: &std::sync::Mutex<Vec<tempfile::TempDir>>) -> std::path::PathBuf {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    dirs.lock().unwrap().push(dir);
    path
}

#[tokio::test]
async fn memory_store_conforms() {
    run_all(
        &|| Subject {
            store: Arc::new(MemoryStore::new()),
            reopen: None,
        },
        Capabilities::FULL,
    )
    .await;
}

// The file stores run short appends in the calling task, longer work on the
// blocking pool: each store is run through the suite on a multi-threaded and on a
// current-thread runtime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_store_conforms() {
    file_store_suite().await;
}

#[tokio::test(flavor = "current_thread")]
async fn file_store_conforms_on_a_current_thread_runtime() {
    file_store_suite().await;
}

async fn file_store_suite() {
    let dirs = std::sync::Mutex::new(Vec::new());
    run_all(
        &|| {
            let dir = keep(&dirs).join("sessions");
            let reopen_dir = dir.clone();
            Subject {
                store: Arc::new(FileSessionStore::with_durability(dir, Durability::Flush)),
                reopen: Some(Arc::new(move || -> Arc<dyn SessionStore> {
                    Arc::new(FileSessionStore::new(reopen_dir.clone()))
                })),
            }
        },
        Capabilities::FULL,
    )
    .await;
}
