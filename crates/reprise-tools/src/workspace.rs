//! The working folder the tools act in, and how a path the model gives is opened
//! under it: relative, never up with `..`, never through a symbolic link that leads
//! out (`openat2` with `RESOLVE_BENEATH`), and never into a protected folder such as
//! the runs folder.

use std::path::{Component, Path, PathBuf};

use rustix::fd::{AsFd, AsRawFd, OwnedFd};
use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use crate::error::FileError;

/// The largest content `write_file` writes unless the workspace says otherwise
/// ([`Workspace::max_write`]): 64 MiB.
pub const DEFAULT_MAX_WRITE: u64 = 64 << 20;

/// The folder the built-in tools work in, and the folders inside it they must not
/// touch.
#[derive(Clone, Debug)]
pub struct Workspace {
    root: PathBuf,
    protected: Vec<PathBuf>,
    max_write: u64,
}

impl Workspace {
    /// The tools' working folder (made absolute from the current directory when
    /// relative).
    pub fn new(root: impl Into<PathBuf>) -> Workspace {
        let root = root.into();
        let root = std::path::absolute(&root).unwrap_or(root);
        Workspace {
            root,
            protected: Vec::new(),
            max_write: DEFAULT_MAX_WRITE,
        }
    }

    /// The largest content, in bytes, `write_file` writes; a larger one is refused
    /// ([`DEFAULT_MAX_WRITE`] unless set).
    pub fn max_write(mut self, bytes: u64) -> Workspace {
        self.max_write = bytes;
        self
    }

    /// The largest content `write_file` writes.
    pub fn write_limit(&self) -> u64 {
        self.max_write
    }

    /// A folder the tools must neither read nor write, nor a command change: the
    /// runs folder, which holds the transcripts. A relative path is taken from the
    /// working folder. It need not exist yet.
    pub fn protect(mut self, folder: impl AsRef<Path>) -> Workspace {
        self.protected.push(self.root.join(folder));
        self
    }

    /// The working folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The protected folders as they lie on the machine now (links resolved where
    /// they exist), so that they can be compared with where an open file really is.
    pub fn protected_now(&self) -> Vec<PathBuf> {
        self.protected.iter().map(|dir| real(dir)).collect()
    }

    /// The working folder as it lies on the machine.
    pub fn root_now(&self) -> PathBuf {
        real(&self.root)
    }

    /// `given` as a normalised path relative to the working folder (`.` for the
    /// folder itself), refused when it could name anything outside, or a protected
    /// folder.
    pub(crate) fn relative(&self, given: &str) -> Result<PathBuf, FileError> {
        if given.is_empty() {
            return Err(FileError::Empty);
        }
        let mut path = Path::new(given);
        if path.is_absolute() {
            let root = self.root_now();
            path = path
                .strip_prefix(&self.root)
                .or_else(|_| path.strip_prefix(&root))
                .map_err(|_| FileError::Absolute {
                    path: given.to_owned(),
                })?;
        }
        let mut relative = PathBuf::new();
        for part in path.components() {
            match part {
                Component::Normal(name) => relative.push(name),
                Component::CurDir => {}
                Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                    return Err(FileError::GoesUp {
                        path: given.to_owned(),
                    });
                }
            }
        }
        if relative.as_os_str().is_empty() {
            relative.push(".");
        }
        let root = self.root_now();
        let inside = |dir: &PathBuf| dir.strip_prefix(&root).ok().map(Path::to_path_buf);
        for protected in self.protected_now().iter().filter_map(inside) {
            if !protected.as_os_str().is_empty() && relative.starts_with(&protected) {
                return Err(FileError::Protected {
                    path: given.to_owned(),
                });
            }
        }
        Ok(relative)
    }

    /// A handle on the working folder.
    pub(crate) fn open_root(&self) -> Result<OwnedFd, FileError> {
        rustix::fs::open(
            &self.root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| FileError::io(".", errno))
    }

    /// Opens `relative` (from [`Workspace::relative`]) beneath the working folder:
    /// a symbolic link is followed only while it stays inside, and the file opened
    /// must not lie in a protected folder.
    pub(crate) fn open(
        &self,
        root: &OwnedFd,
        relative: &Path,
        flags: OFlags,
        given: &str,
    ) -> Result<OwnedFd, FileError> {
        let fd = open_beneath(root, relative, flags, Mode::empty(), given)?;
        self.check_not_protected(&fd, given)?;
        Ok(fd)
    }

    /// Refuses `fd` when the file it is open on lies in a protected folder (reached
    /// through a link inside the working folder). The kernel's name for the open
    /// file is read from `/proc/self/fd`; without `/proc`, the check of the path as
    /// given is all there is.
    pub(crate) fn check_not_protected(&self, fd: impl AsFd, given: &str) -> Result<(), FileError> {
        let link = format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd());
        let Ok(real) = std::fs::read_link(link) else {
            return Ok(());
        };
        if self.protected_now().iter().any(|dir| real.starts_with(dir)) {
            return Err(FileError::Protected {
                path: given.to_owned(),
            });
        }
        Ok(())
    }
}

/// `path` with its links resolved and its `..` applied: the part that exists as it
/// lies on the machine, the rest (which does not exist yet) appended.
pub(crate) fn real(path: &Path) -> PathBuf {
    if let Ok(real) = std::fs::canonicalize(path) {
        return real;
    }
    let mut lexical = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                lexical.pop();
            }
            Component::CurDir => {}
            other => lexical.push(other),
        }
    }
    match (lexical.parent(), lexical.file_name()) {
        (Some(parent), Some(name)) => real(parent).join(name),
        _ => lexical,
    }
}

/// `openat2(root, relative, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`: the kernel
/// refuses any step (a `..`, an absolute link, a link pointing up) that would leave
/// `root`, with no window between a check and the open.
pub(crate) fn open_beneath(
    root: impl AsFd,
    relative: &Path,
    flags: OFlags,
    mode: Mode,
    given: &str,
) -> Result<OwnedFd, FileError> {
    match rustix::fs::openat2(
        root,
        relative,
        flags | OFlags::CLOEXEC,
        mode,
        ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
    ) {
        Ok(fd) => Ok(fd),
        Err(Errno::XDEV) => Err(FileError::LeadsOut {
            path: given.to_owned(),
        }),
        Err(errno) => Err(FileError::io(given, errno)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_made_relative_and_kept_inside() {
        let workspace = Workspace::new("/work/here").protect(".run");
        let relative = |given: &str| workspace.relative(given);
        assert_eq!(relative("a/./b.txt").unwrap(), PathBuf::from("a/b.txt"));
        assert_eq!(relative(".").unwrap(), PathBuf::from("."));
        assert_eq!(relative("/work/here/a").unwrap(), PathBuf::from("a"));
        assert!(matches!(relative(""), Err(FileError::Empty)));
        assert!(matches!(relative("../x"), Err(FileError::GoesUp { .. })));
        assert!(matches!(
            relative("a/../../x"),
            Err(FileError::GoesUp { .. })
        ));
        assert!(matches!(relative("a/../b"), Err(FileError::GoesUp { .. })));
        assert!(matches!(
            relative("/etc/passwd"),
            Err(FileError::Absolute { .. })
        ));
        assert!(matches!(
            relative("./.run/x/transcript.jsonl"),
            Err(FileError::Protected { .. })
        ));
        assert!(matches!(relative(".run"), Err(FileError::Protected { .. })));
        assert_eq!(relative(".runner").unwrap(), PathBuf::from(".runner"));
    }

    #[test]
    fn a_folder_that_does_not_exist_yet_is_placed_where_it_will_be() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        assert_eq!(real(&base.join("work/../runs/./x")), base.join("runs/x"));
        assert_eq!(real(&base.join("a/b")), base.join("a/b"));
    }
}
