//! Objects stored compressed and packed, and stores written before packs and
//! compression.

use std::path::Path;

use reprise_checkpoint::{CaptureOptions, CheckpointStore};

use crate::support::{all_objects, loose_objects, packed_objects, state, unpack_to_loose, write};

/// The bytes of every file the store keeps its objects in.
fn stored_bytes(store: &Path) -> u64 {
    ["objects", "packs"]
        .iter()
        .flat_map(|dir| walkdir::WalkDir::new(store.join(dir)).min_depth(1))
        .map(|entry| entry.unwrap().metadata().unwrap())
        .filter(std::fs::Metadata::is_file)
        .map(|meta| meta.len())
        .sum()
}

#[test]
fn text_is_stored_compressed_and_objects_stored_as_they_were_are_still_read() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("folder");
    let store_dir = work.path().join("store");
    let mut content = 0;
    for i in 0..200 {
        let text = format!("line {i} of a text file that repeats itself\n").repeat(20);
        content += text.len() as u64;
        write(&root, &format!("d{}/f{i}.txt", i % 7), text);
    }
    write(&root, "tiny", "x");
    let before = state(&root);
    let mut store = CheckpointStore::open(&store_dir, &root, CaptureOptions::default()).unwrap();
    let first = store.checkpoint().unwrap();
    let stored = stored_bytes(&store_dir);
    assert!(stored * 3 < content, "{stored} bytes stored for {content}");
    assert!(
        loose_objects(&store_dir).is_empty(),
        "small objects are packed"
    );
    let packed = packed_objects(&store_dir);
    // 201 contents, 8 trees and the record.
    assert_eq!(packed.len(), 210);
    assert_eq!(
        packed.iter().filter(|object| object.compressed).count(),
        200,
        "every text file, not the 1-byte one, nor a tree or the record"
    );

    // A store written before packs and compression held every object as a file of
    // its own, as it is.
    drop(store);
    unpack_to_loose(&store_dir);
    assert_eq!(loose_objects(&store_dir).len(), 210);
    std::fs::remove_dir_all(&root).unwrap();
    std::fs::create_dir(&root).unwrap();
    let mut store = CheckpointStore::open(&store_dir, &root, CaptureOptions::default()).unwrap();
    assert_eq!(store.verify(&first.id).unwrap().len(), 201);
    store.restore(&first.id).unwrap();
    assert_eq!(state(&root), before);
    // A new object next to old ones is packed and compressed; the old ones stay
    // as they are.
    write(
        &root,
        "d0/new.txt",
        "new text, new text, new text, new text\n".repeat(10),
    );
    store.checkpoint().unwrap();
    assert_eq!(
        all_objects(&store_dir)
            .iter()
            .filter(|object| object.compressed)
            .count(),
        1
    );
    assert!(
        loose_objects(&store_dir)
            .iter()
            .all(|object| !object.compressed)
    );
}
