//! What the chat's commands read of a run kept here as a whole, and how a run an
//! import wrote as a folder is taken in: the parts of [`PgRunCatalog`] that go
//! beyond one query.
//!
//! [`PgRunCatalog`]: crate::PgRunCatalog

use reprise_redact::Redactor;
use reprise_runs::{
    CatalogError, RunCatalog, RunFolder, RunRecord, copy_run_entries, read_session_record,
};
use reprise_session::{SessionKey, StoreError};
use serde_json::{Value, json};

use crate::{PgRunCatalog, PgSessionStore, SessionSummary};

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

/// Takes in the run folder `written`: copies its entries into a new session named
/// like it, holding that session's writer lock, and removes the folder (also when
/// the copy fails: an import there is done again from its source). Returns the
/// session's name.
pub(crate) async fn take_in(
    catalog: &PgRunCatalog,
    written: &RunFolder,
) -> Result<String, CatalogError> {
    let copied = copy_in(catalog, written).await;
    let removed = tokio::fs::remove_dir_all(&written.dir)
        .await
        .map_err(|source| CatalogError::Delete {
            dir: written.dir.clone(),
            source,
        });
    // The import folder goes once it is empty.
    if let Some(parent) = written.dir.parent() {
        let _ = tokio::fs::remove_dir(parent).await;
    }
    let name = copied?;
    removed?;
    Ok(name)
}

async fn copy_in(catalog: &PgRunCatalog, written: &RunFolder) -> Result<String, CatalogError> {
    let name = written.name().to_owned();
    // The same session imported before has the same name.
    if catalog.store().summary(&name).await?.is_some() {
        return Err(StoreError::AlreadyExists { session: name }.into());
    }
    let store = catalog.store_for(written, &Redactor::new());
    let _lock = store.lock(&name).await?;
    if let Err(error) = copy_run_entries(&written.dir, &*store, &name).await {
        // No half-copied run is left behind.
        if let Ok(key) = SessionKey::session(&name) {
            let _ = store.delete(&key).await;
        }
        return Err(error.into());
    }
    Ok(name)
}
