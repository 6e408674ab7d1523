//! A fork with its files: the working folder of a run, as it was at the fork's
//! point, written into a new or empty folder that the new run then works in.
//!
//! The files are those of the first checkpoint taken after the fork's last message
//! (before anything done after it changed the folder), else the folder as it is
//! now. The new run's checkpoint store already holds every checkpoint its copied
//! conversation names (`fork_checkpoints`), so that rewinds work in the fork too.
//! The user's `.git` is not carried: checkpoints leave it out, so the new folder
//! has none.

use std::path::{Path, PathBuf};

use crate::error::{ChatError, Result};
use reprise_checkpoint::{CaptureOptions, CheckpointId, Materialized};
use reprise_session::Entry;

use crate::checkpoints::{open_store, run_workdir};
use crate::rewind::{FilesAfter, files_after};

/// `dir` made absolute, when it is a folder that does not exist yet or is empty.
pub fn empty_destination(dir: &Path) -> Result<PathBuf> {
    let dir = std::path::absolute(dir).map_err(|source| ChatError::WorkdirNotAbsolute {
        dir: dir.to_path_buf(),
        source,
    })?;
    match std::fs::read_dir(&dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(ChatError::WorkdirNotEmpty { dir });
            }
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            return Err(ChatError::Workdir { dir, source: error });
        }
    }
    Ok(dir)
}

/// `path` with links resolved: its deepest existing ancestor canonicalized, the
/// rest appended (a folder that does not exist yet).
pub fn resolved(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = path;
    loop {
        if let Ok(real) = std::fs::canonicalize(at) {
            return rest.iter().rev().fold(real, |real, name| real.join(name));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                at = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// Refuses a folder for a fork's files inside the runs folder `runs_dir`.
pub fn outside_runs(dir: &Path, runs_dir: &Path) -> Result<()> {
    let runs = resolved(&std::path::absolute(runs_dir).unwrap_or_else(|_| runs_dir.to_path_buf()));
    if resolved(dir).starts_with(&runs) {
        return Err(ChatError::WorkdirInRuns {
            dir: dir.to_path_buf(),
            runs,
        });
    }
    Ok(())
}

/// What a fork with files needs.
pub struct ForkFiles<'a> {
    /// The source run's folder.
    pub source: &'a Path,
    /// The new run's folder, already given the checkpoints its conversation names
    /// and `at` (see `fork_checkpoints`).
    pub target: &'a Path,
    /// The checkpoint of the fork's point: the first one recorded after the fork's
    /// last entry; `None` when nothing changed the folder since.
    pub at: Option<CheckpointId>,
    /// Where the files go (new or empty, absolute).
    pub dir: &'a Path,
    /// What checkpoints capture.
    pub options: CaptureOptions,
}

/// The checkpoint a fork of the first `copied` of `entries` writes out: the first
/// one recorded after its last entry (`None`: nothing changed the folder since).
/// Where that checkpoint is missing (it could not be taken), the fork with files
/// is refused: the next one would be a later state.
pub fn fork_point(entries: &[Entry], copied: usize) -> Result<Option<CheckpointId>> {
    match files_after(entries, copied.saturating_sub(1)) {
        FilesAfter::Unchanged => Ok(None),
        FilesAfter::Checkpoint(id) => Ok(Some(id)),
        FilesAfter::Missing { .. } => Err(ChatError::ForkCheckpointMissing),
    }
}

/// Writes the files into `spec.dir` and records it as the new run's working
/// folder. `fallback`: the source's working folder when it recorded none.
pub fn fork_files(spec: ForkFiles<'_>, fallback: &Path) -> Result<Materialized> {
    let (source_workdir, _) = run_workdir(spec.source, fallback);
    let mut store = open_store(spec.target, &source_workdir, spec.options.clone())?;
    let files = match spec.at {
        Some(id) => id,
        // Nothing changed the folder since: it is taken as it is now.
        None => store.checkpoint()?.id,
    };
    let written = store
        .materialize(&files, spec.dir)
        .map_err(|source| ChatError::WriteFiles {
            dir: spec.dir.to_path_buf(),
            source,
        })?;
    reprise_runs::write_workdir(spec.target, spec.dir)?;
    Ok(written)
}
