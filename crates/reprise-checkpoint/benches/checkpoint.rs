//! Checkpoints against git on the same tree: the first checkpoint against `git add
//! -A` into a fresh repository, a checkpoint after a few changes against `git
//! status`, the store's growth over 100 small changes, and a rewind of 10 files.
//! On a generated folder of 10,000 files and 100 MB, then the store's size for
//! 10,000 small text files (`-- size`), then on this repository.
//!
//! `cargo bench -p reprise-checkpoint --bench checkpoint` (needs `git`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng};
use reprise_checkpoint::{CaptureOptions, CheckpointStore};

/// A seeded generator, so every run benches the same tree.
type Rng = StdRng;

const WORDS: [&str; 16] = [
    "fn", "let", "match", "self", "return", "Some", "None", "impl", "struct", "pub", "use",
    "crate", "mut", "&", "=>", "{}",
];

fn text(rng: &mut Rng, size: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(size + 16);
    while out.len() < size {
        out.extend_from_slice(WORDS[(rng.random::<u64>() % 16) as usize].as_bytes());
        out.push(if rng.random::<u64>().is_multiple_of(9) {
            b'\n'
        } else {
            b' '
        });
        if rng.random::<u64>().is_multiple_of(5) {
            out.extend_from_slice(format!("x{} ", rng.random::<u64>() % 100_000).as_bytes());
        }
    }
    out.truncate(size);
    out
}

fn generate(root: &Path) -> u64 {
    let mut rng = StdRng::seed_from_u64(0x9e37_79b9_7f4a_7c15);
    let mut total = 0;
    for top in 0..10 {
        for sub in 0..10 {
            let dir = root.join(format!("mod{top}/part{sub}"));
            std::fs::create_dir_all(&dir).unwrap();
            for file in 0..100 {
                let size = 2_000 + (rng.random::<u64>() % 16_000) as usize;
                std::fs::write(dir.join(format!("file{file}.rs")), text(&mut rng, size)).unwrap();
                total += size as u64;
            }
        }
    }
    std::fs::write(root.join(".gitignore"), "*.tmp\n").unwrap();
    total
}

fn sync(path: &Path) {
    let dir = std::fs::File::open(path).unwrap();
    rustix::fs::syncfs(&dir).unwrap();
}

fn git(git_dir: &Path, work: &Path, args: &[&str]) -> Duration {
    let start = Instant::now();
    let status = Command::new("git")
        .arg(format!("--git-dir={}", git_dir.display()))
        .arg(format!("--work-tree={}", work.display()))
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
    start.elapsed()
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1000.0)
}

/// The bytes of the files below `dir`: their lengths, and the disk blocks they take.
fn usage(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let mut apparent = 0;
    let mut blocks = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                pending.push(entry.path());
            } else {
                apparent += meta.len();
                blocks += meta.blocks() * 512;
            }
        }
    }
    (apparent, blocks)
}

fn first_checkpoint_vs_git_add(name: &str, work: &Path, tmp: &Path, options: &CaptureOptions) {
    let mut git_times = Vec::new();
    let mut ours = Vec::new();
    for round in 0..3 {
        let git_dir = tmp.join(format!("git-{round}"));
        git(&git_dir, work, &["init", "-q"]);
        sync(tmp);
        git_times.push(git(&git_dir, work, &["add", "-A"]));
        sync(tmp);
        let store_dir = tmp.join(format!("store-{round}"));
        let mut store = CheckpointStore::open(&store_dir, work, options.clone()).unwrap();
        let start = Instant::now();
        let checkpoint = store.checkpoint().unwrap();
        ours.push(start.elapsed());
        if round == 0 {
            println!(
                "{name}: {} files, {:.1} MB captured, {} ignored, {} large",
                checkpoint.files,
                checkpoint.bytes as f64 / 1e6,
                checkpoint.skipped_ignored,
                checkpoint.skipped_large
            );
        }
    }
    let (git_add, first) = (median(git_times), median(ours));
    println!(
        "{name}: first checkpoint {} | git add -A into a fresh repository {} | ratio {:.2}x (goal <= 1.5x)",
        ms(first),
        ms(git_add),
        first.as_secs_f64() / git_add.as_secs_f64()
    );
}

fn warm_vs_git_status(
    name: &str,
    work: &Path,
    tmp: &Path,
    store: &mut CheckpointStore,
    files: &[PathBuf],
) {
    let git_dir = tmp.join("git-0");
    git(&git_dir, work, &["status", "--porcelain"]);
    let status = median(
        (0..7)
            .map(|_| git(&git_dir, work, &["status", "--porcelain"]))
            .collect(),
    );
    store.checkpoint().unwrap();
    let unchanged = median(
        (0..7)
            .map(|_| {
                let start = Instant::now();
                store.checkpoint().unwrap();
                start.elapsed()
            })
            .collect(),
    );
    println!(
        "{name}: git status (warm) {} | checkpoint, nothing changed {} ({:.2}x)",
        ms(status),
        ms(unchanged),
        unchanged.as_secs_f64() / status.as_secs_f64()
    );
    // Files of this repository are never changed: only the generated tree's are.
    let counts: &[usize] = if files.is_empty() { &[] } else { &[1, 10] };
    for &changed in counts {
        let mut times = Vec::new();
        for round in 0..7 {
            for (i, path) in files.iter().take(changed).enumerate() {
                let mut bytes = std::fs::read(path).unwrap();
                bytes.extend_from_slice(format!("// change {round} {i}\n").as_bytes());
                std::fs::write(path, bytes).unwrap();
            }
            sync(tmp);
            let start = Instant::now();
            store.checkpoint().unwrap();
            times.push(start.elapsed());
        }
        let time = median(times);
        println!(
            "{name}: checkpoint after {changed} changed file(s) {} | ratio to git status {:.2}x (goal <= 1.5x)",
            ms(time),
            time.as_secs_f64() / status.as_secs_f64()
        );
    }
}

fn generated(tmp: &Path) {
    let work = tmp.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let total = generate(&work);
    println!("generated: 10,000 files, {:.1} MB", total as f64 / 1e6);
    sync(tmp);
    let options = CaptureOptions::default();
    first_checkpoint_vs_git_add("generated", &work, tmp, &options);
    let files: Vec<PathBuf> = (0..10)
        .map(|i| work.join(format!("mod{i}/part{}/file{}.rs", (i * 3) % 10, i * 7)))
        .collect();
    let store_dir = tmp.join("store-0");
    let mut store = CheckpointStore::open(&store_dir, &work, options).unwrap();
    warm_vs_git_status("generated", &work, tmp, &mut store, &files);

    // Growth: 100 checkpoints, one 10 KB file changed each.
    let growth_dir = tmp.join("store-growth");
    let mut growth = CheckpointStore::open(&growth_dir, &work, CaptureOptions::default()).unwrap();
    growth.checkpoint().unwrap();
    let before = objects_usage(&growth_dir);
    let mut rng = StdRng::seed_from_u64(42);
    let mut added = 0;
    let start = Instant::now();
    for round in 0..100 {
        let path = work.join(format!(
            "mod{}/part{}/file{}.rs",
            round % 10,
            (round / 10) % 10,
            round % 100
        ));
        std::fs::write(&path, text(&mut rng, 10_000)).unwrap();
        added += growth.checkpoint().unwrap().added_bytes;
    }
    let elapsed = start.elapsed();
    let after = objects_usage(&growth_dir);
    println!(
        "generated: 100 checkpoints, one 10 KB file changed each: +{:.2} MB of objects ({:.2} MB in disk blocks; the checkpoints report {:.2} MB) (goal <= 3 MB); {} each",
        (after.0 - before.0) as f64 / 1e6,
        (after.1 - before.1) as f64 / 1e6,
        added as f64 / 1e6,
        ms(elapsed / 100)
    );

    // Rewind of 10 changed files (the undo checkpoint included), and its undo.
    let mut rewinds = Vec::new();
    let mut undos = Vec::new();
    for round in 0..5 {
        let base = growth.checkpoint().unwrap();
        for (i, path) in files.iter().enumerate() {
            std::fs::write(path, format!("rewind {round} {i}\n")).unwrap();
        }
        growth.checkpoint().unwrap();
        sync(tmp);
        let start = Instant::now();
        let restored = growth.restore(&base.id).unwrap();
        rewinds.push(start.elapsed());
        assert_eq!(restored.preview.restored.len(), 10);
        let start = Instant::now();
        growth.restore(&restored.undo).unwrap();
        undos.push(start.elapsed());
        growth.restore(&base.id).unwrap();
    }
    println!(
        "generated: rewind of 10 changed files {} (goal <= 100 ms); its undo {}",
        ms(median(rewinds)),
        ms(median(undos))
    );
}

/// The store's size beside the content's: 10,000 text files of about 1.1 KB (11 MB),
/// one checkpoint.
fn size(tmp: &Path) {
    let work = tmp.join("work");
    let mut rng = StdRng::seed_from_u64(7);
    let mut content = 0;
    let mut content_blocks = 0;
    for top in 0..100 {
        let dir = work.join(format!("dir{top}"));
        std::fs::create_dir_all(&dir).unwrap();
        for file in 0..100 {
            let size = 600 + (rng.random::<u64>() % 1_000) as usize;
            let path = dir.join(format!("file{file}.txt"));
            std::fs::write(&path, text(&mut rng, size)).unwrap();
            content += size as u64;
            content_blocks += usage_of(&path);
        }
    }
    let store_dir = tmp.join("store-size");
    let mut store = CheckpointStore::open(&store_dir, &work, CaptureOptions::default()).unwrap();
    let checkpoint = store.checkpoint().unwrap();
    let (apparent, blocks) = usage(&store_dir);
    println!(
        "size: 10,000 text files, {:.2} MB of content ({:.2} MB in disk blocks): the whole store {:.2} MB ({:.2}x; the checkpoint reports {:.2} MB), {:.2} MB in disk blocks ({:.2}x the content's bytes, {:.2}x its blocks)",
        content as f64 / 1e6,
        content_blocks as f64 / 1e6,
        apparent as f64 / 1e6,
        apparent as f64 / content as f64,
        checkpoint.added_bytes as f64 / 1e6,
        blocks as f64 / 1e6,
        blocks as f64 / content as f64,
        blocks as f64 / content_blocks as f64,
    );
}

/// [`usage`] of the folders of a store holding objects (loose and packed).
fn objects_usage(store: &Path) -> (u64, u64) {
    ["objects", "packs"]
        .iter()
        .map(|dir| store.join(dir))
        .filter(|dir| dir.is_dir())
        .map(|dir| usage(&dir))
        .fold((0, 0), |(a, b), (c, d)| (a + c, b + d))
}

/// The disk blocks of one file, in bytes.
fn usage_of(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().blocks() * 512
}

fn repository(tmp: &Path) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap();
    let options = CaptureOptions {
        exclude: vec![".run".into(), "target".into()],
        ..CaptureOptions::default()
    };
    first_checkpoint_vs_git_add("repository", &repo, tmp, &options);
    let store_dir = tmp.join("store-0");
    let mut store = CheckpointStore::open(&store_dir, &repo, options).unwrap();
    warm_vs_git_status("repository", &repo, tmp, &mut store, &[]);
}

fn main() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-tmp");
    let tmp = base.join(format!("checkpoint-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let only = std::env::args().nth(1).filter(|arg| !arg.starts_with('-'));
    if only.as_deref().is_none_or(|only| only == "generated") {
        let dir = tmp.join("generated");
        std::fs::create_dir_all(&dir).unwrap();
        generated(&dir);
    }
    if only.as_deref().is_none_or(|only| only == "size") {
        let dir = tmp.join("size");
        std::fs::create_dir_all(&dir).unwrap();
        size(&dir);
    }
    if only.as_deref() == Some("warm") {
        // For a profiler: warm checkpoints only, one file changed each.
        let work = tmp.join("work");
        std::fs::create_dir_all(&work).unwrap();
        generate(&work);
        let mut store =
            CheckpointStore::open(tmp.join("store"), &work, CaptureOptions::default()).unwrap();
        store.checkpoint().unwrap();
        let start = Instant::now();
        for round in 0..50 {
            std::fs::write(work.join("mod1/part1/file1.rs"), format!("{round}")).unwrap();
            store.checkpoint().unwrap();
        }
        println!(
            "warm checkpoint, one file changed: {}",
            ms(start.elapsed() / 50)
        );
    }
    if only.as_deref().is_none_or(|only| only == "repository") {
        let dir = tmp.join("repository");
        std::fs::create_dir_all(&dir).unwrap();
        repository(&dir);
    }
    std::fs::remove_dir_all(&tmp).unwrap();
}
