//! Checkpoint records: the object naming a checkpoint's root tree, with what the
//! capture counted. Its SHA-256 is the checkpoint's id.

use crate::error::CheckpointError;
use crate::id::{CheckpointId, ObjectId};
use crate::objects::Objects;

/// The format number of restore journals.
pub(crate) const FORMAT: u32 = 1;

/// The format number written in every checkpoint record: 2 since file contents may
/// be stored compressed (`.zst` objects); a record of format 1 names objects that
/// are all stored as they are. Both are read.
pub(crate) const RECORD_FORMAT: u32 = 2;

/// The largest record read.
pub(crate) const RECORD_LIMIT: u64 = 64 << 10;

/// A checkpoint record, as stored (JSON).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Record {
    pub(crate) format: u32,
    pub(crate) kind: RecordKind,
    pub(crate) tree: ObjectId,
    pub(crate) created_at: jiff::Timestamp,
    pub(crate) files: u64,
    pub(crate) bytes: u64,
    pub(crate) skipped_ignored: u64,
    pub(crate) skipped_large: u64,
    pub(crate) skipped_special: u64,
    /// Files and folders that could not be read (absent in older records).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) skipped_unreadable: u64,
    pub(crate) added_bytes: u64,
    /// The links object: the captured files hard-linked together (absent when
    /// none are, and in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) links: Option<ObjectId>,
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

/// Tells a record from a file that happens to be JSON.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RecordKind {
    /// The only kind.
    Checkpoint,
}

/// Reads the record of checkpoint `id` from `objects`.
pub(crate) fn read(objects: &Objects, id: &CheckpointId) -> Result<Record, CheckpointError> {
    let bytes = objects.read(&id.0, RECORD_LIMIT)?;
    serde_json::from_slice(&bytes).map_err(|source| CheckpointError::BadRecord {
        id: *id,
        dir: objects.dir().to_path_buf(),
        source,
    })
}
