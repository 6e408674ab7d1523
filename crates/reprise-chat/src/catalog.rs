//! Where conversations are kept: in the run folders, or in a PostgreSQL database that
//! many machines reach (`--database-url`). The one place that chooses; everything
//! else holds the chosen [`RunCatalog`].

use std::path::Path;
use std::sync::Arc;

use crate::error::{ChatError, Result};
use reprise_postgres::{PgRunCatalog, PgSessionStore, PgStoreOptions};
use reprise_runs::{FolderCatalog, RunCatalog};

/// How long a command waits for the database before saying it cannot be reached.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The runs of `runs_dir`, or of the database at `database_url` when one is given
/// (connecting to it, and bringing its schema up to date), where writers hold a
/// conversation with leases of `lease`.
pub async fn open_catalog(
    runs_dir: &Path,
    database_url: Option<&str>,
    lease: std::time::Duration,
) -> Result<Arc<dyn RunCatalog>> {
    let Some(url) = database_url else {
        return Ok(Arc::new(FolderCatalog::new(runs_dir)));
    };
    let options = PgStoreOptions {
        acquire_timeout: CONNECT_TIMEOUT,
        ..PgStoreOptions::default().with_lease(lease)
    };
    // The error names the server (host, port, database), never the password.
    let store = PgSessionStore::connect(url, options)
        .await
        .map_err(ChatError::Database)?;
    Ok(Arc::new(PgRunCatalog::new(runs_dir, store)))
}
