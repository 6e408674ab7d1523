//! A run rewound from outside a chat (`reprise rewind`): the run's writer lock taken
//! (a run open in a chat is not rewound under it), its conversation read, the plan
//! made and its preview written, then, once the person agrees, carried out: the
//! files restored, the rewind entry appended, the lock released at once (in a
//! database the lease would keep the run "in use" a while).
//!
//! `/rewind` in an open chat is [`rewind_steps`](crate::rewind_steps); both plan,
//! preview and carry out with [`rewind`](crate::rewind).
//!
//! A run or a working folder with a restore a crash cut (see
//! `reprise_checkpoint::UnfinishedRestore`) is rewound in no other way than
//! `--finish`, which finishes that restore, leaving the files changed since the
//! cut as they are, and records it as a files rewind.

use std::path::PathBuf;
use std::sync::Arc;

use reprise_checkpoint::CheckpointStore;
use reprise_runs::{RunCatalog, RunFolder};
use reprise_session::{SessionKey, SessionStore, WriterLock};

use crate::checkpoints::{
    capture_options, checkpoint_error, open_store, refuse_unfinished, run_workdir,
};
use crate::config::Settings;
use crate::error::{ChatError, Result};
use crate::rewind::{
    RewindPart, RewindPlan, carry_out, finish_cut_restore, finish_preview_text, left_unreadable,
    plan_rewind, plan_undo, preview_with_folder, restore_preview,
};

/// What to rewind a run to.
#[derive(Clone, Copy, Debug)]
pub struct RunRewindTarget<'a> {
    /// The person's message to go back to (its number or entry uuid); `None` with
    /// `undo`.
    pub to: Option<&'a str>,
    /// What is rewound.
    pub part: RewindPart,
    /// Undo the latest rewind instead.
    pub undo: bool,
    /// Finish the restore a crash cut instead (`--finish`).
    pub finish: bool,
    /// Where the checkpoint after the message is missing, restore the nearest
    /// earlier one (an older state) rather than refuse.
    pub nearest_earlier: bool,
}

/// A rewind of a run, planned and previewed, holding the run's writer lock until it
/// is carried out or let go.
pub struct PreparedRunRewind {
    run: RunFolder,
    store: Arc<dyn SessionStore>,
    lock: WriterLock,
    key: SessionKey,
    /// `None`: the restore a crash cut is finished.
    plan: Option<RewindPlan>,
    checkpoints: Option<CheckpointStore>,
    /// The run's working folder, where the files are restored.
    pub workdir: PathBuf,
    /// What the rewind will do, in words (raw: escaped where shown).
    pub preview: String,
}

/// Plans the rewind of the run `spec` names to `target`, under the run's writer
/// lock. `warn` is told when the run's recorded working folder is not taken (the
/// current directory is used instead).
pub async fn prepare_run_rewind(
    runs: &dyn RunCatalog,
    settings: &Settings,
    spec: &str,
    target: RunRewindTarget<'_>,
    warn: &mut dyn FnMut(&str),
) -> Result<PreparedRunRewind> {
    let run = runs.find(spec).await?;
    let Some(session_id) = run.session_id.as_deref() else {
        return Err(ChatError::NothingToRewind {
            run: run.name().to_owned(),
        });
    };
    let store = runs.store_for(&run, &reprise_redact::Redactor::new().with_env_secrets());
    // A run open in a chat is not rewound under it.
    let lock = match store.lock(session_id).await {
        Ok(lock) => lock,
        Err(error @ reprise_session::StoreError::Locked { .. }) => {
            return Err(ChatError::RewindInUse {
                run: run.name().to_owned(),
                source: error,
            });
        }
        Err(error) => return Err(error.into()),
    };
    let key = SessionKey::session(session_id)?;
    if target.finish {
        return prepare_finish(runs, settings, run, store, lock, key, warn).await;
    }
    let entries = store.load(&key).await?.unwrap_or_default().entries;
    let plan = if target.undo {
        plan_undo(&entries)?
    } else {
        let Some(to) = target.to else {
            return Err(ChatError::NoRewindTarget);
        };
        plan_rewind(&entries, to, target.part, target.nearest_earlier)?
    };
    runs.ensure_local_folder(&run).await?;
    let (workdir, not_taken) = run_workdir(&run.dir, &std::env::current_dir()?);
    if let Some(warning) = not_taken {
        warn(&warning);
    }
    // A half restored folder is only finished (`--finish`), a dry run included.
    refuse_unfinished(&workdir, &run.dir)?;
    let mut checkpoints = match &plan.files {
        Some(_) => {
            if !run.dir.join(reprise_checkpoint::STORE_DIR_NAME).is_dir() {
                return Err(ChatError::NoCheckpointsHere {
                    run: run.name().to_owned(),
                    dir: run.dir.clone(),
                });
            }
            Some(open_store(&run.dir, &workdir, capture_options(settings))?)
        }
        None => None,
    };
    let preview = match (&plan.files, checkpoints.as_mut()) {
        (Some(target), Some(store)) => Some(restore_preview(store, target, &workdir)?),
        _ => None,
    };
    let preview = preview_with_folder(&plan, preview.as_ref(), &workdir);
    Ok(PreparedRunRewind {
        run,
        store,
        lock,
        key,
        plan: Some(plan),
        checkpoints,
        workdir,
        preview,
    })
}

/// Prepares `--finish`: what finishing the run's cut restore will do.
async fn prepare_finish(
    runs: &dyn RunCatalog,
    settings: &Settings,
    run: RunFolder,
    store: Arc<dyn SessionStore>,
    lock: WriterLock,
    key: SessionKey,
    warn: &mut dyn FnMut(&str),
) -> Result<PreparedRunRewind> {
    runs.ensure_local_folder(&run).await?;
    let (workdir, not_taken) = run_workdir(&run.dir, &std::env::current_dir()?);
    if let Some(warning) = not_taken {
        warn(&warning);
    }
    let nothing = || ChatError::NothingToFinish {
        run: run.name().to_owned(),
    };
    if !run.dir.join(reprise_checkpoint::STORE_DIR_NAME).is_dir() {
        // The folder's cut restore may be another run's: that one is named.
        refuse_unfinished(&workdir, &run.dir)?;
        return Err(nothing());
    }
    let mut checkpoints = open_store(&run.dir, &workdir, capture_options(settings))?;
    let Some(preview) = checkpoints.finish_preview().map_err(checkpoint_error)? else {
        refuse_unfinished(&workdir, &run.dir)?;
        return Err(nothing());
    };
    let preview = finish_preview_text(&preview, &workdir);
    Ok(PreparedRunRewind {
        run,
        store,
        lock,
        key,
        plan: None,
        checkpoints: Some(checkpoints),
        workdir,
        preview,
    })
}

impl PreparedRunRewind {
    /// The run's name.
    pub fn run_name(&self) -> &str {
        self.run.name()
    }

    /// Lets the run go unchanged.
    pub async fn let_go(self) -> Result<()> {
        Ok(self.lock.release().await?)
    }

    /// Carries the rewind out: the files restored (when it restores any), the
    /// rewind entry appended, the lock released and the store closed. Returns what
    /// the restore left as it was because no checkpoint could read it, in words.
    pub async fn carry_out(mut self) -> Result<Option<String>> {
        let (entry, done) = match (&self.plan, self.checkpoints.as_mut()) {
            (Some(plan), checkpoints) => carry_out(plan, checkpoints)?,
            (None, Some(checkpoints)) => {
                (finish_cut_restore(checkpoints, self.run.name())?.1, None)
            }
            (None, None) => return Err(ChatError::NoCheckpointStore),
        };
        self.store
            .append(&self.key, std::slice::from_ref(&entry))
            .await?;
        // Released now: in a database the lease would keep the run "in use" a while.
        self.lock.release().await?;
        self.store.close().await?;
        Ok(done.as_ref().and_then(left_unreadable))
    }
}
