//! A restore killed at every one of its steps, through the binary (the test-only
//! `REPRISE_TEST_KILL_AT` hook of reprise-checkpoint's `test-hooks` feature, on in
//! this crate's tests).
//!
//! A folder of a few hundred files, sub-folders, modes and links is state A; a
//! command of the chat makes state B; `reprise rewind last --to 1 --files-only
//! --yes` (B back to A) is killed at step 1, 2, … until it finishes unkilled. After
//! each kill, one of the entry points that open the run or work in the folder (a
//! new chat there, `--continue`, `--resume`, `/resume`, `rewind --dry-run`,
//! `fork --workdir`) must refuse and name `reprise rewind RUN --finish`, changing
//! nothing; `--finish --dry-run` changes nothing either; then `--finish --yes`
//! must leave the folder exactly A: every file's bytes and mode, every folder and
//! its mode, every link's target, and no stray file.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use reprise_testkit::{Reply, ScriptedServer, assert_contains};

use crate::support::{Output, Sandbox, run_command};

/// Every entry of the folder (but the runs folder and the config): a file's mode
/// and bytes, a folder's mode, a link's target.
type Tree = BTreeMap<PathBuf, String>;

fn tree(dir: &Path) -> Tree {
    let mut out = Tree::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(dir).unwrap().to_path_buf();
            if rel == Path::new(".run") || rel == Path::new("xdg") {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode() & 0o7777;
            let value = if meta.file_type().is_symlink() {
                format!("link {}", std::fs::read_link(&path).unwrap().display())
            } else if meta.is_dir() {
                pending.push(path);
                format!("dir {mode:o}")
            } else {
                let bytes = std::fs::read(&path).unwrap();
                format!("file {mode:o} {}", String::from_utf8_lossy(&bytes))
            };
            out.insert(rel, value);
        }
    }
    out
}

/// Fails with the entries that differ (not both trees whole).
#[track_caller]
fn assert_same(now: &Tree, want: &Tree, what: &str) {
    let differ: Vec<_> = now
        .keys()
        .chain(want.keys())
        .filter(|path| now.get(*path) != want.get(*path))
        .map(|path| (path, now.get(path), want.get(path)))
        .collect();
    assert!(differ.is_empty(), "{what}: (path, now, wanted): {differ:?}");
}

fn write(dir: &Path, rel: &str, text: &str) {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// State A: 240 files in 8 folders, two executables, links, a folder B deletes.
fn write_a(dir: &Path) {
    for i in 0..240 {
        write(
            dir,
            &format!("src/m{}/f{i}.txt", i % 8),
            &format!("a {i}\n"),
        );
    }
    write(dir, "README", "top\n");
    write(dir, "gone/one.txt", "1\n");
    write(dir, "gone/deep/two.txt", "2\n");
    for (name, mode) in [("bin/run.sh", 0o755), ("bin/tool.sh", 0o644)] {
        write(dir, name, "#!/bin/sh\n");
        std::fs::set_permissions(dir.join(name), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    std::os::unix::fs::symlink("../src/m0/f0.txt", dir.join("bin/first")).unwrap();
    std::os::unix::fs::symlink("run.sh", dir.join("bin/old-link")).unwrap();
}

/// The command that makes state B from A: files rewritten, deleted, created, a
/// folder removed and one made, executable bits flipped, links changed.
fn b_command() -> String {
    let mut script = String::from("set -e; echo changed > README; ");
    for i in (0..240).step_by(40) {
        script.push_str(&format!("echo 'b {i}' > src/m{}/f{i}.txt; ", i % 8));
    }
    for i in [3, 5] {
        script.push_str(&format!("rm src/m{}/f{i}.txt; ", i % 8));
    }
    script.push_str(
        "rm -r gone; mkdir -p made/sub; echo new > made/sub/n.txt; echo new > src/m1/new.txt; \
         chmod 644 bin/run.sh; chmod 755 bin/tool.sh; ln -sfn ../src/m1/f1.txt bin/first; \
         rm bin/old-link; ln -s tool.sh bin/new-link",
    );
    script
}

struct Setup {
    sandbox: Sandbox,
    server: ScriptedServer,
    run: String,
    /// The whole sandbox (folder, runs folder, config) at state B.
    template: tempfile::TempDir,
    a: Tree,
    b: Tree,
}

fn copy_all(from: &Path, to: &Path) {
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", from.display()))
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success());
}

impl Setup {
    async fn new() -> Setup {
        let sandbox = Sandbox::new();
        write_a(sandbox.path());
        let a = tree(sandbox.path());
        let server = ScriptedServer::start().await;
        let command = b_command();
        server.answer_with(move |body| {
            let last = body["messages"]
                .as_array()
                .and_then(|messages| messages.last())
                .map(|message| message["role"].as_str().unwrap_or_default().to_owned())
                .unwrap_or_default();
            if last != "user" {
                return Reply::text("done");
            }
            let arguments = serde_json::json!({ "command": command }).to_string();
            Reply::tool_call("call_b", "run_command", arguments)
        });
        let out = sandbox
            .chat(&server.base_url(), &["--yes", "make it B"], "")
            .await;
        assert_eq!(out.status, 0, "{}", out.stderr);
        let b = tree(sandbox.path());
        assert_ne!(a, b);
        assert_eq!(b[Path::new("bin/tool.sh")], "file 755 #!/bin/sh\n", "{b:?}");
        let run = sandbox.conversations()[0]
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let template = tempfile::tempdir().unwrap();
        copy_all(sandbox.path(), template.path());
        Setup {
            sandbox,
            server,
            run,
            template,
            a,
            b,
        }
    }

    /// The folder and the runs folder put back as they were at state B (the
    /// folder itself stays: its identity is what the run recorded).
    fn reset(&self) {
        for entry in std::fs::read_dir(self.sandbox.path()).unwrap() {
            let path = entry.unwrap().path();
            if std::fs::symlink_metadata(&path).unwrap().is_dir() {
                std::fs::remove_dir_all(&path).unwrap();
            } else {
                std::fs::remove_file(&path).unwrap();
            }
        }
        copy_all(self.template.path(), self.sandbox.path());
        assert_same(&tree(self.sandbox.path()), &self.b, "reset");
    }

    async fn run(&self, args: &[&str]) -> Output {
        self.sandbox.run(args, "").await
    }

    /// The rewind B → A, killed at step `at`; whether it was killed.
    async fn killed_rewind(&self, at: usize) -> bool {
        let mut command =
            self.sandbox
                .command(&["rewind", "last", "--to", "1", "--files-only", "--yes"]);
        command.env("REPRISE_TEST_KILL_AT", at.to_string());
        let out = run_command(command, "").await;
        if out.status == 0 {
            return false;
        }
        assert_eq!(out.status, -1, "step {at}: not killed: {}", out.stderr);
        true
    }

    fn journal(&self) -> bool {
        self.sandbox
            .runs_dir()
            .join(&self.run)
            .join("checkpoints/restore.journal")
            .exists()
    }

    fn marked(&self) -> bool {
        self.sandbox.path().join(".reprise-restore").exists()
    }

    fn refused(&self, what: &str, at: usize, out: &Output) {
        assert_ne!(out.status, 0, "step {at}: {what} was not refused");
        assert_contains!(out.stderr, &format!("reprise rewind {} --finish", self.run));
    }

    /// Entry point `which` after a kill at step `at`: refused, nothing changed.
    async fn entry_point(&self, which: usize, at: usize) {
        let before = tree(self.sandbox.path());
        let base_url = self.server.base_url();
        let chat = ["--plain", "--yes", "--base-url", &base_url, "--model", "m"];
        match which % 6 {
            0 if self.marked() => {
                let out = self.sandbox.chat(&base_url, &["--yes"], "hello\n").await;
                self.refused("a new chat in the folder", at, &out);
            }
            0 => {
                // No mark: the journal was written and the folder not touched yet,
                // or the folder is whole and the mark already removed.
                let now = tree(self.sandbox.path());
                assert!(now == self.a || now == self.b, "step {at}: unmarked, half");
            }
            1 => {
                let mut args = chat.to_vec();
                args.push("--continue");
                let out = self.sandbox.run(&args, "hello\n").await;
                self.refused("--continue", at, &out);
            }
            2 => {
                let mut args = chat.to_vec();
                args.extend(["--resume", &self.run]);
                let out = self.sandbox.run(&args, "hello\n").await;
                self.refused("--resume RUN", at, &out);
            }
            3 => {
                // From a chat in another folder, over the same runs folder.
                let elsewhere = tempfile::tempdir().unwrap();
                let runs_dir = self.sandbox.runs_dir();
                let mut command = self.sandbox.command(&chat);
                command
                    .current_dir(elsewhere.path())
                    .env("REPRISE_RUNS_DIR", &runs_dir);
                let out = run_command(command, "/resume\n1\n").await;
                assert_contains!(out.stderr, &format!("reprise rewind {} --finish", self.run));
                assert!(
                    !out.stderr.contains("(resumed the conversation"),
                    "{}",
                    out.stderr
                );
            }
            4 => {
                let out = self
                    .run(&["rewind", "last", "--to", "1", "--files-only", "--dry-run"])
                    .await;
                self.refused("rewind --dry-run", at, &out);
            }
            _ => {
                let fork_dir = self.template.path().join("..").join(format!(
                    "fork-{}-{at}",
                    self.template.path().file_name().unwrap().to_string_lossy()
                ));
                let fork_dir = fork_dir.to_string_lossy().into_owned();
                let out = self
                    .run(&["fork", &self.run, "--at", "1", "--workdir", &fork_dir])
                    .await;
                self.refused("fork --workdir", at, &out);
                assert!(!Path::new(&fork_dir).exists(), "step {at}: fork written");
            }
        }
        assert_same(
            &tree(self.sandbox.path()),
            &before,
            &format!("step {at}: entry point {which} changed the folder"),
        );
        assert!(
            self.journal(),
            "step {at}: entry point {which} took the journal"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_killed_at_any_step_is_refused_everywhere_until_finished_whole() {
    let setup = Setup::new().await;
    let mut at = 1;
    let mut after_journal_gone = 0;
    loop {
        setup.reset();
        if !setup.killed_rewind(at).await {
            break;
        }
        if !setup.journal() {
            // Killed after the journal went: the restore had finished.
            assert_same(&tree(setup.sandbox.path()), &setup.a, &format!("step {at}"));
            after_journal_gone += 1;
            at += 1;
            continue;
        }
        setup.entry_point(at, at).await;
        if at % 3 == 0 {
            let before = tree(setup.sandbox.path());
            let out = setup
                .run(&["rewind", &setup.run, "--finish", "--dry-run"])
                .await;
            assert_eq!(out.status, 0, "step {at}: {}", out.stderr);
            assert_contains!(out.stdout, "finish the restore that was cut");
            assert_same(
                &tree(setup.sandbox.path()),
                &before,
                &format!("step {at}: dry run wrote"),
            );
            assert!(setup.journal());
        }
        let out = setup
            .run(&["rewind", &setup.run, "--finish", "--yes"])
            .await;
        assert_eq!(out.status, 0, "step {at}: {}", out.stderr);
        assert_contains!(out.stdout, "finished the cut restore of");
        assert_same(
            &tree(setup.sandbox.path()),
            &setup.a,
            &format!("step {at}: finished, the folder is not A"),
        );
        assert!(!setup.journal() && !setup.marked(), "step {at}");
        at += 1;
    }
    // Journal, mark, each deletion, write and rename, sync, head, mark, journal.
    eprintln!("a restore of {} steps, killed at each", at - 1);
    assert!(at > 25, "only {at} steps");
    assert!(after_journal_gone <= 1);
    // Unkilled, the rewind finished: A, and then the chat works in the folder.
    assert_same(&tree(setup.sandbox.path()), &setup.a, "unkilled");
    assert!(!setup.marked());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_changed_after_the_kill_is_named_and_never_overwritten() {
    let setup = Setup::new().await;
    setup.reset();
    // Half way: the journal, the mark, the deletions, some files written.
    assert!(setup.killed_rewind(16).await);
    assert!(setup.marked());
    let half = tree(setup.sandbox.path());
    assert!(half != setup.a && half != setup.b, "not half restored");
    // Something else writes a file the restore was still to put back.
    let pending = (0..240)
        .step_by(40)
        .rev()
        .map(|i| {
            (
                format!("src/m{}/f{i}.txt", i % 8),
                format!("file 644 b {i}\n"),
            )
        })
        .find(|(rel, b)| half[Path::new(rel)] == *b)
        .map(|(rel, _)| rel)
        .unwrap();
    write(setup.sandbox.path(), &pending, "written after the kill\n");
    // Read-only commands still work, and say it.
    for args in [vec!["show", setup.run.as_str()], vec!["runs"]] {
        let out = setup.run(&args).await;
        assert_eq!(out.status, 0, "{args:?}: {}", out.stderr);
        assert_contains!(
            out.stderr,
            &format!("`reprise rewind {} --finish`", setup.run)
        );
    }

    let out = setup
        .run(&["rewind", &setup.run, "--finish", "--dry-run"])
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let changed = out
        .stdout
        .split("changed since the restore was cut")
        .nth(1)
        .unwrap_or_else(|| panic!("{}", out.stdout));
    assert_contains!(changed, &pending);

    let out = setup
        .run(&["rewind", &setup.run, "--finish", "--yes"])
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let mut want = setup.a.clone();
    want.insert(
        PathBuf::from(&pending),
        "file 644 written after the kill\n".to_owned(),
    );
    assert_same(&tree(setup.sandbox.path()), &want, "finished");
    // Finished, and recorded as a files rewind: --undo brings B back (what was
    // written after the kill is in the undo's own undo point).
    let out = setup.run(&["rewind", &setup.run, "--undo", "--yes"]).await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_same(&tree(setup.sandbox.path()), &setup.b, "undone");
}
