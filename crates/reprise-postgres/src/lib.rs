//! Sessions in PostgreSQL, for agents run as services.
//!
//! A folder of JSONL files serves one machine. When many worker processes on many
//! machines may each continue any conversation, the transcripts go to a database they
//! all reach: [`PgSessionStore`] keeps sessions, subagent transcripts and forks in
//! PostgreSQL behind the same [`SessionStore`](reprise_session::SessionStore) trait as
//! the file stores, and passes the same conformance suite.
//!
//! One writer per session, across machines: [`SessionStore::lock`] takes a lease with
//! an epoch and an expiry, renewed in the background while the lock is held. Every
//! append checks, in the transaction that writes it, that its epoch is still the
//! session's; a writer that stalled past its lease and was taken over gets
//! [`StoreError::TakenOver`](reprise_session::StoreError::TakenOver) naming the new holder
//! (host and pid), and nothing it sends afterwards is stored.
//!
//! Appends made while another is on its way to the server share the next
//! transaction, each still fenced and all-or-nothing on its own: a service writing
//! many sessions pays for few commits.
//!
//! The schema is created by migrations embedded in the crate, run on connect unless
//! [`PgStoreOptions::run_migrations`] is off. `docs/postgres.md` of the repository
//! describes the schema, the guarantees and why a lease rather than an advisory lock.
//!
//! [`SessionStore::lock`]: reprise_session::SessionStore::lock

mod appends;
mod catalog;
mod catalog_search;
mod catalog_sizes;
mod error;
mod lease;
mod options;
mod run_record;
mod schema;
mod store;
mod stored_text;

pub use catalog::PgRunCatalog;
pub use error::{DriverError, PgStoreError};
pub use options::PgStoreOptions;
pub use store::{PgSessionStore, SessionCursor, SessionSummary};

/// The embedded schema migrations, for callers who run them themselves.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");
