//! Checkpoints taken by the chat before calls that change the working folder, and
//! `reprise rewind` / `reprise fork --workdir` over them: a scripted session through
//! the real tools (write, edit, `sed -i`, `rm`, `mv`, an untracked file, a 5 MB
//! binary), rewound to each point, undone, forked with its files; the folder's
//! `.git` is never touched.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::support::{Sandbox, roles_and_texts};
use reprise_testkit::assert_contains;
use reprise_testkit::{Reply, ScriptedServer};

/// Every file under `dir` (but `.run`, `xdg` and `.git`) and its bytes.
pub fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            if [".run", "xdg", ".git"]
                .iter()
                .any(|skip| rel == Path::new(skip))
            {
                continue;
            }
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// Every file under `dir/.git` and its bytes.
fn git_bytes(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let git = dir.join(".git");
    let mut out = BTreeMap::new();
    let mut pending = vec![git.clone()];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let rel = path.strip_prefix(&git).unwrap().to_path_buf();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    assert!(out.len() > 10, "a repository: {:?}", out.keys());
    out
}

/// `git ARGS` in `dir`, reading no configuration from the machine.
fn git(dir: &Path, args: &[&str]) {
    let status = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

/// The scripted session: one message per step, each answered by one call.
const STEPS: [(&str, &str, &str); 6] = [
    (
        "write",
        "write_file",
        r#"{"path":"src/a.txt","content":"one\n"}"#,
    ),
    (
        "edit",
        "edit_file",
        r#"{"path":"src/a.txt","old":"one","new":"two"}"#,
    ),
    (
        "sed",
        "run_command",
        r#"{"command":"sed -i s/two/three/ src/a.txt"}"#,
    ),
    ("rm", "run_command", r#"{"command":"rm src/b.txt"}"#),
    (
        "mv",
        "run_command",
        r#"{"command":"mv src/a.txt src/c.txt"}"#,
    ),
    (
        "untracked and big",
        "run_command",
        r#"{"command":"echo u > src/new.txt; head -c 5000000 /dev/urandom > src/big.bin"}"#,
    ),
];

async fn rewind(sandbox: &Sandbox, args: &[&str]) -> crate::support::Output {
    let mut all = vec!["rewind", "last"];
    all.extend_from_slice(args);
    sandbox.run(&all, "").await
}

#[tokio::test]
async fn a_session_rewinds_to_each_point_undoes_and_forks_with_its_files() {
    let sandbox = Sandbox::new();
    let dir = sandbox.path();
    // Commands may change files below the working folder's top level (the sandbox
    // keeps the top level, where the runs folder is, as it is).
    std::fs::create_dir(dir.join("src")).unwrap();
    std::fs::write(dir.join("src/b.txt"), "bee\n").unwrap();
    // The user's own repository, with two commits.
    git(dir, &["init", "-q"]);
    git(dir, &["add", "src/b.txt"]);
    git(dir, &["commit", "-q", "-m", "bee"]);
    std::fs::write(dir.join("src/tracked.txt"), "tracked\n").unwrap();
    git(dir, &["add", "src/tracked.txt"]);
    git(dir, &["commit", "-q", "-m", "tracked"]);
    let git_before = git_bytes(dir);
    let server = ScriptedServer::start().await;
    let mut states = vec![tree(dir)];
    for (index, &(prompt, tool, arguments)) in STEPS.iter().enumerate() {
        server.push_all([
            Reply::tool_call(format!("call_{index}"), tool, arguments),
            Reply::text("ok"),
        ]);
        let mut flags = vec!["--yes"];
        if index > 0 {
            flags.push("--continue");
        }
        let out = sandbox
            .chat(&server.base_url(), &flags, &format!("{prompt}\n"))
            .await;
        assert_eq!(out.status, 0, "{}", out.stderr);
        states.push(tree(dir));
    }
    assert!(states[6].contains_key(Path::new("src/big.bin")));
    assert!(!states[4].contains_key(Path::new("src/b.txt")));
    let run = sandbox.conversations().remove(0);
    assert!(run.join("checkpoints").is_dir());

    // A hand edit after the last checkpoint is named, and brought back by --undo.
    std::fs::write(dir.join("src/new.txt"), "by hand\n").unwrap();
    let hand = tree(dir);
    let out = rewind(&sandbox, &["--to", "6", "--dry-run"]).await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    // Only the hand edit: what the last turn's own calls changed is not "outside".
    let outside: Vec<&str> = out
        .stdout
        .lines()
        .skip_while(|line| !line.contains("changed outside reprise"))
        .skip(1)
        .take_while(|line| line.starts_with("    "))
        .map(str::trim)
        .collect();
    assert_eq!(outside, ["src/new.txt"], "{}", out.stdout);
    assert_contains!(out.stdout, "4 messages leave the model's view");
    assert_eq!(tree(dir), hand, "a dry run changes nothing");
    let out = rewind(&sandbox, &["--to", "6"]).await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "--yes");

    // The undo of a rewind gives back the hand edit too.
    let out = rewind(&sandbox, &["--to", "6", "--yes"]).await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(tree(dir), states[5]);
    let out = rewind(&sandbox, &["--undo", "--yes"]).await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(tree(dir), hand);

    for number in (1..=6).rev() {
        let out = rewind(&sandbox, &["--to", &number.to_string(), "--yes"]).await;
        assert_eq!(out.status, 0, "{}", out.stderr);
        assert_eq!(tree(dir), states[number - 1], "rewound to message {number}");
    }
    let out = rewind(&sandbox, &["--undo", "--yes"]).await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(tree(dir), states[1]);

    // The conversation goes on from message 1 ("write") in a new process: the
    // rewound messages are not sent.
    server.push_all([Reply::text("again")]);
    let out = sandbox
        .chat(&server.base_url(), &["--yes", "--continue"], "later\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let bodies = server.request_bodies();
    let texts: Vec<String> = roles_and_texts(bodies.last().unwrap())
        .into_iter()
        .filter(|(role, _)| role == "user")
        .map(|(_, text)| text)
        .collect();
    assert_eq!(texts, ["write", "later"]);

    let out = rewind(&sandbox, &["--to", "9", "--yes"]).await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "choose 1 to 2");
    assert_eq!(git_bytes(dir), git_before);

    // A fork up to the answer to message 1 ("write"; the rewound messages after it
    // are out of view) gets the folder as it is: nothing changed it since.
    let elsewhere = tempfile::tempdir().unwrap();
    let forked_dir = elsewhere.path().join("fork-files");
    let out = sandbox
        .run(
            &[
                "fork",
                "last",
                "--at",
                "1",
                "--workdir",
                forked_dir.to_str().unwrap(),
            ],
            "",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(tree(&forked_dir), states[1]);
    // A fork with files does not carry `.git`: checkpoints leave it out.
    assert!(!forked_dir.join(".git").exists());
    assert_eq!(git_bytes(dir), git_before);
    // A files rewind in the fork works on its own folder.
    let fork_run = sandbox.conversations().pop().unwrap();
    let fork_name = fork_run.file_name().unwrap().to_str().unwrap().to_owned();
    let out = sandbox
        .run(&["rewind", &fork_name, "--to", "1", "--yes"], "")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(tree(&forked_dir), states[0]);
    assert!(!forked_dir.join(".git").exists());
    assert_eq!(git_bytes(dir), git_before);
    let out = sandbox
        .run(
            &["fork", "last", "--workdir", forked_dir.to_str().unwrap()],
            "",
        )
        .await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "is not empty");
}

#[tokio::test]
async fn a_run_without_checkpoints_says_so() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    server.push_all([Reply::text("hi"), Reply::text("hi again")]);
    let out = sandbox
        .chat(&server.base_url(), &["--yes"], "one\ntwo\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let out = rewind(&sandbox, &["--to", "1", "--files-only", "--yes"]).await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "no checkpoint of the working folder");
    let out = rewind(&sandbox, &["--to", "2", "--conversation-only", "--yes"]).await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "2 messages leave the model's view");
    let out = sandbox.run(&["show", "last"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let out = rewind(&sandbox, &["--undo", "--yes"]).await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let out = rewind(&sandbox, &["--undo", "--yes"]).await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "no rewind to undo");
}

#[tokio::test]
async fn a_working_folder_reprise_did_not_record_is_not_taken() {
    let sandbox = Sandbox::new();
    let dir = sandbox.path();
    std::fs::write(dir.join("here.txt"), "mine\n").unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(elsewhere.path().join("private.txt"), "not yours\n").unwrap();
    let server = ScriptedServer::start().await;
    server.push_all([Reply::text("hi")]);
    let out = sandbox.chat(&server.base_url(), &["--yes"], "one\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    // A run folder planted with a working folder elsewhere (no identity recorded,
    // then another folder's).
    let run = sandbox.conversations().remove(0);
    let planted = [
        serde_json::json!({ "workdir": elsewhere.path() }),
        serde_json::json!({ "workdir": elsewhere.path(), "identity": [1, 2] }),
    ];
    for (index, workdir) in planted.iter().enumerate() {
        std::fs::write(run.join("workdir.json"), workdir.to_string()).unwrap();
        server.push_all([
            Reply::tool_call(format!("call_{index}"), "list_dir", "{}"),
            Reply::text("listed"),
        ]);
        let out = sandbox
            .chat(
                &server.base_url(),
                &["--yes", "--continue"],
                "what is here?\n",
            )
            .await;
        assert_eq!(out.status, 0, "{}", out.stderr);
        let shown = format!("{}{}", out.stdout, out.stderr);
        assert_contains!(shown, "not the folder this run was given");
        let sent = server.request_bodies().last().unwrap().to_string();
        assert!(sent.contains("here.txt"), "{sent}");
        assert!(!sent.contains("private.txt"), "{sent}");
    }
}

#[tokio::test]
async fn the_files_only_preview_names_its_message_and_one_more_line_is_singular() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::tool_call(
            "call_1",
            "write_file",
            r#"{"path":"note.txt","content":"one\ntwo\n"}"#,
        ),
        Reply::text("written"),
        Reply::tool_call("call_2", "read_file", r#"{"path":"note.txt"}"#),
        Reply::text("it says one"),
    ]);
    let out = sandbox
        .chat(&server.base_url(), &["--yes"], "write a note\nread it\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stderr, "↳ one (+1 line)\n");
    let out = sandbox.run(&["show", "last"], "").await;
    assert_contains!(out.stdout, "(+1 line)");
    assert!(!out.stdout.contains("(+1 lines)"), "{}", out.stdout);

    let out = rewind(&sandbox, &["--to", "1", "--files-only", "--dry-run"]).await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(
        out.stdout,
        "rewind the files to just before message 1: write a note\n"
    );
    assert_contains!(out.stdout, "the conversation stays as it is");
    let out = rewind(&sandbox, &["--to", "2", "--conversation-only", "--yes"]).await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let out = sandbox.run(&["show", "last"], "").await;
    assert_contains!(
        out.stdout,
        "── rewound: what is marked │ below left the model's view (4 messages) ──"
    );
}
