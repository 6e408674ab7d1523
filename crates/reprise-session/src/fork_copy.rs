//! Copying a transcript for a fork: bytes, not parsed entries, and complete lines only,
//! so that a fork costs about a file copy and works while the source is being written.

use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::Path;

use uuid::Uuid;

use crate::entry::Entry;
use crate::store::StoreError;
use crate::store_fs::io_err;

/// Bytes scanned at a time.
const CHUNK: usize = 4 << 20;

fn read_chunk(file: &File, path: &Path, buf: &mut [u8], offset: u64) -> Result<usize, StoreError> {
    loop {
        match file.read_at(buf, offset) {
            Ok(n) => return Ok(n),
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(StoreError::Io {
                    op: "read",
                    path: path.to_path_buf(),
                    source,
                });
            }
        }
    }
}

/// The length of the complete lines among the first `len` bytes of `file`.
fn complete_prefix(file: &File, path: &Path, len: u64) -> Result<u64, StoreError> {
    let mut end = len;
    let mut buf = vec![0u8; 64 << 10];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let want = (end - start) as usize;
        let got = read_chunk(file, path, &mut buf[..want], start)?;
        if got < want {
            // The file shrank under us; what remains is all there is.
            return complete_prefix(file, path, start + got as u64);
        }
        if let Some(pos) = memchr::memrchr(b'\n', &buf[..want]) {
            return Ok(start + pos as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

/// Finds the end offset (just past its `\n`) of the line holding entry `uuid`, by
/// searching the bytes for the uuid's text and confirming each hit by parsing only
/// that line. A bare-message line (no `"uuid"` field) matches when the uuid derived
/// from the session id and its 1-based line number is the one asked for.
fn end_of_entry(
    file: &File,
    path: &Path,
    limit: u64,
    session_id: &str,
    uuid: Uuid,
) -> Result<Option<u64>, StoreError> {
    let needle = uuid.hyphenated().to_string();
    let finder = memchr::memmem::Finder::new(needle.as_bytes());
    let has_uuid_field = memchr::memmem::Finder::new(b"\"uuid\"");
    let mut found = None;
    scan_lines(file, path, limit, &mut |line, end, number| {
        let is_it = if finder.find(line).is_some() {
            serde_json::from_slice::<Entry>(line).is_ok_and(|entry| entry.uuid == uuid)
        } else {
            // A bare-message line has no uuid of its own.
            has_uuid_field.find(line).is_none() && Entry::bare_line_uuid(session_id, number) == uuid
        };
        if is_it {
            found = Some(end);
        }
        !is_it
    })?;
    Ok(found)
}

/// Calls `visit(line, end_offset, line_number)` for each complete line before `limit`
/// until it returns false.
fn scan_lines(
    file: &File,
    path: &Path,
    limit: u64,
    visit: &mut dyn FnMut(&[u8], u64, usize) -> bool,
) -> Result<(), StoreError> {
    let mut buf = vec![0u8; usize::try_from(limit).unwrap_or(CHUNK).clamp(4096, CHUNK)];
    let mut base = 0u64;
    let mut filled = 0usize;
    let mut number = 0usize;
    while base + (filled as u64) < limit {
        if filled == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        let want = ((limit - base) as usize - filled).min(buf.len() - filled);
        let got = read_chunk(
            file,
            path,
            &mut buf[filled..filled + want],
            base + filled as u64,
        )?;
        if got == 0 {
            break;
        }
        filled += got;
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', &buf[..filled]) {
            number += 1;
            if !visit(&buf[start..end], base + end as u64 + 1, number) {
                return Ok(());
            }
            start = end + 1;
        }
        buf.copy_within(start..filled, 0);
        filled -= start;
        base += start as u64;
    }
    Ok(())
}

/// Copies the complete lines of `source` (all of them, or up to and including entry
/// `up_to`) to the end of `target`. Returns the bytes copied.
///
/// The copy is done by the kernel where it can (`copy_file_range` through
/// `std::io::copy`); only a fork point is found by reading.
pub(crate) fn copy_lines(
    source_path: &Path,
    session_id: &str,
    up_to: Option<Uuid>,
    target: &mut File,
    target_path: &Path,
) -> Result<u64, StoreError> {
    let source = File::open(source_path).map_err(io_err("open", source_path))?;
    // A writer may be appending: fix the length once, and copy only whole lines.
    let len = source
        .metadata()
        .map_err(io_err("stat", source_path))?
        .len();
    let complete = complete_prefix(&source, source_path, len)?;
    let end = match up_to {
        None => complete,
        Some(uuid) => end_of_entry(&source, source_path, complete, session_id, uuid)?.ok_or(
            StoreError::EntryNotFound {
                session: session_id.to_owned(),
                entry: uuid,
            },
        )?,
    };
    let mut reader = std::io::Read::take(&source, end);
    let copied = std::io::copy(&mut reader, target).map_err(io_err("copy", target_path))?;
    if copied != end {
        return Err(StoreError::Io {
            op: "copy",
            path: source_path.to_path_buf(),
            source: std::io::Error::new(ErrorKind::UnexpectedEof, "source shrank during fork"),
        });
    }
    Ok(copied)
}
