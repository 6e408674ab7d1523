//! Checkpoints when a file cannot be read, run as a user without privileges (root
//! ignores modes): the file is left out of that checkpoint and named as not
//! captured, the rest of the checkpoint stands, and a rewind never restores a later
//! state than the one asked for, even where a checkpoint is missing altogether.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::support::{Output, Sandbox, plain_yes};
use reprise_testkit::{Reply, ScriptedServer, assert_contains, unprivileged};

/// The program and arguments that run the binary as a user without privileges.
fn wrapper() -> Vec<String> {
    let mut argv: Vec<String> = unprivileged::argv("reprise")
        .into_iter()
        .map(|arg| arg.into_string().unwrap())
        .collect();
    argv.pop();
    argv
}

/// A sandbox the unprivileged user owns, with `src/a.txt` = v0 and `src/notes`.
fn sandbox() -> Sandbox {
    let sandbox = Sandbox::new();
    let src = sandbox.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("a.txt"), "v0\n").unwrap();
    std::fs::write(src.join("notes"), "my notes\n").unwrap();
    std::fs::create_dir(src.join("secret")).unwrap();
    std::fs::write(src.join("secret/key"), "k\n").unwrap();
    unprivileged::hand_over(sandbox.path()).unwrap();
    sandbox
}

async fn run(sandbox: &Sandbox, args: &[&str]) -> Output {
    let wrapper = wrapper();
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    sandbox.run_through(&wrapper, args, "").await
}

/// One chat turn (a new process, continuing the run after the first) whose one
/// call runs `command`.
async fn turn(sandbox: &Sandbox, server: &ScriptedServer, index: usize, command: &str) -> Output {
    server.push_all([
        Reply::tool_call(
            format!("call_{index}"),
            "run_command",
            serde_json::json!({ "command": command }).to_string(),
        ),
        Reply::text("ok"),
    ]);
    let base_url = server.base_url();
    let mut args = plain_yes(&base_url).to_vec();
    if index > 1 {
        args.push("--continue");
    }
    let wrapper = wrapper();
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    let input = format!("message {index}\n");
    let out = sandbox.run_through(&wrapper, &args, &input).await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    out
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join("src").join(name)).unwrap()
}

fn mode(dir: &Path, name: &str) -> u32 {
    std::fs::metadata(dir.join("src").join(name))
        .unwrap()
        .permissions()
        .mode()
        & 0o777
}

/// The paths a preview names as not captured.
fn not_captured(preview: &str) -> Vec<&str> {
    preview
        .lines()
        .filter_map(|line| line.trim().strip_prefix("not captured "))
        .collect()
}

#[tokio::test]
async fn an_unreadable_file_is_left_out_of_its_checkpoints_and_a_rewind_restores_the_rest() {
    let sandbox = sandbox();
    let dir = sandbox.path();
    let server = ScriptedServer::start().await;
    let commands = [
        "echo v1 > src/a.txt; chmod 000 src/notes src/secret",
        "echo v2 > src/a.txt",
        "echo v3 > src/a.txt; chmod 600 src/notes; chmod 700 src/secret",
        "echo v4 > src/a.txt",
    ];
    let mut warned = Vec::new();
    for (index, command) in commands.iter().enumerate() {
        let out = turn(&sandbox, &server, index + 1, command).await;
        assert!(
            !out.stderr.contains("no checkpoint"),
            "message {}: {}",
            index + 1,
            out.stderr
        );
        if out
            .stderr
            .contains("could not read, and left out: src/notes")
        {
            warned.push(index + 1);
        }
    }
    // The checkpoints before messages 2 and 3 could not read the notes.
    assert_eq!(warned, [2, 3]);
    assert_eq!(read(dir, "a.txt"), "v4\n");

    let mut previews = Vec::new();
    for number in 1..=4 {
        let to = number.to_string();
        let out = run(&sandbox, &["rewind", "last", "--to", &to, "--dry-run"]).await;
        assert_eq!(out.status, 0, "{}", out.stderr);
        previews.push(out.stdout);
    }
    for (at, preview) in previews.iter().enumerate() {
        let expected: &[&str] = if at == 1 || at == 2 {
            &["src/notes", "src/secret"]
        } else {
            &[]
        };
        assert_eq!(
            not_captured(preview),
            expected,
            "--to {}: {preview}",
            at + 1
        );
        assert_contains!(preview, "1 restored");
    }
    assert_contains!(
        previews[1],
        "warning: 2 paths were not captured by that checkpoint"
    );
    assert_ne!(previews[0], previews[1]);
    assert_eq!(read(dir, "a.txt"), "v4\n", "a dry run changes nothing");

    let out = run(
        &sandbox,
        &["rewind", "last", "--to", "2", "--files-only", "--yes"],
    )
    .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    // Before message 2 it was v1; the notes, not captured then, are left as they are.
    assert_eq!(read(dir, "a.txt"), "v1\n");
    assert_eq!(read(dir, "notes"), "my notes\n");
    assert_eq!(mode(dir, "notes"), 0o600);
    assert_eq!(read(dir, "secret/key"), "k\n");
    assert_contains!(out.stdout, "left as they are (not captured");
    assert_contains!(out.stdout, "src/notes");

    // And back.
    let out = run(&sandbox, &["rewind", "last", "--undo", "--yes"]).await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(read(dir, "a.txt"), "v4\n");
    let out = run(
        &sandbox,
        &["rewind", "last", "--to", "1", "--files-only", "--yes"],
    )
    .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(read(dir, "a.txt"), "v0\n");
    assert_eq!(read(dir, "notes"), "my notes\n");
}

#[tokio::test]
async fn a_missing_checkpoint_is_refused_or_replaced_by_an_earlier_one_never_a_later_one() {
    let sandbox = sandbox();
    let dir = sandbox.path();
    let server = ScriptedServer::start().await;
    turn(&sandbox, &server, 1, "echo v1 > src/a.txt").await;
    // The store cannot take the next checkpoint: its temporary folder refuses writes.
    let run_dir = sandbox.conversations().remove(0);
    let tmp = run_dir.join("checkpoints/tmp");
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o500)).unwrap();
    let out = turn(&sandbox, &server, 2, "echo v2 > src/a.txt").await;
    assert_contains!(
        out.stderr,
        "no checkpoint of the working folder before these calls"
    );
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o700)).unwrap();
    turn(&sandbox, &server, 3, "echo v3 > src/a.txt").await;
    assert_eq!(read(dir, "a.txt"), "v3\n");

    for args in [
        &["--to", "2", "--dry-run"][..],
        &["--to", "2", "--files-only", "--yes"][..],
    ] {
        let mut all = vec!["rewind", "last"];
        all.extend_from_slice(args);
        let out = run(&sandbox, &all).await;
        assert_ne!(out.status, 0, "{}", out.stdout);
        assert_contains!(out.stderr, "is missing");
        assert_contains!(out.stderr, "--nearest-earlier");
    }
    assert_eq!(
        read(dir, "a.txt"),
        "v3\n",
        "a refused rewind changes nothing"
    );
    // A fork with files at that point is refused too (`--at 1` ends with the answer
    // to message 1: the next calls had no checkpoint).
    let forked = dir.join("forked");
    let out = run(
        &sandbox,
        &[
            "fork",
            "last",
            "--at",
            "1",
            "--workdir",
            forked.to_str().unwrap(),
        ],
    )
    .await;
    assert_ne!(out.status, 0, "{}", out.stdout);
    assert_contains!(out.stderr, "at the fork's point is missing");
    assert!(!forked.exists());

    let out = run(
        &sandbox,
        &[
            "rewind",
            "last",
            "--to",
            "2",
            "--files-only",
            "--nearest-earlier",
            "--yes",
        ],
    )
    .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "nearest earlier checkpoint");
    // Before message 2 it was v1, which no checkpoint holds: the nearest earlier
    // one (before message 1) is restored, never the later v2.
    assert_eq!(read(dir, "a.txt"), "v0\n");
    // A message whose checkpoint is there is unaffected.
    let out = run(
        &sandbox,
        &["rewind", "last", "--to", "3", "--files-only", "--yes"],
    )
    .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(read(dir, "a.txt"), "v2\n");
}
