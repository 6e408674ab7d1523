//! File-system helpers for the session stores: private modes set at creation, synced
//! directory entries, and atomic whole-file writes.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::store::StoreError;

/// Mode of every directory a store creates.
pub(crate) const DIR_MODE: u32 = 0o700;
/// Mode of every file a store creates.
pub(crate) const FILE_MODE: u32 = 0o600;

/// Builds the `map_err` closure for an I/O failure on `path`.
pub(crate) fn io_err(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |source| StoreError::Io { op, path, source }
}

/// Makes the directory entries inside `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|handle| handle.sync_all())
        .map_err(io_err("sync", dir))
}

/// The directory holding `path` (`.` for a bare name).
pub(crate) fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// Creates `dir` and its missing parents with mode 0700. When `sync` is set, each
/// new directory's entry is synced in its parent, so a crash cannot lose it.
pub(crate) fn create_private_dir_all(dir: &Path, sync: bool) -> Result<(), StoreError> {
    if dir.is_dir() {
        return Ok(());
    }
    let parent = parent_of(dir);
    if parent != dir {
        create_private_dir_all(parent, sync)?;
    }
    match DirBuilder::new().mode(DIR_MODE).create(dir) {
        Ok(()) => {
            if sync {
                sync_dir(parent)?;
            }
            Ok(())
        }
        Err(error) if error.kind() == ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(source) => Err(StoreError::Io {
            op: "create directory",
            path: dir.to_path_buf(),
            source,
        }),
    }
}

/// Creates a new file 0600; fails if it exists.
pub(crate) fn create_new_private(path: &Path) -> Result<File, StoreError> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(path)
        .map_err(io_err("create", path))
}

/// A name for a temporary sibling of `path`, unique within this process and across
/// processes (pid), hidden (leading dot) so listings skip it.
pub(crate) fn temp_sibling(path: &Path, what: &str) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    parent_of(path).join(format!(".{name}.{what}-{}-{n}", std::process::id()))
}

/// Replaces `path` with `bytes` atomically: a 0600 temp file, then rename. With
/// `sync`, the data and the directory entry are durable before this returns.
pub(crate) fn write_file_atomic(path: &Path, bytes: &[u8], sync: bool) -> Result<(), StoreError> {
    let temp = temp_sibling(path, "tmp");
    let result = (|| {
        let mut file = create_new_private(&temp)?;
        file.write_all(bytes).map_err(io_err("write", &temp))?;
        if sync {
            file.sync_data().map_err(io_err("sync", &temp))?;
        }
        std::fs::rename(&temp, path).map_err(io_err("rename", path))?;
        if sync {
            sync_dir(parent_of(path))?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// Moves `from` to `to` only if `to` does not exist (a hard link, then the source
/// removed), so two racing creators cannot both win. Files only.
pub(crate) fn move_no_replace(from: &Path, to: &Path) -> Result<bool, StoreError> {
    match std::fs::hard_link(from, to) {
        Ok(()) => {
            std::fs::remove_file(from).map_err(io_err("remove", from))?;
            Ok(true)
        }
        Err(error) if error.kind() == ErrorKind::AlreadyExists => Ok(false),
        Err(source) => Err(StoreError::Io {
            op: "link",
            path: to.to_path_buf(),
            source,
        }),
    }
}

/// Removes the file `path`; one already gone is fine.
pub(crate) fn remove_file_if_exists(path: &Path) -> Result<(), StoreError> {
    gone_is_fine(std::fs::remove_file(path), path)
}

/// Removes the directory `path` and everything in it; one already gone is fine.
pub(crate) fn remove_dir_if_exists(path: &Path) -> Result<(), StoreError> {
    gone_is_fine(std::fs::remove_dir_all(path), path)
}

fn gone_is_fine(removed: std::io::Result<()>, path: &Path) -> Result<(), StoreError> {
    match removed {
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(()),
        other => other.map_err(io_err("remove", path)),
    }
}

/// True when `path` exists (without following a final symlink).
pub(crate) fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}
