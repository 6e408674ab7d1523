//! Checkpoints given from one store to another (a fork): every loose object a
//! checkpoint reaches, and every pack holding one, hard-linked (copied only across
//! file systems), so that the fork costs no space and outlives its source.

use std::collections::HashSet;
use std::path::Path;

use crate::error::CheckpointError;
use crate::id::{CheckpointId, ObjectId};
use crate::objects::{Batch, Objects};
use crate::record;
use crate::store_file;
use crate::tree::{self, Kind};

/// A tree is a list of names: one larger than this is not one of ours.
const TREE_LIMIT: u64 = 256 << 20;

/// Gives `to` the checkpoints `ids` of `from`; returns how many objects were added.
///
/// Every object is staged first (loose ones renamed into place before packs, packs
/// in the order they were written), and the records' own batch is committed last:
/// a kill in the middle leaves objects no record names yet, never a record naming a
/// missing object.
pub(crate) fn share(
    from: &Objects,
    to: &Objects,
    ids: &[CheckpointId],
) -> Result<u64, CheckpointError> {
    let mut seen: HashSet<ObjectId> = HashSet::new();
    let mut batch = Batch::default();
    let mut records = Batch::default();
    for id in ids {
        if !seen.insert(id.0) {
            continue;
        }
        let record = record::read(from, id)?;
        // Walked top-down, staged bottom-up: a tree after everything below it.
        let mut order = Vec::new();
        let mut pending = vec![record.tree];
        while let Some(tree_id) = pending.pop() {
            if !seen.insert(tree_id) {
                continue;
            }
            order.push(tree_id);
            let bytes = from.read(&tree_id, TREE_LIMIT)?;
            if ObjectId::of(&bytes) != tree_id {
                return Err(from.damaged(&tree_id, "its content does not match its name"));
            }
            let entries = tree::decode(&bytes).map_err(|reason| from.damaged(&tree_id, reason))?;
            for entry in entries {
                if entry.kind == Kind::Dir {
                    pending.push(entry.id);
                } else if entry.kind != Kind::Unreadable && seen.insert(entry.id) {
                    order.push(entry.id);
                }
            }
        }
        for object in order.iter().rev() {
            to.link_from(from, object, &mut batch)?;
        }
        to.link_from(from, &id.0, &mut records)?;
    }
    let added = (batch.len() + records.len()) as u64;
    batch.commit(to)?;
    records.commit(to)?;
    Ok(added)
}

/// Gives the checkpoint store in `target_dir` (created when missing) the
/// checkpoints `ids` of the store in `source_dir`, for a fork of a run: their
/// objects are hard-linked, not copied (copied only across file systems), so the
/// fork costs no space and survives the source's deletion. Neither store's working
/// folder is needed. The last of `ids` becomes the target's latest checkpoint.
/// Returns how many objects were added.
pub fn share_checkpoints(
    source_dir: impl AsRef<Path>,
    target_dir: impl AsRef<Path>,
    ids: &[CheckpointId],
) -> Result<u64, CheckpointError> {
    let from = Objects::open(source_dir.as_ref())?;
    let to = Objects::open(target_dir.as_ref())?;
    let added = share(&from, &to, ids)?;
    if let Some(last) = ids.last() {
        store_file::overwrite(
            &target_dir.as_ref().join(store_file::HEAD_NAME),
            format!("{last}\n").as_bytes(),
        )?;
    }
    Ok(added)
}
