//! Every kind of fork (`reprise fork`, `/fork`, `--continue --fork-session`) gives
//! the new run the checkpoints its conversation names, their objects hard links to
//! the source's: a files rewind in the fork restores the folder, and still does
//! once the source run is deleted.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::rewind::tree;
use crate::support::Sandbox;
use reprise_testkit::{Reply, ScriptedServer};

/// Every file holding objects of a run's checkpoint store (loose objects and
/// packs), by name, with its inode.
fn objects(run: &Path) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    if let Ok(packs) = std::fs::read_dir(run.join("checkpoints/packs")) {
        for pack in packs {
            let pack = pack.unwrap();
            let name = format!("packs/{}", pack.file_name().to_string_lossy());
            out.insert(name, pack.metadata().unwrap().ino());
        }
    }
    let Ok(fanouts) = std::fs::read_dir(run.join("checkpoints/objects")) else {
        return out;
    };
    for fanout in fanouts {
        let fanout = fanout.unwrap().path();
        for object in std::fs::read_dir(&fanout).unwrap() {
            let object = object.unwrap();
            let name = format!(
                "{}{}",
                fanout.file_name().unwrap().to_string_lossy(),
                object.file_name().to_string_lossy()
            );
            out.insert(name, object.metadata().unwrap().ino());
        }
    }
    out
}

fn name(run: &Path) -> String {
    run.file_name().unwrap().to_string_lossy().into_owned()
}

/// The run folder that `before` did not have.
fn new_run(sandbox: &Sandbox, before: &[PathBuf]) -> PathBuf {
    let mut added: Vec<PathBuf> = sandbox
        .conversations()
        .into_iter()
        .filter(|run| !before.contains(run))
        .collect();
    assert_eq!(added.len(), 1, "{added:?}");
    added.remove(0)
}

#[tokio::test]
async fn every_kind_of_fork_rewinds_files_with_objects_shared_from_its_source() {
    let sandbox = Sandbox::new();
    let dir = sandbox.path();
    std::fs::create_dir(dir.join("src")).unwrap();
    std::fs::write(dir.join("src/a.txt"), "zero\n").unwrap();
    let server = ScriptedServer::start().await;
    let steps = [
        (
            "first",
            "write_file",
            r#"{"path":"src/a.txt","content":"one\n"}"#,
        ),
        (
            "second",
            "run_command",
            r#"{"command":"echo bee > src/b.txt; head -c 300000 /dev/urandom > src/c.bin"}"#,
        ),
    ];
    let mut states = vec![tree(dir)];
    for (index, (prompt, tool, arguments)) in steps.into_iter().enumerate() {
        server.push_all([
            Reply::tool_call(format!("call_{index}"), tool, arguments),
            Reply::text("ok"),
        ]);
        let flags: &[&str] = if index == 0 {
            &["--yes"]
        } else {
            &["--yes", "--continue"]
        };
        let out = sandbox
            .chat(&server.base_url(), flags, &format!("{prompt}\n"))
            .await;
        assert_eq!(out.status, 0, "{}", out.stderr);
        states.push(tree(dir));
    }
    let source = sandbox.conversations().remove(0);
    let source_objects = objects(&source);
    assert!(!source_objects.is_empty());

    // `reprise fork RUN`.
    let before = sandbox.conversations();
    let out = sandbox.run(&["fork", &name(&source)], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let plain = new_run(&sandbox, &before);
    // `/fork` in a chat going on with the source, the conversation only (the
    // files stay shared through the same working folder).
    let before = sandbox.conversations();
    let out = sandbox
        .chat(
            &server.base_url(),
            &["--yes", "--resume", &name(&source)],
            "/fork\n2\n",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let slash = new_run(&sandbox, &before);
    // `--resume RUN --fork-session`, with a message of its own.
    let before = sandbox.conversations();
    server.push_all([Reply::text("in the fork")]);
    let out = sandbox
        .chat(
            &server.base_url(),
            &["--yes", "--resume", &name(&source), "--fork-session"],
            "third\n",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let session = new_run(&sandbox, &before);

    let forks = [plain, slash, session];
    for fork in &forks {
        let shared = objects(fork);
        assert!(!shared.is_empty(), "{} has no checkpoints", fork.display());
        for (object, inode) in &shared {
            assert_eq!(
                source_objects.get(object),
                Some(inode),
                "{object} of {} is a hard link to the source's",
                fork.display()
            );
        }
    }

    let out = sandbox.run(&["rm", &name(&source), "--yes"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(!source.exists());
    for fork in &forks {
        for (number, state) in [(1, &states[0]), (2, &states[1])] {
            let out = sandbox
                .run(
                    &[
                        "rewind",
                        &name(fork),
                        "--to",
                        &number.to_string(),
                        "--files-only",
                        "--yes",
                    ],
                    "",
                )
                .await;
            assert_eq!(out.status, 0, "{}: {}", fork.display(), out.stderr);
            assert_eq!(&tree(dir), state, "{} rewound to {number}", fork.display());
            let out = sandbox
                .run(&["rewind", &name(fork), "--undo", "--yes"], "")
                .await;
            assert_eq!(out.status, 0, "{}", out.stderr);
            assert_eq!(tree(dir), states[2]);
        }
    }
}
