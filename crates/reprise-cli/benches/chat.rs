//! Figures for the chat's run commands and resume, printed (no assertions):
//!
//! - `reprise runs` over 10,000 runs (wall time of the whole process, and of
//!   `reprise --version` for comparison: what starting the binary costs);
//! - `reprise --continue` on a run with 10,000 messages: the redraw shown and the
//!   session loaded, in plain mode (process exits at end of input) and full-screen
//!   (a pseudo-terminal, until the resumed line is on screen); peak memory.
//!
//! - `reprise --continue` and `reprise show --json` on a 100 MB run of coding-agent
//!   turns (98,000 entries: prompts, replies with tool calls, tool results), against
//!   the library's own load of the same session: first in a fresh process (what a
//!   program that opens it once pays), and again in this process; then the same on a
//!   100 MB run the chat itself wrote (the real binary driven against the scripted
//!   server for 400 turns, every reply with `usage`, repeated with fresh ids).
//!
//! - the same on a 100 MB run of short turns (200,000 entries: prompts and replies of
//!   about 300 characters, `usage` and `model` on every reply), where the cost is
//!   per entry;
//! - `reprise runs --json` over 10,000 and then 100,000 runs, the list cache warm.
//!
//! - `reprise --continue` (plain and full screen) of sessions of short turns whose
//!   last compaction is near the end (its `through` 40 entries before the end, 20
//!   entries after it): 10 MB, 1 GB, and with `REPRISE_BENCH_10GB=1` 10 GB, side by
//!   side in one run: time to the resumed line and peak RSS (`-- resume`).
//!
//! `show --json` is also set against the seed's Python loader (`json.loads` of every
//! line of the file) where `python3` is on the machine.
//!
//! Run with `cargo bench -p reprise-cli --bench chat` (`-- big` runs only the 100 MB
//! part, `-- short` only its short-turn run, `-- listing` only the listing at scale,
//! `-- resume` only the compacted sessions, `-- small` only the rest). With
//! `REPRISE_BENCH_KEEP=DIR` the runs are written under `DIR` and kept, to profile by
//! hand. With `REPRISE_BENCH_BEFORE=BINARY` the listing at scale also times that
//! build of `reprise` in the same rounds, to set a change against what came before it;
//! so do `show --json` and `--continue` (plain and full screen) of the 100 MB runs.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed test or bench run

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use reprise_runs::{RunStore, create_run_folder};
use reprise_session::{Durability, Entry, Message, SessionKey, SessionStore};
use reprise_testkit::peak::{PeakWatch, vm_hwm_kib};
use reprise_testkit::{coding_agent_entry, short_turn_entry};

const RUNS: usize = 10_000;
const MESSAGES: usize = 10_000;
const REPEAT: usize = 5;
/// Alternating rounds of the 100 MB `show --json` comparison.
const ROUNDS: usize = 9;
/// Set in a child process of this bench: load the session at this run folder, print
/// how long it took (µs) and exit.
const CHILD_LOAD_DIR: &str = "REPRISE_CHAT_BENCH_LOAD_DIR";
const CHILD_LOAD_KEY: &str = "REPRISE_CHAT_BENCH_LOAD_KEY";

fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_reprise")
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// A command of a build of `reprise` in `cwd`, its output piped.
fn command_of(binary: &Path, cwd: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(binary);
    command
        .args(args)
        .current_dir(cwd)
        .env("XDG_CONFIG_HOME", cwd.join("xdg"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// Runs a command to its end; returns its wall time and its peak RSS in KiB. Its
/// output is read a pipe's worth at a time and dropped: collecting 100 MB here
/// would charge the command for this side's growing buffer.
fn timed(cwd: &Path, args: &[&str]) -> (Duration, u64) {
    let (elapsed, peak, _) = timed_output(cwd, args);
    (elapsed, peak)
}

/// [`timed`], and how many bytes the command printed.
fn timed_output(cwd: &Path, args: &[&str]) -> (Duration, u64, usize) {
    timed_output_of(Path::new(binary()), cwd, args)
}

/// [`timed_output`] of another build of `reprise`.
fn timed_output_of(binary: &Path, cwd: &Path, args: &[&str]) -> (Duration, u64, usize) {
    let start = Instant::now();
    let mut child = command_of(binary, cwd, args).spawn().unwrap();
    let peak = PeakWatch::of(child.id());
    let mut stdout = child.stdout.take().unwrap();
    let mut buffer = vec![0u8; 1 << 16];
    let mut printed = 0;
    loop {
        let n = stdout.read(&mut buffer).unwrap();
        if n == 0 {
            break;
        }
        printed += n;
    }
    let status = child.wait().unwrap();
    let elapsed = start.elapsed();
    assert!(status.success(), "{args:?} failed");
    (elapsed, peak.finish(), printed)
}

/// Writes `count` runs through the library, on several threads (creating folders
/// syncs directories, which is slow one at a time).
fn make_runs(runs_dir: &Path, count: usize) {
    const THREADS: usize = 8;
    std::fs::create_dir_all(runs_dir).unwrap();
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            scope.spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                for i in (t..count).step_by(THREADS) {
                    let folder = create_run_folder(runs_dir).unwrap();
                    let store = RunStore::with_durability(&folder.dir, Durability::None);
                    let key = SessionKey::session(&uuid::Uuid::now_v7().to_string()).unwrap();
                    let entries = [
                        Entry::message(Message::user(format!(
                            "question number {i} about something"
                        ))),
                        Entry::message(Message::assistant(format!("answer number {i}"))),
                    ];
                    runtime.block_on(store.append(&key, &entries)).unwrap();
                }
            });
        }
    });
}

async fn make_long_run(runs_dir: &Path, messages: usize) {
    let folder = create_run_folder(runs_dir).unwrap();
    let store = RunStore::with_durability(&folder.dir, Durability::None);
    let key = SessionKey::session(&uuid::Uuid::now_v7().to_string()).unwrap();
    let mut entries = Vec::with_capacity(messages);
    for i in 0..messages / 2 {
        entries.push(Entry::message(Message::user(format!(
            "question {i}: could you explain the next step of the plan in a few sentences?"
        ))));
        entries.push(Entry::message(Message::assistant(format!(
            "Answer {i}: the next step is to **check** the inputs, then `run` the job, \
             and finally look at the report. Nothing else is needed today."
        ))));
    }
    for chunk in entries.chunks(1000) {
        store.append(&key, chunk).await.unwrap();
    }
}

fn full_screen_continue(cwd: &Path) -> (Duration, u64) {
    full_screen_until(cwd, "(resumed the conversation of")
}

fn full_screen_until(cwd: &Path, marker: &str) -> (Duration, u64) {
    full_screen_until_of(Path::new(binary()), cwd, marker)
}

/// [`full_screen_until`] of another build of `reprise`.
fn full_screen_until_of(binary: &Path, cwd: &Path, marker: &str) -> (Duration, u64) {
    use portable_pty::{CommandBuilder, PtySize, native_pty_system};
    let pair = native_pty_system()
        .openpty(PtySize {
            rows: 40,
            cols: 120,
            pixel_width: 0,
            pixel_height: 0,
        })
        .unwrap();
    let mut builder = CommandBuilder::new(binary);
    builder.args(["--continue", "--base-url", "http://127.0.0.1:9/v1"]);
    builder.cwd(cwd);
    builder.env("TERM", "xterm-256color");
    builder.env("XDG_CONFIG_HOME", cwd.join("xdg"));
    let start = Instant::now();
    let mut child = pair.slave.spawn_command(builder).unwrap();
    drop(pair.slave);
    let mut reader = pair.master.try_clone_reader().unwrap();
    let mut writer = pair.master.take_writer().unwrap();
    let mut parser = vt100::Parser::new(
        std::num::NonZeroU16::new(40).unwrap(),
        std::num::NonZeroU16::new(120).unwrap(),
        0,
    );
    let mut buffer = [0u8; 65536];
    let shown = loop {
        let n = reader.read(&mut buffer).unwrap();
        assert!(n > 0, "the chat closed before the redraw");
        parser.process(&buffer[..n]);
        if parser.screen().contents().contains(marker) {
            break start.elapsed();
        }
    };
    let hwm = child.process_id().map_or(0, vm_hwm_kib);
    use std::io::Write;
    writer.write_all(b"\x04").unwrap();
    writer.flush().unwrap();
    // Drain until the chat exits.
    while matches!(reader.read(&mut buffer), Ok(n) if n > 0) {
        if child.try_wait().unwrap().is_some() {
            break;
        }
    }
    let _ = child.wait();
    (shown, hwm)
}

const BIG_ENTRIES: usize = 98_000;
/// Turns of the chat driven against the scripted server for the chat-written run,
/// which is then repeated (fresh ids) to about [`BIG_BYTES`].
const DRIVEN_TURNS: usize = 400;
const BIG_BYTES: u64 = 100_000_000;
/// Set in a child process of this bench: how many entries the loaded session holds.
const CHILD_LOAD_COUNT: &str = "REPRISE_CHAT_BENCH_LOAD_COUNT";

/// A big run in a runs folder: where it is, its key, the size of its conversation
/// file and how many entries it holds.
struct BigRun {
    dir: std::path::PathBuf,
    key: SessionKey,
    len: u64,
    entries: usize,
}

/// Writes batches from `batch` (called with the number of entries written so far,
/// until it returns none) into a new run through the run store.
async fn write_big_run(runs_dir: &Path, mut batch: impl FnMut(usize) -> Vec<Entry>) -> BigRun {
    let folder = create_run_folder(runs_dir).unwrap();
    let store = RunStore::with_durability(&folder.dir, Durability::None);
    let key = SessionKey::session(&uuid::Uuid::now_v7().to_string()).unwrap();
    let mut written = 0;
    loop {
        let entries = batch(written);
        if entries.is_empty() {
            break;
        }
        written += entries.len();
        store.append(&key, &entries).await.unwrap();
    }
    let len = std::fs::metadata(folder.dir.join("conversation.jsonl"))
        .unwrap()
        .len();
    BigRun {
        dir: folder.dir,
        key,
        len,
        entries: written,
    }
}

/// A run of [`BIG_ENTRIES`] coding-agent entries (about 100 MB).
async fn make_big_run(runs_dir: &Path) -> BigRun {
    write_big_run(runs_dir, |i| {
        (i..(i + 2000).min(BIG_ENTRIES))
            .map(coding_agent_entry)
            .collect()
    })
    .await
}

/// Entries of the short-turn run: about 100 MB.
const SHORT_ENTRIES: usize = 200_000;

/// A run of [`SHORT_ENTRIES`] short turns as the chat writes them (prompts and
/// replies of about 300 characters, `usage` and `model` on every reply).
async fn make_short_turn_run(runs_dir: &Path) -> BigRun {
    write_big_run(runs_dir, |i| {
        (i..(i + 2000).min(SHORT_ENTRIES))
            .map(short_turn_entry)
            .collect()
    })
    .await
}

/// A run of about [`BIG_BYTES`] that the chat wrote: [`DRIVEN_TURNS`] turns of the
/// real binary against the scripted server (every reply with `usage`), repeated.
async fn make_chat_written_run(work: &Path, runs_dir: &Path) -> BigRun {
    let template = reprise_testkit::chat_corpus::read_entries(
        &reprise_testkit::chat_corpus::drive_chat(Path::new(binary()), work, DRIVEN_TURNS).await,
    );
    let template_bytes: u64 = template
        .iter()
        .map(|entry| serde_json::to_vec(entry).unwrap().len() as u64 + 1)
        .sum();
    let copies = BIG_BYTES.div_ceil(template_bytes) as usize;
    let mut copy = 0;
    write_big_run(runs_dir, |_| {
        if copy == copies {
            return Vec::new();
        }
        copy += 1;
        reprise_testkit::chat_corpus::repeated(&template, copy - 1)
    })
    .await
}

/// One [`RunStore::load`] of `key` in a fresh process, timed there.
fn fresh_process_load(run: &BigRun) -> Duration {
    let output = Command::new(std::env::current_exe().unwrap())
        .env(CHILD_LOAD_DIR, &run.dir)
        .env(CHILD_LOAD_KEY, run.key.session_id())
        .env(CHILD_LOAD_COUNT, run.entries.to_string())
        .output()
        .unwrap();
    assert!(output.status.success());
    let micros = String::from_utf8(output.stdout).unwrap();
    Duration::from_micros(micros.trim().parse().unwrap())
}

async fn child_load(dir: &str, session_id: &str) {
    let reader = RunStore::with_durability(Path::new(dir), Durability::None);
    let key = SessionKey::session(session_id).unwrap();
    let start = Instant::now();
    let loaded = reader.load(&key).await.unwrap().unwrap();
    let took = start.elapsed();
    let expected: usize = std::env::var(CHILD_LOAD_COUNT).unwrap().parse().unwrap();
    assert_eq!(loaded.entries.len(), expected);
    println!("{}", took.as_micros());
}

/// The 100 MB figures on the short-turn run.
async fn short_bench(root: &Path) {
    let short = root.join("short");
    std::fs::create_dir_all(short.join("xdg")).unwrap();
    let setup = Instant::now();
    let run = make_short_turn_run(&short.join(".run")).await;
    println!(
        "setup: a run of {} short turns (prompts and replies of about 300 characters, usage on every reply), {:.1} MB, written in {}",
        run.entries,
        run.len as f64 / 1e6,
        ms(setup.elapsed())
    );
    big_run_bench(&short, &run).await;
}

/// The 100 MB figures on the three big runs: generated coding-agent turns, short
/// turns, and turns the chat wrote.
async fn big_bench(root: &Path) {
    short_bench(root).await;
    let generated = root.join("big");
    std::fs::create_dir_all(generated.join("xdg")).unwrap();
    let setup = Instant::now();
    let run = make_big_run(&generated.join(".run")).await;
    println!(
        "setup: a run of {} generated coding-agent entries, {:.1} MB, written in {}",
        run.entries,
        run.len as f64 / 1e6,
        ms(setup.elapsed())
    );
    big_run_bench(&generated, &run).await;

    let chat_written = root.join("chat-written");
    std::fs::create_dir_all(chat_written.join("xdg")).unwrap();
    let setup = Instant::now();
    let run = make_chat_written_run(&root.join("driven"), &chat_written.join(".run")).await;
    println!(
        "setup: a run of {} entries the chat wrote ({DRIVEN_TURNS} turns against the scripted server, repeated), {:.1} MB, written in {}",
        run.entries,
        run.len as f64 / 1e6,
        ms(setup.elapsed())
    );
    big_run_bench(&chat_written, &run).await;
}

async fn big_run_bench(big: &Path, run: &BigRun) {
    let big = big.to_path_buf();
    let (dir, key, len) = (&run.dir, &run.key, run.len);
    let mb = len as f64 / 1e6;
    // The library's load of the same session (a reader: no writer lock), in this
    // process, after the file is in the page cache: a load that reuses memory the
    // previous one freed.
    let reader = RunStore::with_durability(dir, Durability::None);
    let _ = reader.load(key).await.unwrap().unwrap();
    let mut library = Vec::new();
    for _ in 0..REPEAT {
        let start = Instant::now();
        let loaded = reader.load(key).await.unwrap().unwrap();
        library.push(start.elapsed());
        assert_eq!(loaded.entries.len(), run.entries);
    }
    let library = median(library);
    println!(
        "library load (RunStore::load) again in one process, {mb:.1} MB: median {}",
        ms(library)
    );

    // `show --json` against the library's first load in a fresh process (a program
    // that opens the session once, as `show` does), in alternating rounds so that
    // a burst of load on the machine falls on both.
    let show_args = ["show", "--json", dir.file_name().unwrap().to_str().unwrap()];
    let _ = timed(&big, &show_args);
    let mut first_loads = Vec::new();
    let mut show = Vec::new();
    for _ in 0..ROUNDS {
        first_loads.push(fresh_process_load(run));
        show.push(timed(&big, &show_args).0);
    }
    let first_load = median(first_loads);
    let show_time = median(show);
    println!(
        "library first load (RunStore::load in a fresh process), {mb:.1} MB: median {}",
        ms(first_load)
    );
    println!(
        "reprise show --json, {mb:.1} MB: median {} ({:.2}x the first load, {:.2}x the load again)",
        ms(show_time),
        show_time.as_secs_f64() / first_load.as_secs_f64(),
        show_time.as_secs_f64() / library.as_secs_f64()
    );
    if let Some(python) = python_load(&dir.join("conversation.jsonl"), run.entries) {
        println!(
            "the seed's Python loader (json.loads per line, python3 in a fresh process), {mb:.1} MB: median {} (show --json is {:.2}x faster)",
            ms(python),
            python.as_secs_f64() / show_time.as_secs_f64()
        );
    }

    let args = [
        "--plain",
        "--continue",
        "--base-url",
        "http://127.0.0.1:9/v1",
    ];
    let plain: Vec<_> = (0..REPEAT)
        .map(|_| timed_peak(&big, &args, "(resumed the conversation of"))
        .collect();
    let plain_time = median(plain.iter().map(|(d, _, _)| *d).collect());
    let plain_exit = median(plain.iter().map(|(_, d, _)| *d).collect());
    let plain_peak = plain.iter().map(|(_, _, kib)| *kib).max().unwrap_or(0);
    println!(
        "reprise --plain --continue, {mb:.1} MB, until the resumed line is printed: median {} ({:.2}x the first load); to exit at end of input: median {}",
        ms(plain_time),
        plain_time.as_secs_f64() / first_load.as_secs_f64(),
        ms(plain_exit)
    );
    println!(
        "  peak RSS: {:.1} MiB ({:.2}x the file)",
        plain_peak as f64 / 1024.0,
        plain_peak as f64 * 1024.0 / len as f64
    );
    let full: Vec<_> = (0..REPEAT).map(|_| full_screen_continue(&big)).collect();
    let full_time = median(full.iter().map(|(d, _)| *d).collect());
    let full_peak = full.iter().map(|(_, kib)| *kib).max().unwrap_or(0);
    println!(
        "reprise --continue full screen, {mb:.1} MB, until the resumed line is on screen: median {}",
        ms(full_time)
    );
    println!(
        "  peak RSS: {:.1} MiB ({:.2}x the file)",
        full_peak as f64 / 1024.0,
        full_peak as f64 * 1024.0 / len as f64
    );
    if let Some(before) = std::env::var_os("REPRISE_BENCH_BEFORE") {
        against_before(Path::new(&before), &big, &show_args, mb);
    }
}

/// `show --json`, `--plain --continue` and the full screen's `--continue` of this
/// build and of `before`, in alternating rounds: the same run, the same load.
fn against_before(before: &Path, cwd: &Path, show_args: &[&str], mb: f64) {
    let this = Path::new(binary());
    let plain_args = [
        "--plain",
        "--continue",
        "--base-url",
        "http://127.0.0.1:9/v1",
    ];
    let marker = "(resumed the conversation of";
    let (mut show, mut plain, mut full) = ([vec![], vec![]], [vec![], vec![]], [vec![], vec![]]);
    for _ in 0..REPEAT {
        for (side, binary) in [this, before].into_iter().enumerate() {
            show[side].push(timed_output_of(binary, cwd, show_args).0);
            plain[side].push(timed_peak_of(binary, cwd, &plain_args, marker).0);
            full[side].push(full_screen_until_of(binary, cwd, marker).0);
        }
    }
    for (what, [now, then]) in [
        ("show --json", show),
        ("--plain --continue to the resumed line", plain),
        ("--continue full screen to the resumed line", full),
    ] {
        let (now, then) = (median(now), median(then));
        println!(
            "  {what}, {mb:.1} MB: this build median {}, {} median {} (this build {:.2}x its time)",
            ms(now),
            before.display(),
            ms(then),
            now.as_secs_f64() / then.as_secs_f64()
        );
    }
}

/// The seed's Python `load`: every line of the file through `json.loads`, in a fresh
/// `python3`, timed around the whole process (median of [`REPEAT`]); `None` without
/// python3.
fn python_load(file: &Path, entries: usize) -> Option<Duration> {
    const LOAD: &str = "import sys, json\n\
        from pathlib import Path\n\
        messages = [json.loads(line) for line in Path(sys.argv[1]).read_text(encoding='utf-8').splitlines() if line]\n\
        print(len(messages))\n";
    let run = || {
        let start = Instant::now();
        let output = Command::new("python3")
            .args(["-c", LOAD])
            .arg(file)
            .output()
            .ok()?;
        let took = start.elapsed();
        let count: usize = String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse()
            .ok()?;
        // The conversation file also holds the session's header line.
        assert!(count >= entries, "python read {count} lines");
        Some(took)
    };
    run()?;
    let samples: Option<Vec<_>> = (0..REPEAT).map(|_| run()).collect();
    Some(median(samples?))
}

/// Runs a command to its end; when `marker` first appeared on its stderr (plain mode
/// on a pipe keeps stdout for the replies), its wall time, and its own peak RSS
/// (KiB, see [`PeakWatch`]).
fn timed_peak(cwd: &Path, args: &[&str], marker: &str) -> (Duration, Duration, u64) {
    timed_peak_of(Path::new(binary()), cwd, args, marker)
}

/// [`timed_peak`] of another build of `reprise`.
fn timed_peak_of(
    binary: &Path,
    cwd: &Path,
    args: &[&str],
    marker: &str,
) -> (Duration, Duration, u64) {
    let start = Instant::now();
    let mut child = command_of(binary, cwd, args).spawn().unwrap();
    let peak = PeakWatch::of(child.id());
    let mut out = Vec::new();
    let mut stderr = child.stderr.take().unwrap();
    let mut buffer = [0u8; 65536];
    let mut shown = None;
    loop {
        let n = stderr.read(&mut buffer).unwrap();
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buffer[..n]);
        if shown.is_none() && String::from_utf8_lossy(&out).contains(marker) {
            shown = Some(start.elapsed());
        }
    }
    let status = child.wait().unwrap();
    let elapsed = start.elapsed();
    assert!(status.success(), "{args:?} failed");
    let shown = shown.expect("the marker was never printed");
    (shown, elapsed, peak.finish())
}

/// A run of short turns of about `bytes` whose last compaction is near the end: its
/// `through` is the reply 40 entries before the compaction entry, which records the
/// counts of every reply before it (`usage_before`), as the agent writes it; 20 more
/// entries follow it.
async fn make_compacted_run(runs_dir: &Path, bytes: u64) -> BigRun {
    const KEPT: usize = 40;
    const AFTER: usize = 20;
    // About 520 bytes a line (measured on the first batch below).
    let per_entry = 520u64;
    let before = ((bytes / per_entry) as usize).max(2 * KEPT) & !1;
    let mut counts = (0u64, 0u64, 0u64);
    let mut through = None;
    let mut done = false;
    write_big_run(runs_dir, |i| {
        if done {
            return Vec::new();
        }
        if i < before {
            let batch: Vec<Entry> = (i..(i + 2000).min(before)).map(short_turn_entry).collect();
            for entry in &batch {
                if let Some(usage) = entry.usage.as_ref().and_then(|u| u.counts()) {
                    counts.0 += usage.prompt_tokens;
                    counts.1 += usage.completion_tokens;
                    counts.2 += usage.total_tokens;
                }
            }
            if i + batch.len() == before {
                // The reply KEPT entries before the end (odd entries are replies).
                through = batch
                    .iter()
                    .rev()
                    .nth(KEPT - 1)
                    .map(|entry| entry.uuid)
                    .or(through);
            }
            return batch;
        }
        done = true;
        let mut compaction = reprise_session::Compaction {
            summary: "The person and the assistant went through the parser's records,                       the schema check and the report of rejected rows; the strict mode                       stops at the first bad row."
                .repeat(8),
            through: through.expect("a reply to compact through"),
            tokens_before: 120_000,
            tokens_after: 9_000,
        }
        .to_entry();
        compaction.extra.insert(
            reprise_agent::USAGE_BEFORE_FIELD.to_owned(),
            serde_json::json!({
                "prompt_tokens": counts.0,
                "completion_tokens": counts.1,
                "total_tokens": counts.2,
            }),
        );
        let mut batch = vec![compaction];
        batch.extend((before..before + AFTER).map(short_turn_entry));
        batch
    })
    .await
}

/// `--continue` of compacted sessions of 10 MB, 1 GB and (with
/// `REPRISE_BENCH_10GB=1`) 10 GB, side by side: time to the resumed line and peak
/// RSS, plain and full screen.
async fn resume_bench(root: &Path) {
    let mut sizes = vec![10_000_000u64, 1_000_000_000];
    if std::env::var_os("REPRISE_BENCH_10GB").is_some() {
        sizes.push(10_000_000_000);
    }
    let mut folders = Vec::new();
    for bytes in sizes {
        let cwd = root.join(format!("compacted-{bytes}"));
        std::fs::create_dir_all(cwd.join("xdg")).unwrap();
        let setup = Instant::now();
        let run = make_compacted_run(&cwd.join(".run"), bytes).await;
        println!(
            "setup: {:.1} MB compacted run of {} entries written in {}",
            run.len as f64 / 1e6,
            run.entries,
            ms(setup.elapsed())
        );
        folders.push((cwd, run.len));
    }
    let args = [
        "--plain",
        "--continue",
        "--base-url",
        "http://127.0.0.1:9/v1",
    ];
    // Alternating rounds over the sizes, so that a burst of load falls on all.
    let mut plain = vec![Vec::new(); folders.len()];
    let mut full = vec![Vec::new(); folders.len()];
    for (cwd, _) in &folders {
        let _ = timed_peak(cwd, &args, "(resumed the conversation of");
    }
    for _ in 0..REPEAT {
        for (at, (cwd, _)) in folders.iter().enumerate() {
            plain[at].push(timed_peak(cwd, &args, "(resumed the conversation of"));
            full[at].push(full_screen_continue(cwd));
        }
    }
    for (at, (_, len)) in folders.iter().enumerate() {
        let mb = *len as f64 / 1e6;
        let plain_time = median(plain[at].iter().map(|(d, _, _)| *d).collect());
        let plain_peak = plain[at].iter().map(|(_, _, kib)| *kib).max().unwrap_or(0);
        let full_time = median(full[at].iter().map(|(d, _)| *d).collect());
        let full_peak = full[at].iter().map(|(_, kib)| *kib).max().unwrap_or(0);
        println!(
            "compacted run, {mb:.1} MB: --plain --continue to the resumed line: median {}, peak RSS {:.1} MiB; full screen: median {}, peak RSS {:.1} MiB",
            ms(plain_time),
            plain_peak as f64 / 1024.0,
            ms(full_time),
            full_peak as f64 / 1024.0
        );
    }
}

/// Run folders for the listing at scale: `count` more runs under `runs_dir`, named
/// after start times a minute apart from `first` on, each as the chat leaves it
/// (`session.log`, a conversation of a prompt and a reply, `session.json` and
/// `.summary.json` written by the run store). Folders are made directly:
/// `create_run_folder` looks through the whole runs folder for leftovers each time.
fn make_listed_runs(runs_dir: &Path, first: usize, count: usize) {
    const THREADS: usize = 8;
    std::fs::create_dir_all(runs_dir).unwrap();
    let start = jiff::Timestamp::from_second(1_780_000_000).unwrap();
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            scope.spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                for n in (first + t..first + count).step_by(THREADS) {
                    let at = start
                        .checked_add(jiff::SignedDuration::from_secs(n as i64 * 60))
                        .unwrap();
                    let dir = runs_dir.join(at.strftime("%Y-%m-%dT%H-%M-%S-%3fZ").to_string());
                    std::fs::create_dir(&dir).unwrap();
                    std::fs::write(dir.join("session.log"), "").unwrap();
                    let store = RunStore::with_durability(&dir, Durability::None);
                    let key = SessionKey::session(&uuid::Uuid::now_v7().to_string()).unwrap();
                    let entries = [
                        Entry::message(Message::user(format!(
                            "question number {n} about something"
                        ))),
                        Entry::message(Message::assistant(format!("answer number {n}"))),
                    ];
                    runtime.block_on(store.append(&key, &entries)).unwrap();
                }
            });
        }
    });
}

/// `reprise runs --json` (and the table) over 10,000 and 100,000 runs, the list
/// cache warm, against the process start and `list_runs` in this process: medians
/// of alternating rounds.
fn listing_bench(root: &Path) {
    let before = std::env::var_os("REPRISE_BENCH_BEFORE").map(std::path::PathBuf::from);
    let many = root.join("listed");
    let runs_dir = many.join(".run");
    std::fs::create_dir_all(many.join("xdg")).unwrap();
    let mut made = 0;
    for count in [10_000, 100_000] {
        let setup = Instant::now();
        make_listed_runs(&runs_dir, made, count - made);
        made = count;
        println!("setup: {count} runs written in {}", ms(setup.elapsed()));
        // Old enough to be cached (the cache leaves out files changed within the
        // last second), then a listing that caches them all.
        std::thread::sleep(Duration::from_millis(1100));
        let _ = timed(&many, &["runs"]);
        let listed = reprise_runs::list_runs(&runs_dir).unwrap();
        assert_eq!(listed.runs.len(), count);
        let mut samples: [Vec<Duration>; 4] = Default::default();
        let mut before_samples = Vec::new();
        let mut printed = 0;
        for _ in 0..REPEAT {
            if let Some(before) = &before {
                let (took, _, out) = timed_output_of(before, &many, &["runs", "--json"]);
                assert!(out > 0);
                before_samples.push(took);
            }
            samples[0].push(timed(&many, &["--version"]).0);
            let start = Instant::now();
            let _ = reprise_runs::list_runs(&runs_dir).unwrap();
            samples[1].push(start.elapsed());
            samples[2].push(timed(&many, &["runs"]).0);
            let (took, _, out) = timed_output(&many, &["runs", "--json"]);
            samples[3].push(took);
            printed = out;
        }
        let [version, in_process, table, json] = samples.map(median);
        println!(
            "{count} runs: reprise runs --json median {} ({printed} bytes); reprise runs median {}; list_runs in the bench process median {}; reprise --version median {}",
            ms(json),
            ms(table),
            ms(in_process),
            ms(version)
        );
        if let Some(before) = &before {
            let before_json = median(before_samples);
            println!(
                "{count} runs: reprise runs --json of {} median {} ({:.2}x this build)",
                before.display(),
                ms(before_json),
                before_json.as_secs_f64() / json.as_secs_f64()
            );
        }
    }
}

#[tokio::main]
async fn main() {
    if let (Ok(dir), Ok(id)) = (std::env::var(CHILD_LOAD_DIR), std::env::var(CHILD_LOAD_KEY)) {
        return child_load(&dir, &id).await;
    }
    let temporary = tempfile::tempdir().unwrap();
    let kept = std::env::var_os("REPRISE_BENCH_KEEP").map(std::path::PathBuf::from);
    let root = kept.as_deref().unwrap_or(temporary.path());
    std::fs::create_dir_all(root).unwrap();
    let only = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    if only.as_deref() == Some("short") {
        return short_bench(root).await;
    }
    if only.as_deref() == Some("listing") {
        return listing_bench(root);
    }
    if only.as_deref() == Some("resume") {
        return resume_bench(root).await;
    }
    if only.as_deref() != Some("small") {
        big_bench(root).await;
    }
    if only.as_deref() == Some("big") {
        return;
    }
    let many = root.join("many");
    std::fs::create_dir_all(many.join("xdg")).unwrap();
    let setup = Instant::now();
    make_runs(&many.join(".run"), RUNS);
    println!("setup: {RUNS} runs written in {}", ms(setup.elapsed()));
    let listed = reprise_runs::list_runs(&many.join(".run")).unwrap();
    assert_eq!(listed.runs.len(), RUNS);
    let in_process: Vec<_> = (0..REPEAT)
        .map(|_| {
            let start = Instant::now();
            let _ = reprise_runs::list_runs(&many.join(".run")).unwrap();
            start.elapsed()
        })
        .collect();

    let _ = timed(&many, &["runs"]); // warm the page cache
    let version: Vec<_> = (0..REPEAT)
        .map(|_| timed(&many, &["--version"]).0)
        .collect();
    let runs: Vec<_> = (0..REPEAT).map(|_| timed(&many, &["runs"]).0).collect();
    let json: Vec<_> = (0..REPEAT)
        .map(|_| timed(&many, &["runs", "--json"]).0)
        .collect();
    println!(
        "reprise --version (process start only): median {}",
        ms(median(version))
    );
    println!(
        "reprise runs, {RUNS} runs:               median {}",
        ms(median(runs))
    );
    println!(
        "reprise runs --json, {RUNS} runs:        median {}",
        ms(median(json))
    );
    println!(
        "  of which list_runs (in the bench process): median {}",
        ms(median(in_process))
    );

    let long = root.join("long");
    std::fs::create_dir_all(long.join("xdg")).unwrap();
    make_long_run(&long.join(".run"), MESSAGES).await;
    let args = [
        "--plain",
        "--continue",
        "--base-url",
        "http://127.0.0.1:9/v1",
    ];
    let _ = timed(&long, &args);
    let mut plain = Vec::new();
    let mut peak = 0;
    for _ in 0..REPEAT {
        let (elapsed, rss) = timed(&long, &args);
        plain.push(elapsed);
        peak = peak.max(rss);
    }
    println!(
        "reprise --plain --continue, {MESSAGES} messages (redraw printed, session loaded, exit): median {}",
        ms(median(plain))
    );
    let full: Vec<_> = (0..REPEAT).map(|_| full_screen_continue(&long)).collect();
    let chat_peak = full.iter().map(|(_, hwm)| *hwm).max().unwrap_or(0);
    println!(
        "reprise --continue full-screen, {MESSAGES} messages, until the resumed line is on screen: median {}",
        ms(median(full.iter().map(|(d, _)| *d).collect()))
    );
    println!(
        "peak RSS of the full-screen chat with the {MESSAGES}-message run open: {:.1} MiB",
        chat_peak as f64 / 1024.0
    );
    println!(
        "peak RSS of any reprise process waited for so far (runs, --plain --continue): {:.1} MiB",
        peak as f64 / 1024.0
    );
    listing_bench(root);
}
