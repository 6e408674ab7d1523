//! What the binary says when the file system refuses: a read-only mount and a folder
//! it may not write, each named as what it is (never "in use"), the OS text once.
//!
//! The refusals are real: the binary runs in a new user namespace (`unshare`, from
//! util-linux), where a bind mount can be made read-only, and where even root holds no
//! capability over files it owns, so a folder without its write bit refuses it.

use reprise_testkit::assert_contains;

use crate::run_commands::{make_run, name};
use crate::support::{Output, Sandbox};

/// Runs the binary with `dir` bind-mounted read-only over itself.
async fn on_read_only(
    sandbox: &Sandbox,
    dir: &std::path::Path,
    args: &[&str],
    input: &str,
) -> Output {
    let dir = dir.to_str().unwrap();
    let script = r#"d="$1"; shift; mount --bind "$d" "$d" && mount -o remount,bind,ro "$d" "$d" && exec "$@""#;
    sandbox
        .run_through(
            &[
                "unshare",
                "--user",
                "--map-root-user",
                "--mount",
                "sh",
                "-c",
                script,
                "sh",
                dir,
            ],
            args,
            input,
        )
        .await
}

/// Runs the binary in a user namespace of its own, without capabilities over the
/// sandbox's files.
async fn without_privileges(sandbox: &Sandbox, args: &[&str], input: &str) -> Output {
    sandbox
        .run_through(&["unshare", "--user"], args, input)
        .await
}

fn assert_once(stderr: &str, text: &str) {
    assert_eq!(
        stderr.matches(text).count(),
        1,
        "{text:?} once in: {stderr}"
    );
}

#[tokio::test]
async fn rm_on_a_read_only_file_system_says_so_and_deletes_nothing() {
    let sandbox = Sandbox::new();
    let run = make_run(&sandbox.runs_dir(), "bread", 1).await;
    let out = on_read_only(
        &sandbox,
        &sandbox.runs_dir(),
        &["rm", &name(&run), "--yes"],
        "",
    )
    .await;
    assert_ne!(out.status, 0);
    assert!(!out.stderr.contains("in use"), "{}", out.stderr);
    assert_contains!(out.stderr, &format!("cannot delete run {}", name(&run)));
    assert_once(&out.stderr, "Read-only file system");
    assert!(run.join("conversation.jsonl").exists());
}

#[tokio::test]
async fn a_chat_on_a_read_only_runs_folder_says_so_and_leaves_nothing() {
    let sandbox = Sandbox::new();
    std::fs::create_dir_all(sandbox.runs_dir()).unwrap();
    let args = [
        "--plain",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
    ];
    let out = on_read_only(&sandbox, &sandbox.runs_dir(), &args, "hi\n").await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "cannot create a run folder in .run");
    assert_once(&out.stderr, "Read-only file system");
    assert!(sandbox.runs().is_empty());
}

#[tokio::test]
async fn permission_errors_are_named_as_such() {
    use std::os::unix::fs::PermissionsExt;
    let sandbox = Sandbox::new();
    let run = make_run(&sandbox.runs_dir(), "bread", 1).await;

    // A run folder that may not be written: rm refuses, naming it, and keeps it.
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o500)).unwrap();
    let out = without_privileges(&sandbox, &["rm", &name(&run), "--yes"], "").await;
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_ne!(out.status, 0);
    assert!(!out.stderr.contains("in use"), "{}", out.stderr);
    assert_contains!(out.stderr, &name(&run));
    assert_once(&out.stderr, "Permission denied");
    assert!(run.join("conversation.jsonl").exists());

    // A runs folder that may not be written: no chat starts, and it says why.
    let runs = sandbox.runs_dir();
    std::fs::set_permissions(&runs, std::fs::Permissions::from_mode(0o500)).unwrap();
    let args = [
        "--plain",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
    ];
    let out = without_privileges(&sandbox, &args, "hi\n").await;
    std::fs::set_permissions(&runs, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "cannot create a run folder in .run");
    assert_once(&out.stderr, "Permission denied");
    assert_eq!(sandbox.runs(), vec![run]);
}
