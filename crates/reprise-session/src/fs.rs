//! File-system helpers of the stores and the run folders, and their one error type.
//!
//! Directories are created 0700 and files 0600, with the mode set at creation and never
//! widened later. Whole-file writes are atomic (a temp file, then a rename); appends
//! are single writes; directory entries are synced where a crash must not lose them.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::store::session_store::LoadWarning;

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
}

/// Mode of every directory created here.
pub(crate) const DIR_MODE: u32 = 0o700;
/// Mode of every file created here.
pub(crate) const FILE_MODE: u32 = 0o600;

/// Builds the `map_err` closure for an I/O failure on `path`.
pub(crate) fn io_err(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> IoError {
    let path = path.to_path_buf();
    move |source| IoError { op, path, source }
}

/// Makes the directory entries inside `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), IoError> {
    File::open(dir)
        .and_then(|handle| handle.sync_all())
        .map_err(io_err("sync", dir))
}

/// Makes the directory entry of `path` durable.
pub(crate) fn sync_parent(path: &Path) -> Result<(), IoError> {
    sync_dir(parent_of(path))
}

/// The directory holding `path` (`.` for a bare name).
pub(crate) fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// Whether [`create_private_dir_all`] syncs the entry of each directory it creates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DirSync {
    /// Each new directory's entry is synced in its parent, so a crash cannot lose it:
    /// for a directory that a durable write is about to rely on (a store's directory
    /// before its first synced append, the parent of a fork's target).
    Synced,
    /// Not synced: for directories whose contents are synced as a whole before they
    /// matter (a fork's staging folder, synced before its rename), for stores that do
    /// not sync, and for the run folders' own files, whose appends sync the file they
    /// create (see [`open_private_append`]).
    Unsynced,
}

impl DirSync {
    /// [`DirSync::Synced`] when `sync` is set.
    pub(crate) fn when(sync: bool) -> Self {
        if sync {
            DirSync::Synced
        } else {
            DirSync::Unsynced
        }
    }
}

/// Creates `dir` and its missing parents with mode 0700; an existing directory is
/// left as it is.
pub(crate) fn create_private_dir_all(dir: &Path, sync: DirSync) -> Result<(), IoError> {
    if dir.is_dir() {
        return Ok(());
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
        Err(error) if error.kind() == ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(source) => Err(IoError::new("create directory", dir, source)),
    }
}

/// Creates a new file 0600; fails if it exists.
pub(crate) fn create_new_private(path: &Path) -> Result<File, IoError> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(path)
        .map_err(io_err("create", path))
}

/// A name for a temporary sibling of `path`, unique within this process and across
/// processes (pid), hidden (leading dot) so listings skip it.
pub(crate) fn temp_sibling(path: &Path, what: &str) -> PathBuf {
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
pub(crate) fn write_file_atomic(path: &Path, bytes: &[u8], sync: bool) -> Result<(), IoError> {
    let temp = temp_sibling(path, "tmp");
    let result = (|| {
        let mut file = create_new_private(&temp)?;
        file.write_all(bytes).map_err(io_err("write", &temp))?;
        if sync {
            file.sync_data().map_err(io_err("sync", &temp))?;
        }
        std::fs::rename(&temp, path).map_err(io_err("rename", path))?;
        if sync {
            sync_dir(parent_of(path))?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// Moves `from` to `to` only if `to` does not exist (a hard link, then the source
/// removed), so two racing creators cannot both win. Files only.
pub(crate) fn move_no_replace(from: &Path, to: &Path) -> Result<bool, IoError> {
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
pub(crate) fn remove_file_if_exists(path: &Path) -> Result<(), IoError> {
    gone_is_fine(std::fs::remove_file(path), path)
}

/// Removes the directory `path` and everything in it; one already gone is fine.
pub(crate) fn remove_dir_if_exists(path: &Path) -> Result<(), IoError> {
    gone_is_fine(std::fs::remove_dir_all(path), path)
}

fn gone_is_fine(removed: std::io::Result<()>, path: &Path) -> Result<(), IoError> {
    match removed {
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(()),
        other => other.map_err(io_err("remove", path)),
    }
}

/// True when `path` exists (without following a final symlink).
pub(crate) fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// Opens `path` for appending (and reading its last byte), creating it 0600 when
/// missing. A new file's directory
/// entry is synced so that the file survives a crash.
pub(crate) fn open_private_append(path: &Path) -> Result<File, IoError> {
    match OpenOptions::new().read(true).append(true).open(path) {
        Ok(file) => return Ok(file),
        Err(error) if error.kind() == ErrorKind::NotFound => {}
        Err(source) => return Err(IoError::new("open", path, source)),
    }
    let file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(FILE_MODE)
        .open(path)
        .map_err(io_err("create", path))?;
    sync_parent(path)?;
    Ok(file)
}

/// Appends one complete line (`line` must end in `\n`) with a single write.
///
/// When the file ends in a torn line (a crash mid-write), a `\n` goes first so the
/// torn fragment stays a line of its own (readers skip it with a warning) instead of
/// corrupting this one. Cutting the fragment off instead would race with other
/// processes appending to a shared file such as `history.jsonl`.
pub(crate) fn append_line(
    file: &File,
    path: &Path,
    line: &[u8],
    durable: bool,
) -> Result<(), IoError> {
    let len = file.metadata().map_err(io_err("stat", path))?.len();
    let mut torn = false;
    if len > 0 {
        let mut last = [0u8; 1];
        file.read_exact_at(&mut last, len - 1)
            .map_err(io_err("read", path))?;
        torn = last[0] != b'\n';
    }
    let mut handle = file;
    let result = if torn {
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.push(b'\n');
        buf.extend_from_slice(line);
        handle.write_all(&buf)
    } else {
        handle.write_all(line)
    };
    result.map_err(io_err("write", path))?;
    if durable {
        file.sync_data().map_err(io_err("sync", path))?;
    }
    Ok(())
}

/// Reads the complete lines of a file, calling `each(line_number, line)` for every
/// line that ends in `\n` and is UTF-8. A torn last line (no `\n`) is ignored and
/// reported; a line that is not UTF-8 is skipped and reported. A missing file reads
/// as empty.
pub(crate) fn for_each_complete_line(
    path: &Path,
    warnings: &mut Vec<LoadWarning>,
    mut each: impl FnMut(usize, &str, &mut Vec<LoadWarning>),
) -> Result<(), IoError> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(()),
        Err(source) => return Err(IoError::new("open", path, source)),
    };
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut buf = Vec::new();
    let mut number = 0;
    loop {
        buf.clear();
        let read = reader
            .read_until(b'\n', &mut buf)
            .map_err(io_err("read", path))?;
        if read == 0 {
            return Ok(());
        }
        number += 1;
        if buf.last() != Some(&b'\n') {
            warnings.push(LoadWarning {
                file: path.to_path_buf(),
                line: number,
                message: "torn last line (no newline) ignored".to_owned(),
            });
            return Ok(());
        }
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        match std::str::from_utf8(&buf) {
            Ok(line) => each(number, line, warnings),
            Err(_) => warnings.push(LoadWarning {
                file: path.to_path_buf(),
                line: number,
                message: "line is not UTF-8, skipped".to_owned(),
            }),
        }
    }
}
