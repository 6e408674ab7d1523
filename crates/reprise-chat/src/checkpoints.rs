//! Checkpoints of the working folder, taken by the chat before the calls that may
//! change it (`reprise-checkpoint`, stored in `<run>/checkpoints`), and the store of
//! a run as `reprise rewind` and `reprise fork --workdir` open it.
//!
//! A checkpoint that cannot be taken does not stop the conversation: the chat says
//! so and the calls run without one (a later rewind to that point is refused, or
//! goes to an earlier checkpoint, never to the next one). Files it cannot read are
//! left out of it, and the chat names them.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::{ChatError, Result};
use futures::future::BoxFuture;
use reprise_agent::BeforeChanges;
use reprise_checkpoint::{
    CaptureOptions, Checkpoint, CheckpointError, CheckpointStore, STORE_DIR_NAME, UnfinishedRestore,
};
use tokio::sync::mpsc::UnboundedSender;

use crate::config::Settings;
use crate::error_text::with_causes;
use crate::events::UiEvent;

/// What the chat's checkpoints capture: files up to the configured size, never
/// the runs folder.
pub fn capture_options(settings: &Settings) -> CaptureOptions {
    let runs_dir =
        std::path::absolute(&settings.runs_dir).unwrap_or_else(|_| settings.runs_dir.clone());
    CaptureOptions {
        max_file_size: settings.checkpoint_max_file_size,
        exclude: vec![runs_dir],
    }
}

/// The error naming the run whose cut `restore` of `workdir` must be finished.
pub fn unfinished_error(workdir: &Path, restore: &UnfinishedRestore) -> ChatError {
    // The store is `<run>/checkpoints`.
    let run = restore
        .store
        .parent()
        .and_then(Path::file_name)
        .map_or_else(
            || restore.store.display().to_string(),
            |name| name.to_string_lossy().into_owned(),
        );
    ChatError::UnfinishedRestore {
        workdir: workdir.to_path_buf(),
        run,
    }
}

/// A checkpoint store's error, with a cut restore named as one to finish.
pub fn checkpoint_error(error: CheckpointError) -> ChatError {
    match error {
        CheckpointError::Unfinished { workdir, restore } => unfinished_error(&workdir, &restore),
        other => ChatError::Checkpoint(other),
    }
}

/// Fails when a restore was cut before it finished in `workdir` (its mark is at
/// the folder's root) or by the run in `run_dir` (its journal is in the run's
/// store): what works in that folder or opens that run checks this first. Reads
/// only.
pub fn refuse_unfinished(workdir: &Path, run_dir: &Path) -> Result<()> {
    let own = reprise_checkpoint::unfinished_in_store(&run_dir.join(STORE_DIR_NAME))?;
    let found = match own {
        Some(restore) => Some(restore),
        None => reprise_checkpoint::unfinished_in_folder(workdir)?,
    };
    match found {
        None => Ok(()),
        Some(restore) => Err(unfinished_error(workdir, &restore)),
    }
}

/// Whether the run in `run_dir` has a restore a crash cut (its journal is there),
/// for the listings: one `stat`.
pub fn restore_cut(run_dir: &Path) -> bool {
    run_dir
        .join(STORE_DIR_NAME)
        .join(reprise_checkpoint::JOURNAL_NAME)
        .exists()
}

/// [`restore_cut`] of each of `run_dirs`, in order: one `stat` each, relative to
/// the folder the runs are in, held open while consecutive runs share it (a
/// listing's all do), instead of a walk of each whole path from the root. Many runs
/// are split between a few threads: the time is the kernel's lookups of names.
pub fn restore_cuts(run_dirs: &[&Path]) -> Vec<bool> {
    const PARALLEL_FROM: usize = 256;
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(4);
    if threads < 2 || run_dirs.len() < PARALLEL_FROM {
        return restore_cuts_in_turn(run_dirs);
    }
    let chunk = run_dirs.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let workers: Vec<_> = run_dirs
            .chunks(chunk)
            .map(|part| (part, scope.spawn(move || restore_cuts_in_turn(part))))
            .collect();
        workers
            .into_iter()
            // A worker that panicked is redone here, so no run goes unchecked.
            .flat_map(|(part, worker)| worker.join().unwrap_or_else(|_| restore_cuts_in_turn(part)))
            .collect()
    })
}

/// [`restore_cuts`] in this thread.
fn restore_cuts_in_turn(run_dirs: &[&Path]) -> Vec<bool> {
    let mut held: Option<(&Path, Option<rustix::fd::OwnedFd>)> = None;
    let mut relative = String::new();
    run_dirs
        .iter()
        .copied()
        .map(|dir| {
            let (Some(parent), Some(name)) =
                (dir.parent(), dir.file_name().and_then(|name| name.to_str()))
            else {
                return restore_cut(dir);
            };
            // Compared as bytes: comparing paths parses them into components.
            if held
                .as_ref()
                .is_none_or(|(folder, _)| folder.as_os_str() != parent.as_os_str())
            {
                let opened = rustix::fs::open(
                    parent,
                    rustix::fs::OFlags::PATH
                        | rustix::fs::OFlags::DIRECTORY
                        | rustix::fs::OFlags::CLOEXEC,
                    rustix::fs::Mode::empty(),
                );
                held = Some((parent, opened.ok()));
            }
            let Some((_, Some(folder))) = &held else {
                return restore_cut(dir);
            };
            relative.clear();
            for part in [name, STORE_DIR_NAME, reprise_checkpoint::JOURNAL_NAME] {
                if !relative.is_empty() {
                    relative.push('/');
                }
                relative.push_str(part);
            }
            // Links followed, as `Path::exists` does.
            rustix::fs::statat(folder, relative.as_str(), rustix::fs::AtFlags::empty()).is_ok()
        })
        .collect()
}

/// What `reprise show` and `reprise runs` say of a run whose restore was cut.
pub fn restore_cut_note(run: &str) -> String {
    format!(
        "note: run {run}: a rewind was cut before it finished restoring the files of its \
         working folder; nothing works in that folder until `reprise rewind {run} --finish` \
         finishes it"
    )
}

/// Opens (creating) the checkpoint store of the run in `run_dir` over `workdir`.
pub fn open_store(
    run_dir: &Path,
    workdir: &Path,
    options: CaptureOptions,
) -> Result<CheckpointStore> {
    CheckpointStore::open(run_dir.join(STORE_DIR_NAME), workdir, options).map_err(|source| {
        ChatError::OpenCheckpoints {
            workdir: workdir.to_path_buf(),
            run_dir: run_dir.to_path_buf(),
            source,
        }
    })
}

/// The working folder of the run in `run_dir`: the one it recorded, else `fallback`
/// (the folder the chat was started in), and why a recorded one was not taken (it
/// is no longer the folder the run was given, or reprise did not record it).
pub fn run_workdir(run_dir: &Path, fallback: &Path) -> (PathBuf, Option<String>) {
    match reprise_runs::read_workdir(run_dir) {
        Ok(Some(workdir)) => (workdir, None),
        Ok(None) => (fallback.to_path_buf(), None),
        Err(error) => (fallback.to_path_buf(), Some(with_causes(&error))),
    }
}

/// The chat's [`BeforeChanges`] hook: a checkpoint of the working folder before
/// calls that may change it. The store is opened, and the working folder recorded
/// in the run, at the first checkpoint: a run whose tools never change anything
/// gets neither. Clones share the store: `/rewind` restores through the same one.
#[derive(Clone)]
pub struct FolderCheckpoints {
    inner: Arc<Inner>,
}

struct Inner {
    run_dir: PathBuf,
    workdir: PathBuf,
    options: CaptureOptions,
    store: Mutex<Option<CheckpointStore>>,
    ui: UnboundedSender<UiEvent>,
    /// Whether calls ran after the latest checkpoint (see [`FolderCheckpoints::settle`]).
    unsettled: AtomicBool,
}

impl FolderCheckpoints {
    /// Checkpoints of `workdir`, kept in the run folder `run_dir`.
    pub fn new(
        run_dir: PathBuf,
        workdir: PathBuf,
        options: CaptureOptions,
        ui: UnboundedSender<UiEvent>,
    ) -> Self {
        FolderCheckpoints {
            inner: Arc::new(Inner {
                run_dir,
                workdir,
                options,
                store: Mutex::new(None),
                ui,
                unsettled: AtomicBool::new(false),
            }),
        }
    }
}

impl FolderCheckpoints {
    /// Runs `work` on the run's checkpoint store (the one the chat's checkpoints
    /// are taken with), off the async threads. Fails when the run has none.
    pub async fn with_store<R: Send + 'static>(
        &self,
        work: impl FnOnce(&mut CheckpointStore) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            let mut guard = inner.store.lock().unwrap_or_else(PoisonError::into_inner);
            work(inner.opened(&mut guard, false)?)
        })
        .await
        .map_err(ChatError::CheckpointTask)?
    }

    /// Checkpoints the folder as the calls of a run left it, when calls ran after
    /// the latest checkpoint. A rewind's preview names the files changed outside
    /// reprise by comparing the folder with the latest checkpoint: without this one,
    /// taken when the turn ends, it would also name what the turn's own calls
    /// changed. It is named by no entry of the conversation. A failure only leaves
    /// those files in the next preview.
    pub async fn settle(&self) {
        if !self.inner.unsettled.swap(false, Ordering::AcqRel) {
            return;
        }
        let inner = Arc::clone(&self.inner);
        match tokio::task::spawn_blocking(move || inner.take()).await {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => {
                tracing::warn!("checkpoint after the calls: {}", with_causes(&error))
            }
            Err(error) => tracing::warn!("checkpoint after the calls: {error}"),
        }
    }
}

impl Inner {
    fn take(&self) -> Result<Checkpoint> {
        let mut guard = self.store.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(self.opened(&mut guard, true)?.checkpoint()?)
    }

    /// The run's store, opened at its first use. `taking`: a checkpoint is about to
    /// be taken, so the working folder is recorded first; otherwise a run that has
    /// no store fails.
    fn opened<'s>(
        &self,
        slot: &'s mut Option<CheckpointStore>,
        taking: bool,
    ) -> Result<&'s mut CheckpointStore> {
        match slot {
            Some(store) => Ok(store),
            slot @ None => {
                if taking {
                    // A run that recorded no folder, or one it can no longer take,
                    // works here from now on.
                    if !matches!(reprise_runs::read_workdir(&self.run_dir), Ok(Some(_))) {
                        reprise_runs::write_workdir(&self.run_dir, &self.workdir)?;
                    }
                } else if !self.run_dir.join(STORE_DIR_NAME).is_dir() {
                    return Err(ChatError::NoCheckpoints);
                }
                Ok(slot.insert(open_store(
                    &self.run_dir,
                    &self.workdir,
                    self.options.clone(),
                )?))
            }
        }
    }
}

impl BeforeChanges for FolderCheckpoints {
    fn before_changes(&self) -> BoxFuture<'_, Option<String>> {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move {
            let ui = inner.ui.clone();
            let taken = tokio::task::spawn_blocking({
                let inner = Arc::clone(&inner);
                move || inner.take()
            })
            .await;
            // The calls run whether or not the checkpoint was taken.
            inner.unsettled.store(true, Ordering::Release);
            let error = match taken {
                Ok(Ok(checkpoint)) => {
                    if !checkpoint.not_captured.is_empty() {
                        let _ = ui.send(UiEvent::Warning(not_captured_warning(&checkpoint)));
                    }
                    return Some(checkpoint.id.to_string());
                }
                Ok(Err(error)) => with_causes(&error),
                Err(error) => error.to_string(),
            };
            let _ = ui.send(UiEvent::Warning(format!(
                "no checkpoint of the working folder before these calls (they run anyway; a \
                 rewind cannot bring back what they change): {error}"
            )));
            None
        })
    }
}

/// What the chat says when a checkpoint left out paths it could not read.
fn not_captured_warning(checkpoint: &Checkpoint) -> String {
    /// Past this many, the paths are counted rather than named.
    const NAMED: usize = 10;
    let mut names: Vec<String> = checkpoint
        .not_captured
        .iter()
        .take(NAMED)
        .map(|path| path.display().to_string())
        .collect();
    if checkpoint.not_captured.len() > NAMED {
        names.push(format!(
            "and {} more",
            checkpoint.not_captured.len() - NAMED
        ));
    }
    format!(
        "the checkpoint before these calls could not read, and left out: {} (a rewind to it \
         leaves them as they are)",
        names.join(", ")
    )
}
