//! Writing converted sessions into run folders, once per source.
//!
//! A run made by an import records where it came from in its `session.json`:
//!
//! ```json
//! "importedFrom": {"tool": "claude-code", "path": "/home/me/.claude/projects/x/ab.jsonl",
//!                  "sessionId": "ab…", "contentHash": "sha256:…", "title": "…"}
//! ```
//!
//! `importedFrom` is written last, once every entry is on disk, so an import cut
//! short leaves a run without it, and the next import of the file makes a whole one.
//! A file whose tool, session id and content hash an earlier import recorded creates
//! nothing new. A session that grew since its import (the source tool went on with
//! it) has its new part appended to the run imported before, when that run holds
//! exactly what the earlier import wrote and the new conversion starts with it.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use reprise_runs::{
    CONVERSATION_JSONL, RunStore, SESSION_JSON, SUBAGENTS_DIR, create_run_folder_at,
    run_folder_name,
};
use reprise_session::{Durability, SessionKey, SessionStore};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::error::ImportError;
use crate::report::Report;
use crate::{Converted, SourceTool, convert, read_file};

/// The `session.json` field naming the source of an imported run.
pub const IMPORTED_FROM: &str = "importedFrom";

/// What importing one file did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A new run folder was written.
    Created {
        /// The run folder.
        run: PathBuf,
    },
    /// Dry run: the run folder that would be written (its name may get a `-N` suffix).
    WouldCreate {
        /// The folder name.
        name: String,
    },
    /// An earlier import of the same content made this run; nothing was written.
    AlreadyImported {
        /// The run folder.
        run: PathBuf,
    },
    /// The session grew since an earlier import made this run: its new entries were
    /// appended to it (with `dry_run`, would be).
    Appended {
        /// The run folder.
        run: PathBuf,
        /// How many entries were appended, subagents' included.
        entries: usize,
        /// Whether this was a dry run, so that nothing was written.
        dry_run: bool,
    },
}

/// One imported file.
#[derive(Clone, Debug)]
pub struct ImportedFile {
    /// The file.
    pub path: PathBuf,
    /// The tool that wrote it.
    pub tool: SourceTool,
    /// Its session id in that tool.
    pub session_id: String,
    /// Its title there, if any.
    pub title: Option<String>,
    /// Names of the subagent conversations it brought.
    pub subagents: Vec<String>,
    /// What happened.
    pub outcome: Outcome,
    /// What was converted and what was not.
    pub report: Report,
    /// Why a session imported before was imported as a new run rather than
    /// appended to the earlier one.
    pub not_appended: Option<String>,
}

type Key = (String, String, String);

/// An earlier import of a session: its run and how many entries of the main
/// conversation it wrote.
#[derive(Clone, Debug)]
struct Earlier {
    run: PathBuf,
    entries: Option<usize>,
}

/// Imports files into one runs directory, remembering what is there already.
#[derive(Debug)]
pub struct Importer {
    runs_dir: PathBuf,
    known: HashMap<Key, PathBuf>,
    /// The latest import of each (tool, session id).
    sessions: HashMap<(String, String), Earlier>,
    durability: Durability,
}

fn key_of(value: &Value) -> Option<Key> {
    let from = value.get(IMPORTED_FROM)?;
    Some((
        from["tool"].as_str()?.to_owned(),
        from["sessionId"].as_str()?.to_owned(),
        from["contentHash"].as_str()?.to_owned(),
    ))
}

fn content_hash(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut text = String::with_capacity(7 + 64);
    text.push_str("sha256:");
    for byte in digest {
        text.push_str(&format!("{byte:02x}"));
    }
    text
}

fn write_error(path: &Path) -> impl FnOnce(std::io::Error) -> ImportError + '_ {
    move |source| ImportError::Write {
        path: path.to_path_buf(),
        source,
    }
}

impl Importer {
    /// An importer into `runs_dir` (which need not exist yet). Reads the
    /// `session.json` of every run there to know what was imported before.
    pub fn new(runs_dir: &Path) -> Result<Importer, ImportError> {
        let mut known = HashMap::new();
        let mut sessions: HashMap<(String, String), Earlier> = HashMap::new();
        let read = match std::fs::read_dir(runs_dir) {
            Ok(read) => Some(read),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => {
                return Err(ImportError::Read {
                    path: runs_dir.to_path_buf(),
                    source,
                });
            }
        };
        for item in read.into_iter().flatten().flatten() {
            let name = item.file_name();
            if name.to_string_lossy().starts_with('.') {
                continue;
            }
            // A run folder that is a link is not a run.
            if !item.file_type().is_ok_and(|kind| kind.is_dir()) {
                continue;
            }
            let meta_path = item.path().join(SESSION_JSON);
            let is_file = std::fs::symlink_metadata(&meta_path).is_ok_and(|m| m.is_file());
            let Some(bytes) = is_file.then(|| std::fs::read(&meta_path).ok()).flatten() else {
                continue;
            };
            let Some(value) = serde_json::from_slice::<Value>(&bytes).ok() else {
                continue;
            };
            if let Some(key) = key_of(&value) {
                let entries = value[IMPORTED_FROM]["entries"]
                    .as_u64()
                    .and_then(|n| usize::try_from(n).ok());
                let earlier = Earlier {
                    run: item.path(),
                    entries,
                };
                // Of several runs of one session, the one that imported most of it
                // is the one that grows.
                let session = (key.0.clone(), key.1.clone());
                if sessions
                    .get(&session)
                    .is_none_or(|known| known.entries < earlier.entries)
                {
                    sessions.insert(session, earlier);
                }
                known.insert(key, item.path());
            }
        }
        Ok(Importer {
            runs_dir: runs_dir.to_path_buf(),
            known,
            sessions,
            durability: Durability::Full,
        })
    }

    /// Writes with `durability` instead of [`Durability::Full`] (tests).
    pub fn with_durability(mut self, durability: Durability) -> Importer {
        self.durability = durability;
        self
    }

    /// Imports the transcript at `path` into a new run folder, named after the
    /// session's start; with `dry_run`, only converts it and says what it would write.
    pub async fn import_file(
        &mut self,
        path: &Path,
        dry_run: bool,
    ) -> Result<ImportedFile, ImportError> {
        let bytes = read_file(path)?;
        // The hash is computed beside the conversion.
        let (converted, hash) = std::thread::scope(|scope| {
            let hashing = std::thread::Builder::new().spawn_scoped(scope, || content_hash(&bytes));
            let converted = convert(path, &bytes);
            let hash = match hashing {
                Ok(handle) => handle.join().unwrap_or_else(|_| content_hash(&bytes)),
                Err(_) => content_hash(&bytes),
            };
            (converted, hash)
        });
        let converted = converted?;
        drop(bytes);
        let key = (
            converted.tool.as_str().to_owned(),
            converted.session_id.clone(),
            hash.clone(),
        );
        let start = converted.started.unwrap_or_else(Timestamp::now);
        let session = (key.0.clone(), key.1.clone());
        let mut not_appended = None;
        let outcome = if let Some(run) = self.known.get(&key) {
            Outcome::AlreadyImported { run: run.clone() }
        } else {
            let growth = match self.sessions.get(&session) {
                Some(earlier) => match growth_of(earlier, &converted) {
                    Ok(growth) => Some((earlier.run.clone(), growth)),
                    Err(why) => {
                        not_appended = Some(why);
                        None
                    }
                },
                None => None,
            };
            match growth {
                Some((run, growth)) => {
                    let entries = growth.count();
                    if !dry_run {
                        self.append(&run, path, &converted, &growth, &hash).await?;
                        self.remember(key, &run, converted.main.len());
                    }
                    Outcome::Appended {
                        run,
                        entries,
                        dry_run,
                    }
                }
                None if dry_run => Outcome::WouldCreate {
                    name: run_folder_name(start),
                },
                None => {
                    let run = self.write_run(path, &converted, &hash, start).await?;
                    self.remember(key, &run, converted.main.len());
                    Outcome::Created { run }
                }
            }
        };
        Ok(ImportedFile {
            path: path.to_path_buf(),
            tool: converted.tool,
            session_id: converted.session_id,
            title: converted.title,
            subagents: converted
                .subagents
                .iter()
                .map(|(name, _)| name.clone())
                .collect(),
            outcome,
            report: converted.report,
            not_appended,
        })
    }

    /// Records that `run` now holds the import of `key`, `entries` entries long.
    fn remember(&mut self, key: Key, run: &Path, entries: usize) {
        let session = (key.0.clone(), key.1.clone());
        self.known.insert(key, run.to_path_buf());
        self.sessions.insert(
            session,
            Earlier {
                run: run.to_path_buf(),
                entries: Some(entries),
            },
        );
    }

    /// Appends what `converted` holds beyond what run `dir` has (`growth`), then
    /// records the new content hash.
    async fn append(
        &self,
        dir: &Path,
        path: &Path,
        converted: &Converted,
        growth: &Growth,
        hash: &str,
    ) -> Result<(), ImportError> {
        let store = RunStore::with_durability(dir, self.write_durability());
        let main =
            SessionKey::session(&growth.session_id).map_err(reprise_session::StoreError::from)?;
        store
            .append(&main, &converted.main[growth.main_from..])
            .await?;
        let mut written = vec![dir.join(CONVERSATION_JSONL)];
        for ((name, entries), from) in converted.subagents.iter().zip(&growth.subagents_from) {
            if *from == entries.len() {
                continue;
            }
            let key = SessionKey::subagent(&growth.session_id, name)
                .map_err(reprise_session::StoreError::from)?;
            store.append(&key, &entries[*from..]).await?;
            written.push(dir.join(SUBAGENTS_DIR).join(format!("{name}.jsonl")));
        }
        drop(store);
        self.sync(&written)?;
        self.write_imported_from(dir, path, converted, hash)
    }

    /// The durability entries are written with: synced once at the end instead of
    /// after every append.
    fn write_durability(&self) -> Durability {
        match self.durability {
            Durability::Full => Durability::Flush,
            other => other,
        }
    }

    fn sync(&self, files: &[PathBuf]) -> Result<(), ImportError> {
        if self.durability == Durability::Full {
            for file in files {
                let handle = std::fs::File::open(file).map_err(write_error(file))?;
                handle.sync_data().map_err(write_error(file))?;
            }
        }
        Ok(())
    }

    async fn write_run(
        &self,
        path: &Path,
        converted: &Converted,
        hash: &str,
        start: Timestamp,
    ) -> Result<PathBuf, ImportError> {
        let folder = create_run_folder_at(&self.runs_dir, start)?;
        let dir = folder.dir.clone();
        // The run's own session: the source's id stays in importedFrom.
        let session_id = Uuid::now_v7().to_string();
        let store = RunStore::with_durability(&dir, self.write_durability());
        let main = SessionKey::session(&session_id).map_err(reprise_session::StoreError::from)?;
        store.append(&main, &converted.main).await?;
        for (name, entries) in &converted.subagents {
            let key = SessionKey::subagent(&session_id, name)
                .map_err(reprise_session::StoreError::from)?;
            store.append(&key, entries).await?;
        }
        drop(store);
        let mut written = vec![dir.join(CONVERSATION_JSONL)];
        for (name, _) in &converted.subagents {
            written.push(dir.join(SUBAGENTS_DIR).join(format!("{name}.jsonl")));
        }
        self.sync(&written)?;
        self.write_imported_from(&dir, path, converted, hash)?;
        Ok(dir)
    }

    /// Last: the mark that this import is complete, `importedFrom` in the run's
    /// `session.json`.
    fn write_imported_from(
        &self,
        dir: &Path,
        path: &Path,
        converted: &Converted,
        hash: &str,
    ) -> Result<(), ImportError> {
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let meta_path = dir.join(SESSION_JSON);
        let bytes = std::fs::read(&meta_path).map_err(write_error(&meta_path))?;
        let mut meta: Value =
            serde_json::from_slice(&bytes).map_err(|error| ImportError::Malformed {
                path: meta_path.clone(),
                message: error.to_string(),
            })?;
        let mut from = json!({
            "tool": converted.tool.as_str(),
            "path": absolute.to_string_lossy(),
            "sessionId": converted.session_id,
            "contentHash": hash,
            "entries": converted.main.len(),
        });
        if let Some(title) = &converted.title {
            from["title"] = Value::String(title.clone());
        }
        meta[IMPORTED_FROM] = from;
        let text = serde_json::to_vec_pretty(&meta).map_err(|error| ImportError::Malformed {
            path: meta_path.clone(),
            message: error.to_string(),
        })?;
        let temp = dir.join(format!(".{SESSION_JSON}.tmp-{}-0", std::process::id()));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode_private()
            .open(&temp)
            .map_err(write_error(&temp))?;
        file.write_all(&text).map_err(write_error(&temp))?;
        if self.durability == Durability::Full {
            file.sync_data().map_err(write_error(&temp))?;
        }
        drop(file);
        std::fs::rename(&temp, &meta_path).map_err(write_error(&meta_path))?;
        if self.durability == Durability::Full {
            let handle = std::fs::File::open(dir).map_err(write_error(dir))?;
            handle.sync_all().map_err(write_error(dir))?;
        }
        Ok(())
    }
}

/// What a grown session adds to the run an earlier import made of it.
#[derive(Debug)]
struct Growth {
    /// The run's session id.
    session_id: String,
    /// The first entry of the main conversation not in the run.
    main_from: usize,
    /// The same for each subagent of the conversion, in its order.
    subagents_from: Vec<usize>,
    /// Entries to append in all.
    total: usize,
}

impl Growth {
    fn count(&self) -> usize {
        self.total
    }
}

/// Whether `converted` is what the earlier import wrote into its run, and more;
/// else why its new part cannot be appended there.
fn growth_of(earlier: &Earlier, converted: &Converted) -> Result<Growth, String> {
    let dir = &earlier.run;
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let meta: Value = std::fs::read(dir.join(SESSION_JSON))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or_else(|| format!("run {name} has no readable session.json"))?;
    let session_id = meta["sessionId"]
        .as_str()
        .ok_or_else(|| format!("run {name} names no session"))?
        .to_owned();
    let load = |path: &Path| -> Result<Vec<Value>, String> {
        let loaded = reprise_session::load_file(path, &session_id)
            .map_err(|error| format!("run {name} cannot be read: {error}"))?;
        Ok(loaded
            .map(|loaded| loaded.entries)
            .unwrap_or_default()
            .iter()
            .filter_map(|entry| serde_json::to_value(entry).ok())
            .collect())
    };
    let starts_with = |entries: &[reprise_session::Entry], have: &[Value]| {
        have.len() <= entries.len()
            && entries
                .iter()
                .zip(have)
                .all(|(entry, had)| serde_json::to_value(entry).ok().as_ref() == Some(had))
    };
    let main = load(&dir.join(CONVERSATION_JSONL))?;
    if earlier.entries.is_some_and(|n| n != main.len()) {
        return Err(format!(
            "run {name} went on in reprise after it was imported"
        ));
    }
    if !starts_with(&converted.main, &main) {
        return Err(format!(
            "the part imported before into run {name} changed in the source (a rewind, a \
             compaction, or a call that was unanswered then)"
        ));
    }
    let mut total = converted.main.len() - main.len();
    let mut subagents_from = Vec::with_capacity(converted.subagents.len());
    for (sub, entries) in &converted.subagents {
        let have = load(&dir.join(SUBAGENTS_DIR).join(format!("{sub}.jsonl")))?;
        if !starts_with(entries, &have) {
            return Err(format!(
                "subagent {sub} imported before into run {name} changed in the source"
            ));
        }
        total += entries.len() - have.len();
        subagents_from.push(have.len());
    }
    Ok(Growth {
        session_id,
        main_from: main.len(),
        subagents_from,
        total,
    })
}

/// Creates files readable by their owner only, as every file of a run folder is.
trait PrivateMode {
    fn mode_private(&mut self) -> &mut Self;
}

impl PrivateMode for std::fs::OpenOptions {
    #[cfg(unix)]
    fn mode_private(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.mode(0o600)
    }

    #[cfg(not(unix))]
    fn mode_private(&mut self) -> &mut Self {
        self
    }
}
