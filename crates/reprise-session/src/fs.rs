//! File-system helpers of the file stores, and their one error type. They are public
//! so that stores kept in other crates (the run folders of `reprise-runs`) follow the
//! same rules.
//!
//! Directories are created 0700 and files 0600, with the mode set at creation and never
//! widened later. Whole-file writes are atomic (a temp file, then a rename); appends
//! are single writes; directory entries are synced where a crash must not lose them.

use std::fs::{DirBuilder, File};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{Mode, OFlags, ResolveFlags};

/// A file operation that failed: what was being done, and to which path.
///
/// The operating system's error is the [`source`](std::error::Error::source), not part
/// of this error's text, so that a report that prints the whole chain of causes (as
/// `anyhow`'s `{:#}` does) shows it once: `write /runs/x/conversation.jsonl: No space
/// left on device (os error 28)`.
#[derive(Debug, thiserror::Error)]
#[error("{op} {}", .path.display())]
pub struct IoError {
    /// What was being done (`create`, `open`, `read`, `write`, `sync`, …).
    pub op: &'static str,
    /// The file or directory.
    pub path: PathBuf,
    /// The operating system's error.
    #[source]
    pub source: std::io::Error,
}

impl IoError {
    /// The failure of `op` on `path`.
    pub fn new(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        IoError {
            op,
            path: path.into(),
            source,
        }
    }

    /// The kind of the operating system's error.
    pub fn kind(&self) -> ErrorKind {
        self.source.kind()
    }

    /// Whether this is a symbolic link refused where a file or folder of a store
    /// should be (reprise follows no link inside a runs folder).
    pub fn is_refused_link(&self) -> bool {
        self.op == "refuse"
    }
}

/// Mode of every directory created here.
pub(crate) const DIR_MODE: u32 = 0o700;
/// Mode of every file created here.
pub(crate) const FILE_MODE: u32 = 0o600;

/// Builds the `map_err` closure for an I/O failure on `path`.
pub fn io_err(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> IoError {
    let path = path.to_path_buf();
    move |source| IoError { op, path, source }
}

/// Makes the directory entries inside `dir` durable.
pub fn sync_dir(dir: &Path) -> Result<(), IoError> {
    File::open(dir)
        .and_then(|handle| handle.sync_all())
        .map_err(io_err("sync", dir))
}

/// The directory holding `path` (`.` for a bare name).
pub fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// Whether [`create_private_dir_all`] syncs the entry of each directory it creates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirSync {
    /// Each new directory's entry is synced in its parent, so a crash cannot lose it:
    /// for a directory that a durable write is about to rely on (a store's directory
    /// before its first synced append, the parent of a fork's target).
    Synced,
    /// Not synced: for directories whose contents are synced as a whole before they
    /// matter (a fork's staging folder, synced before its rename), for stores that do
    /// not sync, and for files whose appends sync the file they create (the run
    /// folders' own files).
    Unsynced,
}

impl DirSync {
    /// [`DirSync::Synced`] when `sync` is set.
    pub fn when(sync: bool) -> Self {
        if sync {
            DirSync::Synced
        } else {
            DirSync::Unsynced
        }
    }
}

/// Creates `dir` and its missing parents with mode 0700; an existing directory is
/// left as it is. A symbolic link where `dir` should be is refused
/// ([`link_refused`]): nothing is ever created through one.
pub fn create_private_dir_all(dir: &Path, sync: DirSync) -> Result<(), IoError> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => return Ok(()),
        Ok(meta) if meta.file_type().is_symlink() => return Err(link_refused(dir)),
        Ok(_) => return Err(not_a_directory(dir)),
        Err(_) => {}
    }
    let parent = parent_of(dir);
    if parent != dir {
        create_private_dir_all(parent, sync)?;
    }
    match DirBuilder::new().mode(DIR_MODE).create(dir) {
        Ok(()) => {
            if sync == DirSync::Synced {
                sync_dir(parent)?;
            }
            Ok(())
        }
        Err(error) if error.kind() == ErrorKind::AlreadyExists && is_real_dir(dir) => Ok(()),
        Err(error) if error.kind() == ErrorKind::AlreadyExists => Err(not_a_directory(dir)),
        Err(source) => Err(IoError::new("create directory", dir, source)),
    }
}

/// The error for a file (not a folder) found where a folder should be.
fn not_a_directory(path: &Path) -> IoError {
    IoError::new(
        "create directory",
        path,
        std::io::Error::new(
            ErrorKind::NotADirectory,
            "a file is in the way: this must be a directory",
        ),
    )
}

/// Whether `path` is a directory itself (not a link to one).
pub(crate) fn is_real_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|meta| meta.is_dir())
}

/// Creates a new file 0600; fails if it exists (a symbolic link included: it is
/// never followed) or if a folder on its way below `root` is a symbolic link.
pub fn create_new_private(root: &Path, path: &Path) -> Result<File, IoError> {
    open_beneath(
        root,
        path,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
        "create",
    )
}

/// The text of a refused link, as the source of the [`IoError`] naming it.
const LINK_REFUSED: &str = "a symbolic link: reprise follows no link inside a runs folder";

/// The error for a symbolic link found at `path` where a file or folder of a store
/// should be.
pub fn link_refused(path: &Path) -> IoError {
    IoError::new(
        "refuse",
        path,
        std::io::Error::new(ErrorKind::InvalidInput, LINK_REFUSED),
    )
}

/// The path beneath `root` that `path` names (`path` itself when `root` is `.` or
/// not a prefix of it).
fn relative_to<'p>(root: &Path, path: &'p Path) -> &'p Path {
    match path.strip_prefix(root) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel,
        _ => path,
    }
}

/// Opens `path`, which lies beneath the directory `root`, without following any
/// symbolic link below `root` (`root` itself is taken as given).
///
/// One `openat2` with `RESOLVE_NO_SYMLINKS` relative to a handle on `root`, so that no
/// link can be swapped in between a check and the open; on kernels without
/// `openat2`, `openat` with `O_NOFOLLOW` on each directory and the file in turn. A
/// link met on the way is refused with an error naming it ([`link_refused`]).
/// Files are created 0600.
pub fn open_beneath(
    root: &Path,
    path: &Path,
    flags: OFlags,
    op: &'static str,
) -> Result<File, IoError> {
    // A path not beneath `root` has only its last component guarded.
    let base = if path.starts_with(root) || (root == Path::new(".") && path.is_relative()) {
        root
    } else {
        parent_of(path)
    };
    let rel = relative_to(base, path);
    // openat2 takes a mode only along with O_CREAT.
    let mode = if flags.contains(OFlags::CREATE) {
        Mode::from_raw_mode(FILE_MODE)
    } else {
        Mode::empty()
    };
    let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let opened = rustix::fs::open(
        base,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .and_then(|dir| {
        match rustix::fs::openat2(
            &dir,
            rel,
            flags,
            mode,
            ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        ) {
            Err(rustix::io::Errno::NOSYS) => open_walking(&dir, rel, flags, mode),
            other => other,
        }
    });
    match opened {
        Ok(fd) => Ok(File::from(fd)),
        Err(rustix::io::Errno::LOOP) => Err(link_refused(&first_link(base, path))),
        Err(errno) => Err(IoError::new(op, path, errno.into())),
    }
}

/// `openat` with `O_NOFOLLOW` one component at a time (kernels before `openat2`).
fn open_walking(
    dir: &rustix::fd::OwnedFd,
    rel: &Path,
    flags: OFlags,
    mode: Mode,
) -> rustix::io::Result<rustix::fd::OwnedFd> {
    let parts: Vec<_> = rel.components().collect();
    let mut current: Option<rustix::fd::OwnedFd> = None;
    for (i, part) in parts.iter().enumerate() {
        let at = current.as_ref().unwrap_or(dir);
        let next = if i + 1 == parts.len() {
            rustix::fs::openat(at, part.as_os_str(), flags, mode)?
        } else {
            rustix::fs::openat(
                at,
                part.as_os_str(),
                OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )?
        };
        current = Some(next);
    }
    current.ok_or(rustix::io::Errno::INVAL)
}

/// The first symbolic link on the way from `base` to `path` (`path` when none is
/// found any more), to name in the refusal.
fn first_link(base: &Path, path: &Path) -> PathBuf {
    let mut at = base.to_path_buf();
    for part in relative_to(base, path).components() {
        at.push(part);
        if std::fs::symlink_metadata(&at).is_ok_and(|meta| meta.file_type().is_symlink()) {
            return at;
        }
    }
    path.to_path_buf()
}

/// Opens `path` for reading without following a link below `root`; `Ok(None)` when
/// it does not exist.
pub fn open_read_beneath(root: &Path, path: &Path) -> Result<Option<File>, IoError> {
    match open_beneath(root, path, OFlags::RDONLY, "open") {
        Ok(file) => Ok(Some(file)),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error),
    }
}

/// What a file of type `kind` is, as an error names it, when it is not a regular file
/// (`a FIFO (named pipe)`, `a character device`, `a folder`, …); `None` for a regular
/// file.
pub fn not_regular(kind: std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_file() {
        None
    } else if kind.is_dir() {
        Some("a folder")
    } else if kind.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if kind.is_char_device() {
        Some("a character device")
    } else if kind.is_block_device() {
        Some("a block device")
    } else if kind.is_socket() {
        Some("a socket")
    } else {
        Some("not a file")
    }
}

/// Reads the whole regular file `path` (a link named is followed), for files a person
/// names (a config, a transcript to import). Anything else is refused before a byte
/// is read, so that a FIFO cannot block the reader and a device such as `/dev/zero`
/// cannot make it read forever: opened non-blocking, then checked; and a file longer
/// than `limit` bytes is refused rather than read whole.
pub fn read_regular_file(path: &Path, limit: u64) -> Result<Vec<u8>, IoError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let refuse = |source| IoError::new("read", path, source);
    let file = std::fs::OpenOptions::new()
        .read(true)
        // Opening a FIFO for reading waits for a writer unless non-blocking; on a
        // regular file the flag changes nothing.
        .custom_flags(OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(refuse)?;
    let meta = file.metadata().map_err(refuse)?;
    if let Some(what) = not_regular(meta.file_type()) {
        return Err(refuse(std::io::Error::new(
            ErrorKind::InvalidInput,
            format!("{what}, not a regular file"),
        )));
    }
    let too_long = || {
        refuse(std::io::Error::new(
            ErrorKind::FileTooLarge,
            format!("longer than {limit} bytes, the most that is read of it"),
        ))
    };
    if meta.len() > limit {
        return Err(too_long());
    }
    let mut bytes = Vec::new();
    // One byte past the limit tells a file that grew while it was read.
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(refuse)?;
    if bytes.len() as u64 > limit {
        return Err(too_long());
    }
    Ok(bytes)
}

/// A name for a temporary sibling of `path`, unique within this process and across
/// processes (pid), hidden (leading dot) so listings skip it.
pub fn temp_sibling(path: &Path, what: &str) -> PathBuf {
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
///
/// The folder of `path` is opened beneath `root` without following links (see
/// [`open_beneath`]), and the temp file is created and renamed relative to that
/// handle, so a link at `path` is replaced, never written through, and a folder
/// swapped for a link is refused.
pub fn write_file_atomic(
    root: &Path,
    path: &Path,
    bytes: &[u8],
    sync: bool,
) -> Result<(), IoError> {
    let dir_path = parent_of(path);
    let dir = open_dir_beneath(root, dir_path)?;
    let name = path.file_name().unwrap_or(path.as_os_str());
    let temp = temp_sibling(path, "tmp");
    let temp_name = temp.file_name().unwrap_or(temp.as_os_str());
    let mut file = rustix::fs::openat(
        &dir,
        temp_name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(FILE_MODE),
    )
    .map(File::from)
    .map_err(|errno| IoError::new("create", &temp, errno.into()))?;
    let result = (|| {
        file.write_all(bytes).map_err(io_err("write", &temp))?;
        if sync {
            file.sync_data().map_err(io_err("sync", &temp))?;
        }
        rustix::fs::renameat(&dir, temp_name, &dir, name)
            .map_err(|errno| IoError::new("rename", path, errno.into()))?;
        if sync {
            rustix::fs::fsync(&dir)
                .map_err(|errno| IoError::new("sync", dir_path, errno.into()))?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = rustix::fs::unlinkat(&dir, temp_name, rustix::fs::AtFlags::empty());
    }
    result
}

/// A handle on the directory `dir` (`root` itself, or a folder beneath it reached
/// without following links), readable so that it can be synced.
pub(crate) fn open_dir_beneath(root: &Path, dir: &Path) -> Result<rustix::fd::OwnedFd, IoError> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY;
    if dir == root {
        return rustix::fs::open(dir, flags | OFlags::CLOEXEC, Mode::empty())
            .map_err(|errno| IoError::new("open", dir, errno.into()));
    }
    open_beneath(root, dir, flags, "open").map(rustix::fd::OwnedFd::from)
}

/// Moves `from` to `to` only if `to` does not exist (a hard link, then the source
/// removed), so two racing creators cannot both win. Files only.
pub fn move_no_replace(from: &Path, to: &Path) -> Result<bool, IoError> {
    match std::fs::hard_link(from, to) {
        Ok(()) => {
            std::fs::remove_file(from).map_err(io_err("remove", from))?;
            Ok(true)
        }
        Err(error) if error.kind() == ErrorKind::AlreadyExists => Ok(false),
        Err(source) => Err(IoError::new("link", to, source)),
    }
}

/// Removes the file `path`; one already gone is fine.
pub fn remove_file_if_exists(path: &Path) -> Result<(), IoError> {
    gone_is_fine(std::fs::remove_file(path), path)
}

/// Removes the directory `path` and everything in it; one already gone is fine.
pub fn remove_dir_if_exists(path: &Path) -> Result<(), IoError> {
    gone_is_fine(std::fs::remove_dir_all(path), path)
}

fn gone_is_fine(removed: std::io::Result<()>, path: &Path) -> Result<(), IoError> {
    match removed {
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(()),
        other => other.map_err(io_err("remove", path)),
    }
}

/// True when `path` exists (without following a final symlink).
pub fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}
