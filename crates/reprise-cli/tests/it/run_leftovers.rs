//! What interrupted commands leave in a runs folder: a fork killed at any moment
//! leaves no visible run folder, and `prune` removes the folders in which nothing
//! was written, never one a chat holds.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use reprise_testkit::assert_contains;

use crate::run_commands::{make_run, name};
use crate::support::Sandbox;

/// How many times the fork is killed: enough that some kills land while it writes.
const KILLS: u32 = 12;

/// The run folders a person sees (hidden staging folders left out).
fn visible(sandbox: &Sandbox) -> Vec<std::path::PathBuf> {
    sandbox
        .runs()
        .into_iter()
        .filter(|dir| !name(dir).starts_with('.'))
        .collect()
}

#[tokio::test]
async fn a_fork_killed_at_any_moment_leaves_no_run_folder_behind() {
    let sandbox = Sandbox::new();
    let run = make_run(&sandbox.runs_dir(), "bread", 200).await;
    let started = Instant::now();
    let out = sandbox.run(&["fork", &name(&run)], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let whole = started.elapsed();
    for kill in 0..KILLS {
        let mut child = sandbox.command(&["fork", &name(&run)]).spawn().unwrap();
        tokio::time::sleep(whole * kill / KILLS).await;
        child.start_kill().unwrap();
        child.wait().await.unwrap();
    }
    // Every folder in sight is a whole run: the source, or a complete fork.
    let shown = visible(&sandbox);
    for dir in &shown {
        assert!(
            dir.join("session.json").exists() && dir.join("conversation.jsonl").exists(),
            "{} holds only {:?}",
            dir.display(),
            std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect::<Vec<_>>()
        );
    }
    let out = sandbox.run(&["runs", "--json"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let listed: Vec<serde_json::Value> = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(listed.len(), shown.len());
    // The listing removed the staging folders of the killed forks.
    assert_eq!(sandbox.runs().len(), shown.len(), "{:?}", sandbox.runs());
}

/// Sets the modification time of `dir` and of everything in it to long ago.
fn make_old(dir: &Path) {
    let when = SystemTime::now() - reprise_runs::UNUSED_GRACE - Duration::from_secs(60);
    for entry in std::fs::read_dir(dir).unwrap() {
        std::fs::File::open(entry.unwrap().path())
            .unwrap()
            .set_modified(when)
            .unwrap();
    }
    std::fs::File::open(dir)
        .unwrap()
        .set_modified(when)
        .unwrap();
}

#[tokio::test]
async fn prune_removes_run_folders_with_nothing_written_unless_a_chat_holds_them() {
    let sandbox = Sandbox::new();
    let runs = sandbox.runs_dir();
    let run = make_run(&runs, "bread", 1).await;
    // What a killed fork left (its target's lock and an empty log), what a start that
    // resumed another run left, and one whose lock a chat holds.
    let killed = reprise_runs::create_run_folder(&runs).unwrap();
    std::fs::write(killed.dir.join(".lock"), "").unwrap();
    let resumed = reprise_runs::create_run_folder(&runs).unwrap();
    std::fs::write(
        resumed.dir.join("session.log"),
        format!("(resumed run {})\n", name(&run)),
    )
    .unwrap();
    let held = reprise_runs::create_run_folder(&runs).unwrap();
    let lock = reprise_session::parts::acquire(&runs, &held.dir.join(".lock"), "held").unwrap();
    for dir in [&killed.dir, &resumed.dir, &held.dir] {
        make_old(dir);
    }
    let recent = reprise_runs::create_run_folder(&runs).unwrap();

    let out = sandbox.run(&["runs"], "").await;
    assert!(!out.stdout.contains(killed.name()), "{}", out.stdout);
    let out = sandbox
        .run(&["prune", "--older-than", "90d", "--dry-run"], "")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "would delete 3 unused run folders");
    assert!(killed.dir.exists() && resumed.dir.exists());

    let out = sandbox
        .run(&["prune", "--older-than", "90d", "--yes"], "")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "removed 2 unused run folders");
    assert_contains!(out.stdout, &format!("kept {}: in use", held.name()));
    assert!(!killed.dir.exists() && !resumed.dir.exists());
    assert!(held.dir.exists(), "a chat holds it");
    assert!(recent.dir.exists(), "a chat may be starting in it");
    assert!(run.exists());
    drop(lock);
}
