//! Whole files of the store replaced atomically (`head`, the stat cache, the restore
//! journal): a private temporary sibling, renamed over the name.

use std::io::Write;
use std::path::Path;

use rustix::fs::{Mode, OFlags};

use crate::error::{CheckpointError, io_err};

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
