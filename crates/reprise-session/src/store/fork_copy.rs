//! Copying a transcript for a fork: bytes, not parsed entries, and complete lines only,
//! so that a fork costs about a file copy and works while the source is being written.
//!
//! A fork's copied data is synced after the fork returns, by the store that made it
//! ([`ForkSyncs`](crate::store::fork_sync::ForkSyncs)):
//! writing 100 MB to disk takes several times as long as copying it in the page cache,
//! and until the fork's first append every byte of it is also on disk in the source,
//! whose appends were synced. The fork's own first durable append (`fdatasync` of the
//! same file) makes the whole file durable if the background sync has not yet.

use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::Path;

use reprise_message::Entry;
use uuid::Uuid;

use crate::fs::{IoError, io_err};
use crate::store::session_store::StoreError;

/// Bytes scanned at a time.
const CHUNK: usize = 4 << 20;

fn read_chunk(file: &File, path: &Path, buf: &mut [u8], offset: u64) -> Result<usize, StoreError> {
    loop {
        match file.read_at(buf, offset) {
            Ok(n) => return Ok(n),
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(StoreError::Io(IoError::new(
                    "read",
                    path.to_path_buf(),
                    source,
                )));
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
/// searching whole blocks for the uuid's text and confirming each hit by parsing only
/// its line. When that finds nothing, a second pass looks for a bare-message line (no
/// `"uuid"` field) whose uuid, derived from the session id and its 1-based line
/// number, is the one asked for.
fn end_of_entry(
    file: &File,
    path: &Path,
    limit: u64,
    session_id: &str,
    uuid: Uuid,
) -> Result<Option<u64>, StoreError> {
    let needle = uuid.hyphenated().to_string();
    let finder = memchr::memmem::Finder::new(needle.as_bytes());
    let mut found = None;
    scan_blocks(file, path, limit, &mut |block, base, _| {
        for hit in finder.find_iter(block) {
            let start = memchr::memrchr(b'\n', &block[..hit]).map_or(0, |pos| pos + 1);
            let end = hit + memchr::memchr(b'\n', &block[hit..]).unwrap_or(block.len() - hit);
            if serde_json::from_slice::<Entry>(&block[start..end]).is_ok_and(|e| e.uuid == uuid) {
                found = Some(base + end as u64 + 1);
                return false;
            }
        }
        true
    })?;
    if found.is_some() {
        return Ok(found);
    }
    let has_uuid_field = memchr::memmem::Finder::new(b"\"uuid\"");
    scan_blocks(file, path, limit, &mut |block, base, first_line| {
        let mut start = 0;
        for (i, end) in memchr::memchr_iter(b'\n', block).enumerate() {
            let line = &block[start..end];
            start = end + 1;
            if has_uuid_field.find(line).is_none()
                && Entry::bare_line_uuid(session_id, first_line + i + 1) == uuid
            {
                found = Some(base + end as u64 + 1);
                return false;
            }
        }
        true
    })?;
    Ok(found)
}

/// Calls `visit(block, offset, lines_before)` for blocks of complete lines before
/// `limit` until it returns false.
fn scan_blocks(
    file: &File,
    path: &Path,
    limit: u64,
    visit: &mut dyn FnMut(&[u8], u64, usize) -> bool,
) -> Result<(), StoreError> {
    let mut buf = vec![0u8; usize::try_from(limit).unwrap_or(CHUNK).clamp(4096, CHUNK)];
    let mut base = 0u64;
    let mut filled = 0usize;
    let mut lines = 0usize;
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
        let Some(last) = memchr::memrchr(b'\n', &buf[..filled]) else {
            continue;
        };
        let block = &buf[..=last];
        if !visit(block, base, lines) {
            return Ok(());
        }
        lines += memchr::memchr_iter(b'\n', block).count();
        let done = last + 1;
        buf.copy_within(done..filled, 0);
        filled -= done;
        base += done as u64;
    }
    Ok(())
}

/// Copies the complete lines of `source` (all of them, or up to and including entry
/// `up_to`) to the end of `target`. Returns the bytes copied.
///
/// The copy is done by the kernel where it can (`copy_file_range` through
/// `std::io::copy`); only a fork point is found by reading.
pub(crate) fn copy_lines(
    root: &Path,
    source_path: &Path,
    session_id: &str,
    up_to: Option<Uuid>,
    target: &mut File,
    target_path: &Path,
) -> Result<u64, StoreError> {
    let source = crate::fs::open_beneath(root, source_path, rustix::fs::OFlags::RDONLY, "open")?;
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
        return Err(StoreError::Io(IoError::new(
            "copy",
            source_path.to_path_buf(),
            std::io::Error::new(ErrorKind::UnexpectedEof, "source shrank during fork"),
        )));
    }
    Ok(copied)
}
