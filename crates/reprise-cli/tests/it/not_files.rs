//! Paths a person names that are not regular files (a FIFO, a device) or are too
//! long to read whole: `reprise import` and the config file refuse them at once,
//! naming the path, instead of waiting on a FIFO or reading `/dev/zero` forever.

use reprise_testkit::assert_contains;

use crate::support::{Output, Sandbox};

/// Makes a FIFO at `path`.
fn mkfifo(path: &std::path::Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(made.success());
}

/// `args` run to their end, or a failure after a minute: before the file type was
/// checked, a FIFO blocked forever and `/dev/zero` was read until memory ran out.
async fn run_bounded(sandbox: &Sandbox, args: &[&str]) -> Output {
    tokio::time::timeout(std::time::Duration::from_secs(60), sandbox.run(args, ""))
        .await
        .unwrap_or_else(|_| panic!("reprise {args:?} did not end"))
}

#[tokio::test]
async fn what_is_not_a_regular_file_is_refused_without_reading_it() {
    let sandbox = Sandbox::new();
    let fifo = sandbox.path().join("session.jsonl");
    mkfifo(&fifo);
    let out = run_bounded(&sandbox, &["import", "session.jsonl"]).await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "session.jsonl");
    assert_contains!(out.stderr, "a FIFO (named pipe), not a regular file");
    // Named inside a folder, it is not taken for a transcript, and never read.
    let folder = sandbox.path().join("sessions");
    std::fs::create_dir(&folder).unwrap();
    mkfifo(&folder.join("other.jsonl"));
    let out = run_bounded(&sandbox, &["import", "sessions"]).await;
    assert_eq!(out.status, 0, "{}", out.stderr);

    let out = run_bounded(&sandbox, &["import", "/dev/zero"]).await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "/dev/zero");
    assert_contains!(out.stderr, "a character device, not a regular file");

    // A file longer than what is read whole (sparse: it takes no room).
    let big = std::fs::File::create(sandbox.path().join("big.jsonl")).unwrap();
    big.set_len(reprise_import::MAX_TRANSCRIPT_BYTES + 1)
        .unwrap();
    let out = run_bounded(&sandbox, &["import", "big.jsonl"]).await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "big.jsonl");
    assert_contains!(out.stderr, "the most that is read of it");
    assert!(sandbox.conversations().is_empty());
}

#[tokio::test]
async fn a_config_that_is_not_a_regular_file_is_refused_without_reading_it() {
    let sandbox = Sandbox::new();
    let fifo = sandbox.path().join("config.toml");
    mkfifo(&fifo);
    for config in ["config.toml", "/dev/zero"] {
        let out = run_bounded(&sandbox, &["--config", config, "runs"]).await;
        assert_ne!(out.status, 0);
        assert_contains!(out.stderr, &format!("cannot read the config file {config}"));
        assert_contains!(out.stderr, "not a regular file");
    }
}
