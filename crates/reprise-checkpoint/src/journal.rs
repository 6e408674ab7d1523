//! The restore journal: written and synced before a restore changes the first file,
//! removed once every change is durable. While it exists, the folder may be half
//! restored; the next operation on the store (or `recover`) rolls the restore
//! forward, so a crash leaves the folder as it was before the restore or as it is
//! after it, never in between.
//!
//! It names the two checkpoints, and nothing else is needed: the changes are the
//! difference between their trees, and applying them again is harmless.

use std::path::Path;

use crate::error::{CheckpointError, io_err};
use crate::id::CheckpointId;
use crate::store_file;

/// The journal's content (JSON).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Journal {
    pub(crate) format: u32,
    /// The checkpoint of the folder taken just before the restore (its undo point).
    pub(crate) from: CheckpointId,
    /// The checkpoint the folder is being restored to.
    pub(crate) target: CheckpointId,
}

/// Writes the journal durably.
pub(crate) fn write(path: &Path, journal: &Journal) -> Result<(), CheckpointError> {
    let bytes =
        serde_json::to_vec(journal).map_err(|error| CheckpointError::io("encode", path, error))?;
    store_file::replace(path, &bytes, true)
}

/// The journal at `path`, if any.
pub(crate) fn read(path: &Path) -> Result<Option<Journal>, CheckpointError> {
    let Some(bytes) = store_file::read(path, 64 << 10)? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|source| CheckpointError::BadJournal {
            path: path.to_path_buf(),
            source,
        })
}

/// Removes the journal durably.
pub(crate) fn remove(path: &Path) -> Result<(), CheckpointError> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(io_err("remove", path)(error)),
    }
    store_file::sync_dir(path.parent().unwrap_or(Path::new(".")))
}
