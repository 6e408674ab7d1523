//! Private files for the run-folder modules: directories 0700, files 0600 (set at
//! creation, never widened later), appends as single writes, and a line reader that
//! leaves a torn last line alone.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::Path;

use crate::run_error::RunError;
use crate::store::LoadWarning;

/// Creates `dir` and any missing parents with mode 0700.
pub(crate) fn create_private_dir_all(dir: &Path) -> Result<(), RunError> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| RunError::io("create", dir, source))
}

/// Opens `path` for appending (and reading its last byte), creating it 0600 when
/// missing. A new file's directory
/// entry is synced so that the file survives a crash.
pub(crate) fn open_private_append(path: &Path) -> Result<File, RunError> {
    match OpenOptions::new().read(true).append(true).open(path) {
        Ok(file) => return Ok(file),
        Err(error) if error.kind() == ErrorKind::NotFound => {}
        Err(source) => return Err(RunError::io("open", path, source)),
    }
    let file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .map_err(|source| RunError::io("create", path, source))?;
    sync_parent(path)?;
    Ok(file)
}

/// Makes the directory entry of `path` durable.
pub(crate) fn sync_parent(path: &Path) -> Result<(), RunError> {
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    File::open(parent)
        .and_then(|dir| dir.sync_all())
        .map_err(|source| RunError::io("sync", parent, source))
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
) -> Result<(), RunError> {
    let len = file
        .metadata()
        .map_err(|source| RunError::io("stat", path, source))?
        .len();
    let mut torn = false;
    if len > 0 {
        let mut last = [0u8; 1];
        file.read_exact_at(&mut last, len - 1)
            .map_err(|source| RunError::io("read", path, source))?;
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
    result.map_err(|source| RunError::io("write", path, source))?;
    if durable {
        file.sync_data()
            .map_err(|source| RunError::io("sync", path, source))?;
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
) -> Result<(), RunError> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(()),
        Err(source) => return Err(RunError::io("open", path, source)),
    };
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut buf = Vec::new();
    let mut number = 0;
    loop {
        buf.clear();
        let read = reader
            .read_until(b'\n', &mut buf)
            .map_err(|source| RunError::io("read", path, source))?;
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
