//! Kills of rewinds and of the chat's checkpoints, through the real binary.
//!
//! A working folder of many files (some of them large) has a state A, checkpointed
//! by the chat before its first call, and a state B written over it by hand.
//! `reprise rewind RUN --to 1 --files-only --yes` (B back to A) is SIGKILLed at a
//! random moment, again and again; after each kill a `--dry-run` of the same rewind
//! must change nothing (refused while the restore is unfinished), `--finish` finishes
//! a cut restore, and then the folder must be exactly A or exactly B (every file's
//! bytes and mode), its restore journal gone, and every checkpoint the
//! conversation names must name only objects that are in the store (its record,
//! its trees and every content they list). Then the chat is SIGKILLed while a turn
//! checkpoints the folder (changed by hand before each one) and `--continue` opens
//! the run again: the same rule for the checkpoints.
//!
//! The suite runs a few kills; `cargo bench -p reprise-cli --bench rewind_kills`
//! runs many (`REPRISE_REWIND_KILLS`, default 120).

use std::collections::{BTreeMap, HashSet};
use std::hash::{Hash, Hasher};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use reprise_testkit::{Reply, ScriptedServer};
use serde_json::Value;

/// Where a kill of `reprise rewind` fell, from what the folder and the store held
/// just after it.
pub const REWIND_MOMENTS: [&str; 5] = [
    "before the restore (start-up, the undo checkpoint, the comparison)",
    "during the restore, the folder half restored (finished by --finish)",
    "during the restore, journal written, the folder whole (as before or after)",
    "after the restore, before or after the rewind entry",
    "none: the rewind finished first",
];

/// Where a kill of the chat fell.
pub const CHAT_MOMENTS: [&str; 4] = [
    "before the checkpoint wrote an object (start-up, the model's reply)",
    "during the checkpoint (objects written, none named yet)",
    "after the checkpoint was named in the conversation",
    "none: the chat finished first",
];

/// Small files of the folder, and how many large ones.
const SMALL_FILES: usize = 1500;
const LARGE_FILES: usize = 4;
const LARGE_SIZE: usize = 2 << 20;

/// A number from the clock (no seed to keep).
fn jitter(below: u64) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    u64::from(nanos / 1000) % below.max(1)
}

/// Every file and link of the working folder (but the runs folder and the
/// config), hashed with its mode.
pub type Tree = BTreeMap<PathBuf, u64>;

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
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            if meta.is_dir() {
                pending.push(path);
                continue;
            } else if meta.file_type().is_symlink() {
                std::fs::read_link(&path).unwrap().hash(&mut hasher);
            } else {
                std::fs::read(&path).unwrap().hash(&mut hasher);
            }
            (meta.permissions().mode() & 0o100).hash(&mut hasher);
            out.insert(rel, hasher.finish());
        }
    }
    out
}

fn write(dir: &Path, rel: &str, bytes: impl AsRef<[u8]>) {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn small(i: usize, variant: &str) -> String {
    format!("fn f{i}() {{ /* {variant} */ }}\n").repeat(20 + i % 60)
}

fn large(i: usize, variant: u8) -> Vec<u8> {
    (0..LARGE_SIZE)
        .map(|at| (at as u8).wrapping_mul(31).wrapping_add(variant ^ i as u8))
        .collect()
}

/// State A: what the first checkpoint records.
fn write_a(dir: &Path) {
    for i in 0..SMALL_FILES {
        write(dir, &format!("src/m{}/f{i}.rs", i % 30), small(i, "a"));
    }
    for i in 0..LARGE_FILES {
        write(dir, &format!("data/big{i}.bin"), large(i, 1));
    }
}

/// State B, written over A: half the small files changed, a quarter deleted, new
/// folders of new files, the large files rewritten.
fn write_b(dir: &Path) {
    for i in (0..SMALL_FILES).step_by(2) {
        write(dir, &format!("src/m{}/f{i}.rs", i % 30), small(i, "b"));
    }
    for i in (1..SMALL_FILES).step_by(4) {
        std::fs::remove_file(dir.join(format!("src/m{}/f{i}.rs", i % 30))).unwrap();
    }
    for i in 0..300 {
        write(dir, &format!("new/n{}/g{i}.txt", i % 10), small(i, "new"));
    }
    for i in 0..LARGE_FILES {
        write(dir, &format!("data/big{i}.bin"), large(i, 2));
    }
}

/// Files changed by hand before a chat's turn, so that its checkpoint stores new
/// objects.
fn write_round(dir: &Path, round: usize) {
    let variant = format!("round {round}");
    for i in (round % 3..SMALL_FILES).step_by(3) {
        let path = format!("src/m{}/f{i}.rs", i % 30);
        if dir.join(&path).exists() {
            write(dir, &path, small(i, &variant));
        }
    }
    write(dir, "data/big0.bin", large(0, round as u8 ^ 0x55));
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        // A line cut by the kill is not read.
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// The checkpoint ids the conversation names: start records' and rewinds'.
fn named_checkpoints(entries: &[Value]) -> Vec<String> {
    let mut ids = Vec::new();
    for entry in entries {
        for field in ["checkpoint", "files", "undo"] {
            if let Some(id) = entry[field].as_str()
                && matches!(entry["kind"].as_str(), Some("toolStart" | "rewind"))
            {
                ids.push(id.to_owned());
            }
        }
    }
    ids
}

fn object_path(store: &Path, hex: &str) -> PathBuf {
    store.join("objects").join(&hex[..2]).join(&hex[2..])
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Where packed objects lie: their pack, offset, stored length, and whether that is a
/// zstd frame.
type Packed = BTreeMap<String, (PathBuf, usize, usize, bool)>;

/// Every packed object of `store` (docs/format.md: `packs/*.pack`, an index of
/// 53-byte entries before a 48-byte trailer): its pack's bytes and where it lies,
/// for the objects stored as they are (trees and records are).
fn packed(store: &Path) -> Result<Packed, String> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(store.join("packs")) else {
        return Ok(out);
    };
    for entry in entries {
        let path = entry.map_err(|error| error.to_string())?.path();
        let bytes = std::fs::read(&path).map_err(|error| error.to_string())?;
        let bad = || format!("{} is not a whole pack", path.display());
        let trailer = bytes.len().checked_sub(48).ok_or_else(bad)?;
        let index_at = u64::from_le_bytes(bytes[trailer..trailer + 8].try_into().unwrap()) as usize;
        let index = bytes.get(index_at..trailer).ok_or_else(bad)?;
        for entry in index.chunks_exact(53) {
            let offset = u64::from_le_bytes(entry[32..40].try_into().unwrap()) as usize;
            let len = u32::from_le_bytes(entry[40..44].try_into().unwrap()) as usize;
            out.insert(
                hex(&entry[..32]),
                (path.clone(), offset, len, entry[48] == 1),
            );
        }
    }
    Ok(out)
}

/// The bytes of the object `id` of `store` stored as it is, packed or loose.
fn read_raw(store: &Path, packs: &Packed, id: &str) -> std::io::Result<Vec<u8>> {
    match packs.get(id) {
        Some((pack, offset, len, false)) => {
            Ok(std::fs::read(pack)?[*offset..*offset + *len].to_vec())
        }
        _ => std::fs::read(object_path(store, id)),
    }
}

/// Walks checkpoint `id` of `store`: its record, its trees (`reprise-tree 1`) and
/// every content they list must be there. Returns the objects walked.
fn walk_checkpoint(store: &Path, id: &str, seen: &mut HashSet<String>) -> Result<(), String> {
    let packs = packed(store)?;
    let record = read_raw(store, &packs, id)
        .map_err(|error| format!("checkpoint {id}: its record: {error}"))?;
    let record: Value = serde_json::from_slice(&record)
        .map_err(|error| format!("checkpoint {id}: its record: {error}"))?;
    let mut pending = vec![record["tree"].as_str().unwrap_or_default().to_owned()];
    while let Some(tree_id) = pending.pop() {
        if !seen.insert(tree_id.clone()) {
            continue;
        }
        let bytes = read_raw(store, &packs, &tree_id)
            .map_err(|error| format!("checkpoint {id}: tree {tree_id}: {error}"))?;
        let mut rest = bytes
            .strip_prefix(b"reprise-tree 1\n".as_slice())
            .ok_or_else(|| format!("checkpoint {id}: {tree_id} is not a tree"))?;
        while let Some((&kind, after)) = rest.split_first() {
            let object = hex(&after[..32]);
            let end = after[32..].iter().position(|&b| b == 0).unwrap();
            rest = &after[32 + end + 1..];
            if kind == b'd' {
                pending.push(object);
            } else if kind != b'u'
                && seen.insert(object.clone())
                && !packs.contains_key(&object)
                && !object_path(store, &object).exists()
                && !object_path(store, &format!("{object}.zst")).exists()
            {
                return Err(format!("checkpoint {id} names a missing object {object}"));
            }
        }
    }
    Ok(())
}

/// A soak's folder: the working folder, its config and runs folder, the model
/// server.
pub struct RewindSoak {
    pub dir: PathBuf,
    server: ScriptedServer,
    run: PathBuf,
    a: Tree,
    b: Tree,
    rewind_time: Duration,
    /// From the restore journal's appearance to the rewind's end.
    restore_time: Duration,
    chat_time: Duration,
    rounds: usize,
    /// How many kills fell at each of [`REWIND_MOMENTS`].
    pub rewind_moments: [usize; REWIND_MOMENTS.len()],
    /// How many kills fell at each of [`CHAT_MOMENTS`].
    pub chat_moments: [usize; CHAT_MOMENTS.len()],
    /// Checkpoints walked after kills.
    pub walked: usize,
}

impl RewindSoak {
    /// A soak in `dir` (created): state A written, checkpointed by a first turn
    /// whose call changes nothing; state B written; one rewind and one chat turn
    /// timed.
    pub async fn new(dir: &Path) -> RewindSoak {
        std::fs::create_dir_all(dir.join("xdg/reprise")).unwrap();
        write_a(dir);
        let server = ScriptedServer::start().await;
        let calls = std::sync::atomic::AtomicUsize::new(0);
        server.answer_with(move |body| {
            let last = body["messages"]
                .as_array()
                .and_then(|messages| messages.last())
                .map(|message| message["role"].as_str().unwrap_or_default().to_owned())
                .unwrap_or_default();
            if last != "user" {
                return Reply::text("done");
            }
            let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Reply::tool_call(format!("call_{n}"), "run_command", r#"{"command":"true"}"#)
        });
        let mut soak = RewindSoak {
            dir: dir.to_path_buf(),
            server,
            run: PathBuf::new(),
            a: Tree::new(),
            b: Tree::new(),
            rewind_time: Duration::ZERO,
            restore_time: Duration::ZERO,
            chat_time: Duration::ZERO,
            rounds: 0,
            rewind_moments: [0; REWIND_MOMENTS.len()],
            chat_moments: [0; CHAT_MOMENTS.len()],
            walked: 0,
        };
        let out = soak.chat("first\n").wait_with_output().await.unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        soak.run = std::fs::read_dir(dir.join(".run"))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .find(|run| run.join("session.json").exists())
            .unwrap();
        soak.a = tree(dir);
        write_b(dir);
        soak.b = tree(dir);
        assert_ne!(soak.a, soak.b);
        let started = Instant::now();
        let mut child = soak.rewind(&["--yes"]);
        let journal = soak.store().join("restore.journal");
        let mut restore_started = None;
        while child.try_wait().unwrap().is_none() {
            if restore_started.is_none() && journal.exists() {
                restore_started = Some(Instant::now());
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let out = child.wait_with_output().await.unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        soak.rewind_time = started.elapsed();
        soak.restore_time = restore_started.map_or(soak.rewind_time / 4, |at| at.elapsed());
        assert_eq!(tree(dir), soak.a);
        write_b(dir);
        soak.check_checkpoints();
        soak
    }

    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_reprise"));
        command
            .args(args)
            .current_dir(&self.dir)
            .env("XDG_CONFIG_HOME", self.dir.join("xdg"))
            .env("TZ", "UTC")
            .env_remove("REPRISE_BASE_URL")
            .env_remove("REPRISE_MODEL")
            .env_remove("REPRISE_RUNS_DIR")
            .env_remove("REPRISE_CONFIG")
            .env_remove("REPRISE_DATABASE_URL")
            .env_remove("OPENAI_API_KEY")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }

    /// The chat, going on with the run when there is one, given `input`.
    fn chat(&self, input: &str) -> tokio::process::Child {
        let base_url = self.server.base_url();
        let mut args = vec![
            "--plain",
            "--yes",
            "--base-url",
            &base_url,
            "--model",
            "test-model",
            // The scripted model answers no summary: the long conversation of many
            // rounds is never compacted.
            "--context-window",
            "100000000",
        ];
        if !self.run.as_os_str().is_empty() {
            args.push("--continue");
        }
        let mut child = self.command(&args).spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let input = input.to_owned();
        tokio::spawn(async move {
            // A chat killed before it read everything closes the pipe.
            let _ = tokio::io::AsyncWriteExt::write_all(&mut stdin, input.as_bytes()).await;
        });
        child
    }

    /// `reprise rewind RUN --to 1 --files-only` with `extra`: the folder back to A.
    fn rewind(&self, extra: &[&str]) -> tokio::process::Child {
        let run = self.run.file_name().unwrap().to_str().unwrap();
        let mut args = vec!["rewind", run, "--to", "1", "--files-only"];
        args.extend_from_slice(extra);
        // Its preview is long: not read, so not piped (a full pipe would stop it).
        let mut child = self.command(&args).stdout(Stdio::null()).spawn().unwrap();
        drop(child.stdin.take());
        child
    }

    /// `reprise rewind RUN --finish --yes`: a cut restore finished.
    fn finish(&self) -> tokio::process::Child {
        let run = self.run.file_name().unwrap().to_str().unwrap();
        let args = ["rewind", run, "--finish", "--yes"];
        let mut child = self.command(&args).stdout(Stdio::null()).spawn().unwrap();
        drop(child.stdin.take());
        child
    }

    fn store(&self) -> PathBuf {
        self.run.join("checkpoints")
    }

    fn entries(&self) -> Vec<Value> {
        lines(&self.run.join("conversation.jsonl"))
    }

    /// Every checkpoint the conversation names is whole.
    fn check_checkpoints(&mut self) {
        let ids = named_checkpoints(&self.entries());
        assert!(!ids.is_empty(), "the conversation names no checkpoint");
        let mut seen = HashSet::new();
        for id in &ids {
            if let Err(error) = walk_checkpoint(&self.store(), id, &mut seen) {
                panic!("{error}");
            }
        }
        self.walked += ids.len();
    }

    /// Kills a child `delay` after `aim` first holds; whether it was still
    /// running then.
    async fn kill_when(
        child: &mut tokio::process::Child,
        aim: impl Fn() -> bool,
        delay: Duration,
    ) -> bool {
        let mut deadline = None;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                if !status.success() {
                    let mut stderr = String::new();
                    if let Some(mut pipe) = child.stderr.take() {
                        let _ =
                            tokio::io::AsyncReadExt::read_to_string(&mut pipe, &mut stderr).await;
                    }
                    panic!("the command failed before its kill ({status}): {stderr}");
                }
                return false;
            }
            if deadline.is_none() && aim() {
                deadline = Some(Instant::now() + delay);
            }
            if deadline.is_some_and(|at| Instant::now() >= at) {
                child.start_kill().unwrap();
                child.wait().await.unwrap();
                return true;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// One rewind B → A killed at a random moment, the next command run, the rules
    /// checked; the folder put back to B. Whether it was killed (it may finish
    /// first).
    pub async fn kill_rewind(&mut self) -> bool {
        let mut child = self.rewind(&["--yes"]);
        let journal_path = self.store().join("restore.journal");
        // Half the kills at any moment, half once the restore has begun.
        let killed = if jitter(2) == 0 {
            let window = self.rewind_time.as_micros() as u64 * 13 / 10;
            let delay = Duration::from_micros(jitter(window));
            Self::kill_when(&mut child, || true, delay).await
        } else {
            let window = self.restore_time.as_micros() as u64 * 13 / 10;
            let delay = Duration::from_micros(jitter(window));
            Self::kill_when(&mut child, || journal_path.exists(), delay).await
        };
        let journal = journal_path.exists();
        let now = tree(&self.dir);
        let moment = if !killed {
            4
        } else if journal && now != self.a && now != self.b {
            1
        } else if journal {
            2
        } else if now == self.b {
            0
        } else if now == self.a {
            3
        } else {
            panic!("a kill without a journal left the folder neither as before nor as after");
        };
        self.rewind_moments[moment] += 1;
        // A dry run changes nothing: refused while the restore is unfinished.
        let out = self
            .rewind(&["--dry-run"])
            .wait_with_output()
            .await
            .unwrap();
        assert_eq!(
            out.status.success(),
            !journal,
            "a dry run after a kill: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(tree(&self.dir), now, "a dry run changed the folder");
        if journal {
            let out = self.finish().wait_with_output().await.unwrap();
            assert!(
                out.status.success(),
                "--finish after a kill failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(!self.store().join("restore.journal").exists());
        let after = tree(&self.dir);
        assert!(
            after == self.a || after == self.b,
            "after a kill ({}) and the next command the folder is half restored",
            REWIND_MOMENTS[moment]
        );
        if moment == 1 {
            assert_eq!(after, self.a, "a half restore is finished");
        }
        self.check_checkpoints();
        if after == self.a {
            write_b(&self.dir);
            assert_eq!(tree(&self.dir), self.b);
        }
        killed
    }

    /// One chat turn whose checkpoint stores the files changed by hand, killed at
    /// a random moment; `--continue` opens the run again and the checkpoints are
    /// checked. Whether it was killed.
    pub async fn kill_chat(&mut self) -> bool {
        self.rounds += 1;
        write_round(&self.dir, self.rounds);
        let named = named_checkpoints(&self.entries()).len();
        let objects = count_objects(&self.store());
        if self.chat_time == Duration::ZERO {
            let started = Instant::now();
            let out = self.chat("timed\n").wait_with_output().await.unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            self.chat_time = started.elapsed();
            self.rounds += 1;
            write_round(&self.dir, self.rounds);
        }
        let mut child = self.chat(&format!("round {}\n", self.rounds));
        let store = self.store();
        // Half the kills at any moment, half once the checkpoint writes objects.
        let killed = if jitter(2) == 0 {
            let window = self.chat_time.as_micros() as u64 * 13 / 10;
            let delay = Duration::from_micros(jitter(window));
            Self::kill_when(&mut child, || true, delay).await
        } else {
            let delay = Duration::from_micros(jitter(self.chat_time.as_micros() as u64 / 4));
            Self::kill_when(&mut child, || has_temp_files(&store), delay).await
        };
        let moment = if !killed {
            3
        } else if named_checkpoints(&self.entries()).len() > named {
            2
        } else if count_objects(&self.store()) > objects || has_temp_files(&self.store()) {
            1
        } else {
            0
        };
        self.chat_moments[moment] += 1;
        let out = self.chat("").wait_with_output().await.unwrap();
        assert!(
            out.status.success(),
            "--continue after a kill failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.check_checkpoints();
        killed
    }
}

fn count_objects(store: &Path) -> usize {
    let loose: usize = std::fs::read_dir(store.join("objects"))
        .map(|fanouts| {
            fanouts
                .filter_map(Result::ok)
                .map(|fanout| std::fs::read_dir(fanout.path()).map_or(0, Iterator::count))
                .sum()
        })
        .unwrap_or(0);
    loose + std::fs::read_dir(store.join("packs")).map_or(0, Iterator::count)
}

fn has_temp_files(store: &Path) -> bool {
    std::fs::read_dir(store.join("tmp")).is_ok_and(|mut entries| entries.next().is_some())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kills_of_rewinds_and_checkpoints_never_leave_half_a_folder_or_a_missing_object() {
    let dir = tempfile::tempdir().unwrap();
    let mut soak = RewindSoak::new(dir.path()).await;
    let mut killed = 0;
    for _ in 0..4 {
        killed += usize::from(soak.kill_rewind().await);
    }
    for _ in 0..2 {
        killed += usize::from(soak.kill_chat().await);
    }
    assert!(killed >= 1, "nothing was killed");
    for (moment, count) in REWIND_MOMENTS.iter().zip(soak.rewind_moments) {
        eprintln!("{count} rewind kills {moment}");
    }
    for (moment, count) in CHAT_MOMENTS.iter().zip(soak.chat_moments) {
        eprintln!("{count} chat kills {moment}");
    }
    assert!(soak.walked > 6);
}
