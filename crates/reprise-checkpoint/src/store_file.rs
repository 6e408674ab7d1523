//! Whole files of the store replaced atomically (`head`, the stat cache, the restore
//! journal): a private temporary sibling, renamed over the name.

use std::io::Write;
use std::path::Path;

use rustix::fs::{Mode, OFlags};

use crate::error::{CheckpointError, io_err};

/// The file naming the checkpoint the working folder was last known to equal.
pub(crate) const HEAD_NAME: &str = "head";

/// Replaces `path` with `bytes`. With `sync`, the data and the name are durable
/// before this returns.
pub(crate) fn replace(path: &Path, bytes: &[u8], sync: bool) -> Result<(), CheckpointError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .unwrap_or(path.as_os_str())
        .to_string_lossy();
    let temp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let fd = rustix::fs::open(
        &temp,
        OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(io_err("create", &temp))?;
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes).map_err(io_err("write", &temp))?;
    if sync {
        file.sync_data().map_err(io_err("sync", &temp))?;
    }
    drop(file);
    std::fs::rename(&temp, path).map_err(io_err("rename", path))?;
    if sync {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Makes the names in `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), CheckpointError> {
    let fd = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(io_err("open", dir))?;
    rustix::fs::fsync(&fd).map_err(io_err("sync", dir))
}

/// Syncs `files` (their data, and their size when `data_only` is false) at once:
/// one thread each, so that the file system commits them together rather than one
/// journal commit after another.
pub(crate) fn sync_together(files: &[std::fs::File], data_only: bool) -> std::io::Result<()> {
    let sync = |file: &std::fs::File| {
        if data_only {
            file.sync_data()
        } else {
            file.sync_all()
        }
    };
    if files.len() <= 1 {
        return files.iter().try_for_each(sync);
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = files
            .iter()
            .map(|file| scope.spawn(move || sync(file)))
            .collect();
        handles.into_iter().try_for_each(|handle| {
            handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    })
}

/// Writes the short `text` over the start of `path` without truncating or renaming
/// (a rename over a file makes ext4 write that file's data at once): for `head`,
/// whose content always has the same length. Not synced: it is a hint.
pub(crate) fn overwrite(path: &Path, text: &[u8]) -> Result<(), CheckpointError> {
    let fd = rustix::fs::open(
        path,
        OFlags::WRONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(io_err("open", path))?;
    let file = std::fs::File::from(fd);
    std::os::unix::fs::FileExt::write_all_at(&file, text, 0).map_err(io_err("write", path))?;
    let len = file.metadata().map_err(io_err("stat", path))?.len();
    if len != text.len() as u64 {
        file.set_len(text.len() as u64)
            .map_err(io_err("truncate", path))?;
    }
    Ok(())
}

/// Reads the small file `path` of the store; `None` when it does not exist.
pub(crate) fn read(path: &Path, limit: u64) -> Result<Option<Vec<u8>>, CheckpointError> {
    let fd = match rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(errno) => return Err(io_err("open", path)(errno)),
    };
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(std::fs::File::from(fd), limit),
        &mut bytes,
    )
    .map_err(io_err("read", path))?;
    Ok(Some(bytes))
}
