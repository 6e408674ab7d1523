//! Run folders (seed 001): one folder per start of the chat, named after its UTC start
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

use std::fmt;
use std::fs::{self, DirBuilder};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::Deserialize;

use crate::id::validate_id;
use crate::private_fs::{create_private_dir_all, open_private_append, sync_parent};
use crate::run_error::RunError;
use crate::run_meta::{SESSION_JSON, SessionJson};

/// The file a run's terminal output goes to; created with the folder.
pub const SESSION_LOG: &str = "session.log";

/// What `find_run` takes to mean the newest run with a conversation.
pub const LAST_RUN: &str = "last";

/// Most suffixes tried when many runs start in the same millisecond.
const MAX_SUFFIX: u32 = 100_000;

/// One run's folder, and the session it holds once it has a conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunFolder {
    /// The folder, `<runs_dir>/<name>`.
    pub dir: PathBuf,
    /// The session kept in the folder (from `session.json`); `None` for a new run.
    pub session_id: Option<String>,
}

impl RunFolder {
    /// A run folder that already exists, with its session id read from
    /// `session.json` when there is one.
    pub fn open(dir: impl Into<PathBuf>) -> Result<RunFolder, RunError> {
        let dir = dir.into();
        let path = dir.join(SESSION_JSON);
        let session_id = match fs::read(&path) {
            Ok(bytes) => {
                let meta: SessionJson =
                    serde_json::from_slice(&bytes).map_err(|error| RunError::Format {
                        path: path.clone(),
                        message: error.to_string(),
                    })?;
                validate_id("session", &meta.session_id)?;
                Some(meta.session_id)
            }
            Err(error) if error.kind() == ErrorKind::NotFound => {
                if !dir.is_dir() {
                    return Err(RunError::io(
                        "open",
                        &dir,
                        std::io::Error::from(ErrorKind::NotFound),
                    ));
                }
                None
            }
            Err(source) => return Err(RunError::io("read", path, source)),
        };
        Ok(RunFolder { dir, session_id })
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

/// [`create_run_folder`] for a run started at `start` (a clock given by the caller).
pub fn create_run_folder_at(runs_dir: &Path, start: Timestamp) -> Result<RunFolder, RunError> {
    create_private_dir_all(runs_dir)?;
    let base = run_folder_name(start);
    let mut builder = DirBuilder::new();
    builder.mode(0o700);
    for n in 1..=MAX_SUFFIX {
        let name = if n == 1 {
            base.clone()
        } else {
            format!("{base}-{n}")
        };
        let dir = runs_dir.join(name);
        match builder.create(&dir) {
            Ok(()) => {
                sync_parent(&dir)?;
                open_private_append(&dir.join(SESSION_LOG))?;
                return Ok(RunFolder {
                    dir,
                    session_id: None,
                });
            }
            Err(error) if error.kind() == ErrorKind::AlreadyExists => continue,
            Err(source) => return Err(RunError::io("create", dir, source)),
        }
    }
    Err(RunError::io(
        "create",
        runs_dir.join(&base),
        std::io::Error::new(
            ErrorKind::AlreadyExists,
            "every suffix of this run name is taken",
        ),
    ))
}

/// One run with a conversation, as `list_runs` sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSummary {
    /// The run's folder.
    pub dir: PathBuf,
    /// The session kept in it.
    pub session_id: String,
    /// When the conversation was last appended to (`updatedAt` of `session.json`, or
    /// the file's modification time when the field is missing).
    pub updated_at: Timestamp,
    /// The person's last message, when `session.json` records it.
    pub last_message: Option<String>,
    /// How many messages the conversation holds, per `session.json`.
    pub message_count: u64,
}

impl RunSummary {
    /// The folder's name (its start time).
    pub fn name(&self) -> &str {
        folder_name(&self.dir)
    }

    /// The run as a folder to resume.
    pub fn folder(&self) -> RunFolder {
        RunFolder {
            dir: self.dir.clone(),
            session_id: Some(self.session_id.clone()),
        }
    }
}

/// A run that `list_runs` left out because its `session.json` could not be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunWarning {
    /// The `session.json` in question.
    pub path: PathBuf,
    /// What was wrong with it.
    pub message: String,
}

impl fmt::Display for RunWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.message)
    }
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
    message_count: u64,
}

/// The runs under `runs_dir` that have a `session.json`, newest first (by
/// `updatedAt`, then by folder name). A missing `runs_dir` lists nothing.
///
/// Only `session.json` is read for each run (plus a stat of it when it lacks
/// `updatedAt`), never the conversation, so the cost does not grow with the size of
/// the conversations. A `session.json` that cannot be read or parsed leaves its run
/// out with a warning in [`RunList::warnings`]; it never fails the listing.
pub fn list_runs(runs_dir: &Path) -> Result<RunList, RunError> {
    let entries = match fs::read_dir(runs_dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(RunList::default()),
        Err(source) => return Err(RunError::io("list", runs_dir, source)),
    };
    let mut dirs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| RunError::io("list", runs_dir, source))?;
        if is_run_dir(&entry) {
            dirs.push(entry.path());
        }
    }
    let mut list = RunList::default();
    for (runs, warnings) in read_summaries(&dirs) {
        list.runs.extend(runs);
        list.warnings.extend(warnings);
    }
    // Names are compared only on equal times: taking a path's file name is not free.
    list.runs.sort_by(|a, b| {
        b.updated_at
            .cmp(&a.updated_at)
            .then_with(|| b.name().cmp(a.name()))
    });
    Ok(list)
}

fn is_run_dir(entry: &fs::DirEntry) -> bool {
    let name = entry.file_name();
    let Some(name) = name.to_str() else {
        return false;
    };
    if validate_id("run", name).is_err() {
        return false;
    }
    // d_type from the directory listing: no extra stat on common file systems.
    match entry.file_type() {
        Ok(kind) => kind.is_dir() || kind.is_symlink(),
        Err(_) => false,
    }
}

/// Runs with at least this many folders are read by several threads.
const PARALLEL_FROM: usize = 256;

/// The summaries of `dirs`, read in chunks by a few threads: each `session.json` is
/// a separate open and read, and the time goes to those system calls.
fn read_summaries(dirs: &[PathBuf]) -> Vec<(Vec<RunSummary>, Vec<RunWarning>)> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(4);
    if threads < 2 || dirs.len() < PARALLEL_FROM {
        return vec![read_chunk(dirs)];
    }
    let chunk = dirs.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let workers: Vec<_> = dirs
            .chunks(chunk)
            .map(|part| (part, scope.spawn(move || read_chunk(part))))
            .collect();
        workers
            .into_iter()
            // A worker that panicked is redone here, so a listing is never partial.
            .map(|(part, worker)| worker.join().unwrap_or_else(|_| read_chunk(part)))
            .collect()
    })
}

fn read_chunk(dirs: &[PathBuf]) -> (Vec<RunSummary>, Vec<RunWarning>) {
    let mut runs = Vec::with_capacity(dirs.len());
    let mut warnings = Vec::new();
    let mut buf = Vec::new();
    for dir in dirs {
        match read_summary(dir, &mut buf) {
            Ok(Some(summary)) => runs.push(summary),
            Ok(None) => {}
            Err(warning) => warnings.push(warning),
        }
    }
    (runs, warnings)
}

/// Reads a small JSON file with as few system calls as possible: one `read` when the
/// file fits in `buf` and its JSON parses, more only when it is cut short. `buf` is
/// reused between files and never cleared (only its first `filled` bytes count), so
/// that no time goes to zeroing it for every run.
fn read_json<T: serde::de::DeserializeOwned>(
    path: &Path,
    buf: &mut Vec<u8>,
) -> std::io::Result<Result<T, serde_json::Error>> {
    let mut file = fs::File::open(path)?;
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

/// `Ok(None)` for a run without `session.json` (not listed, not a problem).
fn read_summary(dir: &Path, buf: &mut Vec<u8>) -> Result<Option<RunSummary>, RunWarning> {
    let path = dir.join(SESSION_JSON);
    let warn = |message: String| RunWarning {
        path: path.clone(),
        message,
    };
    let parsed = match read_json::<SummaryFields>(&path, buf) {
        Ok(parsed) => parsed,
        Err(error) if matches!(error.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
            return Ok(None);
        }
        Err(error) => return Err(warn(format!("cannot read it: {error}"))),
    };
    let fields = parsed.map_err(|error| warn(format!("not a valid session.json: {error}")))?;
    validate_id("session", &fields.session_id)
        .map_err(|error| warn(format!("refused: {error}")))?;
    let updated_at = match fields.updated_at {
        Some(at) => at,
        None => modified_time(&path).map_err(|error| warn(format!("cannot stat it: {error}")))?,
    };
    Ok(Some(RunSummary {
        dir: dir.to_path_buf(),
        session_id: fields.session_id,
        updated_at,
        last_message: fields.last_message,
        message_count: fields.message_count,
    }))
}

fn modified_time(path: &Path) -> std::io::Result<Timestamp> {
    let modified = fs::metadata(path)?.modified()?;
    Timestamp::try_from(modified).map_err(std::io::Error::other)
}

/// Resolves what a person typed to name a run: `last` (the newest run with a
/// conversation, as [`list_runs`] orders them), a folder name, or a prefix of
/// exactly one folder name.
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
    if exact.is_dir() {
        return RunFolder::open(exact);
    }
    let entries = match fs::read_dir(runs_dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == ErrorKind::NotFound => return Err(no_such_run()),
        Err(source) => return Err(RunError::io("list", runs_dir, source)),
    };
    let mut candidates = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| RunError::io("list", runs_dir, source))?;
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
    match candidates.len() {
        0 => Err(no_such_run()),
        1 => RunFolder::open(runs_dir.join(&candidates[0])),
        _ => Err(RunError::AmbiguousRun {
            spec: spec.to_owned(),
            candidates,
        }),
    }
}

fn folder_name(dir: &Path) -> &str {
    dir.file_name().and_then(|name| name.to_str()).unwrap_or("")
}
