//! The bytes of the list cache (see `docs/format.md`, "`.list-cache`"): a header
//! with a checksum of everything after it, then one entry per run in a fixed layout
//! of little-endian integers and length-prefixed UTF-8 strings. Decoding makes no
//! copy: each entry's strings borrow from the file's bytes, and a run's summary is
//! built from them only when the run is listed.
//!
//! Any damage (a cut, a flipped byte, a length that runs past the end, a string
//! that is not UTF-8, bytes after the last entry) makes the whole cache unusable;
//! what to do then is the caller's concern.

use std::collections::HashMap;

use jiff::Timestamp;

use crate::fingerprint::Fingerprint;
use crate::run::RunSummary;

/// The first bytes of a cache file.
const MAGIC: &[u8] = b"reprise list cache\n";

/// Bumped whenever what the cache holds or means changes.
const FORMAT: u32 = 3;

/// The seed of the checksum (foldhash's fixed-seed hash): it tells damage apart, not
/// a forgery (see `list_cache` for who is trusted to write the file).
const CHECKSUM_SEED: u64 = 0x7265_7072_6973_6531;

const HAS_LABELS: u8 = 1;
const HAS_CONVERSATION: u8 = 2;
const HAS_LAST: u8 = 4;
const HAS_FIRST: u8 = 8;
const HAS_TITLE: u8 = 16;

/// What a cached summary was checked against: the fingerprint of the file it was
/// read from, of the run's `labels.json` (when it had one), and the conversation's
/// length the summary describes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Stamp {
    pub(crate) fingerprint: Fingerprint,
    pub(crate) labels: Option<Fingerprint>,
    pub(crate) conversation_bytes: Option<u64>,
}

/// One run's summary as the cache holds it, borrowed from the cache's bytes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CachedRun<'a> {
    pub(crate) stamp: Stamp,
    pub(crate) session_id: &'a str,
    pub(crate) updated_at: Timestamp,
    pub(crate) message_count: u64,
    pub(crate) last_message: Option<&'a str>,
    pub(crate) first_message: Option<&'a str>,
    pub(crate) title: Option<&'a str>,
    /// The tags, each a length-prefixed string (already checked to be UTF-8).
    tags: &'a [u8],
    tag_count: u16,
}

impl<'a> CachedRun<'a> {
    /// The run's tags, in order.
    pub(crate) fn tags(&self) -> Vec<String> {
        let mut reader = Reader { bytes: self.tags };
        (0..self.tag_count)
            .map_while(|_| reader.str16().map(str::to_owned))
            .collect()
    }
}

/// Run folder name → its cached summary. With a fast hash: a listing of 100,000
/// runs looks up each once.
pub(crate) type Entries<'a> = HashMap<&'a str, CachedRun<'a>, foldhash::fast::RandomState>;

/// The entries of a cache file written by this `version`; `None` when `bytes` are
/// not one (another format or version, damaged).
pub(crate) fn decode<'a>(bytes: &'a [u8], version: &str) -> Option<Entries<'a>> {
    let mut reader = Reader { bytes };
    if reader.take(MAGIC.len())? != MAGIC || reader.u32()? != FORMAT || reader.str8()? != version {
        return None;
    }
    let count = reader.u32()?;
    let checksum = reader.u64()?;
    if self::checksum(reader.bytes) != checksum {
        return None;
    }
    // Each entry takes at least 90 bytes: a count that the file cannot hold is not
    // allowed to size the table.
    let capacity = (count as usize).min(reader.bytes.len() / 90);
    let mut entries = Entries::with_capacity_and_hasher(capacity, Default::default());
    for _ in 0..count {
        let (name, run) = entry(&mut reader)?;
        entries.insert(name, run);
    }
    reader.bytes.is_empty().then_some(entries)
}

fn entry<'a>(reader: &mut Reader<'a>) -> Option<(&'a str, CachedRun<'a>)> {
    let name = reader.str16()?;
    let flags = reader.u8()?;
    let fingerprint = fingerprint(reader)?;
    let labels = match flags & HAS_LABELS {
        0 => None,
        _ => Some(self::fingerprint(reader)?),
    };
    let conversation_bytes = match flags & HAS_CONVERSATION {
        0 => None,
        _ => Some(reader.u64()?),
    };
    let seconds = reader.i64()?;
    let nanoseconds = i32::try_from(reader.u32()?).ok()?;
    let updated_at = Timestamp::new(seconds, nanoseconds).ok()?;
    let message_count = reader.u64()?;
    let session_id = reader.str16()?;
    let mut optional = |flag: u8| match flags & flag {
        0 => Some(None),
        _ => reader.str32().map(Some),
    };
    let last_message = optional(HAS_LAST)?;
    let first_message = optional(HAS_FIRST)?;
    let title = optional(HAS_TITLE)?;
    let tag_count = reader.u16()?;
    let tags_start = reader.bytes;
    for _ in 0..tag_count {
        reader.str16()?;
    }
    let tags = &tags_start[..tags_start.len() - reader.bytes.len()];
    Some((
        name,
        CachedRun {
            stamp: Stamp {
                fingerprint,
                labels,
                conversation_bytes,
            },
            session_id,
            updated_at,
            message_count,
            last_message,
            first_message,
            title,
            tags,
            tag_count,
        },
    ))
}

fn fingerprint(reader: &mut Reader<'_>) -> Option<Fingerprint> {
    Some(Fingerprint {
        dev: reader.u64()?,
        ino: reader.u64()?,
        size: reader.u64()?,
        mtime: reader.i64()?,
        mtime_ns: reader.i64()?,
        ctime: reader.i64()?,
        ctime_ns: reader.i64()?,
    })
}

/// The bytes of a cache of `runs` (folder name, stamp, summary) for this `version`;
/// `None` when a run holds more than the layout can say (a string of 4 GiB).
pub(crate) fn encode<'a>(
    version: &str,
    runs: impl ExactSizeIterator<Item = (&'a str, &'a Stamp, &'a RunSummary)>,
) -> Option<Vec<u8>> {
    let count = u32::try_from(runs.len()).ok()?;
    let mut body = Vec::with_capacity(runs.len() * 256);
    for (name, stamp, summary) in runs {
        push_entry(&mut body, name, stamp, summary)?;
    }
    let mut out = Vec::with_capacity(body.len() + 64);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT.to_le_bytes());
    push_str8(&mut out, version)?;
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&checksum(&body).to_le_bytes());
    out.extend_from_slice(&body);
    Some(out)
}

fn push_entry(out: &mut Vec<u8>, name: &str, stamp: &Stamp, run: &RunSummary) -> Option<()> {
    push_str16(out, name)?;
    let mut flags = 0;
    for (present, flag) in [
        (stamp.labels.is_some(), HAS_LABELS),
        (stamp.conversation_bytes.is_some(), HAS_CONVERSATION),
        (run.last_message.is_some(), HAS_LAST),
        (run.first_message.is_some(), HAS_FIRST),
        (run.title.is_some(), HAS_TITLE),
    ] {
        if present {
            flags |= flag;
        }
    }
    out.push(flags);
    push_fingerprint(out, &stamp.fingerprint);
    if let Some(labels) = &stamp.labels {
        push_fingerprint(out, labels);
    }
    if let Some(bytes) = stamp.conversation_bytes {
        out.extend_from_slice(&bytes.to_le_bytes());
    }
    out.extend_from_slice(&run.updated_at.as_second().to_le_bytes());
    let nanoseconds = u32::try_from(run.updated_at.subsec_nanosecond()).ok()?;
    out.extend_from_slice(&nanoseconds.to_le_bytes());
    out.extend_from_slice(&run.message_count.to_le_bytes());
    push_str16(out, &run.session_id)?;
    for text in [&run.last_message, &run.first_message, &run.title]
        .into_iter()
        .flatten()
    {
        push_str32(out, text)?;
    }
    out.extend_from_slice(&u16::try_from(run.tags.len()).ok()?.to_le_bytes());
    for tag in &run.tags {
        push_str16(out, tag)?;
    }
    Some(())
}

fn push_fingerprint(out: &mut Vec<u8>, fingerprint: &Fingerprint) {
    for word in [fingerprint.dev, fingerprint.ino, fingerprint.size] {
        out.extend_from_slice(&word.to_le_bytes());
    }
    for word in [
        fingerprint.mtime,
        fingerprint.mtime_ns,
        fingerprint.ctime,
        fingerprint.ctime_ns,
    ] {
        out.extend_from_slice(&word.to_le_bytes());
    }
}

fn push_str8(out: &mut Vec<u8>, text: &str) -> Option<()> {
    out.push(u8::try_from(text.len()).ok()?);
    out.extend_from_slice(text.as_bytes());
    Some(())
}

fn push_str16(out: &mut Vec<u8>, text: &str) -> Option<()> {
    out.extend_from_slice(&u16::try_from(text.len()).ok()?.to_le_bytes());
    out.extend_from_slice(text.as_bytes());
    Some(())
}

fn push_str32(out: &mut Vec<u8>, text: &str) -> Option<()> {
    out.extend_from_slice(&u32::try_from(text.len()).ok()?.to_le_bytes());
    out.extend_from_slice(text.as_bytes());
    Some(())
}

fn checksum(bytes: &[u8]) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = foldhash::fast::FixedState::with_seed(CHECKSUM_SEED).build_hasher();
    hasher.write(bytes);
    hasher.finish()
}

/// Reads the layout's pieces off the front of `bytes`; `None` once they run out.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Option<&'a [u8]> {
        let (taken, rest) = self.bytes.split_at_checked(len)?;
        self.bytes = rest;
        Some(taken)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    fn u8(&mut self) -> Option<u8> {
        Some(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.array()?))
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.array()?))
    }

    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.array()?))
    }

    fn text(&mut self, len: usize) -> Option<&'a str> {
        simdutf8::basic::from_utf8(self.take(len)?).ok()
    }

    fn str8(&mut self) -> Option<&'a str> {
        let len = self.u8()?;
        self.text(usize::from(len))
    }

    fn str16(&mut self) -> Option<&'a str> {
        let len = self.u16()?;
        self.text(usize::from(len))
    }

    fn str32(&mut self) -> Option<&'a str> {
        let len = usize::try_from(self.u32()?).ok()?;
        self.text(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn stamp(ino: u64) -> Stamp {
        let fingerprint = Fingerprint {
            dev: 1,
            ino,
            size: 188,
            mtime: 1_780_000_000,
            mtime_ns: 5,
            ctime: 1_780_000_001,
            ctime_ns: 6,
        };
        Stamp {
            fingerprint,
            labels: ino.is_multiple_of(2).then_some(fingerprint),
            conversation_bytes: ino.is_multiple_of(3).then_some(ino * 10),
        }
    }

    fn summary(n: u64) -> RunSummary {
        RunSummary {
            dir: PathBuf::from(format!("/runs/r{n}")),
            session_id: format!("s{n}"),
            updated_at: Timestamp::new(1_780_000_000 + n as i64, 123_456_789).unwrap(),
            last_message: n.is_multiple_of(2).then(|| format!("last é {n}")),
            first_message: n.is_multiple_of(3).then(|| format!("first 日本 {n}")),
            message_count: n,
            title: n.is_multiple_of(4).then(|| "a title".to_owned()),
            tags: (0..n % 3).map(|t| format!("tag{t}")).collect(),
        }
    }

    /// `count` runs and the cache of them, for version 1.2.3.
    fn encoded(count: u64) -> (Vec<(String, Stamp, RunSummary)>, Vec<u8>) {
        let runs: Vec<(String, Stamp, RunSummary)> = (0..count)
            .map(|n| (format!("r{n}"), stamp(n), summary(n)))
            .collect();
        let bytes = encode(
            "1.2.3",
            runs.iter()
                .map(|(name, stamp, run)| (name.as_str(), stamp, run)),
        )
        .unwrap();
        (runs, bytes)
    }

    #[test]
    fn what_is_encoded_decodes_to_the_same_runs() {
        let (runs, bytes) = encoded(12);
        let entries = decode(&bytes, "1.2.3").unwrap();
        assert_eq!(entries.len(), runs.len());
        for (name, stamp, run) in &runs {
            let cached = &entries[name.as_str()];
            assert_eq!(cached.stamp, *stamp);
            assert_eq!(cached.session_id, run.session_id);
            assert_eq!(cached.updated_at, run.updated_at);
            assert_eq!(cached.message_count, run.message_count);
            assert_eq!(cached.last_message, run.last_message.as_deref());
            assert_eq!(cached.first_message, run.first_message.as_deref());
            assert_eq!(cached.title, run.title.as_deref());
            assert_eq!(cached.tags(), run.tags);
        }
        assert!(decode(&bytes, "1.2.4").is_none());
    }

    #[test]
    fn a_cut_or_changed_byte_anywhere_makes_the_cache_unusable() {
        let (_, bytes) = encoded(3);
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len], "1.2.3").is_none(), "cut at {len}");
        }
        for at in 0..bytes.len() {
            let mut changed = bytes.clone();
            changed[at] ^= 0x20;
            assert!(decode(&changed, "1.2.3").is_none(), "byte {at} changed");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer, "1.2.3").is_none());
    }
}
