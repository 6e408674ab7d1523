//! A restore cut half way (its journal and mark written, some files changed, as a
//! kill leaves them): nothing but finishing it touches the folder, from its own
//! store or another one over the same folder; a preview of the finish changes
//! nothing; finishing leaves the files changed after the cut as they are and
//! names them.

use std::path::Path;

use reprise_checkpoint::{
    CaptureOptions, CheckpointError, CheckpointStore, MARK_NAME, unfinished_in_folder,
    unfinished_in_store,
};

use crate::support::{state, write};

fn options() -> CaptureOptions {
    CaptureOptions {
        exclude: vec![".run".into()],
        ..CaptureOptions::default()
    }
}

fn state_a(root: &Path) {
    for i in 0..12 {
        write(root, &format!("d{}/f{i}.txt", i % 3), format!("a {i}\n"));
    }
}

fn state_b(root: &Path) {
    for i in 0..12 {
        write(root, &format!("d{}/f{i}.txt", i % 3), format!("b {i}\n"));
    }
    write(root, "new/n.txt", "new\n");
}

fn is_unfinished<T: std::fmt::Debug>(result: Result<T, CheckpointError>) -> bool {
    matches!(result, Err(CheckpointError::Unfinished { .. }))
}

#[test]
fn a_cut_restore_is_finished_only_on_purpose_and_keeps_later_changes() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path();
    let store_dir = root.join(".run/r/checkpoints");
    state_a(root);
    let mut store = CheckpointStore::open(&store_dir, root, options()).unwrap();
    let a = store.checkpoint().unwrap().id;
    let expected_a = state(root);
    state_b(root);
    let b = store.checkpoint().unwrap().id;
    // What a kill half way through a restore from B to A leaves.
    let store_abs = std::fs::canonicalize(&store_dir).unwrap();
    std::fs::write(
        store_dir.join("restore.journal"),
        format!(r#"{{"format":1,"from":"{b}","target":"{a}"}}"#),
    )
    .unwrap();
    std::fs::write(
        root.join(MARK_NAME),
        serde_json::json!({"format": 1, "store": store_abs, "from": b, "target": a}).to_string(),
    )
    .unwrap();
    for i in 0..5 {
        write(root, &format!("d{}/f{i}.txt", i % 3), format!("a {i}\n"));
    }
    write(root, "d2/.reprise-restore.tmp", "half written");
    // Something else then changes a file the restore was to change.
    write(root, "d1/f7.txt", "written after the cut\n");
    let cut = state(root);

    let found = unfinished_in_folder(root).unwrap().unwrap();
    assert_eq!((found.from, found.target), (b, a));
    assert_eq!(found.store, store_abs);
    assert_eq!(
        unfinished_in_store(&store_dir).unwrap(),
        Some(found.clone())
    );
    assert_eq!(store.unfinished().unwrap(), Some(found));
    assert!(is_unfinished(store.checkpoint()));
    assert!(is_unfinished(store.preview(&a)));
    assert!(is_unfinished(store.restore(&a)));
    // Another run's store over the same folder sees the mark.
    let mut other =
        CheckpointStore::open(root.join(".run/other/checkpoints"), root, options()).unwrap();
    assert!(is_unfinished(other.checkpoint()));
    assert_eq!(other.finish().unwrap(), None);
    assert_eq!(state(root), cut, "refusing changed nothing");

    let preview = store.finish_preview().unwrap().unwrap();
    assert_eq!(state(root), cut, "a preview changes nothing");
    assert!(store_dir.join("restore.journal").exists());
    assert_eq!(preview.changed, vec![Path::new("d1/f7.txt").to_path_buf()]);
    assert_eq!(preview.done, 5);
    assert_eq!(preview.remaining.restored.len(), 12 - 5 - 1);
    assert_eq!(
        preview.remaining.deleted,
        vec![Path::new("new/n.txt").to_path_buf()]
    );

    let finished = store.finish().unwrap().unwrap();
    assert_eq!(finished.changed, preview.changed);
    let mut want = expected_a.clone();
    want.insert("d1/f7.txt".into(), state(root)["d1/f7.txt"].clone());
    assert_eq!(state(root), want);
    assert_ne!(state(root)["d1/f7.txt"], expected_a["d1/f7.txt"]);
    assert!(!root.join(MARK_NAME).exists());
    assert!(!store_dir.join("restore.journal").exists());
    assert_eq!(unfinished_in_folder(root).unwrap(), None);
    assert_eq!(store.finish().unwrap(), None);
    store.checkpoint().unwrap();
    other.checkpoint().unwrap();
}

#[test]
fn a_mark_without_its_journal_is_ignored_never_captured_and_replaced() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path();
    state_a(root);
    // Planted: it names a store that holds no such journal.
    let planted = serde_json::json!({
        "format": 1,
        "store": root.join(".run/r/checkpoints"),
        "from": "00".repeat(32),
        "target": "11".repeat(32),
    })
    .to_string();
    std::fs::write(root.join(MARK_NAME), &planted).unwrap();
    assert_eq!(unfinished_in_folder(root).unwrap(), None);
    let mut store =
        CheckpointStore::open(root.join(".run/r/checkpoints"), root, options()).unwrap();
    let a = store.checkpoint().unwrap();
    assert_eq!(a.files, 12, "the mark is not captured");
    write(root, "d0/f0.txt", "changed");
    store.restore(&a.id).unwrap();
    // The restore's own mark took its place, and went when it finished.
    assert!(!root.join(MARK_NAME).exists());
    assert_eq!(state(root).len(), 12);
}
