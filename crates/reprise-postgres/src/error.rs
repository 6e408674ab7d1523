//! Errors of opening a store; the store's own operations fail with
//! [`StoreError`](reprise_session::StoreError).

use std::sync::Arc;

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

/// A driver error that failed several appends sent together, as a [`StoreError`]; the
/// error itself when no other append holds it.
pub(crate) fn shared_backend(context: String, source: Arc<sqlx::Error>) -> StoreError {
    match Arc::try_unwrap(source) {
        Ok(source) => backend(context, source),
        Err(source) => StoreError::Backend {
            context,
            source: Box::new(SharedError(source)),
        },
    }
}

/// One driver error shown to each append of a batch it failed.
#[derive(Debug)]
struct SharedError(Arc<sqlx::Error>);

impl std::fmt::Display for SharedError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(formatter)
    }
}

impl std::error::Error for SharedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}
