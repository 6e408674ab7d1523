//! Errors of opening a store; the store's own operations fail with
//! [`StoreError`](reprise_session::StoreError).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use reprise_session::StoreError;
use sqlx::migrate::MigrateError;
use sqlx::postgres::PgDatabaseError;
use sqlx::{ConnectOptions, Connection, PgPool};

/// Why a [`PgSessionStore`](crate::PgSessionStore) could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum PgStoreError {
    /// The database URL could not be parsed.
    #[error("invalid PostgreSQL URL")]
    Url(#[source] DriverError),
    /// The database URL is not a PostgreSQL one.
    #[error("{0}")]
    Scheme(String),
    /// The server could not be reached or refused the connection.
    #[error("cannot connect to PostgreSQL at {server}")]
    Connect {
        /// Host and port (or socket directory) and database.
        server: String,
        /// The driver's error.
        #[source]
        source: DriverError,
    },
    /// The schema migrations failed.
    #[error("migrating the session schema on PostgreSQL at {server}")]
    Migrate {
        /// Host and port (or socket directory) and database.
        server: String,
        /// The migrator's error.
        #[source]
        source: DriverError,
    },
    /// The database's schema is newer than this library can read.
    #[error(
        "the sessions on PostgreSQL at {server} have schema version {schema}, which only \
         a release that knows schema version {needed} or later can read; this one knows \
         up to {known}: upgrade it"
    )]
    SchemaTooNew {
        /// Host and port (or socket directory) and database.
        server: String,
        /// The newest migration the database has.
        schema: i64,
        /// The oldest schema version a reader must know.
        needed: i64,
        /// The newest migration this library knows.
        known: i64,
    },
}

/// The error of the PostgreSQL driver or of the schema migrations, said once.
///
/// The driver's errors repeat their cause in their own text (`error returned from
/// database: X at line 334`, then `X at line 334` again as their source), and a
/// server's error names the line of the server's source code that raised it, which
/// tells the reader nothing. This one shows the server's message (with its detail and
/// hint) and the causes below the driver's own text. [`DriverError::sqlx`] is the
/// driver's error itself.
#[derive(Debug)]
pub struct DriverError(Driver);

#[derive(Debug)]
enum Driver {
    Sqlx(Arc<sqlx::Error>),
    Migrate(MigrateError),
}

impl DriverError {
    /// The driver's error, when this is one (not a migration's bookkeeping).
    pub fn sqlx(&self) -> Option<&sqlx::Error> {
        match &self.0 {
            Driver::Sqlx(error) => Some(error),
            Driver::Migrate(MigrateError::Execute(error))
            | Driver::Migrate(MigrateError::ExecuteMigration(error, _)) => Some(error),
            Driver::Migrate(_) => None,
        }
    }
}

impl From<sqlx::Error> for DriverError {
    fn from(error: sqlx::Error) -> Self {
        DriverError(Driver::Sqlx(Arc::new(error)))
    }
}

impl From<Arc<sqlx::Error>> for DriverError {
    fn from(error: Arc<sqlx::Error>) -> Self {
        DriverError(Driver::Sqlx(error))
    }
}

impl From<MigrateError> for DriverError {
    fn from(error: MigrateError) -> Self {
        DriverError(Driver::Migrate(error))
    }
}

impl fmt::Display for DriverError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Driver::Sqlx(error) => show(error, formatter),
            Driver::Migrate(MigrateError::Execute(error)) => show(error, formatter),
            Driver::Migrate(MigrateError::ExecuteMigration(error, version)) => {
                write!(formatter, "migration {version}: ")?;
                show(error, formatter)
            }
            // Its text repeats its source's.
            Driver::Migrate(MigrateError::Source(_)) => {
                formatter.write_str("while resolving migrations")
            }
            Driver::Migrate(other) => fmt::Display::fmt(other, formatter),
        }
    }
}

impl std::error::Error for DriverError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.0 {
            Driver::Sqlx(error) => below(error),
            Driver::Migrate(MigrateError::Execute(error))
            | Driver::Migrate(MigrateError::ExecuteMigration(error, _)) => below(error),
            Driver::Migrate(MigrateError::Source(error)) => Some(&**error),
            Driver::Migrate(_) => None,
        }
    }
}

/// A driver error's own text: the server's message, detail and hint for an error the
/// server sent; the operating system's error for a failed connection.
fn show(error: &sqlx::Error, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
    match error {
        sqlx::Error::Database(database) => {
            let Some(server) = database.try_downcast_ref::<PgDatabaseError>() else {
                return formatter.write_str(database.message());
            };
            formatter.write_str(server.message())?;
            if let Some(detail) = server.detail() {
                write!(formatter, " ({detail})")?;
            }
            if let Some(hint) = server.hint() {
                write!(formatter, "; {hint}")?;
            }
            Ok(())
        }
        sqlx::Error::Io(io) => fmt::Display::fmt(io, formatter),
        sqlx::Error::PoolTimedOut => {
            formatter.write_str("no connection to the server could be had in time")
        }
        other => fmt::Display::fmt(other, formatter),
    }
}

/// What lies below a driver error's own text: the driver's text already holds its
/// immediate cause.
fn below(error: &sqlx::Error) -> Option<&(dyn std::error::Error + 'static)> {
    match error {
        sqlx::Error::Database(_) => None,
        sqlx::Error::Io(io) => std::error::Error::source(io),
        other => std::error::Error::source(other)?.source(),
    }
}

/// A driver error as a [`StoreError`], with what was being done.
pub(crate) fn backend(context: String, source: sqlx::Error) -> StoreError {
    StoreError::Backend {
        context,
        source: Box::new(DriverError::from(source)),
    }
}

/// A driver error that failed several appends sent together, as a [`StoreError`].
pub(crate) fn shared_backend(context: String, source: Arc<sqlx::Error>) -> StoreError {
    StoreError::Backend {
        context,
        source: Box::new(DriverError::from(source)),
    }
}

/// The most an operation that found no connection waits to learn why.
const DIAGNOSIS: Duration = Duration::from_secs(2);

/// Why an operation found no connection. A pool that cannot connect retries until it
/// times out and then says only that it timed out; the reason (the server refused the
/// connection, the host has no address) is asked for here with one connection of its
/// own. Any other error is returned as it is.
pub(crate) async fn diagnosed(pool: &PgPool, error: sqlx::Error) -> sqlx::Error {
    if !matches!(error, sqlx::Error::PoolTimedOut) {
        return error;
    }
    let options = pool.connect_options();
    match tokio::time::timeout(DIAGNOSIS, options.connect()).await {
        Ok(Err(cause)) => cause,
        Ok(Ok(connection)) => {
            let _ = connection.close().await;
            error
        }
        Err(_) => error,
    }
}
