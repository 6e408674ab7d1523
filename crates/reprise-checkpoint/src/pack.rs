//! Packs: many small objects in one file (`packs/<seq>-<hash>.pack`), so that a
//! store of small files does not take a disk block per object.
//!
//! A pack is the magic line `reprise-pack 1\n`, the objects' stored bytes back to
//! back, an index of one 53-byte entry per object (its id, the offset and length of
//! its stored bytes, its content's size, whether it is a zstd frame), and a
//! 48-byte trailer (the index's offset, its entry count and its SHA-256). A pack is
//! written whole under a temporary name, synced, and only then renamed into
//! `packs/`: no kill leaves one cut short under its name. A run folder's files are
//! untrusted all the same: an index that does not hash to its trailer's sum, or an
//! entry outside the file, makes the whole pack refused, and an object's bytes are
//! checked against its id whenever it is read.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;

use sha2::{Digest, Sha256};

use crate::id::ObjectId;

/// The first bytes of every pack.
pub(crate) const MAGIC: &[u8] = b"reprise-pack 1\n";

/// What a pack's file name ends with.
pub(crate) const SUFFIX: &str = ".pack";

/// Objects whose content is at most this large (1 MiB) go into packs; larger ones
/// are loose files, where a partly used last block is lost in their size.
pub(crate) const PACKED_MAX: u64 = 1 << 20;

/// The most objects a pack holds: a batch with more writes more packs, and an
/// index claiming more is refused before anything is allocated for it.
pub(crate) const MAX_ENTRIES: usize = 1 << 22;

const ENTRY_LEN: usize = 32 + 8 + 4 + 4 + 1 + 4;
const TRAILER_LEN: usize = 8 + 8 + 32;

/// Where an object is in its pack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The object.
    pub(crate) id: ObjectId,
    /// Where its stored bytes start in the pack.
    pub(crate) offset: u64,
    /// How many stored bytes.
    pub(crate) len: u32,
    /// Its content's size.
    pub(crate) size: u32,
    /// Whether the stored bytes are a zstd frame.
    pub(crate) compressed: bool,
}

impl Entry {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.id.0);
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
        out.push(u8::from(self.compressed));
        // Reserved, zero.
        out.extend_from_slice(&[0; 4]);
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        let id: [u8; 32] = bytes.get(..32)?.try_into().ok()?;
        let offset = u64::from_le_bytes(bytes.get(32..40)?.try_into().ok()?);
        let len = u32::from_le_bytes(bytes.get(40..44)?.try_into().ok()?);
        let size = u32::from_le_bytes(bytes.get(44..48)?.try_into().ok()?);
        let compressed = match bytes.get(48)? {
            0 => false,
            1 => true,
            _ => return None,
        };
        Some(Self {
            id: ObjectId(id),
            offset,
            len,
            size,
            compressed,
        })
    }
}

/// A pack being written to a temporary file.
pub(crate) struct PackWriter {
    /// The temporary file's name in `tmp/`.
    pub(crate) temp: String,
    out: BufWriter<File>,
    offset: u64,
    pub(crate) entries: Vec<Entry>,
    ids: std::collections::HashSet<ObjectId>,
}

impl PackWriter {
    /// Starts a pack in `file` (new and empty), named `temp` in `tmp/`.
    pub(crate) fn new(temp: String, file: File) -> std::io::Result<Self> {
        let mut out = BufWriter::with_capacity(256 << 10, file);
        out.write_all(MAGIC)?;
        Ok(Self {
            temp,
            out,
            offset: MAGIC.len() as u64,
            entries: Vec::new(),
            ids: std::collections::HashSet::new(),
        })
    }

    /// Whether the pack holds `id` already.
    pub(crate) fn contains(&self, id: &ObjectId) -> bool {
        self.ids.contains(id)
    }

    /// Appends object `id`: `stored` (a zstd frame when `compressed`) for a content
    /// of `size` bytes. `size` is at most [`PACKED_MAX`].
    pub(crate) fn push(
        &mut self,
        id: ObjectId,
        stored: &[u8],
        size: u64,
        compressed: bool,
    ) -> std::io::Result<()> {
        let (Ok(len), Ok(size)) = (u32::try_from(stored.len()), u32::try_from(size)) else {
            return Err(std::io::Error::other("object too large for a pack"));
        };
        self.out.write_all(stored)?;
        self.entries.push(Entry {
            id,
            offset: self.offset,
            len,
            size,
            compressed,
        });
        self.ids.insert(id);
        self.offset += u64::from(len);
        Ok(())
    }

    /// Writes the index and the trailer; returns the file (to sync) and the index's
    /// SHA-256.
    pub(crate) fn finish(mut self) -> std::io::Result<(File, [u8; 32], Vec<Entry>)> {
        let mut index = Vec::with_capacity(self.entries.len() * ENTRY_LEN + TRAILER_LEN);
        for entry in &self.entries {
            entry.encode(&mut index);
        }
        let sum: [u8; 32] = Sha256::digest(&index).into();
        index.extend_from_slice(&self.offset.to_le_bytes());
        index.extend_from_slice(&(self.entries.len() as u64).to_le_bytes());
        index.extend_from_slice(&sum);
        self.out.write_all(&index)?;
        let file = self.out.into_inner().map_err(|error| error.into_error())?;
        Ok((file, sum, self.entries))
    }
}

/// The name of a pack: its sequence number, so that names sort in the order the
/// packs were written, and the start of its index's SHA-256.
pub(crate) fn name(seq: u64, sum: &[u8; 32]) -> String {
    let hex: String = sum[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{seq:010}-{hex}{SUFFIX}")
}

/// The sequence number of the pack named `name`; `None` for a name that is not a
/// pack's.
pub(crate) fn seq_of(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(SUFFIX)?;
    let (seq, hash) = stem.split_once('-')?;
    if hash.is_empty() || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    if seq.is_empty() || !seq.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    seq.parse().ok()
}

/// Reads and checks the index of the pack `file`: what it holds, or what is wrong
/// with it.
pub(crate) fn read_index(file: &File) -> Result<Vec<Entry>, String> {
    let len = file
        .metadata()
        .map_err(|error| format!("cannot stat it: {error}"))?
        .len();
    let min = (MAGIC.len() + TRAILER_LEN) as u64;
    if len < min {
        return Err(format!(
            "{len} bytes, shorter than an empty pack ({min} bytes)"
        ));
    }
    let mut magic = [0u8; MAGIC.len()];
    read_at(file, &mut magic, 0)?;
    if magic != MAGIC {
        return Err("it does not start as a pack".to_owned());
    }
    let mut trailer = [0u8; TRAILER_LEN];
    read_at(file, &mut trailer, len - TRAILER_LEN as u64)?;
    let index_at = u64::from_le_bytes(trailer[..8].try_into().unwrap_or_default());
    let count = u64::from_le_bytes(trailer[8..16].try_into().unwrap_or_default());
    let index_len = count.checked_mul(ENTRY_LEN as u64);
    let expected_end = index_len
        .and_then(|index_len| index_at.checked_add(index_len))
        .and_then(|end| end.checked_add(TRAILER_LEN as u64));
    if index_at < MAGIC.len() as u64 || expected_end != Some(len) || count > MAX_ENTRIES as u64 {
        return Err(format!(
            "its trailer (index at {index_at}, {count} entries) does not fit its {len} bytes"
        ));
    }
    let index_len = usize::try_from(len - TRAILER_LEN as u64 - index_at)
        .map_err(|_| "its index is too large".to_owned())?;
    let mut index = vec![0u8; index_len];
    read_at(file, &mut index, index_at)?;
    let sum: [u8; 32] = Sha256::digest(&index).into();
    if sum[..] != trailer[16..] {
        return Err("its index does not match its checksum".to_owned());
    }
    let mut entries = Vec::with_capacity(index.len() / ENTRY_LEN);
    for raw in index.chunks_exact(ENTRY_LEN) {
        let entry = Entry::decode(raw).ok_or("an index entry of an unknown kind")?;
        let end = entry.offset.checked_add(u64::from(entry.len));
        if entry.offset < MAGIC.len() as u64 || end.is_none_or(|end| end > index_at) {
            return Err(format!(
                "object {} lies outside the pack's objects",
                entry.id
            ));
        }
        let fits = u64::from(entry.size) <= PACKED_MAX
            && if entry.compressed {
                u64::from(entry.len) <= zstd_bound()
            } else {
                entry.size == entry.len
            };
        if !fits {
            return Err(format!("object {} has an impossible size", entry.id));
        }
        entries.push(entry);
    }
    Ok(entries)
}

/// The most a zstd frame of a packed object can take.
fn zstd_bound() -> u64 {
    zstd::zstd_safe::compress_bound(PACKED_MAX as usize) as u64
}

fn read_at(file: &File, buf: &mut [u8], at: u64) -> Result<(), String> {
    file.read_exact_at(buf, at)
        .map_err(|error| format!("cannot read it: {error}"))
}

/// Reads the content of the object `entry` from its pack `file`, checked against
/// its id: `Err` says what is wrong.
pub(crate) fn read_object(file: &File, entry: &Entry) -> Result<Vec<u8>, ReadError> {
    let mut stored = vec![0u8; entry.len as usize];
    file.read_exact_at(&mut stored, entry.offset)
        .map_err(ReadError::Io)?;
    let content = if entry.compressed {
        let content = zstd::bulk::decompress(&stored, entry.size as usize)
            .map_err(|_| ReadError::Damaged("not a zstd frame of its size"))?;
        if content.len() != entry.size as usize {
            return Err(ReadError::Damaged("not a zstd frame of its size"));
        }
        content
    } else {
        stored
    };
    if ObjectId::of(&content) != entry.id {
        return Err(ReadError::Damaged("its content does not match its name"));
    }
    Ok(content)
}

/// Why a packed object could not be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The pack could not be read.
    Io(std::io::Error),
    /// Its bytes are not the object's.
    Damaged(&'static str),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pack(objects: &[&[u8]]) -> (tempfile::TempDir, File, Vec<Entry>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p");
        let mut writer = PackWriter::new("p".into(), File::create(&path).unwrap()).unwrap();
        for bytes in objects {
            let compressed = zstd::bulk::compress(bytes, 3).unwrap();
            writer
                .push(ObjectId::of(bytes), &compressed, bytes.len() as u64, true)
                .unwrap();
        }
        writer.push(ObjectId::of(b"raw"), b"raw", 3, false).unwrap();
        let (_, _, entries) = writer.finish().unwrap();
        (dir, File::open(&path).unwrap(), entries)
    }

    #[test]
    fn a_pack_reads_back_what_was_written() {
        let (_dir, file, written) = pack(&[b"alpha", &[7u8; 5000], b""]);
        let entries = read_index(&file).unwrap();
        assert_eq!(entries, written);
        let contents: Vec<Vec<u8>> = entries
            .iter()
            .map(|entry| read_object(&file, entry).unwrap())
            .collect();
        assert_eq!(
            contents,
            [
                b"alpha".to_vec(),
                vec![7u8; 5000],
                Vec::new(),
                b"raw".to_vec()
            ]
        );
    }

    #[test]
    fn a_pack_cut_anywhere_is_refused() {
        let (dir, file, _) = pack(&[b"alpha", b"beta"]);
        let len = file.metadata().unwrap().len();
        let whole = std::fs::read(dir.path().join("p")).unwrap();
        for cut in 0..len {
            let path = dir.path().join("cut");
            std::fs::write(&path, &whole[..cut as usize]).unwrap();
            let cut_file = File::open(&path).unwrap();
            assert!(read_index(&cut_file).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn wild_offsets_and_sizes_are_refused() {
        let (dir, file, entries) = pack(&[b"alpha"]);
        let len = file.metadata().unwrap().len();
        let index_at = entries.last().unwrap().offset + 3;
        for (field, value) in [
            (32, u64::MAX - 2),
            (32, len),
            (32, 0),
            (40, u64::from(u32::MAX)),
            (44, u64::from(u32::MAX)),
        ] {
            let mut bytes = std::fs::read(dir.path().join("p")).unwrap();
            let at = index_at as usize + field;
            let width = if field == 32 { 8 } else { 4 };
            bytes[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
            // The checksum made to match: a pack planted on purpose.
            let index_end = bytes.len() - TRAILER_LEN;
            let sum: [u8; 32] = Sha256::digest(&bytes[index_at as usize..index_end]).into();
            let sum_at = bytes.len() - 32;
            bytes[sum_at..].copy_from_slice(&sum);
            let path = dir.path().join("planted");
            std::fs::write(&path, &bytes).unwrap();
            let error = read_index(&File::open(&path).unwrap()).unwrap_err();
            assert!(
                error.contains("outside") || error.contains("impossible"),
                "{field}: {error}"
            );
        }
    }

    #[test]
    fn a_wrong_object_under_an_id_is_damaged() {
        let (_dir, file, entries) = pack(&[b"alpha"]);
        let mut wrong = entries[1];
        wrong.id = ObjectId::of(b"other");
        assert!(matches!(
            read_object(&file, &wrong),
            Err(ReadError::Damaged(_))
        ));
    }

    #[test]
    fn pack_names_sort_in_order_and_parse() {
        let first = name(9, &[0xab; 32]);
        let second = name(10, &[0x01; 32]);
        assert!(first < second);
        assert_eq!(seq_of(&first), Some(9));
        assert_eq!(seq_of("x.pack"), None);
        assert_eq!(seq_of("12-zz.pack"), None);
    }
}
