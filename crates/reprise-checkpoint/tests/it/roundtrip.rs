//! Capture, change, restore: the folder comes back, whatever the changes.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use proptest::prelude::*;
use reprise_checkpoint::{CaptureOptions, CheckpointStore};

use crate::support::{state, write};

/// A change to the folder.
#[derive(Debug, Clone)]
enum Change {
    Write(usize, Vec<u8>),
    Remove(usize),
    Chmod(usize, bool),
    Link(usize, usize),
    /// A path that is a file becomes a folder, or the other way round.
    Swap(usize),
}

const PATHS: [&str; 8] = ["a", "b.txt", "d/c", "d/e/f", "d/e/g.rs", "h/i", "x", "d/e"];

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        (
            0..PATHS.len(),
            proptest::collection::vec(any::<u8>(), 0..64)
        )
            .prop_map(|(p, c)| Change::Write(p, c)),
        (0..PATHS.len()).prop_map(Change::Remove),
        (0..PATHS.len(), any::<bool>()).prop_map(|(p, x)| Change::Chmod(p, x)),
        (0..PATHS.len(), 0..PATHS.len()).prop_map(|(p, t)| Change::Link(p, t)),
        (0..PATHS.len()).prop_map(Change::Swap),
    ]
}

fn clear(path: &Path) {
    match path.symlink_metadata() {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path).unwrap(),
        Ok(_) => std::fs::remove_file(path).unwrap(),
        Err(_) => {}
    }
}

/// Clears whatever is in the way of `rel` (a file where a folder must be) first.
fn make_room(root: &Path, rel: &str) {
    let mut prefix = root.to_path_buf();
    for part in Path::new(rel).parent().unwrap().components() {
        prefix.push(part);
        if prefix.symlink_metadata().is_ok_and(|meta| !meta.is_dir()) {
            std::fs::remove_file(&prefix).unwrap();
        }
    }
    clear(&root.join(rel));
}

fn apply(root: &Path, change: &Change) {
    match change {
        Change::Write(p, content) => {
            make_room(root, PATHS[*p]);
            write(root, PATHS[*p], content);
        }
        Change::Remove(p) => clear(&root.join(PATHS[*p])),
        Change::Chmod(p, exec) => {
            let path = root.join(PATHS[*p]);
            if path.symlink_metadata().is_ok_and(|meta| meta.is_file()) {
                let mode = if *exec { 0o755 } else { 0o644 };
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
            }
        }
        Change::Link(p, target) => {
            make_room(root, PATHS[*p]);
            std::fs::create_dir_all(root.join(PATHS[*p]).parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(PATHS[*target], root.join(PATHS[*p])).unwrap();
        }
        Change::Swap(p) => {
            let path = root.join(PATHS[*p]);
            if path.symlink_metadata().is_ok_and(|meta| meta.is_dir()) {
                std::fs::remove_dir_all(&path).unwrap();
                std::fs::write(&path, "was a folder").unwrap();
            } else {
                make_room(root, PATHS[*p]);
                write(root, &format!("{}/inner", PATHS[*p]), "was a file");
            }
        }
    }
}

/// The state without empty folders: a checkpoint keeps files, not folders.
fn files(root: &Path) -> std::collections::BTreeMap<String, String> {
    let mut all = state(root);
    all.retain(|_, value| value != "empty dir");
    all
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn a_restore_brings_back_every_captured_state(
        setup in proptest::collection::vec(change(), 1..12),
        changes in proptest::collection::vec(change(), 1..12),
    ) {
        let work = tempfile::tempdir().unwrap();
        let root = work.path();
        for change in &setup {
            apply(root, change);
        }
        let store_dir = tempfile::tempdir().unwrap();
        let mut store = CheckpointStore::open(store_dir.path(), root, CaptureOptions::default()).unwrap();
        let before = files(root);
        let first = store.checkpoint().unwrap();
        for change in &changes {
            apply(root, change);
        }
        let after = files(root);
        let restored = store.restore(&first.id).unwrap();
        prop_assert_eq!(files(root), before);
        store.restore(&restored.undo).unwrap();
        prop_assert_eq!(files(root), after);
    }
}
