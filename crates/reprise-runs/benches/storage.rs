//! Storage benchmark: prints its figures (no assertions; the machine is shared).
//!
//! - durable append of a ~1 KB entry vs a bare `write` + `fdatasync` of the same bytes
//! - load of a 100 MB session of coding-agent turns, and of a 40 MB one of plain prose
//!   (MB/s, CPU time, and peak memory measured in a child process), with the fast
//!   entry decoder and with serde's derived one alone, in turn
//! - fork of a 100 MB session vs `std::fs::copy` (with the default durability the fork's
//!   data is synced in the background after it returns; `copy + sync_all` is printed
//!   for scale)
//!
//! Temp files go under `target/bench-tmp` (not /tmp). Run with
//! `cargo bench -p reprise-runs --bench storage`, optionally followed by `--` and
//! the sections to run (`append`, `load`, `fork`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed test or bench run

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reprise_runs::create_run_store;
use reprise_session::{
    Durability, Entry, FileSessionStore, Message, SessionFork, SessionKey, SessionStore,
};
use reprise_session::{JsonlWriter, load_file};
use reprise_testkit::coding_agent_entry;

const CHILD_ENV: &str = "REPRISE_STORAGE_BENCH_CHILD";
const SESSION_MB: u64 = 100;

fn bench_dir() -> PathBuf {
    // CARGO_MANIFEST_DIR is crates/reprise-session; the shared target dir is two up.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/bench-tmp/storage")
        .canonicalize()
        .unwrap_or_else(|_| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../target/bench-tmp/storage"
            ))
        });
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn vm_hwm_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn vm_rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// A ~1 KB user entry.
fn kilobyte_entry(i: usize) -> Entry {
    let text = format!("message {i}: {}", "lorem ipsum dolor sit amet, ".repeat(35));
    Entry::message(Message::user(text))
}

/// The append variants: bare, writer, store, run store, store from a task, run store
/// through the held runs folder.
const VARIANTS: usize = 6;

fn append_bench(dir: &Path) {
    println!("## durable append of a ~1 KB entry (Durability::Full: write + fdatasync)");
    let rounds = 401;
    let entries: Vec<Entry> = (0..rounds * VARIANTS).map(kilobyte_entry).collect();
    let line_len = serde_json::to_vec(&entries[0]).unwrap().len() + 1;
    println!("entry line: {line_len} bytes, {rounds} appends per variant, interleaved");

    let bare_path = dir.join("bare.jsonl");
    let writer_path = dir.join("writer.jsonl");
    let store_dir = dir.join("store");
    let task_dir = dir.join("store-in-task");
    let run_dir = dir.join("run");
    let held_dir = dir.join("held-run");
    for path in [&bare_path, &writer_path] {
        let _ = std::fs::remove_file(path);
    }
    let _ = std::fs::remove_dir_all(&store_dir);
    let _ = std::fs::remove_dir_all(&task_dir);
    let _ = std::fs::remove_dir_all(&run_dir);
    let _ = std::fs::remove_dir_all(&held_dir);

    let mut bare = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&bare_path)
        .unwrap();
    let mut writer = JsonlWriter::new(&writer_path, "bench", Durability::Full);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let store = FileSessionStore::new(&store_dir);
    let in_task = FileSessionStore::new(&task_dir);
    let run = create_run_store(&run_dir);
    // As the chat opens its run (made by `create_run_folder` when the chat starts):
    // through a held handle on the runs folder.
    std::fs::create_dir_all(&held_dir).unwrap();
    let held = create_run_store(reprise_runs::held::through_held(&held_dir));
    let key = SessionKey::session("bench").unwrap();
    let (_store_lock, _task_lock, _run_lock, _held_lock) = runtime.block_on(async {
        (
            store.lock("bench").await.unwrap(),
            in_task.lock("bench").await.unwrap(),
            run.lock("bench").await.unwrap(),
            held.lock("bench").await.unwrap(),
        )
    });
    // Warm up: create every file.
    writer.append(&entries[..1]).unwrap();
    runtime.block_on(store.append(&key, &entries[..1])).unwrap();
    runtime
        .block_on(in_task.append(&key, &entries[..1]))
        .unwrap();
    runtime.block_on(run.append(&key, &entries[..1])).unwrap();
    runtime.block_on(held.append(&key, &entries[..1])).unwrap();

    // Blocks of consecutive appends per variant, alternated: interleaving single
    // appends would let one file's fdatasync pay for another's pending metadata.
    let shared = Arc::new(entries.clone());
    let mut rounds_times: Vec<[Duration; VARIANTS]> = Vec::new();
    let block = 20;
    let mut next = 1;
    for round in 0..(rounds - 1) / block {
        let mut times = [Duration::ZERO; VARIANTS];
        for step in 0..times.len() {
            // The order rotates from round to round: no variant always runs first.
            let variant = (round + step) % times.len();
            let time = &mut times[variant];
            let start = Instant::now();
            if variant == 4 {
                // From a task on a runtime worker, as an agent spawned with
                // `tokio::spawn` appends.
                let store = in_task.clone();
                let (key, block_entries) = (key.clone(), Arc::clone(&shared));
                let task = runtime.spawn(async move {
                    for i in next..next + block {
                        let entry = &block_entries[i * VARIANTS + 4..i * VARIANTS + 5];
                        store.append(&key, entry).await.unwrap();
                    }
                });
                runtime.block_on(task).unwrap();
                *time += start.elapsed();
                continue;
            }
            for i in next..next + block {
                let entry = &entries[i * VARIANTS + variant..i * VARIANTS + variant + 1];
                match variant {
                    0 => {
                        let mut bytes = serde_json::to_vec(&entry[0]).unwrap();
                        bytes.push(b'\n');
                        bare.write_all(&bytes).unwrap();
                        bare.sync_data().unwrap();
                    }
                    1 => {
                        writer.append(entry).unwrap();
                    }
                    2 => {
                        runtime.block_on(store.append(&key, entry)).unwrap();
                    }
                    3 => {
                        runtime.block_on(run.append(&key, entry)).unwrap();
                    }
                    _ => {
                        runtime.block_on(held.append(&key, entry)).unwrap();
                    }
                }
            }
            *time += start.elapsed();
        }
        rounds_times.push(times);
        next += block;
    }
    println!(
        "{} rounds of {block} appends per variant; ratio = total time / bare total time; \
         median = median over rounds of (variant / bare in the same round)",
        rounds_times.len()
    );
    print_ratios(
        &rounds_times,
        block,
        &[
            (1, "JsonlWriter::append"),
            (2, "FileSessionStore::append (lock held)"),
            (4, "FileSessionStore::append from a spawned task"),
            (3, "RunStore::append (lock held, 1 KB user messages)"),
            (
                5,
                "RunStore::append through the held runs folder, as the chat opens it",
            ),
        ],
    );
    println!();
}

/// Prints each variant's mean time per append and its ratio to variant 0 (the bare
/// write + fdatasync): over the totals, and the median of the per-round ratios, which
/// a burst of noise in one round cannot move.
fn print_ratios<const N: usize>(
    rounds: &[[Duration; N]],
    per_round: usize,
    names: &[(usize, &str)],
) {
    let total = |variant: usize| rounds.iter().map(|r| r[variant]).sum::<Duration>();
    let per = |d: Duration| d.as_secs_f64() * 1e6 / (rounds.len() * per_round) as f64;
    let base = per(total(0));
    println!("bare write+fdatasync (encode included):          {base:8.1} µs per append");
    for &(variant, name) in names {
        let mut ratios: Vec<f64> = rounds
            .iter()
            .map(|r| r[variant].as_secs_f64() / r[0].as_secs_f64())
            .collect();
        ratios.sort_by(f64::total_cmp);
        let mean = per(total(variant));
        println!(
            "{name:48} {mean:8.1} µs  ratio {:.3}x  median {:.3}x",
            mean / base,
            ratios[ratios.len() / 2]
        );
    }
}

/// `RunStore::append` over whole turns (user, assistant with a tool call, tool result,
/// assistant answer), one entry per append as the agent loop writes them, vs a bare
/// write + fdatasync of the same lines.
fn turn_mix_bench(dir: &Path) {
    println!("## durable append, realistic turn mix (user, tool call, tool result, answer)");
    let turns = 100;
    let entries: Vec<Entry> = (0..turns * 4).map(coding_agent_entry).collect();
    let bytes: usize = entries
        .iter()
        .map(|entry| serde_json::to_vec(entry).unwrap().len() + 1)
        .sum();
    println!(
        "{turns} turns = {} appends per variant, {} bytes per turn on average, blocks of 5 turns alternated",
        turns * 4,
        bytes / turns
    );
    let bare_path = dir.join("bare-turns.jsonl");
    let run_dir = dir.join("run-turns");
    let _ = std::fs::remove_file(&bare_path);
    let _ = std::fs::remove_dir_all(&run_dir);
    let mut bare = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&bare_path)
        .unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let run = create_run_store(&run_dir);
    let task_dir = dir.join("run-turns-in-task");
    let _ = std::fs::remove_dir_all(&task_dir);
    let in_task = create_run_store(&task_dir);
    let key = SessionKey::session("bench").unwrap();
    let _lock = runtime.block_on(run.lock("bench")).unwrap();
    let _task_lock = runtime.block_on(in_task.lock("bench")).unwrap();
    // Warm up: create every file.
    let warm = Entry::message(Message::user("warm up"));
    bare.write_all(&serde_json::to_vec(&warm).unwrap()).unwrap();
    bare.write_all(b"\n").unwrap();
    bare.sync_data().unwrap();
    runtime
        .block_on(run.append(&key, std::slice::from_ref(&warm)))
        .unwrap();
    runtime.block_on(in_task.append(&key, &[warm])).unwrap();
    let writer_path = dir.join("writer-turns.jsonl");
    let _ = std::fs::remove_file(&writer_path);
    let mut writer = JsonlWriter::new(&writer_path, "bench", Durability::Full);
    writer
        .append(&[Entry::message(Message::user("warm up"))])
        .unwrap();
    let mut rounds_times: Vec<[Duration; 4]> = Vec::new();
    let turns_per_round = 5;
    for (round, block) in entries.chunks(4 * turns_per_round).enumerate() {
        let mut times = [Duration::ZERO; 4];
        for step in 0..times.len() {
            // The order rotates from round to round: no variant always runs first.
            let variant = (round + step) % times.len();
            let time = &mut times[variant];
            let start = Instant::now();
            if variant == 2 {
                // From a task on a runtime worker, as the chat runs its turns.
                let (store, key, block) = (in_task.clone(), key.clone(), block.to_vec());
                let task = runtime.spawn(async move {
                    for entry in &block {
                        store
                            .append(&key, std::slice::from_ref(entry))
                            .await
                            .unwrap();
                    }
                });
                runtime.block_on(task).unwrap();
                *time += start.elapsed();
                continue;
            }
            for entry in block {
                if variant == 3 {
                    writer.append(std::slice::from_ref(entry)).unwrap();
                } else if variant == 0 {
                    let mut line = serde_json::to_vec(entry).unwrap();
                    line.push(b'\n');
                    bare.write_all(&line).unwrap();
                    bare.sync_data().unwrap();
                } else {
                    runtime
                        .block_on(run.append(&key, std::slice::from_ref(entry)))
                        .unwrap();
                }
            }
            *time += start.elapsed();
        }
        rounds_times.push(times);
    }
    print_ratios(
        &rounds_times,
        4 * turns_per_round,
        &[
            (3, "JsonlWriter::append (turn mix)"),
            (1, "RunStore::append (turn mix)"),
            (2, "RunStore::append (turn mix) from a spawned task"),
        ],
    );
    let _ = std::fs::remove_file(&bare_path);
    let _ = std::fs::remove_dir_all(&run_dir);
    let _ = std::fs::remove_dir_all(&task_dir);
    let _ = std::fs::remove_file(&writer_path);
    println!();
}

/// A second shape for the load figure: plain ASCII prose (no escapes), user and
/// assistant turns of a few hundred bytes to 2 KB.
fn prose_entry(i: usize) -> Entry {
    let sentence = "The report covers the quarter's sales by region, the changes in staffing \
                    and the plan for the next release, with the open questions listed at the end. ";
    let text = format!("Turn {i}: {}", sentence.repeat(2 + i % 12));
    if i.is_multiple_of(2) {
        Entry::message(Message::user(text))
    } else {
        Entry::message(Message::assistant(text))
    }
}

/// A session of `entry(0)`, `entry(1)`, … lines, about `mb` MB; an existing file of
/// that size is reused.
fn make_session(path: &Path, mb: u64, entry: fn(usize) -> Entry) -> u64 {
    let target = mb << 20;
    if std::fs::metadata(path).is_ok_and(|meta| meta.len() >= target) {
        return std::fs::metadata(path).unwrap().len();
    }
    let _ = std::fs::remove_file(path);
    let mut writer = JsonlWriter::new(path, "big", Durability::None);
    let mut i = 0;
    loop {
        let batch: Vec<Entry> = (i..i + 2000).map(entry).collect();
        i += 2000;
        writer.append(&batch).unwrap();
        let len = std::fs::metadata(path).unwrap().len();
        if len >= target {
            return len;
        }
    }
}

/// CPU time (user + system) this process has used, in seconds (10 ms ticks).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    (fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap()) / 100.0
}

/// Which entry decoder a load child uses, named in its environment.
const DECODER_ENV: &str = "REPRISE_STORAGE_BENCH_DECODER";

/// The decoders compared: the fast decoder with the derived one as fallback (what the
/// loader uses), and the derived one alone.
const DECODERS: [&str; 2] = ["fast", "serde"];

fn load_child(path: &Path) {
    let decoder = std::env::var(DECODER_ENV).unwrap_or_default();
    reprise_session::decode_with_serde_only(decoder == "serde");
    let before_hwm = vm_hwm_kb();
    let before_rss = vm_rss_kb();
    let cpu_before = cpu_seconds();
    let start = Instant::now();
    let loaded = load_file(path, "big").unwrap().unwrap();
    let elapsed = start.elapsed();
    let cpu = cpu_seconds() - cpu_before;
    let after_hwm = vm_hwm_kb();
    drop(loaded);
    // In the same process and moment, for scale: serde_json validating every line
    // (IgnoredAny, no values built, one thread) and the derived `Entry` decoder.
    let bytes = std::fs::read(path).unwrap();
    let lines: Vec<&[u8]> = bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    let start = Instant::now();
    for line in &lines {
        let _: serde::de::IgnoredAny = serde_json::from_slice(line).unwrap();
    }
    let validate = start.elapsed().as_secs_f64();
    let start = Instant::now();
    let derived: Vec<Entry> = lines
        .iter()
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    let derive = start.elapsed().as_secs_f64();
    drop(derived);
    // And the loader again, now that the allocator has its memory.
    let start = Instant::now();
    let again = load_file(path, "big").unwrap().unwrap();
    let second = start.elapsed().as_secs_f64();
    drop(again);
    println!(
        "{} {} {} {} {} {} {} {} {}",
        lines.len(),
        elapsed.as_secs_f64(),
        before_hwm,
        before_rss,
        after_hwm,
        validate,
        derive,
        second,
        cpu
    );
}

fn load_bench(path: &Path, len: u64, shape: &str) {
    println!(
        "## load of a {} MB session of {shape} (load_file, warm page cache)",
        len >> 20
    );
    println!(
        "each run loads in two fresh processes, in turn first: `fast` (the fast decoder, \
         the derived one as fallback, as shipped) and `serde` (the derived decoder alone)"
    );
    let exe = std::env::current_exe().unwrap();
    let mb = len as f64 / (1 << 20) as f64;
    let mut best = [f64::MAX; 2];
    for run in 0..3 {
        let mut secs_of = [0.0; 2];
        for step in 0..DECODERS.len() {
            // The order alternates from run to run: neither always loads first.
            let which = (run + step) % DECODERS.len();
            let name = DECODERS[which];
            let output = std::process::Command::new(&exe)
                .env(CHILD_ENV, path)
                .env(DECODER_ENV, name)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&output.stdout);
            let fields: Vec<&str> = text.split_whitespace().collect();
            let entries: usize = fields[0].parse().unwrap();
            let secs: f64 = fields[1].parse().unwrap();
            let before_rss: u64 = fields[3].parse().unwrap();
            let after_hwm: u64 = fields[4].parse().unwrap();
            let validate: f64 = fields[5].parse().unwrap();
            let derive: f64 = fields[6].parse().unwrap();
            let second: f64 = fields[7].parse().unwrap();
            let cpu: f64 = fields[8].parse().unwrap();
            secs_of[which] = secs;
            best[which] = best[which].min(secs);
            let peak = (after_hwm.saturating_sub(before_rss)) as f64 / 1024.0;
            println!(
                "run {run} {name:5}: {entries} entries in {:.3} s = {:.0} MB/s (CPU time {:.2} s = {:.0} MB per CPU-second); peak memory above start {:.0} MB = {:.2}x file size (VmHWM {} MB)",
                secs,
                mb / secs,
                cpu,
                mb / cpu,
                peak,
                peak / mb,
                after_hwm / 1024
            );
            println!(
                "        same process: serde_json validating only (IgnoredAny, 1 thread) {:.0} MB/s; derived Entry decoder (1 thread) {:.0} MB/s; load_file again {:.0} MB/s",
                mb / validate,
                mb / derive,
                mb / second
            );
        }
        println!(
            "run {run}: serde alone / fast = {:.2}x the fast decoder's MB/s",
            secs_of[0] / secs_of[1]
        );
    }
    println!(
        "best: fast {:.0} MB/s, serde alone {:.0} MB/s ({:.2}x)",
        mb / best[0],
        mb / best[1],
        best[0] / best[1]
    );
    println!();
}

fn fork_bench(dir: &Path, source: &Path) {
    println!(
        "## fork of a {} MB session vs std::fs::copy",
        std::fs::metadata(source).unwrap().len() >> 20
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let store_dir = dir.join("forks");
    let _ = std::fs::remove_dir_all(&store_dir);
    std::fs::create_dir_all(&store_dir).unwrap();
    std::fs::copy(source, store_dir.join("src.jsonl")).unwrap();
    let copy_path = dir.join("copy.jsonl");
    let mut results: Vec<(&str, Vec<f64>)> = vec![
        ("std::fs::copy", vec![]),
        ("std::fs::copy + sync_all", vec![]),
        ("fork, Durability::Flush (no fsync)", vec![]),
        ("fork, Durability::Full (default)", vec![]),
    ];
    for round in 0..3 {
        let _ = std::fs::remove_file(&copy_path);
        let start = Instant::now();
        std::fs::copy(source, &copy_path).unwrap();
        results[0].1.push(start.elapsed().as_secs_f64());

        let _ = std::fs::remove_file(&copy_path);
        let start = Instant::now();
        std::fs::copy(source, &copy_path).unwrap();
        std::fs::File::open(&copy_path).unwrap().sync_all().unwrap();
        results[1].1.push(start.elapsed().as_secs_f64());

        for (slot, durability) in [(2, Durability::Flush), (3, Durability::Full)] {
            let store = FileSessionStore::with_durability(&store_dir, durability);
            let target = format!("fork-{round}-{slot}");
            let start = Instant::now();
            runtime
                .block_on(store.fork(SessionFork::whole("src", &target)))
                .unwrap();
            results[slot].1.push(start.elapsed().as_secs_f64());
            let _ = std::fs::remove_file(store_dir.join(format!("{target}.jsonl")));
        }
    }
    let best = |v: &Vec<f64>| v.iter().cloned().fold(f64::MAX, f64::min);
    let copy = best(&results[0].1);
    let copy_sync = best(&results[1].1);
    for (name, times) in &results {
        println!(
            "{name:38} best {:7.1} ms  vs copy {:.2}x  vs copy+sync {:.2}x",
            best(times) * 1e3,
            best(times) / copy,
            best(times) / copy_sync
        );
    }
    // Fork up to an entry near the end: the bytes are scanned for the uuid.
    let store = FileSessionStore::with_durability(&store_dir, Durability::Flush);
    let last = reprise_session::load_file(source, "src").unwrap().unwrap();
    let up_to = last.entries[last.entries.len() - 2].uuid;
    drop(last);
    let start = Instant::now();
    runtime
        .block_on(store.fork(SessionFork::up_to("src", "fork-prefix", up_to)))
        .unwrap();
    let prefix = start.elapsed().as_secs_f64();
    println!(
        "{:38} {:12.1} ms  vs copy {:.2}x",
        "fork up to an entry near the end, Flush",
        prefix * 1e3,
        prefix / copy
    );
    let _ = std::fs::remove_dir_all(&store_dir);
    let _ = std::fs::remove_file(&copy_path);
    println!();
}

fn main() {
    if let Ok(path) = std::env::var(CHILD_ENV) {
        load_child(Path::new(&path));
        return;
    }
    // `cargo bench` passes `--bench`; anything else (a test harness probe) is ignored.
    // Sections can be picked by name: `cargo bench --bench storage -- append load`.
    let picked: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with('-'))
        .collect();
    let wants = |name: &str| picked.is_empty() || picked.iter().any(|p| p == name);
    let dir = bench_dir();
    println!("bench files under {}", dir.display());
    if wants("append") {
        append_bench(&dir);
        turn_mix_bench(&dir);
    }
    let session = dir.join("big.jsonl");
    if wants("load") || wants("fork") {
        let len = make_session(&session, SESSION_MB, coding_agent_entry);
        if wants("load") {
            load_bench(
                &session,
                len,
                "coding-agent turns (tool results full of escapes)",
            );
            // A second shape, so that the figure is not one data shape's.
            let prose = dir.join("prose.jsonl");
            let prose_len = make_session(&prose, 40, prose_entry);
            load_bench(&prose, prose_len, "ASCII prose without escapes");
        }
        if wants("fork") {
            fork_bench(&dir, &session);
        }
    }
    // big.jsonl stays, so the next run skips generating it.
    let _ = std::fs::remove_dir_all(dir.join("store"));
    let _ = std::fs::remove_dir_all(dir.join("store-in-task"));
    let _ = std::fs::remove_dir_all(dir.join("run"));
    for name in ["bare.jsonl", "writer.jsonl"] {
        let _ = std::fs::remove_file(dir.join(name));
    }
}
