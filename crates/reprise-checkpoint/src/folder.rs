//! A folder reached without following links: every path below its root is resolved
//! relative to a handle on the root, by `openat2` with `RESOLVE_NO_SYMLINKS`, or on
//! kernels without it by `openat` with `O_NOFOLLOW` one component at a time. A link
//! swapped in for a folder at any moment makes the operation fail; it never leads a
//! read or a write outside the folder.

use std::path::{Component, Path, PathBuf};

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use crate::error::{CheckpointError, io_err};

/// Mode asked for new folders (the umask applies, as for any program).
pub(crate) const NEW_DIR_MODE: u32 = 0o777;

/// A folder and a handle on its root.
pub(crate) struct Folder {
    root: OwnedFd,
    path: PathBuf,
}

impl Folder {
    /// Opens the folder `path` (a link naming the folder itself is followed: it is
    /// what the person named).
    pub(crate) fn open(path: &Path) -> Result<Self, CheckpointError> {
        let path = std::fs::canonicalize(path).map_err(|source| CheckpointError::BadFolder {
            path: path.to_path_buf(),
            source,
        })?;
        let root = rustix::fs::open(
            &path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| CheckpointError::BadFolder {
            path: path.clone(),
            source: errno.into(),
        })?;
        Ok(Self { root, path })
    }

    /// The folder's path (absolute, links resolved).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The handle on the root.
    pub(crate) fn root(&self) -> BorrowedFd<'_> {
        self.root.as_fd()
    }

    /// The full path of `rel`, for messages.
    pub(crate) fn display_path(&self, rel: &Path) -> PathBuf {
        self.path.join(rel)
    }

    /// Opens `rel` with `flags`, following no link below the root (`rel` empty: the
    /// root itself).
    pub(crate) fn open_at(&self, rel: &Path, flags: OFlags) -> Result<OwnedFd, Errno> {
        let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        if rel.as_os_str().is_empty() {
            return rustix::fs::openat(&self.root, ".", flags, Mode::empty());
        }
        match rustix::fs::openat2(
            &self.root,
            rel,
            flags,
            Mode::empty(),
            ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS | ResolveFlags::BENEATH,
        ) {
            Err(Errno::NOSYS) => self.open_walking(rel, flags),
            other => other,
        }
    }

    fn open_walking(&self, rel: &Path, flags: OFlags) -> Result<OwnedFd, Errno> {
        let names = normal_names(rel)?;
        let mut current: Option<OwnedFd> = None;
        for (i, name) in names.iter().enumerate() {
            let at = current.as_ref().map_or(self.root.as_fd(), AsFd::as_fd);
            let step_flags = if i + 1 == names.len() {
                flags
            } else {
                OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
            };
            current = Some(rustix::fs::openat(at, *name, step_flags, Mode::empty())?);
        }
        current.ok_or(Errno::INVAL)
    }

    /// Opens the folder `rel` for reading its entries and working in it.
    pub(crate) fn open_dir(&self, rel: &Path) -> Result<OwnedFd, Errno> {
        self.open_at(rel, OFlags::RDONLY | OFlags::DIRECTORY)
    }

    /// Opens the folder `rel`, creating it and its missing parents first. A file or a
    /// link where a folder should be fails (`ENOTDIR`, `ELOOP`), never followed.
    pub(crate) fn make_dir_all(&self, rel: &Path) -> Result<OwnedFd, Errno> {
        match self.open_dir(rel) {
            Err(Errno::NOENT) => {}
            other => return other,
        }
        let mut current = self.open_dir(Path::new(""))?;
        for name in normal_names(rel)? {
            match rustix::fs::mkdirat(&current, name, Mode::from_raw_mode(NEW_DIR_MODE)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(errno) => return Err(errno),
            }
            current = rustix::fs::openat(
                &current,
                name,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
        }
        Ok(current)
    }

    /// Whether something is at `rel` or in the way of creating it (a file or a link
    /// where one of its folders should be).
    pub(crate) fn occupied(&self, rel: &Path) -> Result<bool, CheckpointError> {
        let (parent, name) = split(rel);
        let dir = match self.open_dir(parent) {
            Ok(dir) => dir,
            Err(Errno::NOENT) => return Ok(false),
            Err(Errno::NOTDIR | Errno::LOOP) => return Ok(true),
            Err(errno) => return Err(io_err("open", &self.display_path(parent))(errno)),
        };
        match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(_) => Ok(true),
            Err(Errno::NOENT) => Ok(false),
            Err(errno) => Err(io_err("stat", &self.display_path(rel))(errno)),
        }
    }

    /// `lstat` of `rel`, its folders reached without following links; `None` when
    /// nothing is there.
    pub(crate) fn stat(&self, rel: &Path) -> Result<Option<rustix::fs::Stat>, CheckpointError> {
        let (parent, name) = split(rel);
        let dir = match self.open_dir(parent) {
            Ok(dir) => dir,
            Err(Errno::NOENT | Errno::NOTDIR) => return Ok(None),
            Err(errno) => return Err(io_err("open", &self.display_path(parent))(errno)),
        };
        match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(Some(stat)),
            Err(Errno::NOENT) => Ok(None),
            Err(errno) => Err(io_err("stat", &self.display_path(rel))(errno)),
        }
    }
}

/// The folder part and the name of `rel` (`("", rel)` for a name at the root).
pub(crate) fn split(rel: &Path) -> (&Path, &std::ffi::OsStr) {
    let parent = rel.parent().unwrap_or(Path::new(""));
    let name = rel.file_name().unwrap_or(rel.as_os_str());
    (parent, name)
}

/// The names of `rel`'s components; anything but plain names (`..`, `/`) is refused.
fn normal_names(rel: &Path) -> Result<Vec<&std::ffi::OsStr>, Errno> {
    rel.components()
        .map(|component| match component {
            Component::Normal(name) => Ok(name),
            _ => Err(Errno::INVAL),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_inside_the_folder_is_never_followed() {
        let outside = tempfile::tempdir().unwrap();
        let inside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path(), inside.path().join("out")).unwrap();
        let folder = Folder::open(inside.path()).unwrap();
        assert_eq!(
            folder
                .open_at(Path::new("out/secret"), OFlags::RDONLY)
                .err(),
            Some(Errno::LOOP)
        );
        assert!(folder.make_dir_all(Path::new("out/new")).is_err());
        assert!(!outside.path().join("new").exists());
        assert!(folder.make_dir_all(Path::new("a/b")).is_ok());
        assert!(inside.path().join("a/b").is_dir());
        assert_eq!(
            folder.open_at(Path::new("../x"), OFlags::RDONLY).err(),
            Some(Errno::XDEV)
        );
    }
}
