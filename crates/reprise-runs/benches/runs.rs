//! `list_runs` over 10,000 runs, with small conversations and with each
//! conversation 100x larger: warm (page cache warm and `.list-cache` present) and
//! cold (no `.list-cache`: every run's `.summary.json` is read and the cache
//! written). Each run is made as the chat makes it: `session.json` and a conversation,
//! then an append through the run store, which writes `.summary.json`. The listing
//! reads only the summaries, so the two sizes should match. Floors for comparison:
//! reading every `session.json`, and a bare stat of every one. Prints its figures; run
//! with `cargo bench -p reprise-runs --bench runs`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed test or bench run

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use reprise_runs::LIST_CACHE;
use reprise_runs::{RunStore, list_runs};
use reprise_runs::{SESSION_JSON, SessionJson};
use reprise_session::{Durability, Entry, Message, SessionKey, SessionStore};

const RUNS: usize = 10_000;
const ROUNDS: usize = 15;

fn conversation(messages: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for n in 0..messages {
        let message = if n % 2 == 0 {
            Message::user(format!("question {n}: {}", "lorem ipsum dolor ".repeat(8)))
        } else {
            Message::assistant(format!("answer {n}: {}", "sit amet consectetur ".repeat(8)))
        };
        out.extend(serde_json::to_vec(&Entry::message(message)).unwrap_or_default());
        out.push(b'\n');
    }
    out
}

fn make_runs(dir: &Path, conversation: &[u8]) {
    fs::create_dir_all(dir).expect("create bench dir");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let start = Timestamp::from_second(1_780_000_000).expect("timestamp");
    for n in 0..RUNS {
        let at = start
            .checked_add(jiff::SignedDuration::from_secs(n as i64 * 60))
            .expect("time");
        let run = dir.join(format!("{}", at.strftime("%Y-%m-%dT%H-%M-%S-%3fZ")));
        fs::create_dir(&run).expect("create run");
        fs::write(run.join("session.log"), "> hi\nhello\n").expect("write log");
        fs::write(run.join("conversation.jsonl"), conversation).expect("write conversation");
        let meta = SessionJson {
            session_id: format!("session-{n}"),
            updated_at: Some(at),
            last_message: Some(format!("question {n}: what now?")),
            message_count: 4,
            ..SessionJson::default()
        };
        fs::write(
            run.join(SESSION_JSON),
            serde_json::to_vec(&meta).expect("encode"),
        )
        .expect("write session.json");
        // The person's next message, through the store: it writes `.summary.json`.
        let store = RunStore::with_durability(&run, Durability::None);
        let key = SessionKey::session(&format!("session-{n}")).expect("key");
        let next = Entry::message(Message::user(format!("question {n}: what now?")));
        runtime
            .block_on(store.append(&key, &[next]))
            .expect("append");
    }
}

fn time_list(dir: &Path) -> Duration {
    let started = Instant::now();
    let list = list_runs(dir).expect("list_runs");
    let elapsed = started.elapsed();
    assert_eq!(list.runs.len(), RUNS);
    elapsed
}

/// The floor for comparison: list the folder and `fs::read` every `session.json`,
/// on one thread, parsing nothing.
fn time_bare_reads(dir: &Path) -> Duration {
    let started = Instant::now();
    let mut bytes = 0;
    for entry in fs::read_dir(dir).expect("read_dir") {
        let entry = entry.expect("entry");
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path().join(SESSION_JSON);
        bytes += fs::read(path).expect("read").len();
    }
    let elapsed = started.elapsed();
    assert!(bytes > 0);
    elapsed
}

/// A listing without the cache: it is removed first, and the listing writes it anew.
fn time_cold_list(dir: &Path) -> Duration {
    fs::remove_file(dir.join(LIST_CACHE)).expect("remove the list cache");
    time_list(dir)
}

/// The floor of a cached listing: list the folder and stat every `session.json`, on
/// one thread, reading nothing.
fn time_bare_stats(dir: &Path) -> Duration {
    let started = Instant::now();
    let mut bytes = 0;
    for entry in fs::read_dir(dir).expect("read_dir") {
        let entry = entry.expect("entry");
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        bytes += fs::metadata(entry.path().join(SESSION_JSON))
            .expect("stat")
            .len();
    }
    let elapsed = started.elapsed();
    assert!(bytes > 0);
    elapsed
}

/// CPU time this process has used (user + system, all threads, dead ones included),
/// from `/proc/self/stat`, in clock ticks of 10 ms (`getconf CLK_TCK` = 100).
/// Unlike wall time it does not grow when other processes hold the CPUs.
fn cpu_time() -> CpuTime {
    let stat = fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<u64> = after
        .split_whitespace()
        .map(|field| field.parse().unwrap_or(0))
        .collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after `) `.
    let tick = |n: usize| Duration::from_millis(fields.get(n).copied().unwrap_or(0) * 10);
    CpuTime {
        user: tick(11),
        system: tick(12),
    }
}

#[derive(Clone, Copy, Default)]
struct CpuTime {
    user: Duration,
    system: Duration,
}

impl std::ops::Sub for CpuTime {
    type Output = CpuTime;
    fn sub(self, other: CpuTime) -> CpuTime {
        CpuTime {
            user: self.user.saturating_sub(other.user),
            system: self.system.saturating_sub(other.system),
        }
    }
}

impl std::ops::AddAssign for CpuTime {
    fn add_assign(&mut self, other: CpuTime) {
        self.user += other.user;
        self.system += other.system;
    }
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn main() {
    let root: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/bench-tmp")
        .join(format!("runs-{}", std::process::id()));
    let small_dir = root.join("small");
    let large_dir = root.join("large");
    let small = conversation(4);
    let large = small.repeat(100);
    let made = Instant::now();
    make_runs(&small_dir, &small);
    make_runs(&large_dir, &large);
    println!(
        "generated 2 x {RUNS} runs in {:.1} s: conversation {} bytes (small) and {} bytes (100x)",
        made.elapsed().as_secs_f64(),
        small.len(),
        large.len()
    );

    // Files changed within the last second are never cached (see run_list_cache), so
    // let the newest ones age first.
    std::thread::sleep(Duration::from_millis(1100));
    // Warm both trees, then alternate so that noise hits both alike.
    for _ in 0..2 {
        time_list(&small_dir);
        time_list(&large_dir);
    }
    let mut small_times = Vec::new();
    let mut large_times = Vec::new();
    let mut bare_times = Vec::new();
    let (mut small_cpu, mut large_cpu) = (CpuTime::default(), CpuTime::default());
    let mut bare_cpu = CpuTime::default();
    let (mut cold_small, mut cold_large, mut stat_times) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        cold_small.push(time_cold_list(&small_dir));
        cold_large.push(time_cold_list(&large_dir));
        stat_times.push(time_bare_stats(&small_dir));
        let before = cpu_time();
        small_times.push(time_list(&small_dir));
        let middle = cpu_time();
        large_times.push(time_list(&large_dir));
        large_cpu += cpu_time() - middle;
        small_cpu += middle - before;
        let before_bare = cpu_time();
        bare_times.push(time_bare_reads(&small_dir));
        bare_cpu += cpu_time() - before_bare;
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "machine: {threads} CPUs, load average {}",
        fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "floor: read_dir + fs::read of every session.json, one thread: median {:.1} ms",
        ms(median(bare_times))
    );
    println!(
        "floor: read_dir + stat of every session.json, one thread: median {:.1} ms",
        ms(median(stat_times))
    );
    println!(
        "cache file: {} bytes for {RUNS} runs",
        fs::metadata(small_dir.join(LIST_CACHE)).map_or(0, |m| m.len())
    );
    println!(
        "cold list_runs (no cache; reads all, writes the cache): small median {:.1} ms, 100x median {:.1} ms",
        ms(median(cold_small)),
        ms(median(cold_large))
    );
    let (small_min, large_min) = (
        *small_times.iter().min().expect("rounds"),
        *large_times.iter().min().expect("rounds"),
    );
    let (small_med, large_med) = (median(small_times), median(large_times));
    println!(
        "warm list_runs over {RUNS} runs, small conversations: median {:.1} ms, min {:.1} ms (target <= 100 ms)",
        ms(small_med),
        ms(small_min)
    );
    println!(
        "warm list_runs over {RUNS} runs, conversations 100x larger: median {:.1} ms, min {:.1} ms",
        ms(large_med),
        ms(large_min)
    );
    let per_round = |d: Duration| ms(d) / ROUNDS as f64;
    println!(
        "CPU time per warm list_runs (all threads, mean of {ROUNDS}): small {:.1} ms user + {:.1} ms system, \
         100x {:.1} ms user + {:.1} ms system",
        per_round(small_cpu.user),
        per_round(small_cpu.system),
        per_round(large_cpu.user),
        per_round(large_cpu.system)
    );
    println!(
        "CPU time of the floor: {:.1} ms user + {:.1} ms system",
        per_round(bare_cpu.user),
        per_round(bare_cpu.system)
    );
    println!(
        "warm ratio large/small: median {:.2}x, min {:.2}x (target <= 1.5x)",
        ms(large_med) / ms(small_med),
        ms(large_min) / ms(small_min)
    );
    if let Err(error) = fs::remove_dir_all(&root) {
        eprintln!("could not remove {}: {error}", root.display());
    }
}
