//! The PostgreSQL server the tests use (see `reprise_testkit::postgres`), and stores
//! on a test's schema.

use std::time::Duration;

use reprise_postgres::{PgSessionStore, PgStoreOptions};
pub use reprise_testkit::postgres::{TestDb, cluster};

/// Stores on a test's schema.
pub trait StoreOn {
    /// A store on the schema with leases of `lease`.
    async fn store(&self, lease: Duration) -> PgSessionStore;
}

impl StoreOn for TestDb {
    async fn store(&self, lease: Duration) -> PgSessionStore {
        PgSessionStore::connect_with(self.connect_options(), options(lease))
            .await
            .unwrap()
    }
}

/// Store options for tests: short leases, a short wait for connections.
pub fn options(lease: Duration) -> PgStoreOptions {
    PgStoreOptions {
        acquire_timeout: Duration::from_secs(3),
        ..PgStoreOptions::default().with_lease(lease)
    }
}

/// Asserts that every session row's `updated_cs` (what listings are indexed by) is
/// the hundredth of a second of its `updated_at`, as every write must leave it.
pub async fn assert_listing_times_agree(db: &TestDb) {
    let mut connection = db.connection().await;
    let disagreeing: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT id, updated_cs, reprise_centiseconds(updated_at) FROM reprise_sessions \
         WHERE updated_cs <> reprise_centiseconds(updated_at)",
    )
    .fetch_all(&mut connection)
    .await
    .unwrap();
    assert!(disagreeing.is_empty(), "{disagreeing:?}");
}

/// The ids `store` lists, newest first.
pub async fn listed_ids(store: &PgSessionStore) -> Vec<String> {
    let sessions = reprise_session::SessionStore::list_sessions(store)
        .await
        .unwrap();
    sessions.into_iter().map(|info| info.id).collect()
}

/// `error: cause: cause…`, as the chat shows an error.
pub fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
    reprise_runs::error_chain(error)
}
