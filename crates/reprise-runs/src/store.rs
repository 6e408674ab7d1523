//! The run-folder store: one session inside one run folder.
//!
//! ```text
//! <run>/conversation.jsonl        the session's entries
//! <run>/subagents/<name>.jsonl    each subagent's entries
//! <run>/session.json              {"sessionId", "subagents": {name: path}, "forkedFrom"?,
//!                                  "updatedAt", "lastMessage", "messageCount"}
//! <run>/.summary.json             {"sessionId", "updatedAt", "lastMessage", "messageCount"}
//! <run>/.lock                     the writer lock (holds the writer's pid)
//! ```
//!
//! `session.json` appears with the first append (before `conversation.jsonl`) and is
//! replaced (temp file + rename) only when what it maps changes: a subagent is
//! registered. What a listing shows (when, the person's last message, how many
//! messages) is rewritten in place in `.summary.json` after every append, so that
//! listing runs never reads a conversation and an append never pays for a rename (see
//! the `summary` module); the listing fields in `session.json` are as of its last
//! write, and are what listings fall back to without a usable `.summary.json`. A run
//! folder holds one session: any other session id is refused with
//! [`StoreError::Unsupported`]. To fork a run, use [`fork_run`].

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use jiff::Timestamp;
use reprise_redact::Redactor;
use uuid::Uuid;

use crate::listing_redaction::{ListingRedaction, Pending, last_message_text};
use crate::meta::{SESSION_JSON, SessionJson};
use crate::person_message::typed_text;
use crate::summary::{RUN_SUMMARY, SummaryRecord, SummaryWriter};
use reprise_session::IoError;
use reprise_session::JsonlWriter;
use reprise_session::LoadedView;
use reprise_session::fs::{
    DirSync, create_new_private, create_private_dir_all, exists, io_err, move_no_replace,
    remove_dir_if_exists, remove_file_if_exists, sync_dir, temp_sibling, write_file_atomic,
};
use reprise_session::parts::ForkSyncs;
use reprise_session::parts::copy_lines;
use reprise_session::parts::jsonl_stems;
use reprise_session::parts::load_file_beneath;
use reprise_session::parts::{BlockingStore, OverBlockingStore};
use reprise_session::parts::{LockRegistry, acquire};
use reprise_session::parts::{TranscriptFiles, Transcripts};
use reprise_session::{
    AppendReport, ForkOrigin, Loaded, SessionFork, SessionInfo, StoreError, WriterLock,
};
use reprise_session::{Durability, load_file};
use reprise_session::{Entry, now_millis};
use reprise_session::{SessionKey, validate_id};

/// The main transcript of a run.
pub const CONVERSATION_JSONL: &str = "conversation.jsonl";
/// The folder of subagent transcripts in a run.
pub const SUBAGENTS_DIR: &str = "subagents";
/// The writer lock file of a run.
pub const RUN_LOCK: &str = ".lock";
/// Folds appended entries into the listing fields (kept in `.summary.json`). The last message
/// is redacted before it is cut to length, so that a cut never leaves the start of a
/// secret that the whole text would have masked; only the newest one is redacted.
///
/// The first message is kept only when the conversation was empty before `entries`
/// (a run from before `firstMessage` existed gets none rather than a later one).
pub(crate) fn account(meta: &mut SessionJson, entries: &[&Entry], redactor: &Redactor) {
    account_with(meta, entries, redactor, None);
}

/// The newest message the person typed among `entries`: the one [`account`] keeps
/// as the last message.
pub(crate) fn newest_typed_text(entries: &[&Entry]) -> Option<String> {
    entries.iter().rev().find_map(|entry| typed_text(entry))
}

/// Whether the listing fields of `meta` disagree with a transcript's `entries`:
/// another count of messages, or a first or last message missing or not expected.
/// Texts are not compared: that would redact them (compiling the redactor's table
/// costs more than reading a long transcript's entries), and every append that
/// changes them also counts its messages.
fn listing_is_stale(meta: &SessionJson, entries: &[Entry]) -> bool {
    let count = entries
        .iter()
        .filter(|entry| entry.as_message().is_some())
        .count() as u64;
    let typed = entries.iter().find_map(typed_text).is_some();
    count != meta.message_count
        || typed != meta.first_message.is_some()
        || typed != meta.last_message.is_some()
}

/// [`account`], with the last message's listing form already made (from
/// [`newest_typed_text`] of the same entries) when `newest` is set.
pub(crate) fn account_with(
    meta: &mut SessionJson,
    entries: &[&Entry],
    redactor: &Redactor,
    newest: Option<String>,
) {
    let was_empty = meta.message_count == 0;
    meta.message_count += entries
        .iter()
        .filter(|entry| entry.as_message().is_some())
        .count() as u64;
    if was_empty && meta.first_message.is_none() {
        meta.first_message = entries
            .iter()
            .find_map(|entry| typed_text(entry))
            .map(|text| last_message_text(&redactor.redact(&text)));
    }
    if let Some(done) = newest {
        meta.last_message = Some(done);
    } else if let Some(text) = newest_typed_text(entries) {
        meta.last_message = Some(last_message_text(&redactor.redact(&text)));
    }
}

/// The listing fields of `meta`, as `.summary.json` holds them.
pub(crate) fn summary_of(meta: &SessionJson) -> SummaryRecord {
    SummaryRecord {
        session_id: meta.session_id.clone(),
        updated_at: meta.updated_at,
        last_message: meta.last_message.clone(),
        first_message: meta.first_message.clone(),
        message_count: meta.message_count,
        conversation_bytes: None,
    }
}

#[derive(Debug)]
struct RunState {
    /// `session.json` as last read or written; `None` before the first append.
    meta: Option<SessionJson>,
    meta_read: bool,
    /// The writers of the conversation and the subagents' transcripts.
    transcripts: Transcripts,
    /// `.summary.json`, open once the session is written to.
    summary: Option<SummaryWriter>,
    /// The conversation's length the summary described when it was read.
    summary_bytes: Option<u64>,
    /// What the listing's last message passes before it is written.
    redactor: Redactor,
}

#[derive(Debug)]
pub struct Inner {
    dir: PathBuf,
    durability: Durability,
    locks: LockRegistry,
    state: Mutex<RunState>,
    /// The background sync of the fork that made this run folder, joined on drop.
    fork_syncs: ForkSyncs,
    /// Redacts the newest message for the listing while an append syncs.
    listing: Mutex<ListingRedaction>,
}

/// A [`SessionStore`](reprise_session::SessionStore) bound to one run folder; see
/// [`create_run_store`].
///
/// A run folder is forked with [`fork_run`], which returns the new folder's store with
/// the fork's data still being synced in the background. The store owns that sync:
/// [`SessionStore::close`](reprise_session::SessionStore::close) waits for it, and dropping the last clone of the store waits for
/// it too, so once the store is gone the fork is on disk. In async code prefer
/// `close().await`: a drop waits on the thread it runs on.
#[derive(Clone, Debug)]
pub struct RunStore {
    inner: Arc<Inner>,
}

/// A store that keeps one session in the run folder `dir` (created 0700 on the first
/// write if missing), with [`Durability::Full`].
pub fn create_run_store(dir: impl Into<PathBuf>) -> RunStore {
    RunStore::with_durability(dir, Durability::Full)
}

impl OverBlockingStore for RunStore {
    type Inner = Inner;

    fn blocking_store(&self) -> &Arc<Inner> {
        &self.inner
    }
}

impl RunStore {
    /// A run store with the given durability.
    pub fn with_durability(dir: impl Into<PathBuf>, durability: Durability) -> Self {
        RunStore {
            inner: Arc::new(Inner {
                dir: dir.into(),
                durability,
                locks: LockRegistry::default(),
                state: Mutex::new(RunState {
                    meta: None,
                    meta_read: false,
                    transcripts: Transcripts::default(),
                    summary: None,
                    summary_bytes: None,
                    redactor: Redactor::new(),
                }),
                fork_syncs: ForkSyncs::default(),
                listing: Mutex::new(ListingRedaction::default()),
            }),
        }
    }

    /// Redacts the person's last message, which `.summary.json` and `session.json`
    /// keep for listings, with `redactor` (by default the built-in patterns only: give
    /// the one that knows the run's exact secret values, such as the API key). The
    /// conversation itself is kept as it was sent.
    pub fn with_redactor(self, redactor: Redactor) -> RunStore {
        self.inner.state().redactor = redactor;
        self
    }

    /// The run folder.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Forks whose background data sync was started and not yet waited for.
    pub fn pending_fork_syncs(&self) -> usize {
        self.inner.fork_syncs.pending()
    }

    /// The session this run folder holds, from `session.json` (`None` before the first
    /// append).
    pub fn session_id(&self) -> Result<Option<String>, StoreError> {
        let mut state = self.inner.state();
        Ok(self
            .inner
            .meta(&mut state)?
            .map(|meta| meta.session_id.clone()))
    }
}

fn read_session_json(path: &Path) -> Result<Option<SessionJson>, StoreError> {
    let Some(bytes) = crate::fs::read_beneath(crate::fs::run_file_root(path), path)? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|error| StoreError::Format {
            path: path.to_path_buf(),
            message: format!("not a valid session.json: {error}"),
        })
}

pub(crate) fn write_session_json(
    path: &Path,
    meta: &SessionJson,
    sync: bool,
) -> Result<(), StoreError> {
    let bytes = serde_json::to_vec_pretty(meta).map_err(|error| StoreError::Format {
        path: path.to_path_buf(),
        message: error.to_string(),
    })?;
    Ok(write_file_atomic(
        crate::fs::run_file_root(path),
        path,
        &bytes,
        sync,
    )?)
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, RunState> {
        // Everything cached here is re-validated against the files on use.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn listing(&self) -> MutexGuard<'_, ListingRedaction> {
        self.listing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn meta_path(&self) -> PathBuf {
        self.dir.join(SESSION_JSON)
    }

    /// The runs directory: below it no symbolic link is followed (a run folder that
    /// is a link is refused like a file that is one).
    fn root(&self) -> &Path {
        reprise_session::fs::parent_of(&self.dir)
    }

    fn transcript_path(&self, key: &SessionKey) -> PathBuf {
        match key.subagent_name() {
            None => self.dir.join(CONVERSATION_JSONL),
            Some(name) => self.dir.join(SUBAGENTS_DIR).join(format!("{name}.jsonl")),
        }
    }

    /// Whether this run folder holds the session `id` (its `session.json` says so).
    fn is_run_of(&self, state: &mut RunState, id: &str) -> Result<bool, StoreError> {
        Ok(self.meta(state)?.is_some_and(|meta| meta.session_id == id))
    }

    fn meta<'s>(&self, state: &'s mut RunState) -> Result<Option<&'s mut SessionJson>, StoreError> {
        if !state.meta_read {
            state.meta = read_session_json(&self.meta_path())?;
            // The listing fields are in the summary, when it is usable. Without one,
            // they are taken as those of an empty conversation: the first append
            // recounts them from a conversation that is not (recount_if_stale).
            if let Some(meta) = state.meta.as_mut() {
                match crate::summary::read(&self.summary_path()) {
                    Ok(Some(summary)) if summary.session_id == meta.session_id => {
                        meta.updated_at = summary.updated_at.or(meta.updated_at);
                        meta.last_message = summary.last_message;
                        meta.first_message = summary.first_message.or(meta.first_message.take());
                        meta.message_count = summary.message_count;
                        state.summary_bytes = summary.conversation_bytes;
                    }
                    _ => state.summary_bytes = Some(0),
                }
            }
            state.meta_read = true;
        }
        Ok(state.meta.as_mut())
    }

    fn summary_path(&self) -> PathBuf {
        self.dir.join(RUN_SUMMARY)
    }

    /// Writes the listing fields of the session's metadata to `.summary.json`.
    fn write_summary(&self, state: &mut RunState) -> Result<(), StoreError> {
        let Some(meta) = state.meta.as_ref() else {
            return Ok(());
        };
        let writer = match &mut state.summary {
            Some(writer) => writer,
            empty => empty.insert(SummaryWriter::open(&self.summary_path())?),
        };
        let mut record = summary_of(meta);
        record.conversation_bytes = state.transcripts.main().and_then(JsonlWriter::indexed_len);
        writer.write(&record)
    }

    /// Before this store's first append: when the conversation is not at the length
    /// the summary described (emptied, cut or replaced by hand), recounts the listing
    /// fields from it, so that the next summary is not built on stale counts.
    fn recount_if_stale(&self, state: &mut RunState, id: &str) -> Result<(), StoreError> {
        if state
            .transcripts
            .main()
            .is_some_and(JsonlWriter::is_indexed)
        {
            return Ok(());
        }
        let Some(expected) = state.summary_bytes.take() else {
            return Ok(());
        };
        let path = self.dir.join(CONVERSATION_JSONL);
        let found = std::fs::symlink_metadata(&path).map_or(0, |meta| meta.len());
        if found == expected {
            return Ok(());
        }
        let loaded = load_file_beneath(self.root(), &path, id)?;
        if let Some(meta) = state.meta.as_mut() {
            meta.message_count = 0;
            meta.last_message = None;
            meta.first_message = None;
            if let Some(loaded) = loaded {
                account(
                    meta,
                    &loaded.entries.iter().collect::<Vec<_>>(),
                    &state.redactor,
                );
            }
        }
        Ok(())
    }

    /// Refuses a session other than the one this run holds.
    fn check_session(&self, state: &mut RunState, session: &str) -> Result<bool, StoreError> {
        match self.meta(state)? {
            None => Ok(false),
            Some(meta) if meta.session_id == session => Ok(true),
            Some(meta) => Err(StoreError::Unsupported(format!(
                "run folder {} holds session {}; it cannot hold session {session} too \
                 (one session per run folder: use a new run folder)",
                self.dir.display(),
                meta.session_id
            ))),
        }
    }
}

impl TranscriptFiles for Inner {
    fn new_writer(&self, key: &SessionKey) -> JsonlWriter {
        // A run has a handful of transcripts: each writer keeps its file open.
        JsonlWriter::new(self.transcript_path(key), key.session_id(), self.durability)
            .beneath(self.root())
            .part_of(&self.dir.join(CONVERSATION_JSONL))
            .keeping_file_open()
    }

    fn subagents_dir(&self, _id: &str) -> PathBuf {
        self.dir.join(SUBAGENTS_DIR)
    }
}

impl BlockingStore for Inner {
    /// Waits until the data of the fork that made this run folder is on disk.
    fn close(&self) -> Result<(), StoreError> {
        self.fork_syncs.wait();
        Ok(())
    }

    fn append_is_short(&self, key: &SessionKey) -> bool {
        // Busy (another call is using the run): not known to be short.
        let Ok(state) = self.state.try_lock() else {
            return false;
        };
        state.meta_read && state.summary.is_some() && state.transcripts.are_indexed(key)
    }

    fn append(&self, key: &SessionKey, entries: &[Entry]) -> Result<AppendReport, StoreError> {
        let id = key.session_id();
        let mut state = self.state();
        let known = self.check_session(&mut state, id)?;
        let sync_dirs = self.durability.syncs_dirs();
        create_private_dir_all(&self.dir, DirSync::when(sync_dirs))?;
        self.locks
            .with_writer(id, self.root(), &self.dir.join(RUN_LOCK), || {
                let state = &mut *state;
                // A session whose writes stopped gets nothing, session.json included.
                state.transcripts.writer(self, key).check_writable()?;
                if !known {
                    // session.json first: a conversation.jsonl is never without one.
                    let meta = SessionJson {
                        session_id: id.to_owned(),
                        updated_at: Some(now_millis()),
                        ..SessionJson::default()
                    };
                    write_session_json(&self.meta_path(), &meta, sync_dirs)?;
                    state.meta = Some(meta);
                    state.meta_read = true;
                }
                let main = key.subagent_name().is_none();
                if main {
                    self.recount_if_stale(state, id)?;
                }
                // session.json names each subagent before its transcript is written.
                let register = || match key.subagent_name() {
                    Some(name) => {
                        let relative = format!("{SUBAGENTS_DIR}/{name}.jsonl");
                        match state.meta.as_mut() {
                            Some(meta) if meta.subagents.get(name) != Some(&relative) => {
                                meta.subagents.insert(name.to_owned(), relative);
                                write_session_json(&self.meta_path(), meta, sync_dirs)
                            }
                            _ => Ok(()),
                        }
                    }
                    None => Ok(()),
                };
                let redactor = state.redactor.clone();
                let mut newest = None;
                // The listing's redaction runs while the conversation is synced.
                let (written, report) = state.transcripts.append_then(
                    self,
                    key,
                    entries,
                    DirSync::when(sync_dirs),
                    register,
                    |written| {
                        let new: Vec<&Entry> = written.iter().map(|&i| &entries[i]).collect();
                        if main && let Some(text) = newest_typed_text(&new) {
                            newest = Some(self.listing().start(text, &redactor));
                        }
                    },
                )?;
                if main
                    && report.written > 0
                    && let Some(meta) = state.meta.as_mut()
                {
                    let new: Vec<&Entry> = written.iter().map(|&i| &entries[i]).collect();
                    account_with(meta, &new, &redactor, newest.map(Pending::wait));
                    meta.updated_at = Some(now_millis());
                    self.write_summary(state)?;
                }
                Ok(report)
            })
    }

    fn load(&self, key: &SessionKey) -> Result<Option<Loaded>, StoreError> {
        let id = key.session_id();
        let mut state = self.state();
        if !self.is_run_of(&mut state, id)? {
            return Ok(None);
        }
        if !self.locks.holds(id) {
            return load_file_beneath(self.root(), &self.transcript_path(key), id);
        }
        let loaded = state.transcripts.writer(self, key).load()?;
        self.heal_listing(&mut state, key, loaded.as_ref())?;
        Ok(loaded)
    }

    fn load_view(&self, key: &SessionKey) -> Result<Option<LoadedView>, StoreError> {
        let id = key.session_id();
        let mut state = self.state();
        if !self.is_run_of(&mut state, id)? {
            return Ok(None);
        }
        if !self.locks.holds(id) {
            return Ok(
                load_file_beneath(self.root(), &self.transcript_path(key), id)?.map(|loaded| {
                    LoadedView {
                        loaded,
                        skipped_bytes: None,
                    }
                }),
            );
        }
        let view = state.transcripts.writer(self, key).load_view()?;
        // The listing's counts are checked against a whole transcript only.
        if let Some(view) = view.as_ref().filter(|view| view.skipped_bytes.is_none()) {
            self.heal_listing(&mut state, key, Some(&view.loaded))?;
        }
        Ok(view)
    }

    fn list_subkeys(&self, id: &str) -> Result<Vec<SessionKey>, StoreError> {
        validate_id("session", id)?;
        let mut state = self.state();
        if !self.is_run_of(&mut state, id)? {
            return Ok(Vec::new());
        }
        Ok(jsonl_stems(&self.dir.join(SUBAGENTS_DIR))?
            .into_iter()
            .filter_map(|name| SessionKey::subagent(id, &name).ok())
            .collect())
    }

    fn list_sessions(&self) -> Result<Vec<SessionInfo>, StoreError> {
        let mut state = self.state();
        let Some(meta) = self.meta(&mut state)?.cloned() else {
            return Ok(Vec::new());
        };
        let path = self.meta_path();
        let stat = std::fs::metadata(&path).map_err(io_err("stat", &path))?;
        let time = |t: std::io::Result<std::time::SystemTime>| {
            t.ok().and_then(|t| Timestamp::try_from(t).ok())
        };
        // session.json is rewritten at turn boundaries only: appends since then show
        // in the conversation's mtime.
        let appended = std::fs::metadata(self.dir.join(CONVERSATION_JSONL))
            .ok()
            .and_then(|conversation| time(conversation.modified()));
        let updated_at = meta
            .updated_at
            .or_else(|| time(stat.modified()))
            .max(appended)
            .unwrap_or(Timestamp::UNIX_EPOCH);
        Ok(vec![SessionInfo {
            id: meta.session_id,
            created_at: time(stat.created()).unwrap_or(updated_at).min(updated_at),
            updated_at,
            forked_from: meta.forked_from,
        }])
    }

    fn delete(&self, key: &SessionKey) -> Result<(), StoreError> {
        let id = key.session_id();
        let mut state = self.state();
        if !self.is_run_of(&mut state, id)? {
            // Another session, or none: nothing of it here to delete.
            return Ok(());
        }
        self.locks
            .with_writer(id, self.root(), &self.dir.join(RUN_LOCK), || {
                let state = &mut *state;
                match key.subagent_name() {
                    None => {
                        // The conversation goes; session.log and transcript.jsonl are the
                        // run's record of what happened and stay.
                        // The summary first: a run is listed only while session.json exists.
                        state.summary = None;
                        remove_file_if_exists(&self.summary_path())?;
                        remove_file_if_exists(&self.meta_path())?;
                        remove_file_if_exists(&self.transcript_path(key))?;
                        remove_dir_if_exists(&self.dir.join(SUBAGENTS_DIR))?;
                        state.meta = None;
                        state.transcripts.forget_all();
                    }
                    Some(name) => {
                        remove_file_if_exists(&self.transcript_path(key))?;
                        state.transcripts.forget_subagent(name);
                        if let Some(meta) = state.meta.as_mut()
                            && meta.subagents.remove(name).is_some()
                        {
                            write_session_json(&self.meta_path(), meta, false)?;
                        }
                    }
                }
                if self.durability.syncs_dirs() {
                    sync_dir(&self.dir)?;
                }
                Ok(())
            })
    }

    fn lock(&self, id: &str) -> Result<WriterLock, StoreError> {
        validate_id("session", id)?;
        let mut state = self.state();
        self.check_session(&mut state, id)?;
        create_private_dir_all(&self.dir, DirSync::when(self.durability.syncs_dirs()))?;
        self.locks.lock(id, self.root(), &self.dir.join(RUN_LOCK))
    }

    fn fork(&self, fork: &SessionFork) -> Result<(), StoreError> {
        fork.validate()?;
        let (source, target) = (&fork.source, &fork.target);
        Err(StoreError::Unsupported(format!(
            "a run folder holds one session, so session {source} cannot be forked into \
             {target} inside {}: fork the run into a new run folder with \
             reprise_runs::fork_run(source_dir, target_dir, up_to)",
            self.dir.display()
        )))
    }
}

/// Files that may already be in a fork's target run folder: what a freshly created
/// run folder holds before its conversation starts.
const FORK_TARGET_ALLOWED: [&str; 3] = ["session.log", "transcript.jsonl", RUN_LOCK];

/// Forks the run in `source_dir` into the run folder `target_dir`: its conversation
/// (up to and including entry `up_to`, or all of it) and its subagent transcripts
/// (whole), with a new session id (a UUIDv7, returned) and `forkedFrom` recorded in
/// the new `session.json`.
///
/// `target_dir` must not exist, or be a run folder without a conversation yet (holding
/// only `session.log`, `transcript.jsonl` or its lock file, as a freshly created run
/// folder does); otherwise [`StoreError::AlreadyExists`]. Atomic: the copy is staged in
/// a hidden sibling folder and renamed into place (or, into an existing run folder,
/// moved in with `session.json` last, which is what makes a run have a conversation).
/// The source is only read, never locked, so it may be in use; only its complete lines
/// are copied. The copies' data is synced in the background once the fork is in place;
/// the returned [`ForkedRun`]'s store owns that sync (see [`RunStore`]). Blocking: call
/// it from `spawn_blocking` in async code.
pub fn fork_run(
    source_dir: &Path,
    target_dir: &Path,
    up_to: Option<Uuid>,
) -> Result<ForkedRun, StoreError> {
    let source_meta =
        read_session_json(&source_dir.join(SESSION_JSON))?.ok_or_else(|| StoreError::NotFound {
            session: source_dir.display().to_string(),
        })?;
    let source_id = source_meta.session_id.clone();
    validate_id("session", &source_id)?;
    let new_id = Uuid::now_v7().to_string();
    let target_name = target_dir.display().to_string();
    let already = || StoreError::AlreadyExists {
        session: target_name.clone(),
    };

    // Hold the target's writer lock when it exists, so no writer starts meanwhile.
    let _target_lock = if exists(target_dir) {
        check_fork_target(target_dir).map_err(|()| already())?;
        Some(acquire(
            reprise_session::fs::parent_of(target_dir),
            &target_dir.join(RUN_LOCK),
            &target_name,
        )?)
    } else {
        None
    };

    let parent = reprise_session::fs::parent_of(target_dir);
    create_private_dir_all(parent, DirSync::Synced)?;
    let staging = temp_sibling(target_dir, "fork");
    let result = (|| {
        create_private_dir_all(&staging, DirSync::Unsynced)?;
        let conversation = staging.join(CONVERSATION_JSONL);
        let mut file = create_new_private(parent, &conversation)?;
        let mut to_sync = Vec::new();
        let copied = copy_lines(
            reprise_session::fs::parent_of(source_dir),
            &source_dir.join(CONVERSATION_JSONL),
            &source_id,
            up_to,
            &mut file,
            &conversation,
        )
        .or_else(|error| match error {
            // A run whose conversation file is missing forks as empty.
            StoreError::Io(ref error)
                if error.kind() == std::io::ErrorKind::NotFound && up_to.is_none() =>
            {
                Ok(0)
            }
            other => Err(other),
        })?;
        // Synced once the fork is in place (see `fork_sync`).
        to_sync.push((file, target_dir.join(CONVERSATION_JSONL)));

        let mut meta = SessionJson {
            session_id: new_id.clone(),
            updated_at: Some(now_millis()),
            forked_from: Some(ForkOrigin {
                session: source_id.clone(),
                entry: up_to,
            }),
            extra: source_meta.extra.clone(),
            ..SessionJson::default()
        };
        // A whole copy has the source's listing fields, when its summary describes
        // exactly what was copied; otherwise they are counted from the copy.
        let source_summary = crate::summary::read(&source_dir.join(RUN_SUMMARY))
            .ok()
            .flatten()
            .filter(|summary| {
                up_to.is_none()
                    && summary.session_id == source_id
                    && summary.conversation_bytes == Some(copied)
            });
        if let Some(summary) = source_summary {
            meta.message_count = summary.message_count;
            meta.last_message = summary.last_message;
            meta.first_message = summary.first_message;
        } else if let Some(loaded) = load_file(&conversation, &new_id)? {
            // The forked run's own store heals this with its redactor when it loads.
            account(
                &mut meta,
                &loaded.entries.iter().collect::<Vec<_>>(),
                &Redactor::new(),
            );
        }
        let names = jsonl_stems(&source_dir.join(SUBAGENTS_DIR))?;
        if !names.is_empty() {
            let dir = staging.join(SUBAGENTS_DIR);
            create_private_dir_all(&dir, DirSync::Unsynced)?;
            for name in names {
                if validate_id("subagent", &name).is_err() {
                    continue;
                }
                let file_name = format!("{name}.jsonl");
                let to = dir.join(&file_name);
                let mut file = create_new_private(parent, &to)?;
                copy_lines(
                    reprise_session::fs::parent_of(source_dir),
                    &source_dir.join(SUBAGENTS_DIR).join(&file_name),
                    &source_id,
                    None,
                    &mut file,
                    &to,
                )?;
                to_sync.push((file, target_dir.join(SUBAGENTS_DIR).join(&file_name)));
                meta.subagents
                    .insert(name, format!("{SUBAGENTS_DIR}/{file_name}"));
            }
            sync_dir(&dir)?;
        }
        let mut record = summary_of(&meta);
        record.conversation_bytes = Some(copied);
        SummaryWriter::open(&staging.join(RUN_SUMMARY))?.write(&record)?;
        write_session_json(&staging.join(SESSION_JSON), &meta, true)?;
        commit_fork(&staging, target_dir).map_err(|error| match error {
            CommitError::Exists => already(),
            CommitError::Store(error) => error,
        })?;
        let store = create_run_store(target_dir);
        store.inner.fork_syncs.start(to_sync);
        Ok(store)
    })();
    let _ = std::fs::remove_dir_all(&staging);
    result.map(|store| ForkedRun {
        session_id: new_id,
        store,
    })
}

/// A run made by [`fork_run`]: its new session and the store of its run folder.
#[derive(Debug)]
#[must_use = "dropping it waits for the fork's data sync; keep its store to use the run"]
pub struct ForkedRun {
    /// The new session's id (a UUIDv7).
    pub session_id: String,
    /// The store of the new run folder; it owns the fork's pending data sync.
    pub store: RunStore,
}

/// `Err(())` when `dir` is not a run folder that a fork may fill.
fn check_fork_target(dir: &Path) -> Result<(), ()> {
    let read = std::fs::read_dir(dir).map_err(|_| ())?;
    for item in read {
        let item = item.map_err(|_| ())?;
        let name = item.file_name();
        let allowed = name
            .to_str()
            .is_some_and(|name| FORK_TARGET_ALLOWED.contains(&name));
        if !allowed {
            return Err(());
        }
    }
    Ok(())
}

enum CommitError {
    Exists,
    Store(StoreError),
}

impl From<StoreError> for CommitError {
    fn from(error: StoreError) -> Self {
        CommitError::Store(error)
    }
}

impl From<IoError> for CommitError {
    fn from(error: IoError) -> Self {
        CommitError::Store(error.into())
    }
}

fn commit_fork(staging: &Path, target: &Path) -> Result<(), CommitError> {
    let parent = reprise_session::fs::parent_of(target);
    if !exists(target) {
        sync_dir(staging)?;
        // Never over an empty folder another start made meanwhile (a plain rename
        // would replace it): then the fork moves into it below, if it may.
        let renamed = match rustix::fs::renameat_with(
            rustix::fs::CWD,
            staging,
            rustix::fs::CWD,
            target,
            rustix::fs::RenameFlags::NOREPLACE,
        ) {
            // File systems without the flag: the check above is all there is.
            Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
                std::fs::rename(staging, target)
            }
            other => other.map_err(std::io::Error::from),
        };
        match renamed {
            Ok(()) => {
                sync_dir(parent)?;
                return Ok(());
            }
            Err(error)
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::DirectoryNotEmpty | std::io::ErrorKind::AlreadyExists
                ) =>
            {
                // Someone created the run folder meanwhile: fall through and move in.
            }
            Err(source) => {
                return Err(
                    StoreError::Io(IoError::new("rename", target.to_path_buf(), source)).into(),
                );
            }
        }
        check_fork_target(target).map_err(|()| CommitError::Exists)?;
    }
    // Into an existing run folder: subagents and conversation first, session.json
    // last, each refusing to replace anything.
    let subagents = staging.join(SUBAGENTS_DIR);
    if exists(&subagents) {
        let to = target.join(SUBAGENTS_DIR);
        if exists(&to) {
            return Err(CommitError::Exists);
        }
        std::fs::rename(&subagents, &to).map_err(io_err("rename", &to))?;
    }
    for name in [CONVERSATION_JSONL, SESSION_JSON] {
        if !move_no_replace(&staging.join(name), &target.join(name))? {
            return Err(CommitError::Exists);
        }
    }
    sync_dir(target)?;
    Ok(())
}

impl Inner {
    /// As the writer, heals the listing fields of `session.json` from the main
    /// transcript itself, read whole.
    fn heal_listing(
        &self,
        state: &mut RunState,
        key: &SessionKey,
        loaded: Option<&Loaded>,
    ) -> Result<(), StoreError> {
        let state = &mut *state;
        if let (None, Some(loaded)) = (key.subagent_name(), loaded)
            && let Some(meta) = state.meta.as_mut()
            && listing_is_stale(meta, &loaded.entries)
        {
            meta.message_count = 0;
            meta.last_message = None;
            meta.first_message = None;
            account(
                meta,
                &loaded.entries.iter().collect::<Vec<_>>(),
                &state.redactor,
            );
            self.write_summary(state)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;
    use reprise_session::Message;
    use reprise_session::SessionStore;

    #[tokio::test]
    async fn dropping_a_forked_run_store_leaves_no_fork_sync_pending() {
        let runs = tempfile::tempdir().unwrap();
        let source = runs.path().join("a");
        let store = create_run_store(&source);
        let key = SessionKey::session("s").unwrap();
        store
            .append(&key, &[Entry::message(Message::user("hi"))])
            .await
            .unwrap();
        let forked = fork_run(&source, &runs.path().join("b"), None).unwrap();
        assert_eq!(forked.store.pending_fork_syncs(), 1);
        // The source's store made no fork: nothing of it to wait for.
        assert_eq!(store.pending_fork_syncs(), 0);
        let pending = forked.store.inner.fork_syncs.pending_counter();
        drop(forked);
        assert_eq!(pending.load(Ordering::SeqCst), 0);
    }
}
