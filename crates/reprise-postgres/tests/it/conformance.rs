//! The store conformance suite, unchanged, on PostgreSQL.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use reprise_session::SessionStore;
use reprise_session::conformance::{Capabilities, Subject, run_all};
use tokio::runtime::{Handle, Runtime};

use crate::support::{StoreOn, TestDb};

/// Where the suite's synchronous factory makes its stores: a runtime of its own,
/// running until the suite ends (a pool's connections are driven by the runtime
/// that made them), waited on from a thread of the factory's own.
struct Setup(Option<Runtime>);

impl Setup {
    fn new() -> Setup {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        Setup(Some(runtime))
    }

    fn handle(&self) -> Handle {
        self.0.as_ref().unwrap().handle().clone()
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// Runs an async setup step on `setup` and waits for it.
fn made_on<F>(setup: &Handle, future: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    std::thread::scope(|scope| scope.spawn(|| setup.block_on(future)).join().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_store_conforms() {
    let lease = Duration::from_secs(30);
    let setup = Setup::new();
    let handle = setup.handle();
    run_all(
        &|| {
            let db = made_on(&handle, TestDb::fresh());
            let store = made_on(&handle, db.store(lease));
            let handle = handle.clone();
            Subject {
                store: Arc::new(store),
                reopen: Some(Arc::new(move || -> Arc<dyn SessionStore> {
                    Arc::new(made_on(&handle, db.store(lease)))
                })),
            }
        },
        Capabilities::FULL,
    )
    .await;
}
