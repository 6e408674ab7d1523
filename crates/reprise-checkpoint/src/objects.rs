//! The object store: every file content, link target, tree and checkpoint record,
//! stored once under the SHA-256 of its bytes (`objects/ab/cdef…`).
//!
//! An object appears under its name only complete and durable: it is written to a
//! temporary file in `tmp/`, the batch's temporary files are synced, then renamed
//! into place, and the folders holding the new names are synced. A kill at any point
//! leaves at most temporary files (removed by the next start) and complete objects.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

use crate::error::{CheckpointError, io_err};
use crate::id::ObjectId;
use crate::store_file::sync_together;

/// Mode of every file and folder of the store.
const FILE_MODE: u32 = 0o600;
const DIR_MODE: u32 = 0o700;

/// Up to this many new files, a batch syncs each one; past it one `syncfs` costs
/// less than a journal commit per file.
const SYNC_EACH_LIMIT: usize = 32;

/// Temporary file names, unique within this process (the pid makes them unique
/// across processes).
static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);

/// The objects folder of one checkpoint store.
pub(crate) struct Objects {
    dir: PathBuf,
    fd: OwnedFd,
    tmp_dir: PathBuf,
    tmp: OwnedFd,
}

impl Objects {
    /// Opens (creating) `<store>/objects` and `<store>/tmp`.
    pub(crate) fn open(store: &Path) -> Result<Self, CheckpointError> {
        let dir = store.join("objects");
        let tmp_dir = store.join("tmp");
        let fd = open_private_dir(&dir)?;
        let tmp = open_private_dir(&tmp_dir)?;
        Ok(Self {
            dir,
            fd,
            tmp_dir,
            tmp,
        })
    }

    /// The objects folder.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the object `id` is stored.
    pub(crate) fn contains(&self, id: &ObjectId) -> bool {
        rustix::fs::statat(&self.fd, id.rel_path(), AtFlags::SYMLINK_NOFOLLOW).is_ok()
    }

    /// Opens the object `id` for reading.
    pub(crate) fn open_object(&self, id: &ObjectId) -> Result<File, CheckpointError> {
        match rustix::fs::openat(
            &self.fd,
            id.rel_path(),
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => Ok(File::from(fd)),
            Err(Errno::NOENT) => Err(self.missing(id)),
            Err(errno) => Err(io_err("open", &self.dir.join(id.rel_path()))(errno)),
        }
    }

    /// Reads the object `id` whole, refusing one longer than `limit` bytes.
    pub(crate) fn read(&self, id: &ObjectId, limit: u64) -> Result<Vec<u8>, CheckpointError> {
        let file = self.open_object(id)?;
        let mut bytes = Vec::new();
        file.take(limit.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(io_err("read", &self.dir.join(id.rel_path())))?;
        if bytes.len() as u64 > limit {
            return Err(self.damaged(id, "larger than any object of its kind"));
        }
        Ok(bytes)
    }

    /// The error for a missing object.
    pub(crate) fn missing(&self, id: &ObjectId) -> CheckpointError {
        CheckpointError::MissingObject {
            id: id.to_string(),
            dir: self.dir.clone(),
        }
    }

    /// The error for a damaged object.
    pub(crate) fn damaged(&self, id: &ObjectId, reason: &'static str) -> CheckpointError {
        CheckpointError::DamagedObject {
            id: id.to_string(),
            dir: self.dir.clone(),
            reason,
        }
    }

    /// Creates a new temporary file in `tmp/`, named after this process.
    fn create_temp(&self) -> Result<(String, File), CheckpointError> {
        let name = temp_name();
        let fd = rustix::fs::openat(
            &self.tmp,
            &name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(FILE_MODE),
        )
        .map_err(io_err("create", &self.tmp_dir.join(&name)))?;
        Ok((name, File::from(fd)))
    }

    /// Makes the object `id` a hard link to the object `id` of `source` (a copy when
    /// the two stores are on different file systems); durable once `batch` is
    /// committed.
    pub(crate) fn link_from(
        &self,
        source: &Objects,
        id: &ObjectId,
        batch: &mut Batch,
    ) -> Result<(), CheckpointError> {
        if self.contains(id) {
            return Ok(());
        }
        let name = temp_name();
        match rustix::fs::linkat(
            &source.fd,
            id.rel_path(),
            &self.tmp,
            &name,
            AtFlags::empty(),
        ) {
            Ok(()) => {
                batch.staged.push((name, *id));
                batch.sync_all = true;
                Ok(())
            }
            Err(Errno::XDEV | Errno::PERM) => {
                let (name, mut temp) = self.create_temp()?;
                let mut from = source.open_object(id)?;
                std::io::copy(&mut from, &mut temp)
                    .map_err(io_err("copy", &self.tmp_dir.join(&name)))?;
                batch.push(self, name, *id, temp)
            }
            Err(Errno::NOENT) => Err(source.missing(id)),
            Err(errno) => Err(io_err("link", &self.tmp_dir.join(&name))(errno)),
        }
    }

    /// Removes the temporary files that processes no longer running left in `tmp/`.
    pub(crate) fn remove_leftovers(&self) -> Result<(), CheckpointError> {
        let dir = rustix::fs::Dir::read_from(&self.tmp).map_err(io_err("read", &self.tmp_dir))?;
        for entry in dir {
            let entry = entry.map_err(io_err("read", &self.tmp_dir))?;
            let name = entry.file_name().to_bytes();
            let Some(pid) = std::str::from_utf8(name)
                .ok()
                .and_then(|name| name.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok())
            else {
                continue;
            };
            if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = rustix::fs::unlinkat(&self.tmp, entry.file_name(), AtFlags::empty());
            }
        }
        Ok(())
    }
}

/// Objects written to temporary files, to appear under their names together at
/// [`commit`](Batch::commit).
#[derive(Default)]
pub(crate) struct Batch {
    staged: Vec<(String, ObjectId)>,
    /// The new files, kept open to sync each while there are few of them.
    open: Vec<File>,
    sync_all: bool,
    /// Bytes written.
    pub(crate) bytes: u64,
}

impl Batch {
    /// Stores `bytes` as object `id` (their SHA-256) unless the store has it.
    pub(crate) fn add(
        &mut self,
        objects: &Objects,
        id: ObjectId,
        bytes: &[u8],
    ) -> Result<(), CheckpointError> {
        if objects.contains(&id) || self.staged.iter().rev().take(4).any(|(_, s)| *s == id) {
            return Ok(());
        }
        let (name, mut file) = objects.create_temp()?;
        file.write_all(bytes)
            .map_err(io_err("write", &objects.tmp_dir.join(&name)))?;
        self.push(objects, name, id, file)
    }

    fn push(
        &mut self,
        objects: &Objects,
        name: String,
        id: ObjectId,
        file: File,
    ) -> Result<(), CheckpointError> {
        let len = file
            .metadata()
            .map_err(io_err("stat", &objects.tmp_dir.join(&name)))?
            .len();
        self.bytes += len;
        self.staged.push((name, id));
        if self.open.len() < SYNC_EACH_LIMIT && !self.sync_all {
            self.open.push(file);
        } else {
            self.open.clear();
            self.sync_all = true;
        }
        Ok(())
    }

    /// Adds the objects of `other` to this batch.
    pub(crate) fn merge(&mut self, other: Batch) {
        self.bytes += other.bytes;
        self.sync_all |= other.sync_all;
        self.staged.extend(other.staged);
        self.open.extend(other.open);
        if self.open.len() > SYNC_EACH_LIMIT {
            self.open.clear();
            self.sync_all = true;
        }
    }

    /// How many objects the batch holds.
    pub(crate) fn len(&self) -> usize {
        self.staged.len()
    }

    /// Makes the batch's objects durable, then gives them their names, then makes
    /// the names durable.
    pub(crate) fn commit(self, objects: &Objects) -> Result<(), CheckpointError> {
        if self.staged.is_empty() {
            return Ok(());
        }
        if self.sync_all {
            rustix::fs::syncfs(&objects.tmp).map_err(io_err("sync", &objects.tmp_dir))?;
        } else {
            sync_together(&self.open, true).map_err(io_err("sync", &objects.tmp_dir))?;
        }
        let mut fanouts = BTreeSet::new();
        let mut new_fanout = false;
        for (name, id) in &self.staged {
            let rel = id.rel_path();
            let fanout = rel[..2].to_owned();
            if !fanouts.contains(&fanout) {
                match rustix::fs::mkdirat(&objects.fd, &fanout, Mode::from_raw_mode(DIR_MODE)) {
                    Ok(()) => new_fanout = true,
                    Err(Errno::EXIST) => {}
                    Err(errno) => return Err(io_err("create", &objects.dir.join(&fanout))(errno)),
                }
            }
            rustix::fs::renameat(&objects.tmp, name.as_str(), &objects.fd, rel.as_str())
                .map_err(io_err("rename", &objects.dir.join(&rel)))?;
            fanouts.insert(fanout);
        }
        if self.sync_all || fanouts.len() > SYNC_EACH_LIMIT {
            rustix::fs::syncfs(&objects.fd).map_err(io_err("sync", &objects.dir))?;
        } else {
            let mut dirs = Vec::with_capacity(fanouts.len() + 1);
            for fanout in &fanouts {
                let fd = rustix::fs::openat(
                    &objects.fd,
                    fanout.as_str(),
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(io_err("open", &objects.dir.join(fanout)))?;
                dirs.push(File::from(fd));
            }
            if new_fanout {
                let fd = rustix::fs::openat(
                    &objects.fd,
                    ".",
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(io_err("open", &objects.dir))?;
                dirs.push(File::from(fd));
            }
            sync_together(&dirs, false).map_err(io_err("sync", &objects.dir))?;
        }
        Ok(())
    }
}

/// A name for a temporary file: `<pid>-<n>`.
fn temp_name() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        NEXT_TEMP.fetch_add(1, Ordering::Relaxed)
    )
}

/// Opens the folder `dir` of a store, creating it (0700) and its parents when missing.
/// A link where it should be is refused.
pub(crate) fn open_private_dir(dir: &Path) -> Result<OwnedFd, CheckpointError> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::open(dir, flags, Mode::empty()) {
        Ok(fd) => return Ok(fd),
        Err(Errno::NOENT) => {}
        Err(errno) => return Err(io_err("open", dir)(errno)),
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)
        .map_err(io_err("create", dir))?;
    rustix::fs::open(dir, flags, Mode::empty()).map_err(io_err("open", dir))
}
