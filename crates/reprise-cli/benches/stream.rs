//! Figures for `reprise show` and `reprise export` of long sessions, printed (no
//! assertions): wall time and peak RSS (`VmHWM`, sampled) of `show`,
//! `show --tools`, `show --json`, and `export --format markdown|html|json`, on
//! sessions of three shapes:
//!
//! - short turns: the chat's own files (prompts and replies of about 300
//!   characters, `usage` and `model` on every reply);
//! - coding-agent turns: prompts, replies with a tool call, results of 2.7 KB;
//! - coding-agent turns with a rewind halfway (it takes 1,000 entries out of the
//!   model's view) and a compaction near the end, so that the output marks both.
//!
//! Each shape at 100 MB and at 1 GB (`REPRISE_BENCH_STREAM_MB=N` sets the larger
//! size), side by side in one run: the memory of a command that streams is the same
//! at both sizes. Beside each export at 100 MB, the way exports were made before
//! they streamed, in a fresh process of this bench: the run read whole
//! (`read_run_record`), its view built (`view_of`), rendered in one text and made
//! safe for the terminal. With `REPRISE_BENCH_BEFORE=BINARY` another build of
//! `reprise` runs the same commands at 100 MB in the same rounds (and at the larger
//! size too with `REPRISE_BENCH_BEFORE_LARGE=1`, as the whole-run exports: reading
//! the whole session takes several times its size in memory).
//!
//! Run with `cargo bench -p reprise-cli --bench stream`. With
//! `REPRISE_BENCH_KEEP=DIR` the runs are written under `DIR` and kept.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed bench run

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use reprise_runs::{RunStore, create_run_folder};
use reprise_session::{Durability, Entry, Rewind, SessionKey, SessionStore};
use reprise_testkit::peak::PeakWatch;
use reprise_testkit::{coding_agent_entry, short_turn_entry};

/// The commands measured, as their arguments after the run's name is added.
const COMMANDS: &[(&str, &[&str])] = &[
    ("show", &["show"]),
    ("show --tools", &["show", "--tools"]),
    ("show --json", &["show", "--json"]),
    ("export md", &["export", "--format", "markdown"]),
    ("export html", &["export", "--format", "html"]),
    ("export json", &["export", "--format", "json"]),
];

/// Runs `binary` with `args` in `cwd` to its end, its output read and dropped;
/// returns its wall time and its peak RSS in KiB, sampled from /proc while it runs
/// (not `ru_maxrss`, which carries this bench's own high-water mark into a child).
fn timed(binary: &Path, cwd: &Path, args: &[&str]) -> (Duration, u64) {
    timed_with(binary, cwd, args, &[])
}

/// [`timed`], with `envs` set for the child.
fn timed_with(binary: &Path, cwd: &Path, args: &[&str], envs: &[(&str, &str)]) -> (Duration, u64) {
    let start = Instant::now();
    let mut child = Command::new(binary)
        .args(args)
        .envs(envs.iter().copied())
        .current_dir(cwd)
        .env("XDG_CONFIG_HOME", cwd.join("xdg"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let peak = PeakWatch::of(child.id());
    let mut stdout = child.stdout.take().unwrap();
    let mut buffer = vec![0u8; 1 << 16];
    while stdout.read(&mut buffer).unwrap() > 0 {}
    let status = child.wait().unwrap();
    let elapsed = start.elapsed();
    let peak = peak.finish();
    assert!(status.success(), "{args:?} failed");
    (elapsed, peak)
}

/// The shapes of session measured.
#[derive(Clone, Copy, Debug)]
enum Shape {
    ShortTurns,
    CodingAgent,
    RewoundAndCompacted,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::ShortTurns => "short turns",
            Shape::CodingAgent => "coding agent",
            Shape::RewoundAndCompacted => "coding agent, rewind + compaction",
        }
    }
}

/// Writes a run of `shape` of about `bytes` into `runs_dir`; returns its size.
async fn make_run(runs_dir: &Path, shape: Shape, bytes: u64) -> u64 {
    let folder = create_run_folder(runs_dir).unwrap();
    let store = RunStore::with_durability(&folder.dir, Durability::None);
    let key = SessionKey::session(&uuid::Uuid::now_v7().to_string()).unwrap();
    let path = folder.dir.join("conversation.jsonl");
    let len = || std::fs::metadata(&path).map_or(0, |meta| meta.len());
    let entry = |i: usize| match shape {
        Shape::ShortTurns => short_turn_entry(i),
        _ => coding_agent_entry(i),
    };
    let mut written = 0;
    let mut rewound = false;
    let mut compacted = false;
    // The person's message 1,000 entries back, which the rewind goes back to.
    let mut rewind_to = None;
    while len() < bytes {
        let mut batch: Vec<Entry> = (written..written + 2000).map(entry).collect();
        written += batch.len();
        if matches!(shape, Shape::RewoundAndCompacted) {
            if !rewound && len() >= bytes / 2 {
                if let Some(to) = rewind_to {
                    batch.insert(
                        0,
                        Rewind {
                            to: Some(to),
                            files: None,
                            undo: None,
                            undoes: None,
                        }
                        .to_entry(),
                    );
                    rewound = true;
                } else {
                    // Entry 1,000 of this batch is a person's message (i % 4 == 0).
                    rewind_to = Some(batch[1000].uuid);
                }
            }
            if !compacted && len() >= bytes - bytes / 20 {
                let through = batch[0].uuid;
                let compaction = reprise_session::Compaction {
                    summary: "The person and the assistant fixed the failing tests one module \
                              at a time; `compute` now trims before counting."
                        .repeat(8),
                    through,
                    tokens_before: 120_000,
                    tokens_after: 9_000,
                }
                .to_entry();
                batch.insert(1, compaction);
                compacted = true;
            }
        }
        store.append(&key, &batch).await.unwrap();
    }
    len()
}

/// The one run folder of `runs_dir`.
fn only_run(runs_dir: &Path) -> PathBuf {
    std::fs::read_dir(runs_dir)
        .unwrap()
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.path())
        .find(|path| path.join("conversation.jsonl").exists())
        .unwrap()
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Set in a child process of this bench: export the run folder at this path the
/// way exports were made before they streamed, in the format of
/// [`CHILD_WHOLE_FORMAT`], to stdout.
const CHILD_WHOLE_DIR: &str = "REPRISE_STREAM_BENCH_WHOLE_DIR";
const CHILD_WHOLE_FORMAT: &str = "REPRISE_STREAM_BENCH_WHOLE_FORMAT";

/// The export of the run at `dir` from the run read whole, as `reprise export`
/// wrote it to a terminal before it streamed.
fn whole_export(dir: &Path, format: &str) {
    use reprise_cli::display::terminal::{visible, visible_json};
    use reprise_cli::export::{Masker, html, markdown, view_of};
    use std::io::Write;
    let run = reprise_runs::read_run_record(dir).unwrap();
    let mask = Masker::new(true);
    let text = match format {
        "markdown" => markdown::render(&view_of(&run, None, &mask)),
        "html" => html::render(&view_of(&run, None, &mask)),
        _ => reprise_cli::commands::export::json_export(&run, &mask).unwrap(),
    };
    let shown = if format == "json" {
        visible_json(&text)
    } else {
        visible(&text)
    };
    std::io::stdout()
        .lock()
        .write_all(shown.as_bytes())
        .unwrap();
}

#[tokio::main]
async fn main() {
    if let (Some(dir), Ok(format)) = (
        std::env::var_os(CHILD_WHOLE_DIR),
        std::env::var(CHILD_WHOLE_FORMAT),
    ) {
        whole_export(Path::new(&dir), &format);
        return;
    }
    let large_mb: u64 = std::env::var("REPRISE_BENCH_STREAM_MB")
        .ok()
        .and_then(|mb| mb.parse().ok())
        .unwrap_or(1000);
    let before = std::env::var_os("REPRISE_BENCH_BEFORE").map(PathBuf::from);
    let before_large = std::env::var_os("REPRISE_BENCH_BEFORE_LARGE").is_some();
    let kept = std::env::var_os("REPRISE_BENCH_KEEP").map(PathBuf::from);
    let temp = tempfile::tempdir().unwrap();
    let root = kept.unwrap_or_else(|| temp.path().to_owned());
    let after = PathBuf::from(env!("CARGO_BIN_EXE_reprise"));
    println!("load average at the start: {}", load_average());
    for shape in [
        Shape::ShortTurns,
        Shape::CodingAgent,
        Shape::RewoundAndCompacted,
    ] {
        for mb in [100, large_mb] {
            let cwd = root.join(format!("{shape:?}-{mb}"));
            std::fs::create_dir_all(cwd.join("xdg")).unwrap();
            let setup = Instant::now();
            let len = make_run(&cwd.join(".run"), shape, mb * 1_000_000).await;
            println!(
                "setup: {} run of {:.1} MB written in {}",
                shape.name(),
                len as f64 / 1e6,
                ms(setup.elapsed())
            );
            let mut builds = vec![("this build", after.clone())];
            if let Some(before) = &before
                && (mb == 100 || before_large)
            {
                builds.push(("before", before.clone()));
            }
            for (label, args) in COMMANDS {
                let mut args = args.to_vec();
                args.push("last");
                let mut line = format!("{} {:.0} MB, {label}:", shape.name(), len as f64 / 1e6);
                // One round each, alternating builds: a 1 GB run takes seconds.
                let figures: Vec<(&str, Duration, u64)> = builds
                    .iter()
                    .map(|(build, binary)| {
                        let (time, peak) = timed(binary, &cwd, &args);
                        (*build, time, peak)
                    })
                    .collect();
                let whole = args
                    .iter()
                    .position(|arg| *arg == "--format")
                    .map(|at| args[at + 1])
                    .filter(|_| mb == 100 || before_large);
                let mut figures = figures;
                if let Some(format) = whole {
                    let run = only_run(&cwd.join(".run"));
                    let (time, peak) = timed_with(
                        &std::env::current_exe().unwrap(),
                        &cwd,
                        &[],
                        &[
                            (CHILD_WHOLE_DIR, run.to_str().unwrap()),
                            (CHILD_WHOLE_FORMAT, format),
                        ],
                    );
                    figures.push(("whole run first", time, peak));
                }
                for (build, time, peak) in figures {
                    line.push_str(&format!(
                        " {build} {}, peak RSS {:.1} MiB;",
                        ms(time),
                        peak as f64 / 1024.0
                    ));
                }
                println!("{line} (load {})", load_average());
            }
            if std::env::var_os("REPRISE_BENCH_KEEP").is_none() {
                std::fs::remove_dir_all(&cwd).unwrap();
            }
        }
    }
}
