//! Errors of opening a store; the store's own operations fail with
//! [`StoreError`](reprise_session::StoreError).

use reprise_session::StoreError;

/// Why a [`PgSessionStore`](crate::PgSessionStore) could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum PgStoreError {
    /// The database URL could not be parsed.
    #[error("invalid PostgreSQL URL")]
    Url(#[source] sqlx::Error),
    /// The server could not be reached or refused the connection.
    #[error("cannot connect to PostgreSQL at {server}")]
    Connect {
        /// Host and port (or socket directory) and database.
        server: String,
        /// The driver's error.
        #[source]
        source: sqlx::Error,
    },
    /// The schema migrations failed.
    #[error("migrating the session schema on PostgreSQL at {server}")]
    Migrate {
        /// Host and port (or socket directory) and database.
        server: String,
        /// The migrator's error.
        #[source]
        source: sqlx::migrate::MigrateError,
    },
}

/// A driver error as a [`StoreError`], with what was being done.
pub(crate) fn backend(context: String, source: sqlx::Error) -> StoreError {
    StoreError::Backend {
        context,
        source: Box::new(source),
    }
}
