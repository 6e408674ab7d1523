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
    // The preview says what the restore does: the link deleted, the files created.
    let preview = store.preview(&first.id).unwrap();
    assert!(preview.kept.is_empty(), "{preview:?}");
    assert_eq!(preview.deleted, [Path::new("dir")]);
    assert_eq!(
        preview.created,
        [Path::new("dir/victim.txt"), Path::new("dir/x.txt")]
    );
    let restored = store.restore(&first.id).unwrap();
    assert_eq!(restored.preview, preview);
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

/// The inode of `path`.
fn inode(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).unwrap().ino()
}

#[test]
fn hard_links_stay_linked_after_a_restore_its_undo_and_a_materialize() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path();
    write(root, "a.txt", "one\n");
    write(root, "sub/c.txt", "alone\n");
    std::fs::hard_link(root.join("a.txt"), root.join("sub/b.txt")).unwrap();
    let store_dir = tempfile::tempdir().unwrap();
    let mut store =
        CheckpointStore::open(store_dir.path(), root, CaptureOptions::default()).unwrap();
    let linked = store.checkpoint().unwrap();

    // Changed through one name (both change), then the link broken and c linked in.
    write(root, "a.txt", "two\n");
    assert_eq!(
        std::fs::read_to_string(root.join("sub/b.txt")).unwrap(),
        "two\n"
    );
    std::fs::remove_file(root.join("sub/b.txt")).unwrap();
    write(root, "sub/b.txt", "two\n");
    std::fs::remove_file(root.join("sub/c.txt")).unwrap();
    std::fs::hard_link(root.join("a.txt"), root.join("sub/c.txt")).unwrap();
    let expected_after = state(root);

    let preview = store.preview(&linked.id).unwrap();
    assert_eq!(
        preview.linked,
        [(
            Path::new("sub/b.txt").to_path_buf(),
            Path::new("a.txt").to_path_buf()
        )]
    );
    assert!(preview.kept.is_empty(), "{preview:?}");
    let restored = store.restore(&linked.id).unwrap();
    assert_eq!(restored.preview.linked, preview.linked);
    assert_eq!(inode(&root.join("a.txt")), inode(&root.join("sub/b.txt")));
    assert_ne!(inode(&root.join("a.txt")), inode(&root.join("sub/c.txt")));
    assert_eq!(
        std::fs::read_to_string(root.join("sub/b.txt")).unwrap(),
        "one\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("sub/c.txt")).unwrap(),
        "alone\n"
    );

    // The undo brings back the other links: a and c one file, b apart.
    let undo = store.preview(&restored.undo).unwrap();
    assert_eq!(undo.unlinked, [Path::new("sub/b.txt")]);
    store.restore(&restored.undo).unwrap();
    assert_eq!(state(root), expected_after);
    assert_eq!(inode(&root.join("a.txt")), inode(&root.join("sub/c.txt")));
    assert_ne!(inode(&root.join("a.txt")), inode(&root.join("sub/b.txt")));

    // A fork's folder gets the links too.
    let fork = tempfile::tempdir().unwrap();
    let dest = fork.path().join("files");
    store.materialize(&linked.id, &dest).unwrap();
    assert_eq!(inode(&dest.join("a.txt")), inode(&dest.join("sub/b.txt")));
}
