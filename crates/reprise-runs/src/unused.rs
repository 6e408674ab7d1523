//! Run folders in which nothing was written: what a chat that could not start, a
//! start that resumed another run, or a process killed while filling a new folder
//! leaves. They hold at most an empty `session.log` and `transcript.jsonl` (a
//! `session.log` of `(resumed run …)` notes counts as empty), the `.lock` and the
//! cached `context-window.json`; listings never show them, and `reprise prune`
//! removes them.
//!
//! A folder is removed only under its writer lock, so never while a chat has it
//! open, and only once nothing in it changed for [`UNUSED_GRACE`]: a chat that is
//! starting has made its folder but not yet taken the lock.

use std::fs::{self, DirEntry};
use std::io::{ErrorKind, Read};
use std::path::Path;
use std::time::{Duration, SystemTime};

use reprise_session::parts::acquire;
use reprise_session::{IoError, StoreError, validate_id};

use crate::error::RunError;
use crate::folder::{CONTEXT_WINDOW_JSON, SESSION_LOG};
use crate::run::RunFolder;
use crate::store::RUN_LOCK;
use crate::transcript::TRANSCRIPT_JSONL;

/// How long nothing in an unused run folder must have changed before
/// [`unused_run_folders`] offers it for removal.
pub const UNUSED_GRACE: Duration = Duration::from_secs(10 * 60);

/// The most bytes of a `session.log` read to tell whether it holds only notes.
const MAX_NOTES_BYTES: u64 = 64 * 1024;

/// What the chat writes in the folder of a start that resumed another run.
const RESUMED_NOTE: &str = "(resumed run ";

/// Whether the entry `entry` of a run folder is one that an unused folder may hold.
fn unused_entry(dir: &Path, entry: &DirEntry) -> bool {
    let name = entry.file_name();
    let Some(name) = name.to_str() else {
        return false;
    };
    let is_file = entry.file_type().is_ok_and(|kind| kind.is_file());
    match name {
        RUN_LOCK | CONTEXT_WINDOW_JSON => is_file,
        TRANSCRIPT_JSONL => is_file && entry.metadata().is_ok_and(|meta| meta.len() == 0),
        SESSION_LOG => is_file && only_notes(&dir.join(SESSION_LOG)),
        _ => false,
    }
}

/// Whether the `session.log` at `path` is empty or holds only `(resumed run …)` notes.
fn only_notes(path: &Path) -> bool {
    let Ok(file) = fs::File::open(path) else {
        return false;
    };
    let mut text = String::new();
    if file
        .take(MAX_NOTES_BYTES + 1)
        .read_to_string(&mut text)
        .is_err()
        || text.len() as u64 > MAX_NOTES_BYTES
    {
        return false;
    }
    text.lines()
        .all(|line| line.starts_with(RESUMED_NOTE) && line.ends_with(')'))
}

/// Whether the folder `dir` holds nothing written (see the module's docs), and the
/// latest modification time of it and what it holds.
fn unused(dir: &Path) -> Result<Option<SystemTime>, IoError> {
    let entries = fs::read_dir(dir).map_err(|source| IoError::new("list", dir, source))?;
    let mut latest = fs::symlink_metadata(dir)
        .and_then(|meta| meta.modified())
        .map_err(|source| IoError::new("stat", dir, source))?;
    for entry in entries {
        let entry = entry.map_err(|source| IoError::new("list", dir, source))?;
        if !unused_entry(dir, &entry) {
            return Ok(None);
        }
        if let Ok(modified) = entry.metadata().and_then(|meta| meta.modified()) {
            latest = latest.max(modified);
        }
    }
    Ok(Some(latest))
}

/// Removes the run folder `folder` when nothing was written in it (see the module's
/// docs), under its writer lock. Returns whether it was removed: a folder a chat
/// holds, or one that holds anything else, is kept.
pub fn remove_unused_run_folder(folder: &RunFolder) -> Result<bool, RunError> {
    match fs::symlink_metadata(&folder.dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => return Ok(false),
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(false),
        Err(source) => return Err(IoError::new("stat", &folder.dir, source).into()),
    }
    let runs_dir = reprise_session::fs::parent_of(&folder.dir);
    let _lock = match acquire(runs_dir, &folder.dir.join(RUN_LOCK), folder.name()) {
        Ok(lock) => lock,
        Err(StoreError::Locked { .. }) => return Ok(false),
        Err(error) => return Err(error.into()),
    };
    if unused(&folder.dir)?.is_none() {
        return Ok(false);
    }
    fs::remove_dir_all(&folder.dir)
        .map_err(|source| IoError::new("remove", &folder.dir, source))?;
    Ok(true)
}

/// The run folders under `runs_dir` in which nothing was written and nothing
/// changed for [`UNUSED_GRACE`] before `now`, oldest first. Folders that are links,
/// or that cannot be read, are not offered.
pub fn unused_run_folders(runs_dir: &Path, now: SystemTime) -> Result<Vec<RunFolder>, RunError> {
    let entries = match fs::read_dir(runs_dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(IoError::new("list", runs_dir, source).into()),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| IoError::new("list", runs_dir, source))?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if validate_id("run", &name).is_err() || !entry.file_type().is_ok_and(|kind| kind.is_dir())
        {
            continue;
        }
        let dir = entry.path();
        let Ok(Some(latest)) = unused(&dir) else {
            continue;
        };
        if now
            .duration_since(latest)
            .is_ok_and(|age| age >= UNUSED_GRACE)
        {
            found.push(RunFolder {
                dir,
                session_id: None,
                warnings: Vec::new(),
            });
        }
    }
    found.sort_by(|a, b| a.dir.cmp(&b.dir));
    Ok(found)
}
