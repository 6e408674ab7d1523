//! The object store: every file content, link target, tree and checkpoint record,
//! stored once under the SHA-256 of its bytes. Objects of up to 1 MiB go into the
//! pack a batch writes (`packs/`, see [`pack`](crate::pack)); larger ones are loose
//! files (`objects/ab/cdef…`). A file's content is stored compressed (a zstd
//! frame; loose, `objects/ab/cdef….zst`) when that makes it smaller. Stores written
//! before packs (loose objects only) and before compression are read as they are.
//!
//! An object appears under its name only complete and durable: a batch's pack and
//! loose objects are written to temporary files in `tmp/`, synced, then renamed
//! into place (the pack holding the batch's last object, a checkpoint's record,
//! last), and the folders holding the new names are synced. A kill at any point
//! leaves at most temporary files (removed by the next start) and complete objects.
//! Every object read is checked against its name.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};
use rustix::io::Errno;
use sha2::{Digest, Sha256};

use crate::error::{CheckpointError, io_err};
use crate::id::ObjectId;
use crate::pack::{self, PACKED_MAX, PackWriter};
use crate::store_file::sync_together;

/// The zstd level of file contents: zstd's default, several times faster than the
/// disk at writing and within a few percent of the higher levels on text.
const LEVEL: i32 = 3;

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
    packs_dir: PathBuf,
    packs_fd: OwnedFd,
    /// The packs read so far; new ones are looked for when an object is not found.
    packs: RwLock<Packs>,
}

/// The packs of a store, as read.
#[derive(Default)]
struct Packs {
    /// The names of the packs in use.
    names: Vec<String>,
    /// Every pack name seen, in use or refused.
    seen: HashSet<String>,
    /// Where each packed object is: its pack (in `names`) and its entry.
    index: HashMap<ObjectId, (usize, pack::Entry)>,
    /// Packs whose index is damaged (or that could not be opened), and why: none
    /// of their objects is used.
    refused: Vec<(String, String)>,
    /// The sequence number the next pack written gets.
    next_seq: u64,
}

impl Packs {
    /// Reads the index of the pack `name` of `packs_fd`; one that is not a pack is
    /// remembered as refused.
    fn load(&mut self, packs_fd: &OwnedFd, name: String) {
        if !self.seen.insert(name.clone()) {
            return;
        }
        if let Some(seq) = pack::seq_of(&name) {
            self.next_seq = self.next_seq.max(seq.saturating_add(1));
        }
        let opened = rustix::fs::openat(
            packs_fd,
            name.as_str(),
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| format!("cannot open it: {}", std::io::Error::from(errno)))
        .and_then(|fd| pack::read_index(&File::from(fd)));
        match opened {
            Ok(entries) => self.add(name, entries),
            Err(reason) => self.refused.push((name, reason)),
        }
    }

    fn add(&mut self, name: String, entries: Vec<pack::Entry>) {
        let at = self.names.len();
        self.names.push(name);
        for entry in entries {
            self.index.entry(entry.id).or_insert((at, entry));
        }
    }
}

/// Where an object is stored.
enum Location {
    /// A loose file, by its name below `objects/`.
    Loose(String),
    /// In a pack, by the pack's name.
    Packed(String),
}

impl Objects {
    /// Opens (creating) `<store>/objects`, `<store>/packs` and `<store>/tmp`, and
    /// reads the packs' indexes.
    pub(crate) fn open(store: &Path) -> Result<Self, CheckpointError> {
        let dir = store.join("objects");
        let tmp_dir = store.join("tmp");
        let packs_dir = store.join("packs");
        let fd = open_private_dir(&dir)?;
        let tmp = open_private_dir(&tmp_dir)?;
        let packs_fd = open_private_dir(&packs_dir)?;
        let objects = Self {
            dir,
            fd,
            tmp_dir,
            tmp,
            packs_dir,
            packs_fd,
            packs: RwLock::new(Packs::default()),
        };
        objects.refresh()?;
        Ok(objects)
    }

    /// The objects folder.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    fn packs(&self) -> RwLockReadGuard<'_, Packs> {
        self.packs
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn packs_mut(&self) -> RwLockWriteGuard<'_, Packs> {
        self.packs
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Reads the packs that appeared in `packs/` since the last look (another
    /// process may have written some), in the order they were written.
    fn refresh(&self) -> Result<(), CheckpointError> {
        let dir =
            rustix::fs::Dir::read_from(&self.packs_fd).map_err(io_err("read", &self.packs_dir))?;
        let mut new = Vec::new();
        {
            let packs = self.packs();
            for entry in dir {
                let entry = entry.map_err(io_err("read", &self.packs_dir))?;
                let Ok(name) = entry.file_name().to_str() else {
                    continue;
                };
                if name.ends_with(pack::SUFFIX) && !packs.seen.contains(name) {
                    new.push(name.to_owned());
                }
            }
        }
        if new.is_empty() {
            return Ok(());
        }
        new.sort();
        let mut packs = self.packs_mut();
        for name in new {
            packs.load(&self.packs_fd, name);
        }
        Ok(())
    }

    /// Whether the object `id` is stored (packed, or loose compressed or not), as
    /// far as this process has looked.
    pub(crate) fn contains(&self, id: &ObjectId) -> bool {
        self.packs().index.contains_key(id) || self.stored_name(id).is_some()
    }

    /// Where the object `id` is stored, looking for new packs once if it is not
    /// found.
    fn locate(&self, id: &ObjectId) -> Result<Option<Location>, CheckpointError> {
        for first in [true, false] {
            {
                let packs = self.packs();
                if let Some((at, _)) = packs.index.get(id) {
                    return Ok(Some(Location::Packed(packs.names[*at].clone())));
                }
            }
            if let Some(name) = self.stored_name(id) {
                return Ok(Some(Location::Loose(name)));
            }
            if first {
                self.refresh()?;
            }
        }
        Ok(None)
    }

    /// The name the loose object `id` is stored under, if it is.
    fn stored_name(&self, id: &ObjectId) -> Option<String> {
        [id.rel_path(), id.rel_path_compressed()]
            .into_iter()
            .find(|name| rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW).is_ok())
    }

    /// Opens the object `id` for reading.
    pub(crate) fn open_object(&self, id: &ObjectId) -> Result<ObjectFile, CheckpointError> {
        for first in [true, false] {
            if let Some(found) = self.open_packed(id)? {
                return Ok(found);
            }
            for (name, compressed) in [(id.rel_path(), false), (id.rel_path_compressed(), true)] {
                match rustix::fs::openat(
                    &self.fd,
                    &name,
                    OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                ) {
                    Ok(fd) => {
                        return Ok(ObjectFile {
                            id: *id,
                            dir: self.dir.clone(),
                            path: self.dir.join(name),
                            stored: Stored::Loose {
                                file: File::from(fd),
                                compressed,
                            },
                        });
                    }
                    Err(Errno::NOENT) => {}
                    Err(errno) => return Err(io_err("open", &self.dir.join(name))(errno)),
                }
            }
            if first {
                self.refresh()?;
            }
        }
        Err(self.missing(id))
    }

    fn open_packed(&self, id: &ObjectId) -> Result<Option<ObjectFile>, CheckpointError> {
        let (name, entry) = {
            let packs = self.packs();
            let Some((at, entry)) = packs.index.get(id) else {
                return Ok(None);
            };
            (packs.names[*at].clone(), *entry)
        };
        let path = self.packs_dir.join(&name);
        let fd = rustix::fs::openat(
            &self.packs_fd,
            name.as_str(),
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(io_err("open", &path))?;
        Ok(Some(ObjectFile {
            id: *id,
            dir: self.dir.clone(),
            path,
            stored: Stored::Packed {
                file: File::from(fd),
                entry,
            },
        }))
    }

    /// Reads the object `id` whole, refusing one longer than `limit` bytes.
    pub(crate) fn read(&self, id: &ObjectId, limit: u64) -> Result<Vec<u8>, CheckpointError> {
        let object = self.open_object(id)?;
        if let Stored::Packed { entry, .. } = &object.stored {
            if u64::from(entry.size) > limit {
                return Err(self.damaged(id, "larger than any object of its kind"));
            }
            return object.read_packed();
        }
        let path = object.path.clone();
        let mut bytes = Vec::new();
        object
            .reader()?
            .take(limit.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(io_err("read", &path))?;
        if bytes.len() as u64 > limit {
            return Err(self.damaged(id, "larger than any object of its kind"));
        }
        Ok(bytes)
    }

    /// The error for a missing object: when a pack of the store was refused, that
    /// pack is named, since the object may have been in it.
    pub(crate) fn missing(&self, id: &ObjectId) -> CheckpointError {
        if let Some((name, reason)) = self.packs().refused.first() {
            return CheckpointError::BadPack {
                id: id.to_string(),
                pack: self.packs_dir.join(name),
                reason: reason.clone(),
            };
        }
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

    /// Gives this store the object `id` of `source`: its loose file, or the whole
    /// pack holding it, hard-linked (copied when the two stores are on different
    /// file systems); durable once `batch` is committed.
    pub(crate) fn link_from(
        &self,
        source: &Objects,
        id: &ObjectId,
        batch: &mut Batch,
    ) -> Result<(), CheckpointError> {
        if self.contains(id) {
            return Ok(());
        }
        let (from_fd, from_dir, stored, packed) = match source.locate(id)? {
            Some(Location::Packed(name)) => {
                batch.count += 1;
                if batch.linked.contains_key(&name) {
                    return Ok(());
                }
                (&source.packs_fd, &source.packs_dir, name, true)
            }
            Some(Location::Loose(name)) => {
                batch.count += 1;
                (&source.fd, &source.dir, name, false)
            }
            None => return Err(source.missing(id)),
        };
        let name = temp_name();
        match rustix::fs::linkat(from_fd, stored.as_str(), &self.tmp, &name, AtFlags::empty()) {
            Ok(()) => batch.sync_all = true,
            Err(Errno::XDEV | Errno::PERM) => {
                let (copy_name, mut temp) = self.create_temp()?;
                let fd = rustix::fs::openat(
                    from_fd,
                    stored.as_str(),
                    OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(io_err("open", &from_dir.join(&stored)))?;
                std::io::copy(&mut File::from(fd), &mut temp)
                    .map_err(io_err("copy", &self.tmp_dir.join(&copy_name)))?;
                batch.keep_open(temp);
                return if packed {
                    batch.linked.insert(stored, copy_name);
                    Ok(())
                } else {
                    batch.staged.push((copy_name, stored, *id));
                    Ok(())
                };
            }
            Err(Errno::NOENT) => return Err(source.missing(id)),
            Err(errno) => return Err(io_err("link", &self.tmp_dir.join(&name))(errno)),
        }
        if packed {
            batch.linked.insert(stored, name);
        } else {
            batch.staged.push((name, stored, *id));
        }
        Ok(())
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

    /// Renames the temporary file `temp` to `name` in `packs/`; `false` when a pack
    /// already has that name (then `temp` is left as it is).
    fn place_pack(&self, temp: &str, name: &str) -> Result<bool, CheckpointError> {
        let path = self.packs_dir.join(name);
        match rustix::fs::renameat_with(
            &self.tmp,
            temp,
            &self.packs_fd,
            name,
            RenameFlags::NOREPLACE,
        ) {
            Ok(()) => Ok(true),
            Err(Errno::EXIST) => Ok(false),
            // A file system without the flag: nothing else writes this store.
            Err(Errno::INVAL | Errno::NOSYS) => {
                rustix::fs::renameat(&self.tmp, temp, &self.packs_fd, name)
                    .map_err(io_err("rename", &path))?;
                Ok(true)
            }
            Err(errno) => Err(io_err("rename", &path)(errno)),
        }
    }
}

/// Objects written to temporary files, to appear under their names together at
/// [`commit`](Batch::commit).
#[derive(Default)]
pub(crate) struct Batch {
    /// Loose objects: temporary name, name in `objects/`, object.
    staged: Vec<(String, String, ObjectId)>,
    /// The new files, kept open to sync each while there are few of them.
    open: Vec<File>,
    sync_all: bool,
    /// The pack this batch writes its small objects to.
    pack: Option<PackWriter>,
    /// The packs of batches merged into this one.
    merged: Vec<PackWriter>,
    /// Packs of another store linked (or copied) whole: name in `packs/`,
    /// temporary name.
    linked: BTreeMap<String, String>,
    /// How many objects the batch adds.
    count: usize,
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
        self.add_as(objects, id, bytes, false)
    }

    /// [`add`](Batch::add) for a file's content: stored compressed when that makes
    /// it smaller.
    pub(crate) fn add_content(
        &mut self,
        objects: &Objects,
        id: ObjectId,
        bytes: &[u8],
    ) -> Result<(), CheckpointError> {
        self.add_as(objects, id, bytes, true)
    }

    fn add_as(
        &mut self,
        objects: &Objects,
        id: ObjectId,
        bytes: &[u8],
        compress: bool,
    ) -> Result<(), CheckpointError> {
        if self.pack.as_ref().is_some_and(|pack| pack.contains(&id))
            || self.staged.iter().rev().take(4).any(|(_, _, s)| *s == id)
            || objects.contains(&id)
        {
            return Ok(());
        }
        let compressed = if compress {
            zstd::bulk::compress(bytes, LEVEL)
                .ok()
                .filter(|compressed| compressed.len() < bytes.len())
        } else {
            None
        };
        let written = compressed.as_deref().unwrap_or(bytes);
        if bytes.len() as u64 <= PACKED_MAX {
            if let Some(full) = self
                .pack
                .take_if(|pack| pack.entries.len() >= pack::MAX_ENTRIES)
            {
                self.merged.push(full);
            }
            let pack = match &mut self.pack {
                Some(pack) => pack,
                None => {
                    let (name, file) = objects.create_temp()?;
                    let path = objects.tmp_dir.join(&name);
                    self.pack
                        .insert(PackWriter::new(name, file).map_err(io_err("write", &path))?)
                }
            };
            pack.push(id, written, bytes.len() as u64, compressed.is_some())
                .map_err(io_err("write", &objects.tmp_dir.join(&pack.temp)))?;
            self.bytes += written.len() as u64;
            self.count += 1;
            return Ok(());
        }
        let stored = match &compressed {
            Some(_) => id.rel_path_compressed(),
            None => id.rel_path(),
        };
        let (name, mut file) = objects.create_temp()?;
        file.write_all(written)
            .map_err(io_err("write", &objects.tmp_dir.join(&name)))?;
        self.bytes += written.len() as u64;
        self.count += 1;
        self.staged.push((name, stored, id));
        self.keep_open(file);
        Ok(())
    }

    /// Keeps `file` to sync at commit, while there are few.
    fn keep_open(&mut self, file: File) {
        if self.open.len() < SYNC_EACH_LIMIT && !self.sync_all {
            self.open.push(file);
        } else {
            self.open.clear();
            self.sync_all = true;
        }
    }

    /// Adds the objects of `other` to this batch; this batch's own pack stays the
    /// one written last.
    pub(crate) fn merge(&mut self, other: Batch) {
        self.bytes += other.bytes;
        self.count += other.count;
        self.sync_all |= other.sync_all;
        self.staged.extend(other.staged);
        self.open.extend(other.open);
        self.merged.extend(other.merged);
        self.merged.extend(other.pack);
        self.linked.extend(other.linked);
        if self.open.len() > SYNC_EACH_LIMIT {
            self.open.clear();
            self.sync_all = true;
        }
    }

    /// How many objects the batch adds.
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// Makes the batch's objects durable, then gives them their names (the loose
    /// ones, the packs linked from another store, the merged batches' packs, and
    /// this batch's own pack last), then makes the names durable.
    pub(crate) fn commit(self, objects: &Objects) -> Result<(), CheckpointError> {
        let Batch {
            staged,
            mut open,
            sync_all,
            pack,
            merged,
            linked,
            ..
        } = self;
        if staged.is_empty() && pack.is_none() && merged.is_empty() && linked.is_empty() {
            return Ok(());
        }
        let mut written = Vec::new();
        for writer in merged.into_iter().chain(pack) {
            let temp = writer.temp.clone();
            let (file, sum, entries) = writer
                .finish()
                .map_err(io_err("write", &objects.tmp_dir.join(&temp)))?;
            if !sync_all {
                open.push(file);
            }
            written.push((temp, sum, entries));
        }
        if sync_all || open.len() > SYNC_EACH_LIMIT {
            rustix::fs::syncfs(&objects.tmp).map_err(io_err("sync", &objects.tmp_dir))?;
        } else {
            sync_together(&open, true).map_err(io_err("sync", &objects.tmp_dir))?;
        }
        drop(open);
        let mut fanouts = BTreeSet::new();
        let mut new_fanout = false;
        for (name, rel, _) in &staged {
            let fanout = rel[..2].to_owned();
            if !fanouts.contains(&fanout) {
                match rustix::fs::mkdirat(&objects.fd, &fanout, Mode::from_raw_mode(DIR_MODE)) {
                    Ok(()) => new_fanout = true,
                    Err(Errno::EXIST) => {}
                    Err(errno) => return Err(io_err("create", &objects.dir.join(&fanout))(errno)),
                }
            }
            rustix::fs::renameat(&objects.tmp, name.as_str(), &objects.fd, rel.as_str())
                .map_err(io_err("rename", &objects.dir.join(rel)))?;
            fanouts.insert(fanout);
        }
        let packs_placed = !linked.is_empty() || !written.is_empty();
        // A pack's objects are named only by records of the same pack or of later
        // ones: placed in the order they were written, no record is there before
        // what it names.
        for (name, temp) in &linked {
            // One there under the same name is the same pack, linked before.
            if !objects.place_pack(temp, name)? {
                let _ = rustix::fs::unlinkat(&objects.tmp, temp.as_str(), AtFlags::empty());
            }
        }
        let mut placed = Vec::new();
        for (temp, sum, entries) in written {
            loop {
                let seq = {
                    let mut packs = objects.packs_mut();
                    let seq = packs.next_seq;
                    packs.next_seq += 1;
                    seq
                };
                let name = pack::name(seq, &sum);
                if objects.place_pack(&temp, &name)? {
                    placed.push((name, entries));
                    break;
                }
                // Another pack took the name: renamed under the next number.
                objects.refresh()?;
            }
        }
        {
            let mut packs = objects.packs_mut();
            for (name, entries) in placed {
                packs.seen.insert(name.clone());
                packs.add(name, entries);
            }
            for name in linked.keys() {
                packs.load(&objects.packs_fd, name.clone());
            }
        }
        if sync_all || fanouts.len() > SYNC_EACH_LIMIT {
            return rustix::fs::syncfs(&objects.fd).map_err(io_err("sync", &objects.dir));
        }
        let mut dirs = Vec::with_capacity(fanouts.len() + 2);
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
        let mut reopen = |fd: &OwnedFd, path: &Path| -> Result<(), CheckpointError> {
            let fd = rustix::fs::openat(
                fd,
                ".",
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(io_err("open", path))?;
            dirs.push(File::from(fd));
            Ok(())
        };
        if new_fanout {
            reopen(&objects.fd, &objects.dir)?;
        }
        if packs_placed {
            reopen(&objects.packs_fd, &objects.packs_dir)?;
        }
        sync_together(&dirs, false).map_err(io_err("sync", &objects.dir))
    }
}

/// An object opened for reading.
pub(crate) struct ObjectFile {
    id: ObjectId,
    /// The objects folder, for errors.
    dir: PathBuf,
    /// The file it is read from.
    path: PathBuf,
    stored: Stored,
}

/// How an object opened is stored.
enum Stored {
    /// A file of its own, a zstd frame or not.
    Loose { file: File, compressed: bool },
    /// In a pack.
    Packed { file: File, entry: pack::Entry },
}

impl ObjectFile {
    /// The object's size: its content's, not what it takes stored compressed.
    pub(crate) fn size(&mut self) -> Result<u64, CheckpointError> {
        let file = match &self.stored {
            Stored::Packed { entry, .. } => return Ok(u64::from(entry.size)),
            Stored::Loose {
                file,
                compressed: false,
            } => {
                return Ok(file.metadata().map_err(io_err("stat", &self.path))?.len());
            }
            Stored::Loose { file, .. } => file,
        };
        // The frame's header holds the content's size (written by `bulk::compress`).
        let mut header = Vec::with_capacity(18);
        file.take(18)
            .read_to_end(&mut header)
            .map_err(io_err("read", &self.path))?;
        let mut file = file;
        file.seek(SeekFrom::Start(0))
            .map_err(io_err("read", &self.path))?;
        match zstd::zstd_safe::get_frame_content_size(&header) {
            Ok(Some(size)) => Ok(size),
            _ => Err(CheckpointError::io(
                "read",
                &self.path,
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "not a zstd frame with its size",
                ),
            )),
        }
    }

    /// Reads a packed object whole, checked against its id.
    fn read_packed(&self) -> Result<Vec<u8>, CheckpointError> {
        let Stored::Packed { file, entry } = &self.stored else {
            return Err(CheckpointError::io(
                "read",
                &self.path,
                std::io::Error::other("not a packed object"),
            ));
        };
        pack::read_object(file, entry).map_err(|error| match error {
            pack::ReadError::Io(error) => CheckpointError::io("read", &self.path, error),
            pack::ReadError::Damaged(reason) => CheckpointError::DamagedObject {
                id: self.id.to_string(),
                dir: self.dir.clone(),
                reason,
            },
        })
    }

    /// The object's content; reading it to the end fails if it does not match the
    /// object's name.
    pub(crate) fn reader(self) -> Result<Box<dyn Read + Send>, CheckpointError> {
        let (file, compressed) = match self.stored {
            Stored::Packed { .. } => {
                return Ok(Box::new(std::io::Cursor::new(self.read_packed()?)));
            }
            Stored::Loose { file, compressed } => (file, compressed),
        };
        let inner: Box<dyn Read + Send> = if compressed {
            Box::new(zstd::stream::read::Decoder::new(file).map_err(io_err("read", &self.path))?)
        } else {
            Box::new(file)
        };
        Ok(Box::new(Checked {
            inner,
            hasher: Sha256::new(),
            id: self.id,
            checked: false,
        }))
    }
}

/// A loose object's content, hashed as it is read: the end is reported only once
/// the hash matched the object's name.
struct Checked {
    inner: Box<dyn Read + Send>,
    hasher: Sha256,
    id: ObjectId,
    checked: bool,
}

impl Read for Checked {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let read = self.inner.read(buf)?;
        if read > 0 {
            self.hasher.update(&buf[..read]);
        } else if !buf.is_empty() && !self.checked {
            self.checked = true;
            let sum: [u8; 32] = self.hasher.finalize_reset().into();
            if sum != self.id.0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("object {} does not match its name", self.id),
                ));
            }
        }
        Ok(read)
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
