//! Real kills: a child process restores back and forth between two states and takes
//! checkpoints until it is SIGKILLed at a random moment; after each kill, recovery
//! leaves the folder in one of the two states, and every checkpoint record in the
//! store names only objects that are there.
//!
//! `REPRISE_CHECKPOINT_KILLS=120 cargo test -p reprise-checkpoint kill -- --nocapture`
//! runs the long version.

use std::collections::{BTreeMap, HashSet};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use rand::Rng;
use reprise_checkpoint::{CaptureOptions, CheckpointId, CheckpointStore};

use crate::support::{all_objects, state, write};

const CHILD_ENV: &str = "REPRISE_CHECKPOINT_KILL_CHILD";

fn options() -> CaptureOptions {
    CaptureOptions {
        exclude: vec![".run".into()],
        ..CaptureOptions::default()
    }
}

/// The child's side: restore A, checkpoint, restore B, checkpoint, … until killed.
/// Does nothing in a normal test run (the variable is only set for the child).
#[test]
fn kill_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut parts = spec.split('\n');
    let root = Path::new(parts.next().unwrap());
    let a: CheckpointId = parts.next().unwrap().parse().unwrap();
    let b: CheckpointId = parts.next().unwrap().parse().unwrap();
    let mut store =
        CheckpointStore::open(root.join(".run/r/checkpoints"), root, options()).unwrap();
    std::fs::write(root.join(".run/ready"), "").unwrap();
    loop {
        for target in [&a, &b] {
            store.restore(target).unwrap();
            store.checkpoint().unwrap();
        }
    }
}

fn state_a(root: &Path) {
    for i in 0..120 {
        write(
            root,
            &format!("src/m{}/f{i}.rs", i % 6),
            format!("fn f{i}() {{}}\n").repeat(40),
        );
    }
    write(root, "blob.bin", vec![1u8; 2 << 20]);
}

fn state_b(root: &Path) {
    for i in (0..120).step_by(2) {
        write(
            root,
            &format!("src/m{}/f{i}.rs", i % 6),
            format!("fn g{i}() {{}}\n").repeat(50),
        );
    }
    for i in (1..120).step_by(4) {
        std::fs::remove_file(root.join(format!("src/m{}/f{i}.rs", i % 6))).unwrap();
    }
    for i in 0..60 {
        write(
            root,
            &format!("new/n{}/g{i}.txt", i % 3),
            format!("new {i}\n"),
        );
    }
    write(root, "blob.bin", vec![2u8; 3 << 20]);
}

/// Every checkpoint record in the store, found by reading the objects.
fn records(store_dir: &Path) -> Vec<CheckpointId> {
    all_objects(store_dir)
        .into_iter()
        .filter(|object| {
            object
                .content
                .starts_with(b"{\"format\":2,\"kind\":\"checkpoint\"")
        })
        .map(|object| object.id.parse().unwrap())
        .collect()
}

#[test]
fn a_killed_restore_or_checkpoint_leaves_one_state_or_the_other() {
    let kills: usize = std::env::var("REPRISE_CHECKPOINT_KILLS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(5);
    let work = tempfile::tempdir().unwrap();
    let root = work.path();
    let store_dir = root.join(".run/r/checkpoints");
    state_a(root);
    let (a, b, expected_a, expected_b) = {
        let mut store = CheckpointStore::open(&store_dir, root, options()).unwrap();
        let a = store.checkpoint().unwrap().id;
        let expected_a = state(root);
        state_b(root);
        let b = store.checkpoint().unwrap().id;
        (a, b, expected_a, state(root))
    };
    assert_ne!(expected_a, expected_b);
    let mut rng = rand::rng();
    let mut verified: HashSet<CheckpointId> = HashSet::new();
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    let mut rolled_forward = 0;
    for round in 0..kills {
        let ready = root.join(".run/ready");
        let _ = std::fs::remove_file(&ready);
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["kill::kill_child", "--exact", "--test-threads=1"])
            .env(CHILD_ENV, format!("{}\n{a}\n{b}", root.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !ready.exists() {
            assert!(
                child.try_wait().unwrap().is_none(),
                "the child ended before it was ready"
            );
            assert!(
                std::time::Instant::now() < deadline,
                "the child never got ready"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        std::thread::sleep(Duration::from_micros(rng.random_range(0..300_000)));
        child.kill().unwrap();
        let status = child.wait().unwrap();
        if status.signal() != Some(9) {
            let mut stderr = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
            panic!("round {round}: the child ended on its own ({status}): {stderr}");
        }
        let journal = store_dir.join("restore.journal").exists();
        let mut store = CheckpointStore::open(&store_dir, root, options()).unwrap();
        if store.finish().unwrap().is_some() {
            rolled_forward += 1;
        }
        assert!(!journal || !store_dir.join("restore.journal").exists());
        let now = state(root);
        let which = if now == expected_a {
            "A"
        } else if now == expected_b {
            "B"
        } else {
            let diff: Vec<_> = now
                .iter()
                .filter(|(path, value)| {
                    expected_a.get(*path) != Some(value) && expected_b.get(*path) != Some(value)
                })
                .take(5)
                .collect();
            panic!("round {round}: the folder is neither state: {diff:?}");
        };
        *seen.entry(which).or_default() += 1;
        assert_eq!(
            std::fs::read_dir(store_dir.join("tmp")).unwrap().count(),
            0,
            "leftovers"
        );
        for id in records(&store_dir) {
            if verified.insert(id) {
                store
                    .verify(&id)
                    .unwrap_or_else(|error| panic!("round {round}: {id}: {error}"));
            }
        }
    }
    println!(
        "{kills} kills: {seen:?}, {rolled_forward} restores finished, {} checkpoints verified",
        verified.len()
    );
}
