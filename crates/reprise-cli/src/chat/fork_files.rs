//! A fork with its files: the working folder of a run, as it was at the fork's
//! point, written into a new or empty folder that the new run then works in.
//!
//! The files are those of the first checkpoint taken after the fork's last message
//! (before anything done after it changed the folder), else the folder as it is
//! now. The new run's checkpoint store gets every checkpoint its copied
//! conversation names, as hard links to the source's objects, so that rewinds work
//! in the fork too.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use reprise_checkpoint::{CaptureOptions, CheckpointId, Materialized, STORE_DIR_NAME};
use reprise_session::{Entry, Rewind, checkpoint_of};

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
    /// The new run's folder.
    pub target: &'a Path,
    /// The source conversation's entries.
    pub entries: &'a [Entry],
    /// How many of them the fork copied.
    pub copied: usize,
    /// Where the files go (new or empty, absolute).
    pub dir: &'a Path,
    /// What checkpoints capture.
    pub options: CaptureOptions,
}

/// Writes the files into `spec.dir`, gives the new run the checkpoints its
/// conversation names and records `spec.dir` as its working folder. `fallback`: the
/// source's working folder when it recorded none.
pub fn fork_files(spec: ForkFiles<'_>, fallback: &Path) -> Result<Materialized> {
    let source_workdir = run_workdir(spec.source, fallback);
    let has_store = spec.source.join(STORE_DIR_NAME).is_dir();
    let mut named: Vec<CheckpointId> = spec.entries[..spec.copied]
        .iter()
        .filter_map(|entry| {
            checkpoint_of(entry)
                .map(str::to_owned)
                .or_else(|| Rewind::from_entry(entry)?.undo)?
                .parse()
                .ok()
        })
        .collect();
    let at = checkpoint_after(spec.entries, spec.copied.saturating_sub(1));
    let mut store = open_store(spec.target, &source_workdir, spec.options.clone())?;
    if has_store {
        let source = open_store(spec.source, &source_workdir, spec.options.clone())?;
        named.extend(at);
        store
            .share_objects_from(&source, &named)
            .context("cannot give the fork the source's checkpoints")?;
    }
    let files = match at.filter(|_| has_store) {
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
