//! Links in the folder: stored as links, never followed, never a way out.

use std::path::Path;

use reprise_checkpoint::{CaptureOptions, CheckpointStore};

use crate::support::{snapshot_bytes, state, write};

#[test]
fn links_are_stored_as_links_and_a_restore_never_writes_through_one() {
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "victim.txt", "outside\n");
    let work = tempfile::tempdir().unwrap();
    let root = work.path();
    write(root, "dir/x.txt", "inside\n");
    write(root, "dir/victim.txt", "the checkpoint's\n");
    std::os::unix::fs::symlink(outside.path().join("victim.txt"), root.join("to-outside")).unwrap();
    let store_dir = tempfile::tempdir().unwrap();
    let mut store =
        CheckpointStore::open(store_dir.path(), root, CaptureOptions::default()).unwrap();
    let first = store.checkpoint().unwrap();
    let files = store.verify(&first.id).unwrap();
    assert!(files[Path::new("to-outside")].ends_with(" l"), "{files:?}");
    let expected = state(root);

    // The folder `dir` replaced by a link to the outside folder.
    std::fs::remove_dir_all(root.join("dir")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("dir")).unwrap();
    let outside_before = snapshot_bytes(outside.path());
    store.restore(&first.id).unwrap();
    assert_eq!(snapshot_bytes(outside.path()), outside_before);
    assert_eq!(state(root), expected);
    assert!(root.join("dir").symlink_metadata().unwrap().is_dir());
}

#[test]
fn an_ignored_link_in_the_way_is_kept_and_not_followed() {
    let outside = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let root = work.path();
    write(root, "dir/x.txt", "inside\n");
    let store_dir = tempfile::tempdir().unwrap();
    let mut store =
        CheckpointStore::open(store_dir.path(), root, CaptureOptions::default()).unwrap();
    let first = store.checkpoint().unwrap();
    std::fs::remove_dir_all(root.join("dir")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("dir")).unwrap();
    write(root, ".gitignore", "/dir\n");
    let preview = store.preview(&first.id).unwrap();
    assert!(preview.created.is_empty(), "{preview:?}");
    let restored = store.restore(&first.id).unwrap();
    assert_eq!(
        restored.preview.kept,
        vec![Path::new("dir/x.txt").to_path_buf()]
    );
    assert!(
        std::fs::read_dir(outside.path()).unwrap().next().is_none(),
        "wrote outside"
    );
    assert!(
        root.join("dir")
            .symlink_metadata()
            .unwrap()
            .file_type()
            .is_symlink()
    );
    // The .gitignore was not in the checkpoint: the restore deleted it.
    assert!(!root.join(".gitignore").exists());
}
