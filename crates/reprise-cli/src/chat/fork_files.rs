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

use anyhow::{Context, Result, bail};
use reprise_checkpoint::{CaptureOptions, CheckpointId, Materialized};
use reprise_session::Entry;

use crate::chat::checkpoints::{open_store, run_workdir};
use crate::chat::rewind::checkpoint_after;

/// `dir` made absolute, when it is a folder that does not exist yet or is empty.
pub fn empty_destination(dir: &Path) -> Result<PathBuf> {
    let dir = std::path::absolute(dir)
        .with_context(|| format!("--workdir {}: cannot make it absolute", dir.display()))?;
    match std::fs::read_dir(&dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                bail!(
                    "--workdir {}: the folder is not empty (a fork writes its files into a new \
                     or empty folder)",
                    dir.display()
                );
            }
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            return Err(anyhow::Error::new(error).context(format!("--workdir {}", dir.display())));
        }
    }
    Ok(dir)
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
/// one recorded after its last entry.
pub fn fork_point(entries: &[Entry], copied: usize) -> Option<CheckpointId> {
    checkpoint_after(entries, copied.saturating_sub(1))
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
        .with_context(|| format!("cannot write the files into {}", spec.dir.display()))?;
    reprise_runs::write_workdir(spec.target, spec.dir)?;
    Ok(written)
}
