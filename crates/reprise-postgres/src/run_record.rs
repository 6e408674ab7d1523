//! What the chat's commands read of a run kept here as a whole, and how a run an
//! import wrote as a folder is taken in: the parts of [`PgRunCatalog`] that go
//! beyond one query.
//!
//! [`PgRunCatalog`]: crate::PgRunCatalog

use std::path::Path;

use reprise_runs::{CatalogError, RunRecord, copy_run_entries, read_session_record};
use reprise_session::{SessionKey, SessionStore};
use serde_json::{Value, json};

use crate::{PgSessionStore, SessionSummary};

/// The fields of a run folder's `session.json` that the database keeps.
fn session_json(summary: &SessionSummary) -> Value {
    let info = &summary.info;
    let mut session = json!({
        "sessionId": info.id,
        "createdAt": info.created_at.to_string(),
        "updatedAt": info.updated_at.to_string(),
        "messageCount": summary.message_count,
        "tags": summary.tags,
    });
    if let Some(title) = &summary.title {
        session["title"] = Value::String(title.clone());
    }
    if let Some(origin) = &info.forked_from {
        session["forkedFrom"] = json!({
            "session": origin.session,
            "entry": origin.entry.map(|entry| entry.to_string()),
        });
    }
    session
}

/// Session `name` whole; an empty record when there is none.
pub(crate) async fn record(store: &PgSessionStore, name: &str) -> Result<RunRecord, CatalogError> {
    let Some(summary) = store.summary(name).await? else {
        return Ok(RunRecord {
            name: name.to_owned(),
            ..RunRecord::default()
        });
    };
    Ok(read_session_record(store, name, name, session_json(&summary)).await?)
}

/// Copies the run folder `dir` into session `session_id`, a new one, holding its
/// writer lock; then removes the folder.
pub(crate) async fn take_in(
    store: &dyn SessionStore,
    dir: &Path,
    session_id: &str,
) -> Result<(), CatalogError> {
    {
        let _lock = store.lock(session_id).await?;
        if let Err(error) = copy_run_entries(dir, store, session_id).await {
            // No half-copied run is left behind.
            if let Ok(key) = SessionKey::session(session_id) {
                let _ = store.delete(&key).await;
            }
            return Err(error.into());
        }
    }
    std::fs::remove_dir_all(dir).map_err(|source| CatalogError::Delete {
        dir: dir.to_path_buf(),
        source,
    })?;
    // The import folder goes once it is empty.
    if let Some(parent) = dir.parent() {
        let _ = std::fs::remove_dir(parent);
    }
    Ok(())
}
