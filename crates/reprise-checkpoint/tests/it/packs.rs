//! Packs of small objects: what a store takes on disk, and packs cut short or
//! planted in a run folder.

use std::path::{Path, PathBuf};

use reprise_checkpoint::{CaptureOptions, CheckpointError, CheckpointId, CheckpointStore};
use sha2::{Digest, Sha256};

use crate::support::{loose_objects, packed_objects, state, write};

/// A folder of 300 small text files and one large file, and a store holding one
/// checkpoint of it.
fn stored(work: &Path) -> (PathBuf, PathBuf, CheckpointId) {
    let root = work.join("folder");
    for i in 0..300 {
        let text =
            format!("file {i}: some text that is not much like the others {i}\n").repeat(1 + i % 9);
        write(&root, &format!("d{}/f{i}.txt", i % 10), text);
    }
    let large: Vec<u8> = (0..3u32 << 20)
        .map(|i| (i.wrapping_mul(7919) >> 8) as u8)
        .collect();
    write(&root, "large.bin", large);
    let store_dir = work.join("store");
    let mut store = CheckpointStore::open(&store_dir, &root, CaptureOptions::default()).unwrap();
    let id = store.checkpoint().unwrap().id;
    (root, store_dir, id)
}

fn packs(store: &Path) -> Vec<PathBuf> {
    let mut packs: Vec<PathBuf> = std::fs::read_dir(store.join("packs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    packs.sort();
    packs
}

#[test]
fn small_objects_share_a_pack_and_large_ones_stay_loose() {
    let work = tempfile::tempdir().unwrap();
    let (root, store_dir, id) = stored(work.path());
    // The files are read by two threads, each writing its pack.
    let packs = packs(&store_dir);
    assert_eq!(packs.len(), 2, "{packs:?}");
    // 300 contents, 11 trees and the record.
    assert_eq!(packed_objects(&store_dir).len(), 312);
    let loose = loose_objects(&store_dir);
    assert_eq!(loose.len(), 1, "the 3 MiB file");
    assert_eq!(loose[0].content.len(), 3 << 20);

    // A checkpoint after one change adds one pack: the content, two trees, the record.
    let before = state(&root);
    write(&root, "d3/f3.txt", "changed\n");
    let mut store = CheckpointStore::open(&store_dir, &root, CaptureOptions::default()).unwrap();
    let second = store.checkpoint().unwrap();
    assert_eq!(self::packs(&store_dir).len(), 3);
    assert_eq!(packed_objects(&store_dir).len(), 316);
    store.restore(&id).unwrap();
    assert_eq!(state(&root), before);
    assert_eq!(store.verify(&second.id).unwrap().len(), 301);
}

/// Replaces the store's only pack with `bytes`, opens the store again, and reads
/// checkpoint `id` whole.
fn read_with_pack(
    store_dir: &Path,
    pack: &Path,
    bytes: &[u8],
    id: &CheckpointId,
) -> Result<usize, CheckpointError> {
    std::fs::write(pack, bytes).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let store = CheckpointStore::open(store_dir, elsewhere.path(), CaptureOptions::default())?;
    store.verify(id).map(|files| files.len())
}

#[test]
fn a_pack_cut_short_leaves_its_checkpoint_absent_never_half_there() {
    let work = tempfile::tempdir().unwrap();
    let (_, store_dir, id) = stored(work.path());
    // The first pack holds contents only; the second, the record too.
    for pack in packs(&store_dir) {
        let whole = std::fs::read(&pack).unwrap();
        let len = whole.len();
        let cuts = [
            0,
            1,
            15,
            16,
            1000,
            len / 2,
            len - 49,
            len - 48,
            len - 20,
            len - 1,
        ];
        for cut in cuts {
            match read_with_pack(&store_dir, &pack, &whole[..cut], &id) {
                Ok(files) => panic!("cut at {cut} of {len}: {files} files read"),
                Err(error) => {
                    let text = error.to_string();
                    assert!(
                        matches!(error, CheckpointError::BadPack { .. })
                            && text.contains(&pack.display().to_string())
                            && text.contains("not a usable pack"),
                        "cut at {cut}: {text}"
                    );
                }
            }
        }
        // Whole again: the checkpoint is there, complete.
        assert_eq!(read_with_pack(&store_dir, &pack, &whole, &id).unwrap(), 301);
    }
    let whole = std::fs::read(&packs(&store_dir)[1]).unwrap();
    let len = whole.len();

    // What a kill leaves while a pack is written is a temporary file, never read
    // and removed by the next checkpoint.
    let temp = store_dir.join("tmp/999999999-1");
    std::fs::write(&temp, &whole[..len / 2]).unwrap();
    let root = work.path().join("folder");
    let mut store = CheckpointStore::open(&store_dir, &root, CaptureOptions::default()).unwrap();
    assert_eq!(store.verify(&id).unwrap().len(), 301);
    store.checkpoint().unwrap();
    assert!(!temp.exists());
}

/// Rewrites the first index entry's field at `field` (bytes from the entry's
/// start) to `value`, and the index's checksum to match: a pack planted on purpose.
fn planted(whole: &[u8], field: usize, value: &[u8]) -> Vec<u8> {
    let mut bytes = whole.to_vec();
    let trailer = bytes.len() - 48;
    let index_at = u64::from_le_bytes(bytes[trailer..trailer + 8].try_into().unwrap()) as usize;
    bytes[index_at + field..index_at + field + value.len()].copy_from_slice(value);
    let sum = Sha256::digest(&bytes[index_at..trailer]);
    bytes[trailer + 16..].copy_from_slice(&sum);
    bytes
}

#[test]
fn a_planted_pack_gives_a_clear_error_and_is_never_read_outside() {
    let work = tempfile::tempdir().unwrap();
    let (root, store_dir, id) = stored(work.path());
    let pack = packs(&store_dir).remove(0);
    let whole = std::fs::read(&pack).unwrap();
    let entries = packed_objects(&store_dir);
    let wild = [
        (32, u64::MAX.to_le_bytes().to_vec(), "outside"),
        (
            32,
            (whole.len() as u64 - 10).to_le_bytes().to_vec(),
            "outside",
        ),
        (32, 3u64.to_le_bytes().to_vec(), "outside"),
        (40, u32::MAX.to_le_bytes().to_vec(), "outside"),
        (44, u32::MAX.to_le_bytes().to_vec(), "impossible size"),
        (48, vec![7], "unknown kind"),
    ];
    for (field, value, reason) in wild {
        let error = read_with_pack(&store_dir, &pack, &planted(&whole, field, &value), &id)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(&pack.display().to_string()) && error.contains(reason),
            "field {field}: {error}"
        );
    }
    // A wild count of entries in the trailer.
    let mut bytes = whole.clone();
    let at = bytes.len() - 40;
    bytes[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    let error = read_with_pack(&store_dir, &pack, &bytes, &id).unwrap_err();
    assert!(error.to_string().contains("does not fit"), "{error}");

    // An index that hashes right, naming other bytes than the object's: the object
    // is damaged, and no restore writes it.
    let swapped = {
        // The first entry's id given to the second entry's bytes.
        let trailer = whole.len() - 48;
        let index_at = u64::from_le_bytes(whole[trailer..trailer + 8].try_into().unwrap()) as usize;
        let second = whole[index_at + 53 + 32..index_at + 53 + 53].to_vec();
        planted(&whole, 32, &second)
    };
    std::fs::write(&pack, &swapped).unwrap();
    std::fs::remove_dir_all(&root).unwrap();
    std::fs::create_dir(&root).unwrap();
    let mut store = CheckpointStore::open(&store_dir, &root, CaptureOptions::default()).unwrap();
    let error = store.restore(&id).unwrap_err();
    assert!(
        matches!(error, CheckpointError::DamagedObject { .. })
            && error.to_string().contains(&entries[0].id),
        "{error}"
    );
    assert!(
        state(&root)
            .values()
            .filter(|hash| hash.ends_with(&entries[1].id))
            .count()
            <= 1,
        "nothing written with the wrong bytes"
    );
}

#[test]
fn a_loose_object_that_does_not_match_its_name_is_never_restored() {
    let work = tempfile::tempdir().unwrap();
    let (root, store_dir, id) = stored(work.path());
    let loose = loose_objects(&store_dir).remove(0);
    assert_eq!(loose.content.len(), 3 << 20);
    // Same length, one bit changed, stored as the object was.
    let mut other = loose.content.clone();
    other[1 << 20] ^= 1;
    let stored = if loose.compressed {
        zstd::encode_all(other.as_slice(), 3).unwrap()
    } else {
        other
    };
    std::fs::write(&loose.file, stored).unwrap();
    std::fs::remove_file(root.join("large.bin")).unwrap();
    let mut store = CheckpointStore::open(&store_dir, &root, CaptureOptions::default()).unwrap();
    let error = with_causes(&store.verify(&id).unwrap_err());
    assert!(
        error.contains(&loose.id) && error.contains("does not match its name"),
        "{error}"
    );
    let error = with_causes(&store.restore(&id).unwrap_err());
    assert!(error.contains("does not match its name"), "{error}");
    assert!(!root.join("large.bin").exists());
}

/// An error and its causes, as one line.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}
