//! Every fork of a run (`reprise fork`, `/fork`, `--fork-session`): the
//! conversation copied by the catalog, its title (`fork of <title>`), then the
//! checkpoints the copy names given
//! to the new run, their objects hard-linked from the source's store (copied only
//! across file systems), and the source's working folder recorded as the new
//! run's, so that a files rewind in the fork works, and goes on working once the
//! source is deleted.
//!
//! Checkpoints live in the run's local folder (`<runs>/<run>/checkpoints`) with
//! either catalog: a run kept in PostgreSQL has them on the machine that took
//! them, and a fork made elsewhere gets none.

use std::path::Path;

use crate::error::{ChatError, Result};
use reprise_checkpoint::{CheckpointId, STORE_DIR_NAME, share_checkpoints};
use reprise_runs::{CatalogFork, RunCatalog, RunFolder, RunFork};
use uuid::Uuid;

use crate::rewind::named_checkpoints;

/// A fork and what became of its checkpoints.
pub struct Forked {
    /// The new run.
    pub fork: CatalogFork,
    /// Why the new run has none of the checkpoints its conversation names, for the
    /// person: its files cannot be rewound. `None` when it has them all (or the
    /// source had none).
    pub warning: Option<String>,
    /// Why the new run has no title, for the person; `None` when it has one.
    pub title_warning: Option<String>,
}

/// Forks `source` into `target` (up to and including entry `up_to`, or all of it)
/// and gives the new run the checkpoints its conversation names, plus `also`.
pub async fn fork_with_checkpoints(
    runs: &dyn RunCatalog,
    source: &RunFolder,
    target: RunFolder,
    up_to: Option<Uuid>,
    also: &[CheckpointId],
) -> Result<Forked> {
    let fork = runs
        .fork(RunFork {
            source,
            target,
            up_to,
        })
        .await?;
    let warning = match give_checkpoints(runs, source, &fork.folder, also).await {
        Ok(()) => None,
        Err(error) => Some(format!(
            "the fork has no checkpoints of the working folder, so its files cannot be \
             rewound: {}",
            crate::error_text::with_causes(&error)
        )),
    };
    let title_warning = give_title(runs, source, &fork.folder)
        .await
        .err()
        .map(|error| {
            format!(
                "the fork has no title: {}",
                crate::error_text::with_causes(&error)
            )
        });
    Ok(Forked {
        fork,
        warning,
        title_warning,
    })
}

/// The title of a fork of a run titled `title` (or, untitled, named `name`): the
/// same for every kind of fork, so that `reprise runs` and the `/resume` list tell
/// the copy from the original.
pub fn fork_title(title: Option<&str>, name: &str) -> String {
    format!("fork of {}", title.unwrap_or(name))
}

async fn give_title(runs: &dyn RunCatalog, source: &RunFolder, fork: &RunFolder) -> Result<()> {
    let title = runs.labels(source).await?.and_then(|labels| labels.title);
    runs.set_title(fork, &fork_title(title.as_deref(), source.name()))
        .await?;
    Ok(())
}

async fn give_checkpoints(
    runs: &dyn RunCatalog,
    source: &RunFolder,
    fork: &RunFolder,
    also: &[CheckpointId],
) -> Result<()> {
    let source_store = source.dir.join(STORE_DIR_NAME);
    // The source's working folder is the fork's until it is given another.
    let workdir = reprise_runs::read_workdir(&source.dir).unwrap_or(None);
    if workdir.is_none() && !source_store.is_dir() {
        return Ok(());
    }
    runs.ensure_local_folder(fork).await?;
    if let Some(workdir) = &workdir {
        reprise_runs::write_workdir(&fork.dir, workdir)?;
    }
    if !source_store.is_dir() {
        return Ok(());
    }
    let entries = runs
        .entries(fork, None)
        .await?
        .map(|loaded| loaded.entries)
        .unwrap_or_default();
    let mut ids = named_checkpoints(&entries);
    ids.extend_from_slice(also);
    if ids.is_empty() {
        return Ok(());
    }
    share(&source_store, &fork.dir.join(STORE_DIR_NAME), &ids)
}

fn share(source_store: &Path, fork_store: &Path, ids: &[CheckpointId]) -> Result<()> {
    share_checkpoints(source_store, fork_store, ids)
        .map(drop)
        .map_err(|source| ChatError::ShareCheckpoints {
            store: source_store.to_path_buf(),
            source,
        })
}
