//! Run folders: one folder per start of the chat, named after its UTC start
//! time, listed newest first from their `session.json` alone.
//!
//! ```text
//! .run/
//! ├── history.jsonl
//! └── 2026-09-29T10-15-00-000Z/
//!     ├── session.log  transcript.jsonl  conversation.jsonl
//!     ├── subagents/<name>.jsonl
//!     └── session.json
//! ```

use std::fs::{self, DirBuilder};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::Deserialize;

use crate::error::RunError;
use crate::fingerprint::{Fingerprint, Limit};
use crate::fs::{open_private_append, sync_parent};
use crate::labels::{LABELS_JSON, parse_labels};
use crate::list_cache;
use crate::list_cache_codec::Stamp;
use crate::meta::{SESSION_JSON, SessionJson};
use crate::recover::{Damage, rebuild_session_json};
use crate::run::{RunFolder, RunSummary, RunWarning, folder_name};
use crate::store::{CONVERSATION_JSONL, account};
use crate::summary::RUN_SUMMARY;
use reprise_session::IoError;
use reprise_session::fs::io_err;
use reprise_session::parts::load_file_beneath;
use reprise_session::validate_id;

/// The file a run's terminal output goes to; created with the folder.
pub const SESSION_LOG: &str = "session.log";

/// What `find_run` takes to mean the newest run with a conversation.
pub const LAST_RUN: &str = "last";

/// The file in which the chat keeps the context window the server reported (a
/// cache: a folder holding only it is still unused).
pub const CONTEXT_WINDOW_JSON: &str = "context-window.json";

/// Most suffixes tried when many runs start in the same millisecond.
const MAX_SUFFIX: u32 = 100_000;

impl RunFolder {
    /// A run folder that already exists, with its session id read from
    /// `session.json` when there is one.
    ///
    /// A `session.json` that is missing while the folder holds a conversation, or
    /// that cannot be parsed, is rebuilt from `conversation.jsonl`, with a warning
    /// naming it in [`RunFolder::warnings`]. A folder that is a symbolic link is
    /// refused. Temporary files that a killed process left in the folder (a
    /// `session.json` replacement cut short) are removed.
    pub fn open(dir: impl Into<PathBuf>) -> Result<RunFolder, RunError> {
        let dir = dir.into();
        match fs::symlink_metadata(&dir) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(reprise_session::fs::link_refused(&dir).into());
            }
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(RunError::Io(IoError::new(
                    "open",
                    &dir,
                    std::io::Error::from(ErrorKind::NotADirectory),
                )));
            }
            Err(source) => return Err(RunError::Io(IoError::new("open", &dir, source))),
        }
        crate::leftovers::remove_dead_leftovers(&dir);
        let path = dir.join(SESSION_JSON);
        let mut warnings = Vec::new();
        let read = match crate::fs::read_beneath(reprise_session::fs::parent_of(&dir), &path) {
            // A link is never read; it is replaced by the rebuilt file.
            Err(error) if error.is_refused_link() && error.path == path => Ok(Some(Vec::new())),
            other => other,
        };
        let damage = match read? {
            None => Damage::Missing,
            Some(bytes) if bytes.is_empty() && crate::fs::is_link(&path) => {
                Damage::Unusable(bytes, "a symbolic link, not followed".to_owned())
            }
            Some(bytes) => match serde_json::from_slice::<SessionJson>(&bytes) {
                Ok(meta) => match validate_id("session", &meta.session_id) {
                    Ok(()) => {
                        return Ok(RunFolder {
                            dir,
                            session_id: Some(meta.session_id),
                            warnings,
                        });
                    }
                    Err(error) => Damage::Unusable(bytes, format!("refused: {error}")),
                },
                Err(error) => Damage::Unusable(bytes, format!("not a valid session.json: {error}")),
            },
        };
        let session_id = rebuild_session_json(&dir, damage, &mut warnings)?;
        for warning in &warnings {
            tracing::warn!(%warning, "run metadata rebuilt");
        }
        Ok(RunFolder {
            dir,
            session_id,
            warnings,
        })
    }

    /// The folder's name (its start time, with a `-N` suffix after a collision).
    pub fn name(&self) -> &str {
        folder_name(&self.dir)
    }
}

/// The folder name for a run started at `start`: `2026-09-29T10-15-00-000Z`
/// (RFC 3339 in UTC, with `:` and `.` replaced so that every file system takes it).
pub fn run_folder_name(start: Timestamp) -> String {
    start.strftime("%Y-%m-%dT%H-%M-%S-%3fZ").to_string()
}

/// Creates a new run folder under `runs_dir` (created 0700 if missing), named after
/// the current UTC time, with an empty `session.log` in it.
///
/// Each folder is taken with a single `mkdir`, which fails when the name exists, so
/// two starts in the same millisecond (threads or processes) never share one: the
/// later ones get `-2`, `-3`, … suffixes.
pub fn create_run_folder(runs_dir: &Path) -> Result<RunFolder, RunError> {
    create_run_folder_at(runs_dir, Timestamp::now())
}

/// The folders a run named `base` may take, in order: `base`, then `base-2`, `base-3`, …
fn candidate_dirs<'a>(runs_dir: &'a Path, base: &'a str) -> impl Iterator<Item = PathBuf> + 'a {
    (1..=MAX_SUFFIX).map(move |n| {
        if n == 1 {
            runs_dir.join(base)
        } else {
            runs_dir.join(format!("{base}-{n}"))
        }
    })
}

/// The error when every folder of [`candidate_dirs`] is taken.
fn every_suffix_taken(runs_dir: &Path, base: &str) -> RunError {
    RunError::Io(IoError::new(
        "create",
        runs_dir.join(base),
        std::io::Error::new(
            ErrorKind::AlreadyExists,
            "every suffix of this run name is taken",
        ),
    ))
}

/// [`create_run_folder`] for a run started at `start` (a clock given by the caller).
pub fn create_run_folder_at(runs_dir: &Path, start: Timestamp) -> Result<RunFolder, RunError> {
    crate::fs::create_runs_dir(runs_dir)?;
    crate::leftovers::remove_dead_leftovers(runs_dir);
    let base = run_folder_name(start);
    let mut builder = DirBuilder::new();
    builder.mode(0o700);
    for dir in candidate_dirs(runs_dir, &base) {
        match builder.create(&dir) {
            Ok(()) => {
                let filled = sync_parent(&dir)
                    .and_then(|()| open_private_append(runs_dir, &dir.join(SESSION_LOG)));
                if let Err(error) = filled {
                    // A run that could not start leaves nothing behind (a full disk).
                    let _ = fs::remove_dir_all(&dir);
                    return Err(error.into());
                }
                return Ok(RunFolder {
                    dir,
                    session_id: None,
                    warnings: Vec::new(),
                });
            }
            Err(error) if error.kind() == ErrorKind::AlreadyExists => continue,
            Err(source) => return Err(RunError::Io(IoError::new("create", dir, source))),
        }
    }
    Err(every_suffix_taken(runs_dir, &base))
}

/// What is said of a prompt history (`history.jsonl`) that is a symbolic link.
pub const HISTORY_LINK_WARNING: &str = "a symbolic link, not followed: the prompts typed are not remembered until it is a file \
     of its own";

/// A run folder for a run started now that does not exist yet: the name a fork is
/// built for, in a hidden staging folder, and then renamed to at once (see
/// [`fork_run`](crate::fork_run)), so that a fork cut short leaves nothing visible.
/// Should another start take the name meanwhile, the fork refuses it.
pub fn new_run_folder(runs_dir: &Path) -> Result<RunFolder, RunError> {
    let base = run_folder_name(Timestamp::now());
    for dir in candidate_dirs(runs_dir, &base) {
        if !reprise_session::fs::exists(&dir) {
            return Ok(RunFolder {
                dir,
                session_id: None,
                warnings: Vec::new(),
            });
        }
    }
    Err(every_suffix_taken(runs_dir, &base))
}

/// What `list_runs` found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunList {
    /// The runs with a usable `session.json`, newest first.
    pub runs: Vec<RunSummary>,
    /// Runs left out, and why.
    pub warnings: Vec<RunWarning>,
}

/// The fields of `session.json` that a listing needs; everything else (subagents,
/// unknown fields) is skipped by the parser instead of being built.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SummaryFields {
    session_id: String,
    #[serde(default)]
    updated_at: Option<Timestamp>,
    #[serde(default)]
    last_message: Option<String>,
    #[serde(default)]
    first_message: Option<String>,
    #[serde(default)]
    message_count: Option<u64>,
}

/// The runs under `runs_dir` that have a `session.json`, newest first (by
/// `updatedAt`, then by folder name). A missing `runs_dir` lists nothing.
///
/// For each run only its `.summary.json` ([`RUN_SUMMARY`], which the run store rewrites
/// in place after every append) is read, or its `session.json` when it has no usable
/// summary; never the conversation, so the cost does not grow with the size of the
/// conversations. A `session.json` that cannot be read or parsed leaves its run out
/// with a warning in [`RunList::warnings`]; it never fails the listing.
///
/// What was read is kept in `<runs_dir>/.list-cache` ([`LIST_CACHE`](crate::LIST_CACHE), 0600): a
/// later listing stats each run's file and reads only those whose fingerprint
/// (device, inode, size, modification and change times in nanoseconds) differs from
/// the cached one. The cache is only ever an optimisation: the result is the same
/// with it, without it, or with a damaged one (which is ignored and rewritten).
pub fn list_runs(runs_dir: &Path) -> Result<RunList, RunError> {
    let limit = Limit::now();
    let entries = match fs::read_dir(runs_dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(RunList::default()),
        Err(source) => return Err(RunError::Io(IoError::new("list", runs_dir, source))),
    };
    let mut names = Vec::new();
    let mut links = Vec::new();
    let mut history_link = false;
    let mut leftovers = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io_err("list", runs_dir))?;
        match run_dir_name(&entry) {
            Some((name, false)) => names.push(name),
            Some((name, true)) if name == crate::HISTORY_JSONL => history_link = true,
            Some((name, true)) => links.push(name),
            None => crate::leftovers::note(&entry, &mut leftovers),
        }
    }
    crate::leftovers::remove(runs_dir, leftovers);
    let dir_fd = fs::File::open(runs_dir).map_err(io_err("open", runs_dir))?;
    let (cached_len, scans) = scan_runs(runs_dir, &dir_fd, &names, limit);

    let mut list = RunList::default();
    list.runs.reserve(names.len());
    for name in links {
        list.warnings.push(warning(
            runs_dir.join(name),
            "a symbolic link, not followed: a run folder must be a folder of its own".to_owned(),
        ));
    }
    if history_link {
        list.warnings.push(warning(
            runs_dir.join(crate::HISTORY_JSONL),
            HISTORY_LINK_WARNING.to_owned(),
        ));
    }
    // What each run listed can be cached under, by its index in `list.runs`.
    let mut stamps = Vec::with_capacity(names.len());
    let mut fresh = 0;
    let mut hits = 0;
    for (name, scan) in names.iter().zip(scans) {
        match scan {
            Scan::Absent => {}
            Scan::Cached(summary, stamp) => {
                hits += 1;
                stamps.push((list.runs.len(), name.as_str(), stamp));
                list.runs.push(summary);
            }
            Scan::Read(summary, stamp) => {
                if let Some(stamp) = stamp {
                    fresh += 1;
                    stamps.push((list.runs.len(), name.as_str(), stamp));
                }
                list.runs.push(summary);
            }
            Scan::Warning(warning) => list.warnings.push(warning),
        }
    }
    // Rewritten only when an entry was added, changed or dropped.
    if fresh > 0 || hits != cached_len {
        list_cache::store(
            runs_dir,
            stamps
                .iter()
                .map(|(index, name, stamp)| (*name, stamp, &list.runs[*index])),
        );
    }
    // On equal times, by name: every run's path is the runs folder joined with its
    // name, so the paths' bytes order as the names do, and comparing them costs no
    // parsing of paths (which was most of listing 100,000 runs whose times tie).
    sort_newest_first(&mut list.runs);
    Ok(list)
}

/// Puts `runs` newest first, then by name, descending. What is sorted is a small key
/// per run (its time and index), and each summary is moved once: sorting the
/// summaries themselves moved every one of them at every pass.
fn sort_newest_first(runs: &mut Vec<RunSummary>) {
    let mut order: Vec<(Timestamp, usize)> = runs
        .iter()
        .enumerate()
        .map(|(index, run)| (run.updated_at, index))
        .collect();
    // Names are unique within a runs folder, so no two keys are equal and an
    // unstable sort gives the one order.
    order.sort_unstable_by(|a, b| {
        b.0.cmp(&a.0)
            .then_with(|| runs[b.1].dir.as_os_str().cmp(runs[a.1].dir.as_os_str()))
    });
    let mut slots: Vec<Option<RunSummary>> = std::mem::take(runs).into_iter().map(Some).collect();
    *runs = order
        .iter()
        .filter_map(|(_, index)| slots[*index].take())
        .collect();
}

/// The folder's name when a directory entry can be a run, and whether it is a
/// symbolic link (never followed: listed as a warning).
fn run_dir_name(entry: &fs::DirEntry) -> Option<(String, bool)> {
    let name = entry.file_name().into_string().ok()?;
    validate_id("run", &name).ok()?;
    // d_type from the directory listing: no extra stat on common file systems.
    let kind = entry.file_type().ok()?;
    (kind.is_dir() || kind.is_symlink()).then_some((name, kind.is_symlink()))
}

fn is_run_dir(entry: &fs::DirEntry) -> bool {
    run_dir_name(entry).is_some()
}

/// Opens `name/file` relative to the runs directory `dir_fd` for reading, following
/// no symbolic link (neither the run folder nor the file may be one).
fn open_run_file(dir_fd: &fs::File, relative: &str) -> std::io::Result<fs::File> {
    let flags =
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC | rustix::fs::OFlags::NOFOLLOW;
    let opened = match rustix::fs::openat2(
        dir_fd,
        relative,
        flags,
        rustix::fs::Mode::empty(),
        rustix::fs::ResolveFlags::NO_SYMLINKS | rustix::fs::ResolveFlags::NO_MAGICLINKS,
    ) {
        // Kernels without openat2: the run folder was seen not to be a link.
        Err(rustix::io::Errno::NOSYS) => {
            rustix::fs::openat(dir_fd, relative, flags, rustix::fs::Mode::empty())
        }
        other => other,
    };
    match opened {
        Ok(fd) => Ok(fs::File::from(fd)),
        Err(rustix::io::Errno::LOOP) => Err(std::io::Error::new(
            ErrorKind::InvalidInput,
            "a symbolic link, not followed inside a runs folder",
        )),
        Err(errno) => Err(errno.into()),
    }
}

/// What one run folder turned out to hold.
enum Scan {
    /// No `session.json`: not a run to list.
    Absent,
    /// Unchanged since it was cached, and what its cache entry was checked against.
    Cached(RunSummary, Stamp),
    /// Read from `session.json`, with what to cache it under (`None`: changed too
    /// recently to cache, or not to be cached).
    Read(RunSummary, Option<Stamp>),
    /// Left out, and why.
    Warning(RunWarning),
}

/// Runs with at least this many folders are scanned by several threads.
const PARALLEL_FROM: usize = 256;

/// How many runs the cache of `runs_dir` held, and what each of `names` holds, in
/// order.
///
/// The time goes to one system call per run (a stat, or an open and read on a cache
/// miss), which the kernel runs in parallel, and to parsing the cache, which is done
/// by its own thread while the stats run.
fn scan_runs(
    runs_dir: &Path,
    dir_fd: &fs::File,
    names: &[String],
    limit: Limit,
) -> (usize, Vec<Scan>) {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(4);
    let parallel = threads >= 2 && names.len() >= PARALLEL_FROM;
    let (cache, stats) = if parallel {
        std::thread::scope(|scope| {
            let cache = scope.spawn(|| list_cache::load(runs_dir));
            let stats = in_chunks(names, threads, |part| stat_chunk(dir_fd, part));
            // A thread that panicked is redone here, so a listing is never partial.
            let cache = cache.join().unwrap_or_else(|_| list_cache::load(runs_dir));
            (cache, stats)
        })
    } else {
        (list_cache::load(runs_dir), stat_chunk(dir_fd, names))
    };
    let mut cache = list_cache::entries(cache.as_deref());
    let cached_len = cache.len();

    let mut scans = Vec::with_capacity(names.len());
    let mut misses = Vec::new();
    for (index, (name, stat)) in names.iter().zip(stats).enumerate() {
        let (fingerprint, source, conversation, labels) = match stat {
            Ok(Some(found)) => found,
            Ok(None) => {
                scans.push(Scan::Absent);
                continue;
            }
            Err(error) => {
                scans.push(Scan::Warning(warning(
                    runs_dir.join(name).join(SESSION_JSON),
                    format!("cannot read it: {error}"),
                )));
                continue;
            }
        };
        // Taken out of the cache: what is left over was not used.
        let unchanged = cache.remove(name.as_str()).and_then(|cached| {
            list_cache::summary_if_unchanged(
                &cached,
                &fingerprint,
                labels.as_ref(),
                conversation,
                runs_dir.join(name),
            )
        });
        match unchanged {
            Some((summary, unchanged)) => scans.push(Scan::Cached(summary, unchanged)),
            None => {
                let dir = runs_dir.join(name);
                // Filled in below, once every miss is known.
                scans.push(Scan::Absent);
                misses.push((index, dir, fingerprint, source, conversation, labels));
            }
        }
    }
    let read = if parallel && misses.len() >= PARALLEL_FROM {
        in_chunks(&misses, threads, |part| {
            read_chunk(dir_fd, names, part, limit)
        })
    } else {
        read_chunk(dir_fd, names, &misses, limit)
    };
    for ((index, ..), scan) in misses.iter().zip(read) {
        scans[*index] = scan;
    }
    (cached_len, scans)
}

/// `work` over `items` split in `threads` chunks, one thread each, results in order.
fn in_chunks<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    work: impl Fn(&[T]) -> Vec<R> + Sync,
) -> Vec<R> {
    let chunk = items.len().div_ceil(threads).max(1);
    let work = &work;
    std::thread::scope(|scope| {
        let workers: Vec<_> = items
            .chunks(chunk)
            .map(|part| (part, scope.spawn(move || work(part))))
            .collect();
        workers
            .into_iter()
            // A worker that panicked is redone here, so a listing is never partial.
            .flat_map(|(part, worker)| worker.join().unwrap_or_else(|_| work(part)))
            .collect()
    })
}

/// Which file a run's listing is read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    /// `.summary.json`, which the run store rewrites after every append.
    Summary,
    /// `session.json` (runs written before `.summary.json` existed, or by others).
    SessionJson,
}

/// What one run's listing is read from, with its fingerprint and (for a summary) the
/// conversation's length; `None` when the run has neither file.
type Found = Option<(Fingerprint, Source, Option<u64>, Option<Fingerprint>)>;

/// The fingerprint of each run's `.summary.json`, or of its `session.json` when it has
/// no summary; `None` when it has neither.
fn stat_chunk(dir_fd: &fs::File, names: &[String]) -> Vec<std::io::Result<Found>> {
    let mut relative = String::new();
    names
        .iter()
        .map(|name| {
            for (file, source) in [
                (RUN_SUMMARY, Source::Summary),
                (SESSION_JSON, Source::SessionJson),
            ] {
                relative.clear();
                relative.push_str(name);
                relative.push('/');
                relative.push_str(file);
                match Fingerprint::stat_at(dir_fd, &relative) {
                    Ok(fingerprint) => {
                        let conversation = (source == Source::Summary)
                            .then(|| conversation_len(dir_fd, name, &mut relative))
                            .flatten();
                        let labels = labels_fingerprint(dir_fd, name, &mut relative)?;
                        return Ok(Some((fingerprint, source, conversation, labels)));
                    }
                    Err(error) if is_missing(&error) => {}
                    Err(error) => return Err(error),
                }
            }
            Ok(None)
        })
        .collect()
}

/// The fingerprint of run `name`'s `labels.json`; `None` when it has none.
fn labels_fingerprint(
    dir_fd: &fs::File,
    name: &str,
    relative: &mut String,
) -> std::io::Result<Option<Fingerprint>> {
    relative.clear();
    relative.push_str(name);
    relative.push('/');
    relative.push_str(LABELS_JSON);
    match Fingerprint::stat_at(dir_fd, relative) {
        Ok(fingerprint) => Ok(Some(fingerprint)),
        Err(error) if is_missing(&error) => Ok(None),
        Err(error) => Err(error),
    }
}

/// Reads run `name`'s `labels.json` into `summary` (when `labels` says it exists).
/// Labels that cannot be read leave the run untitled: they never hide a run.
fn read_run_labels(
    dir_fd: &fs::File,
    name: &str,
    labels: Option<&Fingerprint>,
    summary: &mut RunSummary,
) {
    if labels.is_none() {
        return;
    }
    let read = open_run_file(dir_fd, &format!("{name}/{LABELS_JSON}")).and_then(|mut file| {
        let mut bytes = Vec::with_capacity(256);
        file.read_to_end(&mut bytes)?;
        Ok(bytes)
    });
    if let Ok(bytes) = read {
        let labels = parse_labels(&bytes);
        summary.title = labels.title;
        summary.tags = labels.tags;
    }
}

/// The length of run `name`'s `conversation.jsonl` (0 when missing; `None` when it
/// cannot be stat'ed), to check a summary against.
fn conversation_len(dir_fd: &fs::File, name: &str, relative: &mut String) -> Option<u64> {
    relative.clear();
    relative.push_str(name);
    relative.push('/');
    relative.push_str(CONVERSATION_JSONL);
    match rustix::fs::statat(
        dir_fd,
        relative.as_str(),
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    ) {
        Ok(stat) => u64::try_from(stat.st_size).ok(),
        Err(rustix::io::Errno::NOENT) => Some(0),
        Err(_) => None,
    }
}

/// Recounts the listing fields of `summary` from the run's conversation: for a
/// summary that describes another length of it (emptied, cut, replaced).
fn recount(summary: &mut RunSummary) {
    let path = summary.dir.join(CONVERSATION_JSONL);
    let loaded = load_file_beneath(
        reprise_session::fs::parent_of(&summary.dir),
        &path,
        &summary.session_id,
    );
    let mut meta = SessionJson {
        session_id: summary.session_id.clone(),
        ..SessionJson::default()
    };
    if let Ok(Some(loaded)) = loaded {
        account(
            &mut meta,
            &loaded.entries.iter().collect::<Vec<_>>(),
            &reprise_redact::Redactor::new(),
        );
    }
    summary.message_count = meta.message_count;
    summary.last_message = meta.last_message;
    summary.first_message = meta.first_message;
}

fn is_missing(error: &std::io::Error) -> bool {
    matches!(error.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory)
}

/// A run the cache could not answer for: its index in the names, folder,
/// fingerprint, source, conversation length and the fingerprint of its labels.
type Miss = (
    usize,
    PathBuf,
    Fingerprint,
    Source,
    Option<u64>,
    Option<Fingerprint>,
);

/// How a summary compared with the conversation it describes.
enum Checked {
    /// It describes the conversation at this length (or predates the check).
    Matches(Option<u64>),
    /// It described another length: the counts were recounted.
    Recounted,
}

/// Reads the `session.json` of each missed run `(index in names, dir, fingerprint)`.
fn read_chunk(dir_fd: &fs::File, names: &[String], misses: &[Miss], limit: Limit) -> Vec<Scan> {
    let mut buf = Vec::new();
    misses
        .iter()
        .map(|(index, dir, fingerprint, source, conversation, labels)| {
            let name = &names[*index];
            // Read after the stat, so what is read is at least as new as the
            // fingerprint; if it is newer, the next stat differs and it is read again.
            let read = match source {
                Source::Summary => read_run_summary(dir_fd, name, dir, *conversation),
                Source::SessionJson => Ok(None),
            };
            let read = match read {
                Ok(Some((summary, Checked::Matches(bytes)))) => Ok(Some((summary, true, bytes))),
                Ok(Some((summary, Checked::Recounted))) => Ok(Some((summary, false, None))),
                // No usable summary: session.json, under the summary's fingerprint
                // only when that is what was stat'ed.
                Ok(None) => read_summary(dir_fd, name, dir, fingerprint, &mut buf).map(|found| {
                    found.map(|(summary, counted)| {
                        (summary, *source == Source::SessionJson && !counted, None)
                    })
                }),
                Err(warning) => Err(warning),
            };
            match read {
                Ok(Some((mut summary, cacheable, bytes))) => {
                    read_run_labels(dir_fd, name, labels.as_ref(), &mut summary);
                    let stamp = cacheable
                        .then(|| list_cache::stamp(*fingerprint, *labels, bytes, limit))
                        .flatten();
                    Scan::Read(summary, stamp)
                }
                Ok(None) => Scan::Absent,
                Err(warning) => Scan::Warning(warning),
            }
        })
        .collect()
}

/// Reads a small JSON file with as few system calls as possible: one `read` when the
/// file fits in `buf` and its JSON parses, more only when it is cut short. `buf` is
/// reused between files and never cleared (only its first `filled` bytes count), so
/// that no time goes to zeroing it for every run.
fn read_json<T: serde::de::DeserializeOwned>(
    mut file: fs::File,
    buf: &mut Vec<u8>,
) -> std::io::Result<Result<T, serde_json::Error>> {
    if buf.len() < 4096 {
        buf.resize(4096, 0);
    }
    let mut filled = 0;
    loop {
        if filled == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        let read = file.read(&mut buf[filled..])?;
        filled += read;
        let parsed = serde_json::from_slice::<T>(&buf[..filled]);
        // A short read almost always means the end of the file; when the JSON is cut
        // short it was not, so read on until `read` says the file is done.
        match parsed {
            Err(error) if error.is_eof() && read > 0 => continue,
            parsed => return Ok(parsed),
        }
    }
}

/// What [`list_runs`] shows of the run in `dir` (from its `.summary.json`, else its
/// `session.json`); `None` when it has no conversation or neither file can be used.
pub fn summarize_run(dir: &Path) -> Option<RunSummary> {
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = dir.file_name()?.to_str()?;
    let dir_fd = fs::File::open(parent).ok()?;
    let conversation = conversation_len(&dir_fd, name, &mut String::new());
    let labels = labels_fingerprint(&dir_fd, name, &mut String::new())
        .ok()
        .flatten();
    let mut summary = match read_run_summary(&dir_fd, name, dir, conversation) {
        Ok(Some((summary, _))) => summary,
        _ => {
            let fingerprint =
                Fingerprint::stat_at(&dir_fd, &format!("{name}/{SESSION_JSON}")).ok()?;
            read_summary(&dir_fd, name, dir, &fingerprint, &mut Vec::new())
                .ok()
                .flatten()?
                .0
        }
    };
    read_run_labels(&dir_fd, name, labels.as_ref(), &mut summary);
    Some(summary)
}

/// The listing of run `name` from its `.summary.json`: `Ok(None)` when that is missing
/// or unusable (torn by a crash), or when the run has no `session.json` (a run is
/// listed only while it has one).
fn read_run_summary(
    dir_fd: &fs::File,
    name: &str,
    dir: &Path,
    conversation: Option<u64>,
) -> Result<Option<(RunSummary, Checked)>, RunWarning> {
    let path = || dir.join(RUN_SUMMARY);
    let read_bytes = || {
        let mut file = open_run_file(dir_fd, &format!("{name}/{RUN_SUMMARY}"))?;
        let mut bytes = Vec::with_capacity(512);
        file.read_to_end(&mut bytes)?;
        Ok(bytes)
    };
    let record = match crate::summary::read_with(read_bytes) {
        Ok(Some(record)) => record,
        Ok(None) => return Ok(None),
        Err(error) if is_missing(&error) => return Ok(None),
        Err(error) => return Err(warning(path(), format!("cannot read it: {error}"))),
    };
    match rustix::fs::statat(
        dir_fd,
        format!("{name}/{SESSION_JSON}"),
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    ) {
        Ok(_) => {}
        Err(error) if is_missing(&error.into()) => return Ok(None),
        Err(error) => {
            return Err(warning(
                dir.join(SESSION_JSON),
                format!("cannot read it: {}", std::io::Error::from(error)),
            ));
        }
    }
    if let Err(error) = validate_id("session", &record.session_id) {
        return Err(warning(path(), format!("refused: {error}")));
    }
    let Some(updated_at) = record.updated_at else {
        return Ok(None);
    };
    let mut summary = RunSummary {
        dir: dir.to_path_buf(),
        session_id: record.session_id,
        updated_at,
        last_message: record.last_message,
        first_message: record.first_message,
        message_count: record.message_count,
        title: None,
        tags: Vec::new(),
    };
    let checked = match (record.conversation_bytes, conversation) {
        (Some(expected), Some(found)) if expected != found => {
            recount(&mut summary);
            Checked::Recounted
        }
        (expected, _) => Checked::Matches(expected),
    };
    Ok(Some((summary, checked)))
}

/// The listing of run `name` from its `session.json`, for a run without a usable
/// summary, with whether it was counted from the conversation. `Ok(None)` for a run
/// whose `session.json` went away since it was stat'ed (not listed, not a problem).
///
/// A `session.json` written by an earlier version holds listing fields of its own;
/// one without `updatedAt` takes the modification time of the fingerprint, which is
/// what the summary is cached under. One that holds none (they are no longer
/// written there: they would go stale) with a conversation beside it is counted from
/// the conversation, dated by the conversation's modification time, and not cached
/// (the fingerprint is not the conversation's).
fn read_summary(
    dir_fd: &fs::File,
    name: &str,
    dir: &Path,
    fingerprint: &Fingerprint,
    buf: &mut Vec<u8>,
) -> Result<Option<(RunSummary, bool)>, RunWarning> {
    let path = || dir.join(SESSION_JSON);
    let opened = open_run_file(dir_fd, &format!("{name}/{SESSION_JSON}"))
        .and_then(|file| read_json::<SummaryFields>(file, buf));
    let parsed = match opened {
        Ok(parsed) => parsed,
        Err(error) if matches!(error.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
            return Ok(None);
        }
        Err(error) => return Err(warning(path(), format!("cannot read it: {error}"))),
    };
    let fields = match parsed {
        Ok(fields) => fields,
        Err(error) => {
            return Err(warning(
                path(),
                format!("not a valid session.json: {error}"),
            ));
        }
    };
    if let Err(error) = validate_id("session", &fields.session_id) {
        return Err(warning(path(), format!("refused: {error}")));
    }
    // Without listing fields and with a conversation, the conversation is counted.
    let conversation_time = (fields.updated_at.is_none() && fields.message_count.is_none())
        .then(|| {
            Fingerprint::stat_at(dir_fd, &format!("{name}/{CONVERSATION_JSONL}"))
                .ok()
                .and_then(|found| found.modified().ok())
        })
        .flatten();
    let counted = conversation_time.is_some();
    let updated_at = match fields.updated_at.or(conversation_time) {
        Some(at) => at,
        None => match fingerprint.modified() {
            Ok(at) => at,
            Err(error) => return Err(warning(path(), format!("cannot stat it: {error}"))),
        },
    };
    let mut summary = RunSummary {
        dir: dir.to_path_buf(),
        session_id: fields.session_id,
        updated_at,
        last_message: fields.last_message,
        first_message: fields.first_message,
        message_count: fields.message_count.unwrap_or(0),
        title: None,
        tags: Vec::new(),
    };
    if counted {
        recount(&mut summary);
    }
    Ok(Some((summary, counted)))
}

fn warning(path: PathBuf, message: String) -> RunWarning {
    RunWarning { path, message }
}

/// Resolves what a person typed to name a run: `last` (the newest run with a
/// conversation, as [`list_runs`] orders them), a folder name, or a prefix of
/// exactly one folder name. A prefix of several names that only one of them with a
/// conversation has names that one: folders without a conversation (made by a
/// start that resumed another run, or left before the first message) do not count
/// then.
///
/// `spec` must be a valid id (no `/`, no `..`, not empty), so it can never reach
/// outside `runs_dir`. An exact name wins over being a prefix of longer names
/// (`…-000Z` names its run even when `…-000Z-2` exists). The word `last` always means
/// the newest run.
pub fn find_run(runs_dir: &Path, spec: &str) -> Result<RunFolder, RunError> {
    if spec == LAST_RUN {
        let list = list_runs(runs_dir)?;
        return match list.runs.first() {
            Some(run) => Ok(run.folder()),
            None => Err(RunError::NoRuns {
                runs_dir: runs_dir.to_path_buf(),
            }),
        };
    }
    validate_id("run", spec)?;
    let no_such_run = || RunError::NoSuchRun {
        spec: spec.to_owned(),
        runs_dir: runs_dir.to_path_buf(),
    };
    let exact = runs_dir.join(spec);
    if reprise_session::fs::exists(&exact) {
        // A link is refused by the open, with an error naming it.
        return RunFolder::open(exact);
    }
    let entries = match fs::read_dir(runs_dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == ErrorKind::NotFound => return Err(no_such_run()),
        Err(source) => return Err(RunError::Io(IoError::new("list", runs_dir, source))),
    };
    let mut candidates = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io_err("list", runs_dir))?;
        if !is_run_dir(&entry) {
            continue;
        }
        if let Some(name) = entry.file_name().to_str()
            && name.starts_with(spec)
        {
            candidates.push(name.to_owned());
        }
    }
    candidates.sort();
    if candidates.len() > 1 {
        // A folder a start made and left without a conversation (the one made by a
        // `--resume PREFIX` that resumed elsewhere, a chat quit before its first
        // message) is not a run anyone means: with a prefix it does not count.
        let with_conversation: Vec<&String> = candidates
            .iter()
            .filter(|name| {
                reprise_session::fs::exists(&runs_dir.join(name).join(SESSION_JSON))
                    || reprise_session::fs::exists(&runs_dir.join(name).join(CONVERSATION_JSONL))
            })
            .collect();
        if let [only] = with_conversation.as_slice() {
            return RunFolder::open(runs_dir.join(only));
        }
    }
    match candidates.len() {
        0 => Err(no_such_run()),
        1 => RunFolder::open(runs_dir.join(&candidates[0])),
        _ => Err(RunError::AmbiguousRun {
            spec: spec.to_owned(),
            candidates,
        }),
    }
}

/// [`find_run`], or else the run whose title is `spec` (compared without regard to
/// case or runs of whitespace): a title that names several runs is refused with
/// [`RunError::AmbiguousTitle`] listing them. Run names win over titles, so a title
/// never hides a run's name or prefix.
pub fn find_run_or_title(runs_dir: &Path, spec: &str) -> Result<RunFolder, RunError> {
    let not_a_name = match find_run(runs_dir, spec) {
        Err(error @ (RunError::NoSuchRun { .. } | RunError::InvalidId(_))) => error,
        other => return other,
    };
    let wanted = fold_title(spec);
    let list = list_runs(runs_dir)?;
    let matches: Vec<&RunSummary> = list
        .runs
        .iter()
        .filter(|run| {
            run.title
                .as_deref()
                .is_some_and(|title| !wanted.is_empty() && fold_title(title) == wanted)
        })
        .collect();
    match matches.as_slice() {
        // Neither a name nor a title: with a space it was meant as a title; else
        // what was wrong with it as a name.
        [] if spec.contains(char::is_whitespace) => Err(RunError::NoSuchRun {
            spec: spec.to_owned(),
            runs_dir: runs_dir.to_path_buf(),
        }),
        [] => Err(not_a_name),
        [run] => Ok(run.folder()),
        several => Err(RunError::AmbiguousTitle {
            spec: spec.to_owned(),
            candidates: several.iter().map(|run| run.name().to_owned()).collect(),
        }),
    }
}

/// A title as [`find_run_or_title`] compares it: words joined by one space,
/// lowercased.
pub fn fold_title(title: &str) -> String {
    title
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}
