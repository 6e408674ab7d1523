//! The errors of checkpoints.

use std::path::{Path, PathBuf};

use crate::id::{CheckpointId, InvalidCheckpointId};

/// What went wrong while capturing, restoring or reading a checkpoint.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// A file operation failed: what was being done, and to which path.
    #[error("{op} {}", path.display())]
    Io {
        /// The operation (`read`, `rename`, …).
        op: &'static str,
        /// The file or folder it was done to.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// An object that a checkpoint or tree names is not in the store.
    #[error("{}: object {id} is missing", dir.display())]
    MissingObject {
        /// The object's name (its SHA-256, in hexadecimal).
        id: String,
        /// The checkpoint store.
        dir: PathBuf,
    },
    /// An object that is not in the store, which holds a pack that cannot be used
    /// (damaged, cut short, or not a pack): the object may have been in it.
    #[error("{}: not a usable pack of checkpoints ({reason}); object {id} is missing", pack.display())]
    BadPack {
        /// The object's name.
        id: String,
        /// The pack.
        pack: PathBuf,
        /// What is wrong with the pack.
        reason: String,
    },
    /// An object whose bytes are not what it must hold.
    #[error("{}: object {id} is damaged: {reason}", dir.display())]
    DamagedObject {
        /// The object's name.
        id: String,
        /// The checkpoint store.
        dir: PathBuf,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A checkpoint record that is not one.
    #[error("{}: checkpoint {id} is not a checkpoint record", dir.display())]
    BadRecord {
        /// The checkpoint.
        id: CheckpointId,
        /// The checkpoint store.
        dir: PathBuf,
        /// Why it does not parse.
        #[source]
        source: serde_json::Error,
    },
    /// A text that is not a checkpoint id.
    #[error(transparent)]
    InvalidId(#[from] InvalidCheckpointId),
    /// The restore journal cannot be read.
    #[error("{}: not a restore journal; restore the folder by hand or delete the file", path.display())]
    BadJournal {
        /// The journal file.
        path: PathBuf,
        /// Why it does not parse.
        #[source]
        source: serde_json::Error,
    },
    /// A checkpoint is materialized only into a new or empty folder.
    #[error("{}: not an empty folder; a checkpoint is materialized only into a new or empty folder", path.display())]
    NotEmpty {
        /// The folder.
        path: PathBuf,
    },
    /// A restore of the working folder was cut before it finished: nothing but
    /// finishing it touches the folder.
    #[error(
        "{}: a restore of this folder was cut before it finished (its files may be half restored); it must be finished first (journal in {})",
        workdir.display(),
        restore.store.display()
    )]
    Unfinished {
        /// The working folder.
        workdir: PathBuf,
        /// The restore that was cut (boxed: the error stays small).
        restore: Box<UnfinishedRestore>,
    },
    /// The folder to capture cannot be used.
    #[error("{}: the folder to capture must be an existing folder", path.display())]
    BadFolder {
        /// The folder.
        path: PathBuf,
        /// Why it cannot be used.
        #[source]
        source: std::io::Error,
    },
}

impl CheckpointError {
    /// The error for `op` failing on `path`.
    pub(crate) fn io(op: &'static str, path: &Path, source: impl Into<std::io::Error>) -> Self {
        Self::Io {
            op,
            path: path.to_path_buf(),
            source: source.into(),
        }
    }
}

/// Builds the `map_err` closure for `op` failing on `path`.
pub(crate) fn io_err<E: Into<std::io::Error>>(
    op: &'static str,
    path: &Path,
) -> impl FnOnce(E) -> CheckpointError {
    move |source| CheckpointError::io(op, path, source)
}

/// A restore that was cut before it finished: the folder may be half restored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnfinishedRestore {
    /// The checkpoint store whose journal records it (`<run>/checkpoints`).
    pub store: PathBuf,
    /// The checkpoint the folder was taken at just before the restore.
    pub from: CheckpointId,
    /// The checkpoint the folder was being restored to.
    pub target: CheckpointId,
}
