//! Files hard-linked together stay linked after a rewind and after its undo, and
//! the preview says so.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::support::Sandbox;
use reprise_testkit::{Reply, ScriptedServer, assert_contains};

fn inode(path: &Path) -> u64 {
    std::fs::symlink_metadata(path).unwrap().ino()
}

#[tokio::test]
async fn hard_links_stay_linked_after_a_rewind_and_its_undo() {
    let sandbox = Sandbox::new();
    let dir = sandbox.path();
    let src = dir.join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("a.txt"), "one\n").unwrap();
    std::fs::hard_link(src.join("a.txt"), src.join("b.txt")).unwrap();
    let server = ScriptedServer::start().await;
    // The command writes a new a.txt (b.txt keeps the old content, apart).
    server.push_all([
        Reply::tool_call(
            "call_1",
            "run_command",
            r#"{"command":"rm src/a.txt && echo two > src/a.txt && ln src/a.txt src/c.txt"}"#,
        ),
        Reply::text("ok"),
    ]);
    let out = sandbox
        .chat(&server.base_url(), &["--yes"], "change\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_ne!(inode(&src.join("a.txt")), inode(&src.join("b.txt")));

    let out = sandbox
        .run(&["rewind", "last", "--to", "1", "--dry-run"], "")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(
        out.stdout,
        "hard-linked src/b.txt (one file with src/a.txt again)"
    );
    assert!(!out.stdout.contains("kept"), "{}", out.stdout);

    let out = sandbox
        .run(&["rewind", "last", "--to", "1", "--yes"], "")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(std::fs::read_to_string(src.join("b.txt")).unwrap(), "one\n");
    assert_eq!(inode(&src.join("a.txt")), inode(&src.join("b.txt")));
    assert!(!src.join("c.txt").exists());

    let out = sandbox
        .run(&["rewind", "last", "--undo", "--dry-run"], "")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(
        out.stdout,
        "hard-linked src/c.txt (one file with src/a.txt again)"
    );
    assert_contains!(out.stdout, "unlinked  src/b.txt");
    let out = sandbox
        .run(&["rewind", "last", "--undo", "--yes"], "")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(std::fs::read_to_string(src.join("a.txt")).unwrap(), "two\n");
    assert_eq!(std::fs::read_to_string(src.join("b.txt")).unwrap(), "one\n");
    assert_eq!(inode(&src.join("a.txt")), inode(&src.join("c.txt")));
    assert_ne!(inode(&src.join("a.txt")), inode(&src.join("b.txt")));
}
