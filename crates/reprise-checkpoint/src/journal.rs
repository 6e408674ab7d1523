//! The restore journal and the folder's mark.
//!
//! The journal (`restore.journal` in the store) is written and synced before a
//! restore changes the first file and removed once every change is durable. The
//! mark (`.reprise-restore` at the working folder's root) says the same from the
//! folder's side, for a process that knows the folder but not the run (a new chat
//! started there): it names the store whose journal it stands for. The journal is
//! written before the mark and removed after it, so a mark always has its journal.
//! A mark whose store holds no journal naming the same two checkpoints is not ours
//! (planted, or its run deleted) and is ignored.
//!
//! While the journal exists the folder may be half restored, and nothing captures,
//! previews or restores it until the restore is finished
//! ([`CheckpointStore::finish`](crate::CheckpointStore::finish)). Both name the two
//! checkpoints and nothing else is needed: the changes are the difference between
//! their trees.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::error::{CheckpointError, UnfinishedRestore, io_err};
use crate::folder::Folder;
use crate::id::CheckpointId;
use crate::store_file;

/// The journal's name in the store.
pub const JOURNAL_NAME: &str = "restore.journal";

/// The mark's name at the working folder's root.
pub const MARK_NAME: &str = ".reprise-restore";

/// The mark's name while it is written.
pub(crate) const MARK_TEMP_NAME: &str = ".reprise-restore.new";

/// The largest journal or mark read.
const LIMIT: u64 = 64 << 10;

/// The journal's content (JSON).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Journal {
    pub(crate) format: u32,
    /// The checkpoint of the folder taken just before the restore (its undo point).
    pub(crate) from: CheckpointId,
    /// The checkpoint the folder is being restored to.
    pub(crate) target: CheckpointId,
}

/// The mark's content (JSON).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Mark {
    format: u32,
    /// The store whose journal the mark stands for (absolute).
    store: PathBuf,
    from: CheckpointId,
    target: CheckpointId,
}

/// Writes the journal durably.
pub(crate) fn write(path: &Path, journal: &Journal) -> Result<(), CheckpointError> {
    let bytes =
        serde_json::to_vec(journal).map_err(|error| CheckpointError::io("encode", path, error))?;
    store_file::replace(path, &bytes, true)
}

/// The journal at `path`, if any.
pub(crate) fn read(path: &Path) -> Result<Option<Journal>, CheckpointError> {
    let Some(bytes) = store_file::read(path, LIMIT)? else {
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

/// The restore the store `store_dir` (a `<run>/checkpoints` folder) left
/// unfinished, if any; reads only.
pub fn unfinished_in_store(store_dir: &Path) -> Result<Option<UnfinishedRestore>, CheckpointError> {
    let store = std::fs::canonicalize(store_dir).unwrap_or_else(|_| store_dir.to_path_buf());
    Ok(
        read(&store.join(JOURNAL_NAME))?.map(|journal| UnfinishedRestore {
            store,
            from: journal.from,
            target: journal.target,
        }),
    )
}

/// The unfinished restore the mark at the root of `workdir` stands for, if any:
/// one whose store still holds the journal the mark names. Reads only; a folder
/// that cannot be opened has none.
pub fn unfinished_in_folder(workdir: &Path) -> Result<Option<UnfinishedRestore>, CheckpointError> {
    let Ok(folder) = Folder::open(workdir) else {
        return Ok(None);
    };
    unfinished_marked(&folder)
}

/// [`unfinished_in_folder`] of an opened folder.
pub(crate) fn unfinished_marked(
    folder: &Folder,
) -> Result<Option<UnfinishedRestore>, CheckpointError> {
    let Some(mark) = read_mark(folder)? else {
        return Ok(None);
    };
    let Ok(Some(journal)) = unfinished_in_store(&mark.store) else {
        return Ok(None);
    };
    Ok((journal.from == mark.from && journal.target == mark.target).then_some(journal))
}

fn read_mark(folder: &Folder) -> Result<Option<Mark>, CheckpointError> {
    let display = folder.display_path(Path::new(MARK_NAME));
    let fd = match rustix::fs::openat(
        folder.root(),
        MARK_NAME,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::NOENT | Errno::LOOP | Errno::ACCESS | Errno::ISDIR) => return Ok(None),
        Err(errno) => return Err(io_err("open", &display)(errno)),
    };
    let stat = rustix::fs::fstat(&fd).map_err(io_err("stat", &display))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(LIMIT)
        .read_to_end(&mut bytes)
        .map_err(io_err("read", &display))?;
    // Anything else under that name is not a mark of ours.
    Ok(serde_json::from_slice::<Mark>(&bytes)
        .ok()
        .filter(|mark| mark.store.is_absolute()))
}

/// Writes the mark of the journal of `store` at the root of `folder`, durably.
pub(crate) fn write_mark(
    folder: &Folder,
    store: &Path,
    journal: &Journal,
) -> Result<(), CheckpointError> {
    let display = folder.display_path(Path::new(MARK_NAME));
    let mark = Mark {
        format: journal.format,
        store: store.to_path_buf(),
        from: journal.from,
        target: journal.target,
    };
    let bytes = serde_json::to_vec(&mark)
        .map_err(|error| CheckpointError::io("encode", &display, error))?;
    match rustix::fs::unlinkat(folder.root(), MARK_TEMP_NAME, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => {}
        Err(errno) => return Err(io_err("remove", &display)(errno)),
    }
    let fd = rustix::fs::openat(
        folder.root(),
        MARK_TEMP_NAME,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )
    .map_err(io_err("create", &display))?;
    let mut file = std::fs::File::from(fd);
    file.write_all(&bytes).map_err(io_err("write", &display))?;
    file.sync_data().map_err(io_err("sync", &display))?;
    rustix::fs::renameat(folder.root(), MARK_TEMP_NAME, folder.root(), MARK_NAME)
        .map_err(io_err("rename", &display))?;
    rustix::fs::fsync(folder.root()).map_err(io_err("sync", folder.path()))
}

/// Removes the mark of `store` at the root of `folder` durably; another store's
/// mark (or a file that is no mark) stays. The temporary name a kill in
/// [`write_mark`] leaves goes too: like `write_mark`, it takes that name as its own.
pub(crate) fn remove_mark(folder: &Folder, store: &Path) -> Result<(), CheckpointError> {
    let display = folder.display_path(Path::new(MARK_NAME));
    match rustix::fs::unlinkat(folder.root(), MARK_TEMP_NAME, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => {}
        Err(errno) => return Err(io_err("remove", &display)(errno)),
    }
    if read_mark(folder)?.is_none_or(|mark| mark.store != store) {
        return Ok(());
    }
    match rustix::fs::unlinkat(folder.root(), MARK_NAME, AtFlags::empty()) {
        Ok(()) => rustix::fs::fsync(folder.root()).map_err(io_err("sync", folder.path())),
        Err(Errno::NOENT) => Ok(()),
        Err(errno) => Err(io_err("remove", &display)(errno)),
    }
}
