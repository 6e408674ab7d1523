//! A scripted session on a git repository: write, edit, `sed -i`, `rm`, `mv`, an
//! untracked file and a 5 MB binary, a checkpoint after each step; every point
//! restored, undone, and `.git` never written.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;

use reprise_checkpoint::{CaptureOptions, CheckpointId, CheckpointStore};

use crate::support::{run, snapshot_bytes, state, state_without, write};

fn options() -> CaptureOptions {
    CaptureOptions {
        exclude: vec![".run".into()],
        ..CaptureOptions::default()
    }
}

#[test]
fn every_step_of_a_session_is_restored_exactly_and_git_is_never_written() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path();
    write(root, ".gitignore", "*.log\nbuild/\n");
    write(root, "README.md", "# demo\n");
    run(root, "git", &["init", "-q"]);
    run(root, "git", &["add", "-A"]);
    run(root, "git", &["commit", "-qm", "first"]);
    write(root, "notes.txt", "second commit\n");
    run(root, "git", &["add", "-A"]);
    run(root, "git", &["commit", "-qm", "second"]);
    write(root, "debug.log", "ignored, never touched\n");
    write(root, "build/out.o", "ignored folder\n");
    let git_before = snapshot_bytes(&root.join(".git"));
    let store_dir = root.join(".run/r1/checkpoints");
    let mut store = CheckpointStore::open(&store_dir, root, options()).unwrap();

    let mut points: Vec<(CheckpointId, BTreeMap<String, String>)> = Vec::new();
    let mut take = |store: &mut CheckpointStore| {
        let checkpoint = store.checkpoint().unwrap();
        assert_eq!(checkpoint.skipped_ignored, 2, "debug.log and build/");
        points.push((checkpoint.id, state_without(root, &["debug.log", "build"])));
        checkpoint
    };

    write(root, "src/main.rs", "fn main() { foo(); }\n");
    write(root, "run.sh", "#!/bin/sh\necho foo\n");
    std::fs::set_permissions(root.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let first = take(&mut store);
    assert_eq!(first.files, 5, "{first:?}");

    write(root, "notes.txt", "second commit\nedited\n");
    take(&mut store);

    run(root, "sed", &["-i", "s/foo/bar/", "src/main.rs"]);
    take(&mut store);

    std::fs::remove_file(root.join("notes.txt")).unwrap();
    take(&mut store);

    run(root, "mv", &["src/main.rs", "src/lib.rs"]);
    std::os::unix::fs::symlink("lib.rs", root.join("src/link.rs")).unwrap();
    take(&mut store);

    write(root, "untracked/deep/new.md", "not in git\n");
    let binary: Vec<u8> = (0..5_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    write(root, "data.bin", &binary);
    std::fs::set_permissions(root.join("run.sh"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let last = take(&mut store);
    assert_eq!(last.skipped_large, 0);
    assert!(last.added_bytes >= 5_000_000, "{last:?}");

    // Every point, in an order that crosses them all.
    for index in [0, 5, 2, 4, 1, 3, 0, 5] {
        let (id, expected) = &points[index];
        store.restore(id).unwrap();
        assert_eq!(
            &state_without(root, &["debug.log", "build"]),
            expected,
            "point {index}"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("debug.log")).unwrap(),
            "ignored, never touched\n"
        );
        assert!(root.join("build/out.o").exists());
    }
    // Folders the deletions emptied are gone (no "empty dir" in the states).
    store.restore(&points[0].0).unwrap();
    assert!(!root.join("untracked").exists());

    // Undo gives back the later state.
    store.restore(&points[5].0).unwrap();
    let restored = store.restore(&points[1].0).unwrap();
    assert_eq!(state_without(root, &["debug.log", "build"]), points[1].1);
    store.restore(&restored.undo).unwrap();
    assert_eq!(state_without(root, &["debug.log", "build"]), points[5].1);

    // A hand edit after the last checkpoint is named, and the undo keeps it.
    write(root, "untracked/deep/new.md", "edited by hand\n");
    let preview = store.preview(&points[2].0).unwrap();
    assert_eq!(
        preview.changed_outside,
        vec![std::path::PathBuf::from("untracked/deep/new.md")]
    );
    assert!(
        preview.deleted.contains(&"untracked/deep/new.md".into()),
        "{preview:?}"
    );
    assert!(preview.created.contains(&"notes.txt".into()), "{preview:?}");
    assert!(preview.restored.contains(&"run.sh".into()), "{preview:?}");
    let before_hand = state_without(root, &["debug.log", "build"]);
    let restored = store.restore(&points[2].0).unwrap();
    assert_eq!(restored.preview.changed_outside, preview.changed_outside);
    assert_eq!(state_without(root, &["debug.log", "build"]), points[2].1);
    store.restore(&restored.undo).unwrap();
    assert_eq!(state_without(root, &["debug.log", "build"]), before_hand);
    assert_eq!(
        std::fs::read_to_string(root.join("untracked/deep/new.md")).unwrap(),
        "edited by hand\n"
    );

    assert_eq!(
        snapshot_bytes(&root.join(".git")),
        git_before,
        ".git was written"
    );
    let full = state(root);
    assert!(full.contains_key("debug.log"));
}

#[test]
fn large_files_are_counted_and_never_touched() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path();
    write(root, "small.txt", "small\n");
    write(root, "big.bin", vec![7u8; 3000]);
    let store_dir = tempfile::tempdir().unwrap();
    let options = CaptureOptions {
        max_file_size: 1000,
        ..CaptureOptions::default()
    };
    let mut store = CheckpointStore::open(store_dir.path(), root, options).unwrap();
    let first = store.checkpoint().unwrap();
    assert_eq!((first.files, first.skipped_large), (1, 1));
    write(root, "big.bin", vec![8u8; 3000]);
    write(root, "small.txt", "changed\n");
    let preview = store.preview(&first.id).unwrap();
    assert_eq!(
        preview.restored,
        vec![std::path::PathBuf::from("small.txt")]
    );
    assert!(preview.deleted.is_empty() && preview.created.is_empty());
    store.restore(&first.id).unwrap();
    assert_eq!(
        std::fs::read(root.join("big.bin")).unwrap(),
        vec![8u8; 3000]
    );
    assert_eq!(
        std::fs::read_to_string(root.join("small.txt")).unwrap(),
        "small\n"
    );
}

#[test]
fn a_same_size_change_is_seen_and_an_unchanged_folder_adds_only_a_record() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path();
    write(root, "a.txt", "one\n");
    let store_dir = tempfile::tempdir().unwrap();
    let mut store =
        CheckpointStore::open(store_dir.path(), root, CaptureOptions::default()).unwrap();
    let first = store.checkpoint().unwrap();
    // Same size, within the same second.
    write(root, "a.txt", "two\n");
    let second = store.checkpoint().unwrap();
    assert_ne!(
        store.verify(&first.id).unwrap(),
        store.verify(&second.id).unwrap()
    );
    let third = store.checkpoint().unwrap();
    assert!(third.added_bytes < 400, "only a record: {third:?}");
    assert_eq!(
        store.verify(&second.id).unwrap(),
        store.verify(&third.id).unwrap()
    );
}
