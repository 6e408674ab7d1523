//! Rebuilding a run's metadata from its conversation: a `session.json` that is
//! missing (with a conversation on disk) or damaged never makes a run impossible to
//! show, resume, fork or delete.
//!
//! The session id is taken from `.summary.json` when that is intact, else from the
//! damaged `session.json`'s text when it still holds one, else a new one is made
//! (only the ids of bare-message lines derive from it). The listing fields are
//! recounted from `conversation.jsonl`, the subagents from `subagents/`. The rebuilt
//! file is written under the run's writer lock; a run held by a live chat is not
//! rewritten (the rebuilt metadata is used as read).

use std::path::Path;

use jiff::Timestamp;
use uuid::Uuid;

use crate::error::RunError;
use crate::meta::{SESSION_JSON, SessionJson};
use crate::run::RunWarning;
use crate::store::{
    CONVERSATION_JSONL, RUN_LOCK, SUBAGENTS_DIR, account, summary_of, write_session_json,
};
use crate::summary::{RUN_SUMMARY, SummaryWriter};
use reprise_session::Entry;
use reprise_session::StoreError;
use reprise_session::fs::{parent_of, remove_file_if_exists};
use reprise_session::parts::acquire;
use reprise_session::parts::jsonl_stems;
use reprise_session::parts::load_file_beneath;
use reprise_session::validate_id;

/// What is wrong with a run's `session.json`.
pub(crate) enum Damage {
    /// There is none (a run with a conversation always has one).
    Missing,
    /// Its bytes, and why they cannot be used.
    Unusable(Vec<u8>, String),
}

/// Rebuilds the `session.json` of the run in `dir` from its conversation. Returns the
/// session id (`None` for a missing `session.json` and no conversation: a run not
/// started yet, which needs nothing) and pushes a warning naming the file.
pub(crate) fn rebuild_session_json(
    dir: &Path,
    damage: Damage,
    warnings: &mut Vec<RunWarning>,
) -> Result<Option<String>, RunError> {
    let root = parent_of(dir);
    let path = dir.join(SESSION_JSON);
    let conversation = dir.join(CONVERSATION_JSONL);
    let summary = crate::summary::read(&dir.join(RUN_SUMMARY))
        .ok()
        .flatten()
        .map(|record| record.session_id);
    let (damaged_id, reason) = match &damage {
        Damage::Missing => (None, "missing".to_owned()),
        Damage::Unusable(bytes, reason) => (session_id_in(bytes), reason.clone()),
    };
    let session_id = [summary, damaged_id]
        .into_iter()
        .flatten()
        .find(|id| validate_id("session", id).is_ok())
        .unwrap_or_else(|| Uuid::now_v7().to_string());
    let loaded = load_file_beneath(root, &conversation, &session_id)?;
    let entries = loaded.map(|loaded| loaded.entries).unwrap_or_default();
    if matches!(damage, Damage::Missing) && entries.is_empty() {
        return Ok(None);
    }
    let mut meta = SessionJson {
        session_id: session_id.clone(),
        updated_at: std::fs::symlink_metadata(&conversation)
            .and_then(|meta| meta.modified())
            .ok()
            .and_then(|time| Timestamp::try_from(time).ok())
            .or_else(|| Some(Timestamp::now())),
        ..SessionJson::default()
    };
    account(
        &mut meta,
        &entries.iter().collect::<Vec<&Entry>>(),
        &reprise_redact::Redactor::new(),
    );
    for name in jsonl_stems(&dir.join(SUBAGENTS_DIR))? {
        if validate_id("subagent", &name).is_ok() {
            let relative = format!("{SUBAGENTS_DIR}/{name}.jsonl");
            meta.subagents.insert(name, relative);
        }
    }
    let written = match acquire(root, &dir.join(RUN_LOCK), &session_id) {
        Ok(_lock) => {
            // The summary goes first: it may name another session or stale counts.
            remove_file_if_exists(&dir.join(RUN_SUMMARY))?;
            write_session_json(&path, &meta, true)?;
            // The listing fields go to a new summary (session.json holds none).
            let mut record = summary_of(&meta);
            record.conversation_bytes = std::fs::symlink_metadata(&conversation)
                .ok()
                .map(|found| found.len());
            SummaryWriter::open(&dir.join(RUN_SUMMARY))?.write(&record)?;
            "rebuilt from conversation.jsonl".to_owned()
        }
        Err(StoreError::Locked { pid, .. }) => format!(
            "read as rebuilt from conversation.jsonl, not rewritten: the run is in use{}",
            pid.map(|pid| format!(" by process {pid}"))
                .unwrap_or_default()
        ),
        Err(error) => return Err(error.into()),
    };
    warnings.push(RunWarning {
        path,
        message: format!("{reason}; {written} ({} messages)", meta.message_count),
    });
    Ok(Some(session_id))
}

/// The `"sessionId"` a damaged `session.json` still spells out, if any.
fn session_id_in(bytes: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    let at = text.find("\"sessionId\"")?;
    let rest = text[at + "\"sessionId\"".len()..].trim_start();
    let rest = rest.strip_prefix(':')?.trim_start().strip_prefix('"')?;
    let end = rest.find('"')?;
    Some(rest[..end].to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_id_is_found_in_a_cut_session_json() {
        assert_eq!(
            session_id_in(br#"{"sessionId": "abc-1", "subagents": {"#).as_deref(),
            Some("abc-1")
        );
        assert_eq!(session_id_in(b"\x00\x01garbage"), None);
        assert_eq!(session_id_in(br#"{"sessionId": 7}"#), None);
    }
}
