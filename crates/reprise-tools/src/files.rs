//! The file tools' work: reading a file, listing a folder, writing a file whole and
//! replacing one piece of text in it, all beneath the working folder (see
//! [`Workspace`]). Blocking: the tools run them on tokio's blocking threads.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::error::FileError;
use crate::workspace::{Workspace, open_beneath};

/// The most bytes `read_file` returns.
pub const MAX_READ: usize = 64 * 1024;
/// The most entries `list_dir` returns.
pub const MAX_ENTRIES: usize = 500;
/// The largest file `edit_file` edits.
pub const MAX_EDIT: u64 = 4 << 20;
pub use crate::workspace::DEFAULT_MAX_WRITE;

/// The text of the file `given`, at most [`MAX_READ`] bytes (a longer file is cut,
/// saying so).
pub fn read_file(workspace: &Workspace, given: &str) -> Result<String, FileError> {
    let relative = workspace.relative(given)?;
    let root = workspace.open_root()?;
    // Non-blocking, so that a FIFO is refused below rather than waited on.
    let fd = workspace.open(&root, &relative, OFlags::RDONLY | OFlags::NONBLOCK, given)?;
    let size = regular_size(&fd, given)?;
    let mut bytes = Vec::with_capacity(MAX_READ.min(usize::try_from(size).unwrap_or(MAX_READ)));
    std::fs::File::from(fd)
        .take(MAX_READ as u64)
        .read_to_end(&mut bytes)
        .map_err(|error| FileError::io(given, error))?;
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if size > MAX_READ as u64 {
        text.push_str(&format!("\n[… cut: the file has {size} bytes]"));
    }
    Ok(text)
}

/// The entries of the folder `given` (`.` for the working folder), sorted, folders
/// marked with a trailing `/`; at most [`MAX_ENTRIES`].
pub fn list_dir(workspace: &Workspace, given: &str) -> Result<String, FileError> {
    let relative = workspace.relative(given)?;
    let root = workspace.open_root()?;
    let fd = workspace.open(&root, &relative, OFlags::RDONLY | OFlags::DIRECTORY, given)?;
    let mut names = Vec::new();
    let dir = rustix::fs::Dir::read_from(&fd).map_err(|errno| FileError::io(given, errno))?;
    for entry in dir {
        let entry = entry.map_err(|errno| FileError::io(given, errno))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "." || name == ".." {
            continue;
        }
        let kind = match entry.file_type() {
            FileType::Unknown => {
                rustix::fs::statat(&fd, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW)
                    .map_or(FileType::Unknown, |stat| {
                        FileType::from_raw_mode(stat.st_mode)
                    })
            }
            kind => kind,
        };
        names.push(if kind == FileType::Directory {
            format!("{name}/")
        } else {
            name
        });
    }
    names.sort();
    let total = names.len();
    names.truncate(MAX_ENTRIES);
    let mut text = names.join("\n");
    if total > MAX_ENTRIES {
        text.push_str(&format!("\n[… {} more]", total - MAX_ENTRIES));
    }
    Ok(text)
}

/// Writes `content` to the file `given`, whole and atomically; missing parent
/// folders are created. Content larger than the workspace's
/// [`write_limit`](Workspace::write_limit) is refused. Says what it did.
pub fn write_file(workspace: &Workspace, given: &str, content: &str) -> Result<String, FileError> {
    write_file_with(workspace, given, content.len() as u64, |file| {
        file.write_all(content.as_bytes())
    })
}

/// Writes the file `given` as [`write_file`] does, its content of `size` bytes
/// written in pieces by `fill` into the temporary file, so that it need not be
/// whole in memory. `size` is checked against the largest write before anything is
/// touched; `fill` must write exactly that much (else nothing is replaced).
pub fn write_file_with(
    workspace: &Workspace,
    given: &str,
    size: u64,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<String, FileError> {
    if size > workspace.write_limit() {
        return Err(FileError::TooLargeToWrite {
            path: given.to_owned(),
            size,
            limit: workspace.write_limit(),
        });
    }
    let relative = workspace.relative(given)?;
    let (dir, name) = open_parent(workspace, &relative, given, true)?;
    let created = replace_file(&dir, name, size, fill, given)?;
    let verb = if created { "created" } else { "wrote" };
    Ok(format!("{verb} {given} ({size} bytes)"))
}

/// Replaces the one occurrence of `old` in the file `given` with `new`. Refused
/// when `old` occurs more than once or not at all, saying how often it occurs.
pub fn edit_file(
    workspace: &Workspace,
    given: &str,
    old: &str,
    new: &str,
) -> Result<String, FileError> {
    if old.is_empty() {
        return Err(FileError::EmptyOld {
            path: given.to_owned(),
        });
    }
    let relative = workspace.relative(given)?;
    let (dir, name) = open_parent(workspace, &relative, given, false)?;
    let fd = open_beneath(
        &dir,
        Path::new(name),
        OFlags::RDONLY | OFlags::NONBLOCK,
        Mode::empty(),
        given,
    )?;
    let size = regular_size(&fd, given)?;
    if size > MAX_EDIT {
        return Err(FileError::TooLarge {
            path: given.to_owned(),
            size,
            limit: MAX_EDIT,
        });
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(MAX_EDIT + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| FileError::io(given, error))?;
    let text = String::from_utf8(bytes).map_err(|_| FileError::NotText {
        path: given.to_owned(),
    })?;
    match text.matches(old).count() {
        0 => {
            return Err(FileError::NotFound {
                path: given.to_owned(),
            });
        }
        1 => {}
        count => {
            return Err(FileError::NotUnique {
                path: given.to_owned(),
                count,
            });
        }
    }
    let edited = text.replacen(old, new, 1);
    replace_file(
        &dir,
        name,
        edited.len() as u64,
        |file| file.write_all(edited.as_bytes()),
        given,
    )?;
    Ok(format!(
        "edited {given}: replaced {} lines with {}",
        old.lines().count().max(1),
        new.lines().count()
    ))
}

/// The size of the regular file open on `fd`; anything else is refused.
fn regular_size(fd: &OwnedFd, given: &str) -> Result<u64, FileError> {
    let stat = rustix::fs::fstat(fd).map_err(|errno| FileError::io(given, errno))?;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => Ok(u64::try_from(stat.st_size).unwrap_or(0)),
        other => Err(FileError::NotRegular {
            path: given.to_owned(),
            what: kind_name(other),
        }),
    }
}

fn kind_name(kind: FileType) -> &'static str {
    match kind {
        FileType::Directory => "a folder",
        FileType::Fifo => "a FIFO (named pipe)",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Socket => "a socket",
        FileType::Symlink => "a symbolic link",
        _ => "not a file",
    }
}

/// A handle on the folder that holds `relative`, and the file's name in it. With
/// `create`, missing folders are made on the way (never through a link that leads
/// out).
fn open_parent<'r>(
    workspace: &Workspace,
    relative: &'r Path,
    given: &str,
    create: bool,
) -> Result<(OwnedFd, &'r std::ffi::OsStr), FileError> {
    let not_a_file = || FileError::NotRegular {
        path: given.to_owned(),
        what: "a folder",
    };
    let name = relative.file_name().ok_or_else(not_a_file)?;
    let parent = relative.parent().filter(|p| !p.as_os_str().is_empty());
    let root = workspace.open_root()?;
    let flags = OFlags::PATH | OFlags::DIRECTORY;
    let dir = match parent {
        None => root,
        Some(parent) => match workspace.open(&root, parent, flags, given) {
            Err(FileError::Io { source, .. })
                if create && source.kind() == std::io::ErrorKind::NotFound =>
            {
                make_folders(workspace, &root, parent, given)?
            }
            other => other?,
        },
    };
    workspace.check_not_protected(&dir, given)?;
    Ok((dir, name))
}

/// Makes the folders of `parent` that are missing, one at a time, each in a
/// handle on the one before it, and never in a protected folder.
fn make_folders(
    workspace: &Workspace,
    root: &OwnedFd,
    parent: &Path,
    given: &str,
) -> Result<OwnedFd, FileError> {
    let flags = OFlags::PATH | OFlags::DIRECTORY;
    let mut dir = open_beneath(root, Path::new("."), flags, Mode::empty(), given)?;
    for part in parent.components() {
        workspace.check_not_protected(&dir, given)?;
        let name = part.as_os_str();
        match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o777)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(errno) => return Err(FileError::io(given, errno)),
        }
        dir = open_beneath(&dir, Path::new(name), flags, Mode::empty(), given)?;
    }
    Ok(dir)
}

/// Replaces the file `name` in `dir` with the `size` bytes `fill` writes: a
/// temporary file in the same folder, then a rename over it, so the file is never
/// seen half written. An existing file's permissions are kept; a link at `name` is
/// replaced, never written through. Whether the file is new.
fn replace_file(
    dir: &OwnedFd,
    name: &std::ffi::OsStr,
    size: u64,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    given: &str,
) -> Result<bool, FileError> {
    let (existing, created) = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => (Some(Mode::from_raw_mode(stat.st_mode & 0o7777)), false),
            FileType::Symlink => (None, false),
            other => {
                return Err(FileError::NotRegular {
                    path: given.to_owned(),
                    what: kind_name(other),
                });
            }
        },
        Err(Errno::NOENT) => (None, true),
        Err(errno) => return Err(FileError::io(given, errno)),
    };
    let (temp, fd) = create_temp(dir, given)?;
    let written = (|| {
        if let Some(mode) = existing {
            rustix::fs::fchmod(&fd, mode)?;
        }
        let mut file = std::fs::File::from(fd);
        fill(&mut file)?;
        let written = file.metadata()?.len();
        if written != size {
            return Err(std::io::Error::other(format!(
                "{written} bytes were written where {size} were due: nothing was replaced"
            )));
        }
        file.sync_data()?;
        rustix::fs::renameat(dir, &temp, dir, name)?;
        Ok::<_, std::io::Error>(())
    })();
    if let Err(error) = written {
        let _ = rustix::fs::unlinkat(dir, &temp, AtFlags::empty());
        return Err(FileError::io(given, error));
    }
    Ok(created)
}

/// A new temporary file in `dir`, and its name.
fn create_temp(dir: &OwnedFd, given: &str) -> Result<(std::ffi::OsString, OwnedFd), FileError> {
    let mut tries = 0;
    loop {
        tries += 1;
        let temp = temp_name();
        match rustix::fs::openat(
            dir,
            &temp,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            // Narrowed by the umask, as any new file.
            Mode::from_raw_mode(0o666),
        ) {
            Ok(fd) => return Ok((temp, fd)),
            // Another writer's, or a leftover: another name.
            Err(Errno::EXIST) if tries < 100 => continue,
            Err(errno) => return Err(FileError::io(given, errno)),
        }
    }
}

/// A name for the temporary file beside the one it replaces, that no other writer
/// picks: short (`.reprise-` and 8 letters), so that it fits wherever the name it
/// replaces fits, the longest the file system takes included.
fn temp_name() -> std::ffi::OsString {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| u64::from(since.subsec_nanos()));
    // A different value for every process, call and moment, spread over the
    // letters by a multiplicative hash.
    let mut mixed =
        (u64::from(std::process::id()) << 32 ^ n << 20 ^ nanos).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut letters = String::with_capacity(8);
    for _ in 0..8 {
        letters.push(char::from(b'a' + (mixed % 26) as u8));
        mixed /= 26;
    }
    format!(".reprise-{letters}.tmp").into()
}
