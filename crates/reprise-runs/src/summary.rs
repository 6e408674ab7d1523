//! `.summary.json`: what a listing shows of a run (its session, when the conversation
//! was last appended to, the person's last message, the number of messages), rewritten
//! in place after every append to the conversation.
//!
//! Why a file of its own, written in place: `session.json` is replaced by temp file +
//! rename, and on ext4 a rename over an existing file makes the next journal commit
//! write that file's data too (`auto_da_alloc`), so the conversation's next
//! `fdatasync` paid for it (docs/benchmarks.md has the figures). Overwriting an
//! already allocated block in place adds nothing measurable. An in-place write can be seen half done (a reader racing the
//! writer, or a power cut in the middle), so the record carries a checksum, and a
//! record that fails it is not used: listings then count the conversation. The file
//! is a cache of the conversation; it is never synced.
//!
//! Layout: one line of JSON, one line with the FNV-1a 64 hash of that line's bytes
//! in hex, then spaces up to the longest record written so far (the file never
//! shrinks, so no stale bytes of a longer record follow a shorter one).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::fs::{read_beneath, run_file_root};
use reprise_session::StoreError;
use reprise_session::fs::{io_err, open_beneath};

/// The file name of a run's listing summary, beside `session.json`. Hidden: it is the
/// store's own bookkeeping, not part of the run's record.
pub const RUN_SUMMARY: &str = ".summary.json";

/// What the summary holds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SummaryRecord {
    /// The session kept in the run folder.
    pub(crate) session_id: String,
    /// When the conversation was last appended to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) updated_at: Option<Timestamp>,
    /// The person's last message, trimmed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) last_message: Option<String>,
    /// The person's first message, trimmed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) first_message: Option<String>,
    /// How many message entries the conversation holds.
    #[serde(default)]
    pub(crate) message_count: u64,
    /// The length of `conversation.jsonl` this record describes: a listing that finds
    /// the file at another length (emptied, cut, replaced) recounts instead of
    /// showing stale counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) conversation_bytes: Option<u64>,
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The record's bytes: JSON line, hash line.
pub(crate) fn encode(record: &SummaryRecord) -> Result<Vec<u8>, serde_json::Error> {
    let mut bytes = serde_json::to_vec(record)?;
    let hash = fnv1a64(&bytes);
    bytes.extend_from_slice(format!("\n{hash:016x}\n").as_bytes());
    Ok(bytes)
}

/// The record in `bytes`, or `None` when it is missing, torn or not valid.
pub(crate) fn decode(bytes: &[u8]) -> Option<SummaryRecord> {
    let json_end = memchr::memchr(b'\n', bytes)?;
    let json = &bytes[..json_end];
    let rest = &bytes[json_end + 1..];
    let hash_end = memchr::memchr(b'\n', rest)?;
    let hash = std::str::from_utf8(&rest[..hash_end]).ok()?;
    if hash.len() != 16 || u64::from_str_radix(hash, 16).ok()? != fnv1a64(json) {
        return None;
    }
    if !rest[hash_end + 1..].iter().all(|byte| *byte == b' ') {
        return None;
    }
    serde_json::from_slice(json).ok()
}

/// Reads the summary at `path`: `Ok(None)` when it is missing, or torn every time it
/// was read (a writer may be in the middle of a write: it is read up to three times).
pub(crate) fn read(path: &Path) -> std::io::Result<Option<SummaryRecord>> {
    read_with(|| match read_beneath(run_file_root(path), path) {
        Ok(Some(bytes)) => Ok(bytes),
        Ok(None) => Err(std::io::ErrorKind::NotFound.into()),
        Err(error) => Err(std::io::Error::other(error)),
    })
}

/// [`read`], with the bytes from `read_bytes`.
pub(crate) fn read_with(
    mut read_bytes: impl FnMut() -> std::io::Result<Vec<u8>>,
) -> std::io::Result<Option<SummaryRecord>> {
    for _ in 0..3 {
        let bytes = match read_bytes() {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(error),
        };
        if let Some(record) = decode(&bytes) {
            return Ok(Some(record));
        }
    }
    Ok(None)
}

/// The writer of one run's summary: keeps the file open and overwrites it in place.
#[derive(Debug)]
pub(crate) struct SummaryWriter {
    path: PathBuf,
    file: File,
    /// The file's length: the longest record written, padding included.
    len: u64,
}

impl SummaryWriter {
    /// Opens (or creates, 0600) the summary at `path`. Its directory entry is not
    /// synced: a summary lost in a power cut only makes listings count the
    /// conversation until the next append.
    pub(crate) fn open(path: &Path) -> Result<SummaryWriter, StoreError> {
        let file = open_beneath(
            run_file_root(path),
            path,
            rustix::fs::OFlags::RDWR | rustix::fs::OFlags::CREATE,
            "open",
        )?;
        let len = file.metadata().map_err(io_err("stat", path))?.len();
        Ok(SummaryWriter {
            path: path.to_path_buf(),
            file,
            len,
        })
    }

    /// Overwrites the record with `record` (one positioned write, no sync).
    pub(crate) fn write(&mut self, record: &SummaryRecord) -> Result<(), StoreError> {
        let mut bytes = encode(record).map_err(|error| StoreError::Format {
            path: self.path.clone(),
            message: error.to_string(),
        })?;
        let len = (bytes.len() as u64).max(self.len);
        bytes.resize(len as usize, b' ');
        self.file
            .write_all_at(&bytes, 0)
            .map_err(io_err("write", &self.path))?;
        self.len = len;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(last: &str, count: u64) -> SummaryRecord {
        SummaryRecord {
            session_id: "s1".into(),
            updated_at: Some("2026-11-30T09:38:04.123Z".parse().unwrap()),
            last_message: Some(last.into()),
            first_message: None,
            message_count: count,
            conversation_bytes: None,
        }
    }

    #[test]
    fn a_record_round_trips_and_a_shorter_one_replaces_a_longer_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RUN_SUMMARY);
        let mut writer = SummaryWriter::open(&path).unwrap();
        writer.write(&record("a long first message", 2)).unwrap();
        assert_eq!(
            read(&path).unwrap(),
            Some(record("a long first message", 2))
        );
        writer.write(&record("short", 4)).unwrap();
        assert_eq!(read(&path).unwrap(), Some(record("short", 4)));
        // A writer opened later keeps the file's length.
        let mut again = SummaryWriter::open(&path).unwrap();
        again.write(&record("x", 5)).unwrap();
        assert_eq!(read(&path).unwrap(), Some(record("x", 5)));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn a_torn_or_mixed_record_is_refused() {
        let old = encode(&record("hello world, how are you", 2)).unwrap();
        let mut new = encode(&record("hi", 3)).unwrap();
        new.resize(old.len(), b' ');
        assert!(decode(&old).is_some());
        assert!(decode(&new).is_some());
        // Every mix of a prefix of the new record with the rest of the old one (a
        // reader racing the writer, or a write cut short) is either one of the two
        // records or refused.
        for cut in 0..=old.len() {
            let mut mixed = new[..cut].to_vec();
            mixed.extend_from_slice(&old[cut..]);
            match decode(&mixed) {
                None => {}
                Some(got) => assert!(
                    got == record("hi", 3) || got == record("hello world, how are you", 2),
                    "cut {cut}: {got:?}"
                ),
            }
        }
        assert_eq!(decode(b""), None);
        assert_eq!(decode(b"{}\n"), None);
        assert_eq!(decode(b"{\"sessionId\":\"s\"}\n0000000000000000\n"), None);
    }

    #[test]
    fn a_missing_summary_reads_as_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(&dir.path().join(RUN_SUMMARY)).unwrap(), None);
    }
}
