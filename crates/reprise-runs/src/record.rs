//! A run as it is kept, whole: its record and every entry of its conversation and of
//! its subagents, for an export; and the copy of a run folder's entries into any
//! [`SessionStore`], for an import into runs kept elsewhere.

use std::path::Path;

use reprise_session::{Entry, LoadWarning, SessionKey, SessionStore, load_file};
use serde_json::Value;

use crate::{CONVERSATION_JSONL, RunError, SUBAGENTS_DIR};

/// A run as it is kept: what [`RunCatalog::record`](crate::RunCatalog::record)
/// reads.
#[derive(Clone, Debug, Default)]
pub struct RunRecord {
    /// The run's name.
    pub name: String,
    /// Its `session.json` as it is (or the same fields, where runs are kept
    /// elsewhere): `sessionId`, `createdAt`, `title`, `importedFrom`, `forkedFrom`, …
    pub session: Value,
    /// The main conversation's entries.
    pub main: Vec<Entry>,
    /// Each subagent's name and entries, by name.
    pub subagents: Vec<(String, Vec<Entry>)>,
    /// What was skipped or repaired while reading.
    pub warnings: Vec<LoadWarning>,
}

/// Reads the run folder `dir`: `session.json`, the conversation, and each subagent
/// named in `session.json` or kept in `subagents/`.
pub fn read_run_record(dir: &Path) -> Result<RunRecord, RunError> {
    let (name, session, names) = crate::record_reader::record_head(dir)?;
    let id = session["sessionId"].as_str().unwrap_or_default().to_owned();
    let mut warnings = Vec::new();
    let mut load = |path: &Path| -> Result<Vec<Entry>, RunError> {
        let Some(loaded) = load_file(path, &id)? else {
            return Ok(Vec::new());
        };
        warnings.extend(loaded.warnings);
        Ok(loaded.entries)
    };
    let main = load(&dir.join(CONVERSATION_JSONL))?;
    let mut subagents = Vec::new();
    for name in names {
        let path = dir.join(SUBAGENTS_DIR).join(format!("{name}.jsonl"));
        let entries = load(&path)?;
        subagents.push((name, entries));
    }
    Ok(RunRecord {
        name,
        session,
        main,
        subagents,
        warnings,
    })
}

/// Reads session `session_id` of `store` whole, its subagents by name; `session`
/// is the record to give it.
pub async fn read_session_record(
    store: &dyn SessionStore,
    name: &str,
    session_id: &str,
    session: Value,
) -> Result<RunRecord, RunError> {
    let mut warnings = Vec::new();
    let main = store
        .load(&SessionKey::session(session_id)?)
        .await?
        .unwrap_or_default();
    warnings.extend(main.warnings);
    let mut keys = store.list_subkeys(session_id).await?;
    keys.sort_by(|a, b| a.subagent_name().cmp(&b.subagent_name()));
    let mut subagents = Vec::new();
    for key in keys {
        let Some(agent) = key.subagent_name().map(str::to_owned) else {
            continue;
        };
        let loaded = store.load(&key).await?.unwrap_or_default();
        warnings.extend(loaded.warnings);
        subagents.push((agent, loaded.entries));
    }
    Ok(RunRecord {
        name: name.to_owned(),
        session,
        main: main.entries,
        subagents,
        warnings,
    })
}

/// Appends the conversation of the run folder `dir` and of each of its subagents
/// to session `session_id` of `into`; the caller holds that session's writer lock.
pub async fn copy_run_entries(
    dir: &Path,
    into: &dyn SessionStore,
    session_id: &str,
) -> Result<(), RunError> {
    let record = read_run_record(dir)?;
    into.append(&SessionKey::session(session_id)?, &record.main)
        .await?;
    // A subagent named in `session.json` without entries has nothing to copy.
    for (agent, entries) in record.subagents.iter().filter(|(_, e)| !e.is_empty()) {
        into.append(&SessionKey::subagent(session_id, agent)?, entries)
            .await?;
    }
    Ok(())
}
