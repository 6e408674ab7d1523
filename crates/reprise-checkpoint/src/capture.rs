//! From a walk to a tree: the object of every captured path (from the stat cache, or
//! read and hashed), the trees of the folders, and the new objects written to a
//! batch.
//!
//! Files whose status the cache knows are not opened; the others are read by two
//! threads. Every folder's tree is encoded and hashed in memory (cheap next to a
//! `stat`); only trees the store does not hold yet, those on the path of a change,
//! are written.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::OFlags;
use rustix::io::Errno;

use crate::error::{CheckpointError, io_err};
use crate::folder::{Folder, split};
use crate::id::ObjectId;
use crate::objects::{Batch, Objects};
use crate::scan::{FileStat, Scan, Scanned};
use crate::stat_cache::{Known, StatCache};
use crate::tree::{self, Kind, TreeEntry};

pub(crate) use crate::tree::Flat;

/// Below this many files to read, one thread reads them.
const PARALLEL_FROM: usize = 16;

/// The stat cache is rewritten once it misses this many paths. Rewriting it costs
/// as much as writing every path's status; reading a few changed files again at
/// each checkpoint costs less.
const REWRITE_CACHE_FROM: usize = 32;

/// A captured state of the folder.
pub(crate) struct Captured {
    /// The root tree.
    pub(crate) root: ObjectId,
    pub(crate) files: Flat,
    /// The captured files' bytes.
    pub(crate) bytes: u64,
    /// Files over the size limit (those that grew past it while read included).
    pub(crate) large: u64,
    /// The files and folders that could not be read (no permission), sorted: in
    /// the tree as not captured.
    pub(crate) unreadable: Vec<PathBuf>,
    /// The captured files hard-linked together, each group sorted, the groups in
    /// order (see [`links`](crate::links)).
    pub(crate) links: Vec<Vec<PathBuf>>,
    /// The stat cache for this state (empty unless `cache_stale`).
    pub(crate) cache: StatCache,
    /// Whether the cache given is off by enough paths to be worth rewriting.
    pub(crate) cache_stale: bool,
    /// The new objects (empty when nothing is stored).
    pub(crate) batch: Batch,
}

/// Where the objects of a capture go.
#[derive(Clone, Copy)]
pub(crate) enum Sink<'a> {
    /// Into the store (as a batch to commit).
    Store(&'a Objects),
    /// Nowhere: only their ids are wanted (a preview).
    Discard,
}

/// A file read: what it is, its status before the read, and its object.
type Read1 = Option<(Kind, FileStat, ObjectId, u64)>;

/// Captures the paths of `scan`.
pub(crate) fn capture(
    folder: &Folder,
    scan: Scan,
    cache: &StatCache,
    sink: Sink<'_>,
    max_file_size: u64,
) -> Result<Captured, CheckpointError> {
    let mut large = scan.large;
    let known: Vec<Option<ObjectId>> = scan
        .entries
        .iter()
        .map(|entry| match entry.kind {
            Kind::Unreadable => Some(ObjectId::NONE),
            _ => cache.get(&entry.path, &entry.stat),
        })
        .collect();
    let misses: Vec<&Scanned> = scan
        .entries
        .iter()
        .zip(&known)
        .filter(|(_, known)| known.is_none())
        .map(|(entry, _)| entry)
        .collect();
    // Folders not captured are in no cache: they are neither hits nor misses.
    let uncached = scan
        .entries
        .iter()
        .filter(|entry| entry.kind == Kind::Unreadable)
        .count();
    let hits = known.len() - misses.len() - uncached;
    let cache_stale = misses.len() + cache.entries.len().saturating_sub(hits) >= REWRITE_CACHE_FROM;
    let (results, mut batch) = read_all(folder, &misses, sink, max_file_size)?;
    let mut read = results.into_iter();
    let mut new_cache = StatCache::default();
    let mut files = Flat::with_capacity(known.len());
    let mut bytes = 0;
    let mut unreadable = Vec::new();
    let mut linked: HashMap<(u64, u64), Vec<PathBuf>> = HashMap::new();
    for (entry, known) in scan.entries.into_iter().zip(known) {
        let (kind, stat, id, size) = match known {
            Some(id) => (entry.kind, entry.stat, id, entry.stat.size),
            None => match read.next().flatten() {
                Some(found) => found,
                None => {
                    if entry.kind != Kind::Link {
                        large += u64::from(grew(&entry, folder));
                    }
                    continue;
                }
            },
        };
        if kind == Kind::Unreadable {
            unreadable.push(entry.path.clone());
            files.insert(entry.path, (kind, id));
            continue;
        }
        bytes += if kind == Kind::Link { 0 } else { size };
        if cache_stale {
            new_cache
                .entries
                .insert(entry.path.clone(), Known { stat, id });
        }
        if entry.nlink > 1 && kind != Kind::Link && stat.ino == entry.stat.ino {
            linked
                .entry((entry.dev, stat.ino))
                .or_default()
                .push(entry.path.clone());
        }
        files.insert(entry.path, (kind, id));
    }
    let root = build_trees(&files, sink, &mut batch)?;
    unreadable.sort();
    let links = crate::links::groups(linked.into_values().collect());
    Ok(Captured {
        root,
        files,
        bytes,
        large,
        unreadable,
        links,
        cache: new_cache,
        cache_stale,
        batch,
    })
}

/// Whether a file that could not be captured is there but over the limit now.
fn grew(entry: &Scanned, folder: &Folder) -> bool {
    matches!(folder.stat(&entry.path), Ok(Some(stat)) if stat.st_size as u64 > entry.stat.size)
}

/// Reads the files of `misses`, on two threads when there are many.
fn read_all(
    folder: &Folder,
    misses: &[&Scanned],
    sink: Sink<'_>,
    max_file_size: u64,
) -> Result<(Vec<Read1>, Batch), CheckpointError> {
    let read_part = |part: &[&Scanned]| -> Result<(Vec<Read1>, Batch), CheckpointError> {
        let mut batch = Batch::default();
        let mut out = Vec::with_capacity(part.len());
        for entry in part {
            out.push(read_one(folder, entry, sink, max_file_size, &mut batch)?);
        }
        Ok((out, batch))
    };
    if misses.len() < PARALLEL_FROM {
        return read_part(misses);
    }
    let (first, second) = misses.split_at(misses.len() / 2);
    let (a, b) = std::thread::scope(|scope| {
        let other = scope.spawn(|| read_part(second));
        let mine = read_part(first);
        let theirs = other
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (mine, theirs)
    });
    let (mut results, mut batch) = a?;
    let (more, other_batch) = b?;
    results.extend(more);
    batch.merge(other_batch);
    Ok((results, batch))
}

/// Reads one file or link; `None` when it is gone, replaced by something not
/// captured, or over the limit; [`Kind::Unreadable`] when this user may not read it.
fn read_one(
    folder: &Folder,
    entry: &Scanned,
    sink: Sink<'_>,
    max_file_size: u64,
    batch: &mut Batch,
) -> Result<Read1, CheckpointError> {
    let display = || folder.display_path(&entry.path);
    let (kind, stat, content) = if entry.kind == Kind::Link {
        let (parent, name) = split(&entry.path);
        let dir = match folder.open_dir(parent) {
            Ok(dir) => dir,
            Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => return Ok(None),
            Err(errno) => return Err(io_err("open", &display())(errno)),
        };
        match rustix::fs::readlinkat(&dir, name, Vec::new()) {
            Ok(target) => (Kind::Link, entry.stat, target.into_bytes()),
            Err(Errno::NOENT | Errno::INVAL) => return Ok(None),
            Err(errno) => return Err(io_err("read link", &display())(errno)),
        }
    } else {
        let fd = match folder.open_at(&entry.path, OFlags::RDONLY | OFlags::NONBLOCK) {
            Ok(fd) => fd,
            Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => return Ok(None),
            Err(Errno::ACCESS | Errno::PERM) => {
                return Ok(Some((Kind::Unreadable, entry.stat, ObjectId::NONE, 0)));
            }
            Err(errno) => return Err(io_err("open", &display())(errno)),
        };
        let stat = rustix::fs::fstat(&fd).map_err(io_err("stat", &display()))?;
        if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::RegularFile {
            return Ok(None);
        }
        let stat = FileStat::of(&stat);
        if stat.size > max_file_size {
            return Ok(None);
        }
        let mut content = Vec::with_capacity(usize::try_from(stat.size).unwrap_or(0));
        File::from(fd)
            .take(max_file_size.saturating_add(1))
            .read_to_end(&mut content)
            .map_err(io_err("read", &display()))?;
        if content.len() as u64 > max_file_size {
            return Ok(None);
        }
        let kind = if stat.mode & 0o100 != 0 {
            Kind::Exec
        } else {
            Kind::File
        };
        (kind, stat, content)
    };
    let id = ObjectId::of(&content);
    if let Sink::Store(objects) = sink {
        if kind == Kind::Link {
            batch.add(objects, id, &content)?;
        } else {
            batch.add_content(objects, id, &content)?;
        }
    }
    let size = if kind == Kind::Link {
        0
    } else {
        content.len() as u64
    };
    Ok(Some((kind, stat, id, size)))
}

/// Builds the tree of every folder holding captured paths, deepest first; returns
/// the root's.
fn build_trees(
    files: &Flat,
    sink: Sink<'_>,
    batch: &mut Batch,
) -> Result<ObjectId, CheckpointError> {
    let mut dirs: HashMap<&Path, Vec<TreeEntry>> = HashMap::new();
    dirs.insert(Path::new(""), Vec::new());
    for (path, (kind, id)) in files {
        let (parent, name) = split(path);
        let mut ancestor = parent;
        while !dirs.contains_key(ancestor) {
            dirs.insert(ancestor, Vec::new());
            ancestor = ancestor.parent().unwrap_or(Path::new(""));
        }
        if let Some(entries) = dirs.get_mut(parent) {
            entries.push(TreeEntry {
                name: name.as_bytes().to_vec(),
                kind: *kind,
                id: *id,
            });
        }
    }
    let mut order: Vec<&Path> = dirs.keys().copied().collect();
    order.sort_by_key(|dir| std::cmp::Reverse(dir.components().count()));
    let mut root = ObjectId::of(&tree::encode(&mut []));
    for dir in order {
        let mut entries = dirs.remove(dir).unwrap_or_default();
        let bytes = tree::encode(&mut entries);
        let id = ObjectId::of(&bytes);
        if let Sink::Store(objects) = sink {
            batch.add(objects, id, &bytes)?;
        }
        if dir.as_os_str().is_empty() {
            root = id;
            continue;
        }
        let (parent, name) = split(dir);
        if let Some(entries) = dirs.get_mut(parent) {
            entries.push(TreeEntry {
                name: name.as_bytes().to_vec(),
                kind: Kind::Dir,
                id,
            });
        }
    }
    Ok(root)
}

/// Every path of the tree `root` with its object, read from the store; the ids of
/// the trees go to `trees` when given. Each tree's bytes are checked against its
/// name, so a damaged store cannot make a cycle; trees are walked with a stack, not
/// recursion.
pub(crate) fn flatten(
    objects: &Objects,
    root: &ObjectId,
    mut trees: Option<&mut Vec<ObjectId>>,
) -> Result<Flat, CheckpointError> {
    /// A tree is a list of names: one larger than this is not one of ours.
    const TREE_LIMIT: u64 = 256 << 20;
    let mut flat = Flat::new();
    let mut pending = vec![(PathBuf::new(), *root)];
    while let Some((prefix, id)) = pending.pop() {
        let bytes = objects.read(&id, TREE_LIMIT)?;
        if ObjectId::of(&bytes) != id {
            return Err(objects.damaged(&id, "its content does not match its name"));
        }
        let entries = tree::decode(&bytes).map_err(|reason| objects.damaged(&id, reason))?;
        if let Some(trees) = trees.as_deref_mut() {
            trees.push(id);
        }
        for entry in entries {
            let path = prefix.join(std::ffi::OsStr::from_bytes(&entry.name));
            if entry.kind == Kind::Dir {
                pending.push((path, entry.id));
            } else {
                flat.insert(path, (entry.kind, entry.id));
            }
        }
    }
    Ok(flat)
}
