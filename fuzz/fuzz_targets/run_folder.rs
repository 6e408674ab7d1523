//! The run-folder metadata readers on files of any content: none may panic.
//!
//! The input is split at each `\n%%\n` into the contents of, in order:
//! `session.json`, `.summary.json`, `.list-cache`, `history.jsonl` and
//! `conversation.jsonl`. A part that is missing, or is exactly `-`, leaves that file
//! out. So that the fuzzer gets past the checks that guard the caches:
//!
//! - a `.summary.json` part starting with `#` is written with a valid checksum line
//!   (the rest of the part as the JSON line, then its FNV-1a 64 hash);
//! - the `.list-cache` part is the cache's entries: its first byte is their count,
//!   and the header before them (magic, format, version, count, checksum) is the one
//!   this build writes, with the checksum of the part; in it, `@S` and `@J` are
//!   replaced with the fingerprints of the written `.summary.json` and `session.json`,
//!   so that a cached entry can match the file it claims to describe.
//!
//! The files go to a run folder in a runs directory under /dev/shm (or the temporary
//! directory), which is emptied for every input. Then every public reader of these
//! files runs: `RunFolder::open`, `list_runs` (twice: the first may rewrite the
//! cache), `summarize_run`, `find_run`, `RunStore::session_id`, `read_history` and
//! `read_conversation_with_warnings`. Their errors are fine; a panic is a finding.
#![no_main]

use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use reprise_runs::{
    CONVERSATION_JSONL, HISTORY_JSONL, LIST_CACHE, RUN_SUMMARY, RunFolder, SESSION_JSON,
};

/// The one run folder's name.
const RUN: &str = "2026-01-01T00-00-00-000Z";

/// The runs directory of this process.
fn runs_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let shm = Path::new("/dev/shm");
        let base = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        base.join(format!("reprise-fuzz-runs-{}", std::process::id()))
    })
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `path`'s fingerprint as the list cache writes it (device, inode, size, modified
/// and changed times, little-endian), or zeros when it is missing.
fn fingerprint(path: &Path) -> Vec<u8> {
    let fields = match fs::metadata(path) {
        Ok(meta) => [
            meta.dev(),
            meta.ino(),
            meta.size(),
            meta.mtime() as u64,
            meta.mtime_nsec() as u64,
            meta.ctime() as u64,
            meta.ctime_nsec() as u64,
        ],
        Err(_) => [0; 7],
    };
    fields.iter().flat_map(|field| field.to_le_bytes()).collect()
}

/// The seed of the list cache's checksum (`CHECKSUM_SEED` in reprise-runs'
/// `list_cache_codec.rs`).
const CACHE_CHECKSUM_SEED: u64 = 0x7265_7072_6973_6531;

/// The start of a list cache as this build writes it (magic, format and version),
/// read from the cache a first listing writes; `None` when it wrote none.
fn cache_header(runs_dir: &Path) -> Option<Vec<u8>> {
    let _ = reprise_runs::list_runs(runs_dir);
    let written = fs::read(runs_dir.join(LIST_CACHE)).ok()?;
    let magic = memchr::memchr(b'\n', &written)? + 1;
    let version_len = usize::from(*written.get(magic + 4)?);
    let end = magic + 4 + 1 + version_len;
    (written.len() >= end).then(|| written[..end].to_vec())
}

/// A list cache of the entries in `part` (its first byte their count) behind `header`.
fn list_cache(header: &[u8], part: &[u8]) -> Vec<u8> {
    use std::hash::{BuildHasher, Hasher};
    let (count, entries) = part.split_first().map_or((0, part), |(n, rest)| (*n, rest));
    let mut hasher = foldhash::fast::FixedState::with_seed(CACHE_CHECKSUM_SEED).build_hasher();
    hasher.write(entries);
    let mut bytes = header.to_vec();
    bytes.extend_from_slice(&u32::from(count).to_le_bytes());
    bytes.extend_from_slice(&hasher.finish().to_le_bytes());
    bytes.extend_from_slice(entries);
    bytes
}

/// `text` with each `from` replaced by `to`.
fn replace(text: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = memchr::memmem::find(rest, from) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(to);
        rest = &rest[at + from.len()..];
    }
    out.extend_from_slice(rest);
    out
}

fn split(data: &[u8]) -> Vec<&[u8]> {
    let mut parts = Vec::new();
    let mut rest = data;
    while let Some(at) = memchr::memmem::find(rest, b"\n%%\n") {
        parts.push(&rest[..at]);
        rest = &rest[at + 4..];
    }
    parts.push(rest);
    parts
}

fn write(path: &Path, bytes: &[u8]) {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .expect("create a fuzzed file");
    file.write_all(bytes).expect("write a fuzzed file");
}

fuzz_target!(|data: &[u8]| {
    let runs_dir = runs_dir();
    let _ = fs::remove_dir_all(runs_dir);
    let run = runs_dir.join(RUN);
    fs::create_dir_all(&run).expect("create the run folder");

    let parts = split(data);
    let part = |index: usize| parts.get(index).copied().filter(|part| *part != b"-");
    if let Some(bytes) = part(0) {
        write(&run.join(SESSION_JSON), bytes);
    }
    if let Some(bytes) = part(1) {
        match bytes.strip_prefix(b"#") {
            Some(json) => {
                let mut record = json.to_vec();
                record.extend_from_slice(format!("\n{:016x}\n", fnv1a64(json)).as_bytes());
                write(&run.join(RUN_SUMMARY), &record);
            }
            None => write(&run.join(RUN_SUMMARY), bytes),
        }
    }
    if let Some(bytes) = part(3) {
        write(&runs_dir.join(HISTORY_JSONL), bytes);
    }
    if let Some(bytes) = part(4) {
        write(&run.join(CONVERSATION_JSONL), bytes);
    }
    if let Some(bytes) = part(2)
        && let Some(header) = cache_header(runs_dir)
    {
        let bytes = replace(bytes, b"@S", &fingerprint(&run.join(RUN_SUMMARY)));
        let bytes = replace(&bytes, b"@J", &fingerprint(&run.join(SESSION_JSON)));
        let _ = fs::remove_file(runs_dir.join(LIST_CACHE));
        write(&runs_dir.join(LIST_CACHE), &list_cache(&header, &bytes));
    }

    let _ = RunFolder::open(&run);
    let _ = reprise_runs::list_runs(runs_dir);
    let _ = reprise_runs::list_runs(runs_dir);
    let _ = reprise_runs::summarize_run(&run);
    let _ = reprise_runs::find_run(runs_dir, reprise_runs::LAST_RUN);
    let _ = reprise_runs::find_run(runs_dir, "2026-01");
    let _ = reprise_runs::create_run_store(&run).session_id();
    let _ = reprise_runs::read_history(&runs_dir.join(HISTORY_JSONL));
    let _ = reprise_runs::read_conversation_with_warnings(&run);
});
