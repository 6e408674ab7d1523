//! The store conformance suite, unchanged, on PostgreSQL.

use std::sync::Arc;
use std::time::Duration;

use reprise_session::SessionStore;
use reprise_session::conformance::{Capabilities, Subject, run_all};

use crate::support::{StoreOn, TestDb};

/// Runs an async setup step from the suite's synchronous factory.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(future))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_store_conforms() {
    let lease = Duration::from_secs(30);
    run_all(
        &|| {
            let db = block_on(TestDb::fresh());
            let store = block_on(db.store(lease));
            Subject {
                store: Arc::new(store),
                reopen: Some(Arc::new(move || -> Arc<dyn SessionStore> {
                    Arc::new(block_on(db.store(lease)))
                })),
            }
        },
        Capabilities::FULL,
    )
    .await;
}
