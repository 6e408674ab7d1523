//! Figures for searching and listing a large history, printed (no assertions):
//!
//! - `reprise search QUERY` over 10,000 runs holding about 1 GB of conversations,
//!   page cache warm, against `rg -F -c QUERY` over the same files (`--glob '*.jsonl'`:
//!   the conversations and subagent transcripts) in the same run;
//! - `reprise runs` over those 10,000 runs, every one with a title (`labels.json`),
//!   with the list cache present (warm) and removed before each listing (cold).
//!
//! - `reprise search` over 2,000 runs the chat wrote (the real binary driven against
//!   the scripted server, its conversation repeated with fresh ids into each run),
//!   for a phrase in every reply and for a file name in prompts and tool calls: the
//!   default view (the first hits of each run) against `rg -F -c` over the same
//!   files, and `--all` (every hit) against `rg -F` (every matching line).
//!
//! - `reprise search` over 2,000 and then 20,000 runs of about 116 KB, for a phrase
//!   in 1 run of 100 and for one in every answer, against `rg -F -c`.
//!
//! - `reprise search` in one run of 1 GB (the same turns), for a phrase in its first
//!   message and for one in every answer, with the default view and with `--all`,
//!   literal and `--regex`: wall time against `rg`, and the peak resident memory of
//!   each process (`VmHWM`, sampled while it runs).
//!
//! Wall time of the whole process, median of alternating rounds after an untimed
//! pass of each. The data is generated under `target/bench-tmp/` and removed
//! afterwards (kept under `REPRISE_BENCH_KEEP=DIR` when set). Needs `rg` (Debian's `ripgrep`). Run with
//! `cargo bench -p reprise-cli --bench history` (`-- chat` runs only the search of
//! chat-written runs, `-- sparse` only the search of 2,000 and 20,000 runs, `-- session`
//! only the search of one run of 1 GB).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed test or bench run

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use reprise_runs::{Labels, RunStore, SESSION_JSON, SessionJson, write_labels};
use reprise_session::{Durability, Entry, Message, SessionKey, SessionStore, ToolCall};
use reprise_testkit::peak::PeakWatch;

const RUNS: usize = 10_000;
/// Bytes of conversation per run: 10,000 of them make about 1 GB.
const RUN_BYTES: usize = 100_000;
/// Distinct conversation bodies; each run gets one, after its own first message.
const BODIES: usize = 64;
const ROUNDS: usize = 5;
const QUERY: &str = "migration plan";
/// Runs made of what the chat wrote, and the turns driven to write it.
const CHAT_RUNS: usize = 2_000;
const DRIVEN_TURNS: usize = 40;
/// In every reply of the driven chat; in prompts, tool calls and tool results.
const CHAT_QUERIES: [&str; 2] = ["splits on tabs", "src/module_13.rs"];

/// Removes the generated data however the bench ends.
struct TempDir(PathBuf, bool);

impl Drop for TempDir {
    fn drop(&mut self) {
        if self.1 {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// A small deterministic generator, so every run of the bench searches the same text.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) as usize
    }
}

const WORDS: &[&str] = &[
    "the",
    "a",
    "function",
    "returns",
    "error",
    "file",
    "config",
    "test",
    "value",
    "cargo",
    "build",
    "fails",
    "because",
    "type",
    "mismatch",
    "expected",
    "found",
    "struct",
    "field",
    "missing",
    "please",
    "check",
    "path",
    "server",
    "request",
    "timeout",
    "retry",
    "after",
    "seconds",
    "database",
    "query",
    "index",
    "slow",
    "user",
    "session",
    "token",
    "parse",
    "json",
    "line",
    "column",
    "unexpected",
    "character",
    "fix",
    "patch",
    "diff",
    "commit",
    "branch",
    "merge",
    "review",
    "comment",
    "deploy",
    "release",
    "version",
    "bump",
    "docs",
    "example",
    "output",
    "input",
    "stream",
    "buffer",
    "thread",
    "lock",
    "async",
    "await",
    "future",
    "task",
    "spawn",
    "channel",
    "send",
    "receive",
    "closed",
    "ok",
    "done",
    "next",
    "step",
    "then",
    "run",
    "again",
    "with",
    "without",
    "flag",
    "option",
    "default",
    "über",
    "naïve",
    "café",
    "日本",
    "\"quoted\"",
    "C:\\temp",
    "tab\there",
    "new\nline",
];

fn words(rng: &mut Lcg, count: usize) -> String {
    let mut text = String::new();
    for i in 0..count {
        if i > 0 {
            text.push(' ');
        }
        text.push_str(WORDS[rng.next() % WORDS.len()]);
    }
    text
}

/// One conversation body of about `RUN_BYTES`: turns of a question, a tool call, its
/// result and an answer.
fn body(seed: u64) -> Vec<u8> {
    body_of(seed, RUN_BYTES, "")
}

/// One conversation body of about `bytes`: turns of a question, a tool call, its
/// result and an answer that starts with `answer_start`.
fn body_of(seed: u64, bytes: usize, answer_start: &str) -> Vec<u8> {
    let mut rng = Lcg(seed);
    let mut out = Vec::with_capacity(bytes + 8192);
    let mut turn = 0;
    while out.len() < bytes {
        let entries = [
            Entry::message(Message::user(words(&mut rng, 30))),
            Entry::message(Message::assistant_tool_calls(
                Some(words(&mut rng, 20)),
                vec![ToolCall::function(
                    format!("call_{turn}"),
                    "shell",
                    serde_json::json!({"cmd": words(&mut rng, 8)}).to_string(),
                )],
            )),
            Entry::message(Message::tool(format!("call_{turn}"), words(&mut rng, 400))),
            Entry::message(Message::assistant(format!(
                "{answer_start}{}",
                words(&mut rng, 120)
            ))),
        ];
        for entry in entries {
            out.extend(serde_json::to_vec(&entry).unwrap());
            out.push(b'\n');
        }
        turn += 1;
    }
    out
}

/// Writes `RUNS` run folders: a conversation of about `RUN_BYTES` each (every 100th
/// run's first message mentions `QUERY`), `session.json`, the `.summary.json` an
/// append through the run store writes, and a title.
fn make_runs(runs_dir: &Path) -> u64 {
    let bodies: Vec<Vec<u8>> = (0..BODIES as u64).map(|n| body(n + 1)).collect();
    make_runs_of(runs_dir, 0..RUNS, &bodies)
}

/// Writes run folders `numbers` as [`make_runs`] does, with conversations cut from
/// `bodies`.
fn make_runs_of(runs_dir: &Path, numbers: std::ops::Range<usize>, bodies: &[Vec<u8>]) -> u64 {
    const THREADS: usize = 8;
    std::fs::create_dir_all(runs_dir).unwrap();
    let start = jiff::Timestamp::from_second(1_780_000_000).unwrap();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let numbers = numbers.clone();
                scope.spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .build()
                        .unwrap();
                    let mut bytes = 0u64;
                    for n in (numbers.start + t..numbers.end).step_by(THREADS) {
                        let at = start
                            .checked_add(jiff::SignedDuration::from_secs(n as i64 * 60))
                            .unwrap();
                        let dir = runs_dir.join(at.strftime("%Y-%m-%dT%H-%M-%S-%3fZ").to_string());
                        std::fs::create_dir(&dir).unwrap();
                        let first = if n % 100 == 0 {
                            format!("run {n}: write the {QUERY} for the \"billing\" service")
                        } else {
                            format!("run {n}: look at the failing build")
                        };
                        let mut conversation =
                            serde_json::to_vec(&Entry::message(Message::user(first.clone())))
                                .unwrap();
                        conversation.push(b'\n');
                        conversation.extend_from_slice(&bodies[n % BODIES]);
                        bytes += conversation.len() as u64;
                        std::fs::write(dir.join("conversation.jsonl"), &conversation).unwrap();
                        let session = format!("session-{n}");
                        let meta = SessionJson {
                            session_id: session.clone(),
                            updated_at: Some(at),
                            first_message: Some(first),
                            message_count: 1,
                            ..SessionJson::default()
                        };
                        std::fs::write(dir.join(SESSION_JSON), serde_json::to_vec(&meta).unwrap())
                            .unwrap();
                        let store = RunStore::with_durability(&dir, Durability::None);
                        let key = SessionKey::session(&session).unwrap();
                        let next = Entry::message(Message::user("thanks, that works"));
                        runtime.block_on(store.append(&key, &[next])).unwrap();
                        write_labels(
                            &dir,
                            &Labels {
                                title: Some(format!("Run {n}: the build and the billing service")),
                                tags: vec!["bench".to_owned()],
                            },
                        )
                        .unwrap();
                    }
                    bytes
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    })
}

/// [`CHAT_RUNS`] runs, each the conversation the chat wrote in [`DRIVEN_TURNS`] turns
/// against the scripted server (with fresh ids), searched for [`CHAT_QUERIES`]
/// against `rg -F -c` in alternating rounds.
fn chat_written_search(reprise: &str, root: &Path) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let driven = root.join("driven");
    std::fs::create_dir_all(&driven).unwrap();
    let template = reprise_testkit::chat_corpus::read_entries(&runtime.block_on(
        reprise_testkit::chat_corpus::drive_chat(Path::new(reprise), &driven, DRIVEN_TURNS),
    ));
    let runs_dir = root.join("chat-runs");
    let started = Instant::now();
    let mut bytes = 0;
    for n in 0..CHAT_RUNS {
        let folder = reprise_runs::create_run_folder(&runs_dir).unwrap();
        let store = RunStore::with_durability(&folder.dir, Durability::None);
        let key = SessionKey::session(&uuid::Uuid::now_v7().to_string()).unwrap();
        let entries = reprise_testkit::chat_corpus::repeated(&template, n);
        runtime.block_on(store.append(&key, &entries)).unwrap();
        bytes += std::fs::metadata(folder.dir.join("conversation.jsonl"))
            .unwrap()
            .len();
    }
    println!(
        "made {CHAT_RUNS} runs the chat wrote ({DRIVEN_TURNS} turns each, {} entries), {:.0} MB, in {:.1} s",
        template.len(),
        bytes as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    let runs_arg = runs_dir.to_str().unwrap();
    for query in CHAT_QUERIES {
        // The default view (the first hits of each run) against rg's counts, and
        // every hit against every matching line rg prints.
        let commands: [(&str, Vec<&str>); 4] = [
            (reprise, vec!["--runs-dir", runs_arg, "search", query]),
            ("rg", vec!["-F", "-c", "--glob", "*.jsonl", query, runs_arg]),
            (
                reprise,
                vec!["--runs-dir", runs_arg, "search", "--all", query],
            ),
            ("rg", vec!["-F", "--glob", "*.jsonl", query, runs_arg]),
        ];
        let out: Vec<usize> = commands
            .iter()
            .map(|(program, args)| timed(program, args, root).1)
            .collect();
        let mut times = vec![Vec::new(); commands.len()];
        for _ in 0..ROUNDS {
            for ((program, args), samples) in commands.iter().zip(&mut times) {
                samples.push(timed(program, args, root).0);
            }
        }
        let medians: Vec<Duration> = times.into_iter().map(median).collect();
        println!(
            "chat-written runs, reprise search {query:?}: median {} ({} bytes out); rg -F -c: median {} ({} bytes out); ratio {:.2}x",
            ms(medians[0]),
            out[0],
            ms(medians[1]),
            out[1],
            medians[0].as_secs_f64() / medians[1].as_secs_f64(),
        );
        println!(
            "chat-written runs, reprise search --all {query:?}: median {} ({} bytes out); rg -F: median {} ({} bytes out); ratio {:.2}x",
            ms(medians[2]),
            out[2],
            ms(medians[3]),
            out[3],
            medians[2].as_secs_f64() / medians[3].as_secs_f64(),
        );
    }
}

/// Runs of about 116 KB for the search of few hits and of many: in the answers of
/// every turn of every run, and in the first message of every 100th run.
const SPARSE_RUN_BYTES: usize = 116_000;
const FREQUENT_QUERY: &str = "check the inputs";

/// `reprise search` against `rg -F -c` on 2,000 and then 20,000 runs of about
/// 116 KB: a phrase in 1 run of 100 (the first message) and one in every answer of
/// every run. Alternating rounds, medians.
fn sparse_search(reprise: &str, root: &Path) {
    let runs_dir = root.join("sparse-runs");
    let bodies: Vec<Vec<u8>> = (0..BODIES as u64)
        .map(|n| body_of(n + 1, SPARSE_RUN_BYTES, "Next, check the inputs. "))
        .collect();
    let runs_arg = runs_dir.to_str().unwrap();
    let mut made = 0;
    let mut bytes = 0;
    for count in [2_000, 20_000] {
        let started = Instant::now();
        bytes += make_runs_of(&runs_dir, made..count, &bodies);
        made = count;
        println!(
            "made {count} runs of {} KB, {:.0} MB of conversations, in {:.1} s",
            SPARSE_RUN_BYTES / 1000,
            bytes as f64 / 1e6,
            started.elapsed().as_secs_f64()
        );
        for (what, query) in [("rare", QUERY), ("frequent", FREQUENT_QUERY)] {
            let commands: [(&str, Vec<&str>); 2] = [
                (reprise, vec!["--runs-dir", runs_arg, "search", query]),
                ("rg", vec!["-F", "-c", "--glob", "*.jsonl", query, runs_arg]),
            ];
            let out: Vec<usize> = commands
                .iter()
                .map(|(program, args)| timed(program, args, root).1)
                .collect();
            let mut times = vec![Vec::new(); commands.len()];
            for _ in 0..ROUNDS {
                for ((program, args), samples) in commands.iter().zip(&mut times) {
                    samples.push(timed(program, args, root).0);
                }
            }
            let medians: Vec<Duration> = times.into_iter().map(median).collect();
            println!(
                "{count} runs, {what} hits, reprise search {query:?}: median {} ({} bytes out); rg -F -c: median {} ({} bytes out); ratio {:.2}x",
                ms(medians[0]),
                out[0],
                ms(medians[1]),
                out[1],
                medians[0].as_secs_f64() / medians[1].as_secs_f64(),
            );
        }
    }
}

/// Bytes of the one long run's conversation.
const SESSION_BYTES: u64 = 1_000_000_000;

/// `reprise search` in one run of [`SESSION_BYTES`] (the sparse runs' turns, every
/// answer holding [`FREQUENT_QUERY`], the first message [`QUERY`]): time and peak
/// resident memory against `rg`, few hits and many, default view and `--all`,
/// literal and regex. Alternating rounds, medians; the peak is the highest seen.
fn session_search(reprise: &str, root: &Path) {
    let runs_dir = root.join("session-runs");
    let bodies: Vec<Vec<u8>> = (0..BODIES as u64)
        .map(|n| body_of(n + 1, SPARSE_RUN_BYTES, "Next, check the inputs. "))
        .collect();
    let started = Instant::now();
    make_runs_of(&runs_dir, 0..1, &bodies);
    let dir = std::fs::read_dir(&runs_dir)
        .unwrap()
        .flatten()
        .map(|entry| entry.path())
        .find(|path| path.is_dir())
        .unwrap();
    let conversation = dir.join("conversation.jsonl");
    {
        use std::io::Write;
        // The first message is there; the bodies go on to SESSION_BYTES, then one
        // entry appended through the run store (which keeps the run's summary, as
        // the chat's appends do, so listing the run reads no conversation).
        let written = std::fs::read(&conversation).unwrap();
        let first_line = written.iter().position(|b| *b == b'\n').unwrap() + 1;
        let mut file = std::io::BufWriter::new(std::fs::File::create(&conversation).unwrap());
        file.write_all(&written[..first_line]).unwrap();
        let mut bytes = first_line as u64;
        for body in bodies.iter().cycle() {
            if bytes >= SESSION_BYTES {
                break;
            }
            file.write_all(body).unwrap();
            bytes += body.len() as u64;
        }
        file.flush().unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let store = RunStore::with_durability(&dir, Durability::None);
        let key = SessionKey::session("session-0").unwrap();
        let next = Entry::message(Message::user("thanks, that works"));
        runtime.block_on(store.append(&key, &[next])).unwrap();
    }
    let size = std::fs::metadata(&conversation).unwrap().len();
    println!(
        "made one run of {:.0} MB, in {:.1} s",
        size as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    let runs_arg = runs_dir.to_str().unwrap();
    let file_arg = conversation.to_str().unwrap();
    let frequent_regex = "check the (inputs)";
    let shapes: [(&str, Vec<&str>, Vec<&str>); 5] = [
        (
            "few hits",
            vec!["search", QUERY],
            vec!["-F", "-c", QUERY, file_arg],
        ),
        (
            "many hits, default view",
            vec!["search", FREQUENT_QUERY],
            vec!["-F", "-c", FREQUENT_QUERY, file_arg],
        ),
        (
            "many hits, --all",
            vec!["search", "--all", FREQUENT_QUERY],
            vec!["-F", FREQUENT_QUERY, file_arg],
        ),
        (
            "few hits, --regex",
            vec!["search", "--regex", QUERY],
            vec!["-c", QUERY, file_arg],
        ),
        (
            "many hits, --all --regex",
            vec!["search", "--all", "--regex", frequent_regex],
            vec![frequent_regex, file_arg],
        ),
    ];
    for (what, search, rg) in shapes {
        let mut ours_args = vec!["--runs-dir", runs_arg];
        ours_args.extend(search);
        let commands = [(reprise, ours_args), ("rg", rg)];
        let out: Vec<usize> = commands
            .iter()
            .map(|(program, args)| timed(program, args, root).1)
            .collect();
        let mut times = vec![Vec::new(); commands.len()];
        let mut peaks = vec![0; commands.len()];
        for _ in 0..ROUNDS {
            for (((program, args), samples), peak) in
                commands.iter().zip(&mut times).zip(&mut peaks)
            {
                let (elapsed, _, kib) = timed_peak(program, args, root);
                samples.push(elapsed);
                *peak = kib.max(*peak);
            }
        }
        let medians: Vec<Duration> = times.into_iter().map(median).collect();
        println!(
            "1 GB run, {what}, reprise {:?}: median {}, peak {:.1} MiB ({} bytes out); rg: median {}, peak {:.1} MiB ({} bytes out); ratio {:.2}x",
            commands[0].1[2..].join(" "),
            ms(medians[0]),
            peaks[0] as f64 / 1024.0,
            out[0],
            ms(medians[1]),
            peaks[1] as f64 / 1024.0,
            out[1],
            medians[0].as_secs_f64() / medians[1].as_secs_f64(),
        );
    }
}

/// Runs a command to its end, its output read and dropped; returns its wall time.
fn timed(program: &str, args: &[&str], cwd: &Path) -> (Duration, usize) {
    let (elapsed, out, _) = run_command(program, args, cwd, false);
    (elapsed, out)
}

/// As [`timed`], with the peak resident memory of the process in KiB.
fn timed_peak(program: &str, args: &[&str], cwd: &Path) -> (Duration, usize, u64) {
    run_command(program, args, cwd, true)
}

/// Runs a command to its end, its output read and counted; its wall time, and with
/// `watch` its peak resident memory (`VmHWM`, sampled every 2 ms: not `ru_maxrss`,
/// which carries over the high-water mark of this bench's address space at `exec`).
fn run_command(program: &str, args: &[&str], cwd: &Path, watch: bool) -> (Duration, usize, u64) {
    let start = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .current_dir(cwd)
        .env("XDG_CONFIG_HOME", cwd.join("xdg"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let sampler = watch.then(|| PeakWatch::of(child.id()));
    // Counted, not kept: `--all` prints hundreds of megabytes.
    let mut out = 0;
    let mut stdout = child.stdout.take().unwrap();
    let mut buffer = vec![0; 1 << 16];
    loop {
        match stdout.read(&mut buffer).unwrap() {
            0 => break,
            read => out += read,
        }
    }
    // Sampled once more before the process is reaped (its status is gone then).
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let elapsed = start.elapsed();
    let peak = sampler.map_or(0, PeakWatch::finish);
    assert!(status.success(), "{program} {args:?} failed");
    (elapsed, out, peak)
}

fn main() {
    if Command::new("rg").arg("--version").output().is_err() {
        eprintln!("history bench: `rg` is missing (apt-get install -y ripgrep)");
        return;
    }
    // With REPRISE_BENCH_KEEP=DIR the data is written under DIR and kept, to
    // profile by hand.
    let kept = std::env::var_os("REPRISE_BENCH_KEEP").map(PathBuf::from);
    let root = kept.clone().unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/bench-tmp")
            .join(format!("history-{}", std::process::id()))
    });
    let guard = TempDir(root.clone(), kept.is_none());
    if std::env::args().skip(1).any(|arg| arg == "chat") {
        chat_written_search(env!("CARGO_BIN_EXE_reprise"), &root);
        return;
    }
    if std::env::args().skip(1).any(|arg| arg == "sparse") {
        sparse_search(env!("CARGO_BIN_EXE_reprise"), &root);
        return;
    }
    if std::env::args().skip(1).any(|arg| arg == "session") {
        session_search(env!("CARGO_BIN_EXE_reprise"), &root);
        return;
    }
    let runs_dir = root.join("runs");
    let started = Instant::now();
    let bytes = make_runs(&runs_dir);
    println!(
        "made {RUNS} runs, {:.2} GB of conversations, in {:.1} s",
        bytes as f64 / 1e9,
        started.elapsed().as_secs_f64()
    );
    let reprise = env!("CARGO_BIN_EXE_reprise");
    let runs_arg = runs_dir.to_str().unwrap();
    let search_args = ["--runs-dir", runs_arg, "search", QUERY];
    let rg_args = ["-F", "-c", "--glob", "*.jsonl", QUERY, runs_arg];

    // Untimed passes: the page cache warm, the list cache written.
    let (_, search_out) = timed(reprise, &search_args, &root);
    let (_, rg_out) = timed("rg", &rg_args, &root);
    println!("output: reprise search {search_out} bytes, rg -c {rg_out} bytes");
    let mut search = Vec::new();
    let mut rg = Vec::new();
    let mut ratios = Vec::new();
    for _ in 0..ROUNDS {
        let (ours, _) = timed(reprise, &search_args, &root);
        let (theirs, _) = timed("rg", &rg_args, &root);
        search.push(ours);
        rg.push(theirs);
        ratios.push(ours.as_secs_f64() / theirs.as_secs_f64());
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "reprise search {QUERY:?}: median {}; rg -F -c: median {}; ratio of medians {:.2}x, median of per-round ratios {:.2}x",
        ms(median(search.clone())),
        ms(median(rg.clone())),
        median(search).as_secs_f64() / median(rg).as_secs_f64(),
        ratios[ratios.len() / 2]
    );

    chat_written_search(reprise, &root);
    sparse_search(reprise, &root);
    session_search(reprise, &root);

    let list_args = ["--runs-dir", runs_arg, "runs"];
    let cache = runs_dir.join(reprise_runs::LIST_CACHE);
    timed(reprise, &list_args, &root);
    let mut warm = Vec::new();
    let mut cold = Vec::new();
    for _ in 0..ROUNDS * 2 {
        warm.push(timed(reprise, &list_args, &root).0);
        let _ = std::fs::remove_file(&cache);
        cold.push(timed(reprise, &list_args, &root).0);
    }
    println!(
        "reprise runs, {RUNS} runs with titles: warm (list cache present) median {}, cold (no list cache) median {}",
        ms(median(warm.clone())),
        ms(median(cold.clone()))
    );

    // The same listings without titles (every labels.json moved aside), and the
    // process start alone, in alternating rounds: what titles cost on this machine now.
    let labelled: Vec<PathBuf> = std::fs::read_dir(&runs_dir)
        .unwrap()
        .flatten()
        .map(|entry| entry.path())
        .filter(|dir| dir.join("labels.json").exists())
        .collect();
    let set_aside = |aside: bool| {
        for dir in &labelled {
            let (from, to) = (dir.join("labels.json"), dir.join("labels.aside"));
            let (from, to) = if aside { (from, to) } else { (to, from) };
            std::fs::rename(from, to).unwrap();
        }
        // Old enough to be cached, then a listing that caches them.
        std::thread::sleep(Duration::from_millis(1100));
        timed(reprise, &list_args, &root);
    };
    let mut titled = Vec::new();
    let mut untitled = Vec::new();
    let mut start = Vec::new();
    for _ in 0..ROUNDS {
        for _ in 0..3 {
            titled.push(timed(reprise, &list_args, &root).0);
            start.push(timed(reprise, &["--version"], &root).0);
        }
        set_aside(true);
        for _ in 0..3 {
            untitled.push(timed(reprise, &list_args, &root).0);
        }
        set_aside(false);
    }
    println!(
        "warm reprise runs: with titles median {}, without titles median {}, ratio {:.2}x; reprise --version median {}",
        ms(median(titled.clone())),
        ms(median(untitled.clone())),
        median(titled).as_secs_f64() / median(untitled).as_secs_f64(),
        ms(median(start))
    );
    drop(guard);
}
