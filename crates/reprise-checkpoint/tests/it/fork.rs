//! Forks: a new run's store sharing its source's objects, and a checkpoint written
//! out into a new folder.

use std::os::unix::fs::MetadataExt;

use reprise_checkpoint::{CaptureOptions, CheckpointError, CheckpointStore};

use crate::support::{state, write};

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
    let object = |run: &str, id: &reprise_checkpoint::CheckpointId| {
        let hex = id.to_string();
        runs.path()
            .join(run)
            .join("checkpoints/objects")
            .join(&hex[..2])
            .join(&hex[2..])
    };
    assert_eq!(
        std::fs::metadata(object("r1", &first.id)).unwrap().ino(),
        std::fs::metadata(object("r2", &first.id)).unwrap().ino(),
        "linked, not copied"
    );
    assert!(
        !object("r2", &second.id).exists(),
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
