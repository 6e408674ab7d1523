//! Copying a run's conversation into a new run: in run folders, or in the database.

use anyhow::{Context, Result};
use reprise_session::runs::{RunFolder, RunStore};

use crate::runs::source::RunSource;

/// A run folder that a fork just filled, with its store: the store owns the fork's
/// background data sync, which closing or dropping it waits for.
pub struct Forked {
    /// The new run folder.
    pub folder: RunFolder,
    /// Its store (`None` for a fork in the database, which is done when it returns).
    pub store: Option<RunStore>,
}

/// Copies a run's conversation (up to entry `up_to`, or all) into `target`, a run
/// folder without a conversation.
pub async fn fork_into(
    runs: &RunSource,
    source: &RunFolder,
    target: RunFolder,
    up_to: Option<uuid::Uuid>,
) -> Result<Forked> {
    if runs.is_database() {
        let folder = runs.fork_in_database(source, &target, up_to).await?;
        return Ok(Forked {
            folder,
            store: None,
        });
    }
    let source_dir = source.dir.clone();
    let target_dir = target.dir.clone();
    let forked = tokio::task::spawn_blocking(move || {
        reprise_session::runs::fork_run(&source_dir, &target_dir, up_to)
    })
    .await
    .context("the fork was interrupted")?
    .with_context(|| format!("cannot fork run {}", source.name()))?;
    Ok(Forked {
        folder: RunFolder::open(&target.dir)?,
        store: Some(forked.store),
    })
}
