//! File-system helpers of the run folders alone; those they share with the file
//! stores are in [`reprise_session::fs`].

use std::fs::File;
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use reprise_session::fs::{
    DirSync, create_private_dir_all, io_err, open_beneath, open_read_beneath, parent_of, sync_dir,
};
use reprise_session::{IoError, LoadWarning};
use rustix::fs::OFlags;

/// The root below which no link is followed for a file of a run folder
/// (`<runs>/<run>/<file>`): the runs directory.
pub(crate) fn run_file_root(path: &Path) -> &Path {
    parent_of(parent_of(path))
}

/// Makes the directory entry of `path` durable.
pub(crate) fn sync_parent(path: &Path) -> Result<(), IoError> {
    sync_dir(parent_of(path))
}

/// Whether `path` is a symbolic link.
pub(crate) fn is_link(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_symlink())
}

/// Creates the runs directory `dir` like [`create_private_dir_all`], except that
/// `dir` itself may be a symbolic link to a directory: the runs directory is what the
/// person named, and is followed; below it, no link is.
pub(crate) fn create_runs_dir(dir: &Path) -> Result<(), IoError> {
    if dir.is_dir() {
        return Ok(());
    }
    create_private_dir_all(dir, DirSync::Unsynced)
}

/// Reads the whole file `path` beneath `root` (see [`open_beneath`]); `Ok(None)` when
/// it does not exist.
pub(crate) fn read_beneath(root: &Path, path: &Path) -> Result<Option<Vec<u8>>, IoError> {
    let Some(mut file) = open_read_beneath(root, path)? else {
        return Ok(None);
    };
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut file, &mut bytes).map_err(io_err("read", path))?;
    Ok(Some(bytes))
}

/// Opens `path` for appending (and reading its last byte), creating it 0600 when
/// missing, without following a link below `root` (see [`open_beneath`]). A new
/// file's directory entry is synced so that the file survives a crash.
pub(crate) fn open_private_append(root: &Path, path: &Path) -> Result<File, IoError> {
    let flags = OFlags::RDWR | OFlags::APPEND;
    match open_beneath(root, path, flags, "open") {
        Ok(file) => return Ok(file),
        Err(error) if error.kind() == ErrorKind::NotFound => {}
        Err(error) => return Err(error),
    }
    let file = open_beneath(root, path, flags | OFlags::CREATE, "create")?;
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
    let torn = ends_torn(file, path)?;
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

/// Appends `value` as one JSON line, encoded straight into the file: a value can
/// hold a file the model wrote, and the line would be one more copy of it. Several
/// writes, so only for a file that one process appends to (a torn file is handled
/// as [`append_line`] does).
pub(crate) fn append_json_line(
    file: &File,
    path: &Path,
    value: &serde_json::Value,
    durable: bool,
) -> Result<(), IoError> {
    // A value's only encoding errors are the writer's.
    append_line_with(file, path, durable, |out| {
        Ok(serde_json::to_writer(out, value)?)
    })
}

/// Appends one line that `write` encodes straight into the file (it writes the line
/// without its `\n`), as [`append_json_line`] does.
pub(crate) fn append_line_with(
    file: &File,
    path: &Path,
    durable: bool,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), IoError> {
    let torn = ends_torn(file, path)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 16, file);
    let written = (|| -> std::io::Result<()> {
        if torn {
            out.write_all(b"\n")?;
        }
        write(&mut out)?;
        out.write_all(b"\n")?;
        out.flush()
    })();
    written.map_err(io_err("write", path))?;
    if durable {
        file.sync_data().map_err(io_err("sync", path))?;
    }
    Ok(())
}

/// Whether the file ends in a torn line: not empty and no `\n` last.
fn ends_torn(file: &File, path: &Path) -> Result<bool, IoError> {
    let len = file.metadata().map_err(io_err("stat", path))?.len();
    if len == 0 {
        return Ok(false);
    }
    let mut last = [0u8; 1];
    file.read_exact_at(&mut last, len - 1)
        .map_err(io_err("read", path))?;
    Ok(last[0] != b'\n')
}

/// Reads the complete lines of a file, calling `each(line_number, line)` for every
/// line that ends in `\n` and is UTF-8 (opened without following a link below
/// `root`). A torn last line (no `\n`) is ignored and
/// reported; a line that is not UTF-8 is skipped and reported. A missing file reads
/// as empty.
pub(crate) fn for_each_complete_line(
    root: &Path,
    path: &Path,
    warnings: &mut Vec<LoadWarning>,
    mut each: impl FnMut(usize, &str, &mut Vec<LoadWarning>),
) -> Result<(), IoError> {
    let Some(file) = open_read_beneath(root, path)? else {
        return Ok(());
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
