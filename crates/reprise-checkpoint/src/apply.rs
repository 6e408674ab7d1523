//! Making a folder's captured files equal a checkpoint: the plan (what differs
//! between two captures) and its application.
//!
//! Every change is made relative to a handle on its folder, opened without following
//! links; a file is written to a temporary name in its folder and renamed over the
//! old one, so each path holds either its old or its new content. Applying the same
//! plan again does nothing more, which is what lets a restore cut by a crash be
//! finished.

use std::collections::{BTreeSet, HashSet};
use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::capture::Flat;
use crate::error::{CheckpointError, io_err};
use crate::folder::{Folder, split};
use crate::id::ObjectId;
use crate::kill_hook;
use crate::objects::Objects;
use crate::store_file::sync_together;
use crate::tree::Kind;

/// The temporary name a file is written under in its folder before the rename.
pub(crate) const TEMP_NAME: &str = ".reprise-restore.tmp";

/// Up to this many changed paths, each is synced; past it one `syncfs`.
const SYNC_EACH_LIMIT: usize = 32;

/// The longest link target restored.
const LINK_LIMIT: u64 = 1 << 16;

/// What a restore changes, by path.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Diff {
    /// Present in both, different content or mode.
    pub(crate) restored: Vec<PathBuf>,
    /// In the target only.
    pub(crate) created: Vec<PathBuf>,
    /// In the current state only.
    pub(crate) deleted: Vec<PathBuf>,
    /// Not captured in the target (it could not be read then): left as it is.
    pub(crate) not_captured: Vec<PathBuf>,
    /// Not captured in the current state (it cannot be read now, so nothing could
    /// bring it back): left as it is.
    pub(crate) unreadable_now: Vec<PathBuf>,
}

/// The paths that differ between `from` and `to`. A path that either side did not
/// capture (unreadable), or that lies in such a folder, is left out of the changes:
/// what the target did not capture cannot be restored, and what cannot be read now
/// could not be brought back by an undo.
pub(crate) fn diff(from: &Flat, to: &Flat) -> Diff {
    let mut out = Diff::default();
    let unreadable = Unreadable::of(from, to);
    let left_alone = |path: &Path| unreadable.covers(path);
    for (path, entry) in to {
        if left_alone(path) {
            continue;
        }
        match from.get(path) {
            Some(old) if old == entry => {}
            Some(_) => out.restored.push(path.clone()),
            None => out.created.push(path.clone()),
        }
    }
    out.deleted = from
        .keys()
        .filter(|path| !to.contains_key(*path) && !left_alone(path))
        .cloned()
        .collect();
    out.restored.sort();
    out.created.sort();
    out.deleted.sort();
    out.not_captured = unreadable.then.into_iter().collect();
    out.not_captured.sort();
    out.unreadable_now = unreadable
        .now
        .into_iter()
        .filter(|path| out.not_captured.binary_search(path).is_err())
        .collect();
    out.unreadable_now.sort();
    out
}

/// The paths that either side of a restore did not capture.
pub(crate) struct Unreadable {
    /// Not captured by the target.
    then: HashSet<PathBuf>,
    /// Not captured now.
    now: HashSet<PathBuf>,
}

impl Unreadable {
    /// The unreadable paths of `from` and `to`.
    pub(crate) fn of(from: &Flat, to: &Flat) -> Self {
        let unreadable = |flat: &Flat| -> HashSet<PathBuf> {
            flat.iter()
                .filter(|(_, (kind, _))| *kind == Kind::Unreadable)
                .map(|(path, _)| path.clone())
                .collect()
        };
        Self {
            then: unreadable(to),
            now: unreadable(from),
        }
    }

    /// Whether `path` is, or is in, a path either side did not capture: a restore
    /// leaves it alone.
    pub(crate) fn covers(&self, path: &Path) -> bool {
        (!self.then.is_empty() || !self.now.is_empty())
            && path
                .ancestors()
                .any(|at| self.then.contains(at) || self.now.contains(at))
    }
}

/// Makes the captured files of `folder` go from `from` to `to`; returns the paths of
/// `to` that were not written because something not captured is in their way.
pub(crate) fn apply(
    folder: &Folder,
    objects: &Objects,
    from: &Flat,
    to: &Flat,
) -> Result<Vec<PathBuf>, CheckpointError> {
    let plan = diff(from, to);
    let mut touched: BTreeSet<PathBuf> = BTreeSet::new();
    let mut written: Vec<File> = Vec::new();
    for path in &plan.deleted {
        let (parent, name) = split(path);
        let dir = match folder.open_dir(parent) {
            Ok(dir) => dir,
            Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => continue,
            Err(errno) => return Err(io_err("open", &folder.display_path(parent))(errno)),
        };
        match rustix::fs::unlinkat(&dir, name, AtFlags::empty()) {
            // A folder now where a file was is not ours to remove.
            Ok(()) | Err(Errno::NOENT | Errno::ISDIR | Errno::PERM) => {}
            Err(errno) => return Err(io_err("remove", &folder.display_path(path))(errno)),
        }
        kill_hook::step();
        touched.insert(parent.to_path_buf());
    }
    remove_emptied_dirs(folder, &plan.deleted, to, &mut touched)?;
    let mut kept = Vec::new();
    let mut last_dir: Option<(PathBuf, OwnedFd)> = None;
    for path in plan.restored.iter().chain(&plan.created) {
        let Some(&(kind, id)) = to.get(path) else {
            continue;
        };
        let (parent, name) = split(path);
        if last_dir.as_ref().is_none_or(|(rel, _)| rel != parent) {
            match folder.make_dir_all(parent) {
                Ok(dir) => last_dir = Some((parent.to_path_buf(), dir)),
                Err(Errno::NOTDIR | Errno::EXIST | Errno::LOOP) => {
                    kept.push(path.clone());
                    continue;
                }
                Err(errno) => return Err(io_err("create", &folder.display_path(parent))(errno)),
            }
        }
        let Some((_, dir)) = last_dir.as_ref() else {
            continue;
        };
        let display = folder.display_path(path);
        let current = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Some(stat),
            Err(Errno::NOENT) => None,
            Err(errno) => return Err(io_err("stat", &display)(errno)),
        };
        let mut keep_mode = None;
        if let Some(stat) = current {
            let file_type = FileType::from_raw_mode(stat.st_mode);
            if file_type == FileType::Directory {
                if rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR).is_err() {
                    kept.push(path.clone());
                    continue;
                }
            } else if !from.contains_key(path) {
                // Not captured, yet where the checkpoint has a file: kept, unless it
                // already is that file (a restore being finished).
                if !same_content(dir, name, kind, &id, objects, &display)? {
                    kept.push(path.clone());
                }
                continue;
            } else if file_type == FileType::RegularFile {
                keep_mode = Some(stat.st_mode & 0o7777);
            }
        }
        let file = write_entry(dir, name, kind, &id, objects, keep_mode, &display)?;
        if let Some(file) = file.filter(|_| written.len() <= SYNC_EACH_LIMIT) {
            written.push(file);
        }
        touched.insert(parent.to_path_buf());
    }
    sync_changes(folder, &written, &touched)?;
    kill_hook::step();
    Ok(kept)
}

/// Removes the folders that deleting `deleted` left empty, deepest first, except
/// those `to` has files in. A folder holding anything (an ignored file) stays.
fn remove_emptied_dirs(
    folder: &Folder,
    deleted: &[PathBuf],
    to: &Flat,
    touched: &mut BTreeSet<PathBuf>,
) -> Result<(), CheckpointError> {
    let mut needed: HashSet<&Path> = HashSet::new();
    for path in to.keys() {
        let mut dir = path.parent();
        while let Some(ancestor) = dir.filter(|dir| !dir.as_os_str().is_empty()) {
            if !needed.insert(ancestor) {
                break;
            }
            dir = ancestor.parent();
        }
    }
    let mut candidates: BTreeSet<&Path> = BTreeSet::new();
    for path in deleted {
        let mut dir = path.parent();
        while let Some(ancestor) = dir.filter(|dir| !dir.as_os_str().is_empty()) {
            if needed.contains(ancestor) || !candidates.insert(ancestor) {
                break;
            }
            dir = ancestor.parent();
        }
    }
    let mut order: Vec<&Path> = candidates.into_iter().collect();
    order.sort_by_key(|dir| std::cmp::Reverse(dir.components().count()));
    for dir_rel in order {
        let (parent, name) = split(dir_rel);
        let Ok(parent_fd) = folder.open_dir(parent) else {
            continue;
        };
        if rustix::fs::unlinkat(&parent_fd, name, AtFlags::REMOVEDIR).is_ok() {
            touched.insert(parent.to_path_buf());
        }
    }
    Ok(())
}

/// Whether the entry `name` of `dir` already is `kind` with content `id`.
fn same_content(
    dir: &OwnedFd,
    name: &OsStr,
    kind: Kind,
    id: &ObjectId,
    objects: &Objects,
    display: &Path,
) -> Result<bool, CheckpointError> {
    if kind == Kind::Link {
        return Ok(match rustix::fs::readlinkat(dir, name, Vec::new()) {
            Ok(target) => ObjectId::of(target.as_bytes()) == *id,
            Err(_) => false,
        });
    }
    let fd = match rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(_) => return Ok(false),
    };
    let stat = rustix::fs::fstat(&fd).map_err(io_err("stat", display))?;
    let exec = stat.st_mode & 0o100 != 0;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile
        || exec != (kind == Kind::Exec)
    {
        return Ok(false);
    }
    let size = objects.open_object(id)?.size()?;
    if size != stat.st_size as u64 {
        return Ok(false);
    }
    let mut content = Vec::new();
    File::from(fd)
        .take(size.saturating_add(1))
        .read_to_end(&mut content)
        .map_err(io_err("read", display))?;
    Ok(ObjectId::of(&content) == *id)
}

/// Writes the entry `name` of `dir` as `kind` with the content of `id`: under a
/// temporary name, then renamed over whatever is there. A file replacing a file
/// keeps its permission bits (`keep_mode`) but for the executable ones; a new file
/// gets 0666 or 0777 less the umask. Returns the file written, to sync.
pub(crate) fn write_entry(
    dir: &OwnedFd,
    name: &OsStr,
    kind: Kind,
    id: &ObjectId,
    objects: &Objects,
    keep_mode: Option<u32>,
    display: &Path,
) -> Result<Option<File>, CheckpointError> {
    match rustix::fs::unlinkat(dir, TEMP_NAME, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => {}
        Err(errno) => return Err(io_err("remove", &display.with_file_name(TEMP_NAME))(errno)),
    }
    let file = if kind == Kind::Link {
        let target = objects.read(id, LINK_LIMIT)?;
        rustix::fs::symlinkat(target.as_slice(), dir, TEMP_NAME)
            .map_err(io_err("create link", display))?;
        None
    } else {
        let exec = kind == Kind::Exec;
        let mode = match keep_mode {
            Some(mode) if exec => mode | (mode & 0o444) >> 2,
            Some(mode) => mode & !0o111,
            None if exec => 0o777,
            None => 0o666,
        };
        let fd = rustix::fs::openat(
            dir,
            TEMP_NAME,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
        )
        .map_err(io_err("create", display))?;
        if keep_mode.is_some() {
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode)).map_err(io_err("chmod", display))?;
        }
        let mut file = File::from(fd);
        let mut object = objects.open_object(id)?.reader()?;
        std::io::copy(&mut object, &mut file).map_err(io_err("write", display))?;
        Some(file)
    };
    kill_hook::step();
    rustix::fs::renameat(dir, TEMP_NAME, dir, name).map_err(io_err("rename", display))?;
    kill_hook::step();
    Ok(file)
}

/// Removes the folders that deleting `deleted` left empty, but those `to` has
/// files in: for a cut restore being finished, whose deletions were made before.
pub(crate) fn remove_emptied(
    folder: &Folder,
    deleted: &[PathBuf],
    to: &Flat,
) -> Result<(), CheckpointError> {
    remove_emptied_dirs(folder, deleted, to, &mut BTreeSet::new())
}

/// Removes the temporary file a cut restore may have left in the folder of each
/// of `paths`. Best effort: one left is only a stray file.
pub(crate) fn remove_temp_files<'p>(folder: &Folder, paths: impl Iterator<Item = &'p PathBuf>) {
    let parents: BTreeSet<&Path> = paths.map(|path| split(path).0).collect();
    for parent in parents {
        if let Ok(dir) = folder.open_dir(parent) {
            let _ = rustix::fs::unlinkat(&dir, TEMP_NAME, AtFlags::empty());
        }
    }
}

/// Makes the written files and the changed folders durable.
fn sync_changes(
    folder: &Folder,
    written: &[File],
    touched: &BTreeSet<PathBuf>,
) -> Result<(), CheckpointError> {
    if written.len() > SYNC_EACH_LIMIT || touched.len() > SYNC_EACH_LIMIT {
        return rustix::fs::syncfs(folder.root()).map_err(io_err("sync", folder.path()));
    }
    sync_together(written, true).map_err(io_err("sync", folder.path()))?;
    let dirs: Vec<File> = touched
        .iter()
        .filter_map(|dir_rel| folder.open_dir(dir_rel).ok().map(File::from))
        .collect();
    sync_together(&dirs, false).map_err(io_err("sync", folder.path()))
}

/// Writes every entry of `flat` into the empty folder `folder`; returns the files'
/// count and bytes.
pub(crate) fn materialize(
    folder: &Folder,
    objects: &Objects,
    flat: &Flat,
) -> Result<(u64, u64), CheckpointError> {
    let none = Flat::new();
    let kept = apply(folder, objects, &none, flat)?;
    if let Some(path) = kept.first() {
        return Err(CheckpointError::io(
            "write",
            &folder.display_path(path),
            std::io::Error::from(std::io::ErrorKind::AlreadyExists),
        ));
    }
    let mut bytes = 0;
    for (kind, id) in flat.values() {
        if !matches!(kind, Kind::Link | Kind::Unreadable) {
            bytes += objects.open_object(id)?.size()?;
        }
    }
    let written = flat
        .values()
        .filter(|(kind, _)| *kind != Kind::Unreadable)
        .count();
    Ok((written as u64, bytes))
}
