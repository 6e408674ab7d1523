//! Checkpoints of a working folder: what an agent's tool calls may change, recorded
//! before each call so that the folder can be put back (a rewind), undone, or
//! written out into a new folder (a fork with its files).
//!
//! A [`CheckpointStore`] lives in a run folder (`<run>/checkpoints`) and stores, as
//! git does, every file content once under its SHA-256 and one tree per folder, so
//! a checkpoint after a few changes costs a few objects. A stat cache keeps
//! unchanged files from being read again. What is captured: every file and link of
//! the folder except `.git`, the excluded paths (the runs folder), what `.gitignore`
//! files ignore, and files over a size limit; what is not captured is counted and
//! never touched. A file or folder the user may not read is named in the checkpoint
//! as not captured, and left as it is by a restore. File contents are stored
//! compressed (zstd) when that makes them smaller, and a checkpoint's objects of up
//! to 1 MiB go into one pack file rather than a file each; every object read is
//! checked against its name.
//!
//! ```no_run
//! use reprise_checkpoint::{CaptureOptions, CheckpointStore};
//!
//! # fn main() -> Result<(), reprise_checkpoint::CheckpointError> {
//! let options = CaptureOptions { exclude: vec![".run".into()], ..CaptureOptions::default() };
//! let mut store = CheckpointStore::open(".run/2026-11-30T09-38-04-123Z/checkpoints", ".", options)?;
//! let before = store.checkpoint()?;
//! // … a tool call changes files …
//! let preview = store.preview(&before.id)?;
//! println!("{} to restore, {} to delete", preview.restored.len(), preview.deleted.len());
//! let restored = store.restore(&before.id)?;
//! store.restore(&restored.undo)?; // and back
//! # Ok(())
//! # }
//! ```
//!
//! Every path in the folder is reached relative to a handle on its root without
//! following links, so a link in the folder never makes a capture read, or a
//! restore write, outside it; nothing is ever written to `.git`. A restore cut by
//! a crash is never built on: its journal (in the store) and its mark (at the
//! working folder's root), synced before the first change, make every operation
//! on that folder fail until [`CheckpointStore::finish`] finishes it, leaving the
//! files changed since the cut as they are. The on-disk layout is described in
//! docs/format.md ("Checkpoints of the working folder").

mod apply;
mod capture;
mod error;
mod folder;
mod id;
mod journal;
mod kill_hook;
mod links;
mod objects;
mod pack;
mod record;
mod scan;
mod share;
mod stat_cache;
mod store;
mod store_file;
mod tree;

pub use error::{CheckpointError, UnfinishedRestore};
pub use id::{CheckpointId, InvalidCheckpointId};
pub use journal::{JOURNAL_NAME, MARK_NAME, unfinished_in_folder, unfinished_in_store};
pub use share::share_checkpoints;
pub use store::{
    CaptureOptions, Checkpoint, CheckpointStore, DEFAULT_MAX_FILE_SIZE, FinishPreview,
    Materialized, RestorePreview, Restored, STORE_DIR_NAME,
};
