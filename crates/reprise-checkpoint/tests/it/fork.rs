//! Forks: a new run's store sharing its source's objects, and a checkpoint written
//! out into a new folder.

use std::os::unix::fs::MetadataExt;

use reprise_checkpoint::{CaptureOptions, CheckpointError, CheckpointStore};

use crate::support::{all_objects, state, write};

#[test]
fn a_fork_shares_the_objects_and_outlives_its_source() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path();
    write(root, "a.txt", "alpha\n");
    write(root, "sub/b.txt", "beta\n");
    std::os::unix::fs::symlink("a.txt", root.join("link")).unwrap();
    let runs = tempfile::tempdir().unwrap();
    let mut source = CheckpointStore::open(
        runs.path().join("r1/checkpoints"),
        root,
        CaptureOptions::default(),
    )
    .unwrap();
    let first = source.checkpoint().unwrap();
    write(root, "a.txt", "changed\n");
    let second = source.checkpoint().unwrap();
    let expected_first = {
        let copy = tempfile::tempdir().unwrap();
        source
            .materialize(&first.id, copy.path().join("m"))
            .unwrap();
        state(&copy.path().join("m"))
    };

    let fork_work = tempfile::tempdir().unwrap();
    let mut fork = CheckpointStore::open(
        runs.path().join("r2/checkpoints"),
        fork_work.path(),
        CaptureOptions::default(),
    )
    .unwrap();
    let added = fork.share_objects_from(&source, &[first.id]).unwrap();
    assert_eq!(added, 6, "record, 2 trees, 3 contents");
    assert_eq!(fork.head().unwrap(), Some(first.id));
    let holder = |run: &str, id: &reprise_checkpoint::CheckpointId| {
        all_objects(&runs.path().join(run).join("checkpoints"))
            .into_iter()
            .find(|object| object.id == id.to_string())
            .map(|object| object.file)
    };
    let (in_source, in_fork) = (
        holder("r1", &first.id).unwrap(),
        holder("r2", &first.id).unwrap(),
    );
    assert_eq!(
        in_source.file_name(),
        in_fork.file_name(),
        "the same pack, under its name"
    );
    assert_eq!(
        std::fs::metadata(in_source).unwrap().ino(),
        std::fs::metadata(in_fork).unwrap().ino(),
        "linked, not copied"
    );
    assert!(
        holder("r2", &second.id).is_none(),
        "only the checkpoints asked for"
    );
    std::fs::remove_dir_all(runs.path().join("r1")).unwrap();

    fork.verify(&first.id).unwrap();
    let materialized = fork.materialize(&first.id, fork_work.path()).unwrap();
    assert_eq!(materialized.files, 3);
    assert_eq!(state(fork_work.path()), expected_first);
    // The fork works on its own folder from there.
    write(fork_work.path(), "a.txt", "fork edit\n");
    let edited = fork.checkpoint().unwrap();
    fork.restore(&first.id).unwrap();
    assert_eq!(state(fork_work.path()), expected_first);
    fork.restore(&edited.id).unwrap();
    assert_eq!(
        std::fs::read_to_string(fork_work.path().join("a.txt")).unwrap(),
        "fork edit\n"
    );
}

#[test]
fn materialize_refuses_a_folder_that_is_not_empty() {
    let work = tempfile::tempdir().unwrap();
    write(work.path(), "a.txt", "alpha\n");
    let store_dir = tempfile::tempdir().unwrap();
    let mut store =
        CheckpointStore::open(store_dir.path(), work.path(), CaptureOptions::default()).unwrap();
    let first = store.checkpoint().unwrap();
    let error = store.materialize(&first.id, work.path()).unwrap_err();
    assert!(matches!(error, CheckpointError::NotEmpty { .. }), "{error}");
    assert!(error.to_string().contains("not an empty folder"), "{error}");
}

#[test]
fn checkpoints_are_shared_between_store_folders_without_a_working_folder() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path();
    for i in 0..20 {
        write(root, &format!("d{}/f{i}.txt", i % 4), format!("file {i}\n"));
    }
    let runs = tempfile::tempdir().unwrap();
    let source_dir = runs.path().join("r1/checkpoints");
    let mut source = CheckpointStore::open(&source_dir, root, CaptureOptions::default()).unwrap();
    let first = source.checkpoint().unwrap();
    write(root, "d0/f0.txt", "changed\n");
    let second = source.checkpoint().unwrap();
    let expected_second = state(root);
    drop(source);

    // The working folder is gone: sharing needs only the two stores.
    let target_dir = runs.path().join("r2/checkpoints");
    std::fs::remove_dir_all(root).unwrap();
    let ids = [first.id, second.id, first.id];
    let added = reprise_checkpoint::share_checkpoints(&source_dir, &target_dir, &ids).unwrap();
    // 20 contents and 5 trees and a record, then the changed content, the two trees
    // on its path and a record; nothing twice.
    assert_eq!(added, 26 + 4);
    assert_eq!(
        reprise_checkpoint::share_checkpoints(&source_dir, &target_dir, &ids).unwrap(),
        0,
        "a second share adds nothing"
    );
    std::fs::remove_dir_all(runs.path().join("r1")).unwrap();
    let fork_work = tempfile::tempdir().unwrap();
    let fork =
        CheckpointStore::open(&target_dir, fork_work.path(), CaptureOptions::default()).unwrap();
    assert_eq!(fork.head().unwrap(), Some(first.id));
    fork.verify(&first.id).unwrap();
    fork.materialize(&second.id, fork_work.path().join("m"))
        .unwrap();
    assert_eq!(state(&fork_work.path().join("m")), expected_second);
}
