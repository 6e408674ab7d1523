//! `FileSessionStore`: one JSONL file per session in a directory.
//!
//! ```text
//! <dir>/<id>.jsonl                        the session's entries
//! <dir>/<id>.meta.json                    {"id", "created_at", "updated_at", "forked_from"}
//!                                         (written when the session is created or forked;
//!                                         listings report the later of `updated_at` and
//!                                         the transcript's modification time)
//! <dir>/<id>/subagents/<name>.jsonl       each subagent's entries
//! <dir>/<id>.lock                         the writer lock (holds the writer's pid)
//! ```
//!
//! A session exists when `<id>.jsonl` does: appending to any key of a session creates
//! it first (so a file written by other tools, without `.meta.json`, is a session too).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use jiff::Timestamp;
use reprise_message::{Entry, now_millis};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::fs::{
    DirSync, IoError, create_new_private, create_private_dir_all, exists, io_err, move_no_replace,
    remove_dir_if_exists, remove_file_if_exists, sync_dir, temp_sibling, write_file_atomic,
};
use crate::store::blocking_store::{BlockingStore, OverBlockingStore};
use crate::store::fork_copy::copy_lines;
use crate::store::fork_sync::ForkSyncs;
use crate::store::id::{SessionKey, validate_id};
use crate::store::jsonl::Durability;
use crate::store::jsonl_writer::JsonlWriter;
use crate::store::session_store::{
    AppendReport, ForkOrigin, Loaded, LoadedView, SessionFork, SessionInfo, StoreError, WriterLock,
};
use crate::store::transcripts::{TranscriptFiles, Transcripts};
use crate::store::writer_lock::LockRegistry;

/// The contents of `<id>.meta.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionMeta {
    /// The session id.
    pub id: String,
    /// When the session was created.
    #[serde(with = "ts_millis")]
    pub created_at: Timestamp,
    /// When it was last appended to.
    #[serde(with = "ts_millis")]
    pub updated_at: Timestamp,
    /// Where it was forked from, or `null`.
    #[serde(default)]
    pub forked_from: Option<ForkOrigin>,
    /// Every other field, kept verbatim.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl SessionMeta {
    fn info(&self) -> SessionInfo {
        SessionInfo {
            id: self.id.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
            forked_from: self.forked_from.clone(),
        }
    }
}

/// RFC 3339 with milliseconds, as every timestamp in these files.
pub(crate) mod ts_millis {
    use jiff::Timestamp;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(ts: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{ts:.3}"))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The writers of one session, kept between appends so that an append does not
/// re-read the transcript, and its meta file as last read or written.
#[derive(Debug, Default)]
struct SessionWriters {
    transcripts: Transcripts,
    meta: Option<SessionMeta>,
}

#[derive(Debug)]
pub struct Inner {
    dir: PathBuf,
    durability: Durability,
    locks: LockRegistry,
    sessions: Mutex<HashMap<String, Arc<Mutex<SessionWriters>>>>,
    /// The background syncs of this store's forks, joined when it is dropped.
    fork_syncs: ForkSyncs,
}

fn lock_plain<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The data behind these mutexes is caches that are re-validated against the
    // files on every use, so a panic elsewhere leaves nothing unsafe to reuse.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A [`SessionStore`](crate::SessionStore) keeping each session as `<dir>/<id>.jsonl`.
///
/// Cheap to clone (shared state). Every id is validated before a path is built;
/// directories are created 0700 and files 0600.
///
/// A fork returns once its copy is in place and syncs the copied data in the
/// background (see [`SessionStore::fork`](crate::SessionStore::fork)). The store owns
/// those syncs: [`SessionStore::close`](crate::SessionStore::close) waits for them, and dropping the last clone
/// of the store waits for them too, so once the store is gone every fork it made is on
/// disk. In async code prefer `close().await`: a drop waits on the thread it runs on.
///
/// ```
/// use reprise_session::{Entry, FileSessionStore, Message, SessionFork, SessionKey, SessionStore};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// let store = FileSessionStore::new(dir.path());
/// let key = SessionKey::session("quest-1")?;
/// store.append(&key, &[Entry::message(Message::user("Where is the key?"))]).await?;
/// assert!(dir.path().join("quest-1.jsonl").exists());
/// store.fork(SessionFork::whole("quest-1", "quest-2")).await?;
/// let copy = store.load(&SessionKey::session("quest-2")?).await?.unwrap_or_default();
/// assert_eq!(copy.entries.len(), 1);
/// store.close().await?; // the fork's data is on disk
/// # Ok(()) }
/// # tokio::runtime::Runtime::new().unwrap().block_on(demo()).unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct FileSessionStore {
    inner: Arc<Inner>,
}

impl OverBlockingStore for FileSessionStore {
    type Inner = Inner;

    fn blocking_store(&self) -> &Arc<Inner> {
        &self.inner
    }
}

impl FileSessionStore {
    /// A store in `dir` (created 0700 on the first write) with [`Durability::Full`].
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self::with_durability(dir, Durability::Full)
    }

    /// A store in `dir` with the given durability.
    pub fn with_durability(dir: impl Into<PathBuf>, durability: Durability) -> Self {
        FileSessionStore {
            inner: Arc::new(Inner {
                dir: dir.into(),
                durability,
                locks: LockRegistry::default(),
                sessions: Mutex::new(HashMap::new()),
                fork_syncs: ForkSyncs::default(),
            }),
        }
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The file holding a transcript.
    pub fn transcript_path(&self, key: &SessionKey) -> PathBuf {
        self.inner.transcript_path(key)
    }

    /// Forks whose background data sync was started and not yet waited for.
    pub fn pending_fork_syncs(&self) -> usize {
        self.inner.fork_syncs.pending()
    }
}

impl Inner {
    fn main_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.jsonl"))
    }

    fn meta_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.meta.json"))
    }

    fn lock_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.lock"))
    }

    fn subagents_dir(&self, id: &str) -> PathBuf {
        self.dir.join(id).join("subagents")
    }

    fn transcript_path(&self, key: &SessionKey) -> PathBuf {
        match key.subagent_name() {
            None => self.main_path(key.session_id()),
            Some(name) => self
                .subagents_dir(key.session_id())
                .join(format!("{name}.jsonl")),
        }
    }

    /// Runs `work` with the writer of `key`'s transcript (made at its first use),
    /// its session's writers locked meanwhile.
    fn with_writer<T>(&self, key: &SessionKey, work: impl FnOnce(&mut JsonlWriter) -> T) -> T {
        let writers = self.writers(key.session_id());
        let mut writers = lock_plain(&writers);
        work(writers.transcripts.writer(self, key))
    }

    fn writers(&self, id: &str) -> Arc<Mutex<SessionWriters>> {
        let mut sessions = lock_plain(&self.sessions);
        Arc::clone(sessions.entry(id.to_owned()).or_default())
    }

    fn read_meta(&self, id: &str) -> Option<SessionMeta> {
        let text = std::fs::read(self.meta_path(id)).ok()?;
        match serde_json::from_slice::<SessionMeta>(&text) {
            Ok(meta) => Some(meta),
            Err(error) => {
                tracing::warn!(session = id, "unreadable {id}.meta.json ({error}); rebuilt");
                None
            }
        }
    }

    fn write_meta(&self, meta: &SessionMeta, sync: bool) -> Result<(), StoreError> {
        let path = self.meta_path(&meta.id);
        let bytes = serde_json::to_vec_pretty(meta).map_err(|error| StoreError::Format {
            path: path.clone(),
            message: error.to_string(),
        })?;
        Ok(write_file_atomic(
            crate::fs::parent_of(&path),
            &path,
            &bytes,
            sync,
        )?)
    }
}

impl TranscriptFiles for Inner {
    fn new_writer(&self, key: &SessionKey) -> JsonlWriter {
        let id = key.session_id();
        let writer = JsonlWriter::new(self.transcript_path(key), id, self.durability);
        match key.subagent_name() {
            None => writer,
            Some(_) => writer.part_of(&self.main_path(id)),
        }
    }

    fn subagents_dir(&self, id: &str) -> PathBuf {
        Inner::subagents_dir(self, id)
    }
}

impl BlockingStore for Inner {
    /// Waits until the data of every fork this store (any clone of it) made is on disk.
    fn close(&self) -> Result<(), StoreError> {
        self.fork_syncs.wait();
        Ok(())
    }

    fn append_is_short(&self, key: &SessionKey) -> bool {
        let writers = self.writers(key.session_id());
        // Busy (another call is using the session): not known to be short.
        let Ok(writers) = writers.try_lock() else {
            return false;
        };
        writers.meta.is_some() && writers.transcripts.are_indexed(key)
    }

    fn append(&self, key: &SessionKey, entries: &[Entry]) -> Result<AppendReport, StoreError> {
        let id = key.session_id();
        let writers = self.writers(id);
        let mut writers = lock_plain(&writers);
        let sync_dirs = self.durability.syncs_dirs();
        create_private_dir_all(&self.dir, DirSync::when(sync_dirs))?;
        self.locks
            .with_writer(id, &self.dir, &self.lock_path(id), || {
                let writers = &mut *writers;
                let (_, report) = writers.transcripts.append_then(
                    self,
                    key,
                    entries,
                    DirSync::when(sync_dirs),
                    || Ok(()),
                    |_| {},
                )?;
                let now = now_millis();
                if writers.meta.is_none() {
                    writers.meta = self.read_meta(id);
                }
                // `updated_at` is not rewritten on every append (that would cost a rename
                // per message); listings take the later of it and the transcript's mtime.
                match &mut writers.meta {
                    Some(_) => {}
                    None => {
                        let meta = SessionMeta {
                            id: id.to_owned(),
                            created_at: now,
                            updated_at: now,
                            forked_from: None,
                            extra: Default::default(),
                        };
                        self.write_meta(&meta, sync_dirs)?;
                        writers.meta = Some(meta);
                    }
                }
                Ok(report)
            })
    }

    fn load(&self, key: &SessionKey) -> Result<Option<Loaded>, StoreError> {
        let id = key.session_id();
        let as_writer = self.locks.holds(id);
        // Read through the session's writer so that its uuid index is ready for the
        // next append; as the lock holder, also cut a torn tail off.
        self.with_writer(key, |writer| {
            if as_writer {
                writer.load()
            } else {
                writer.read()
            }
        })
    }

    fn load_view(&self, key: &SessionKey) -> Result<Option<LoadedView>, StoreError> {
        let id = key.session_id();
        // Only the writer reads from the view's start: a reader has no index to keep.
        if !self.locks.holds(id) {
            return Ok(self.load(key)?.map(|loaded| LoadedView {
                loaded,
                skipped_bytes: None,
            }));
        }
        self.with_writer(key, JsonlWriter::load_view)
    }

    fn list_subkeys(&self, id: &str) -> Result<Vec<SessionKey>, StoreError> {
        validate_id("session", id)?;
        let mut keys = jsonl_stems(&self.subagents_dir(id))?
            .into_iter()
            .filter_map(|name| SessionKey::subagent(id, &name).ok())
            .collect::<Vec<_>>();
        keys.sort();
        Ok(keys)
    }

    fn list_sessions(&self) -> Result<Vec<SessionInfo>, StoreError> {
        let mut infos = Vec::new();
        for id in jsonl_stems(&self.dir)? {
            if validate_id("session", &id).is_err() {
                continue;
            }
            let modified = std::fs::metadata(self.main_path(&id))
                .and_then(|meta| meta.modified())
                .ok()
                .and_then(|time| Timestamp::try_from(time).ok());
            let info = match self.read_meta(&id) {
                Some(meta) => {
                    let mut info = meta.info();
                    if let Some(modified) = modified {
                        info.updated_at = info.updated_at.max(modified);
                    }
                    info
                }
                None => {
                    let path = self.main_path(&id);
                    let meta = std::fs::metadata(&path).map_err(io_err("stat", &path))?;
                    let modified = meta
                        .modified()
                        .ok()
                        .and_then(|time| Timestamp::try_from(time).ok())
                        .unwrap_or(Timestamp::UNIX_EPOCH);
                    let created = meta
                        .created()
                        .ok()
                        .and_then(|time| Timestamp::try_from(time).ok())
                        .unwrap_or(modified);
                    SessionInfo {
                        id,
                        created_at: created,
                        updated_at: modified,
                        forked_from: None,
                    }
                }
            };
            infos.push(info);
        }
        infos.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(infos)
    }

    fn delete(&self, key: &SessionKey) -> Result<(), StoreError> {
        let id = key.session_id();
        let writers = self.writers(id);
        let mut writers = lock_plain(&writers);
        if !exists(&self.dir) {
            return Ok(());
        }
        self.locks
            .with_writer(id, &self.dir, &self.lock_path(id), || {
                match key.subagent_name() {
                    None => {
                        remove_file_if_exists(&self.main_path(id))?;
                        remove_file_if_exists(&self.meta_path(id))?;
                        remove_dir_if_exists(&self.dir.join(id))?;
                        writers.transcripts.forget_all();
                        writers.meta = None;
                        Ok(sync_dir(&self.dir)?)
                    }
                    Some(name) => {
                        let path = self.transcript_path(key);
                        remove_file_if_exists(&path)?;
                        writers.transcripts.forget_subagent(name);
                        let dir = self.subagents_dir(id);
                        if exists(&dir) {
                            sync_dir(&dir)?;
                        }
                        Ok(())
                    }
                }
            })
    }

    fn fork(&self, fork: &SessionFork) -> Result<(), StoreError> {
        fork.validate()?;
        let (source, target, up_to) = (fork.source.as_str(), fork.target.as_str(), fork.up_to);
        let source_path = self.main_path(source);
        if !exists(&source_path) {
            return Err(StoreError::NotFound {
                session: source.to_owned(),
            });
        }
        let writers = self.writers(target);
        let mut writers = lock_plain(&writers);
        self.locks
            .with_writer(target, &self.dir, &self.lock_path(target), || {
                let target_path = self.main_path(target);
                if exists(&target_path) {
                    return Err(StoreError::AlreadyExists {
                        session: target.to_owned(),
                    });
                }
                // Without its transcript, a meta file or subagents folder of the target is
                // what a fork that crashed left behind (writers create the transcript
                // first, and we hold the target's lock): clear it.
                remove_file_if_exists(&self.meta_path(target))?;
                remove_dir_if_exists(&self.dir.join(target))?;

                let staged = Staged::new(&self.dir, target);
                let result = self.stage_and_commit(&staged, source, target, up_to);
                staged.clean();
                writers.transcripts.forget_all();
                writers.meta = None;
                result
            })
    }

    fn lock(&self, id: &str) -> Result<WriterLock, StoreError> {
        validate_id("session", id)?;
        create_private_dir_all(&self.dir, DirSync::when(self.durability.syncs_dirs()))?;
        self.locks.lock(id, &self.dir, &self.lock_path(id))
    }
}

impl Inner {
    fn stage_and_commit(
        &self,
        staged: &Staged,
        source: &str,
        target: &str,
        up_to: Option<Uuid>,
    ) -> Result<(), StoreError> {
        let sync = self.durability.syncs_data();
        // 1. The transcript, complete lines only.
        let mut file = create_new_private(&self.dir, &staged.transcript)?;
        copy_lines(
            &self.dir,
            &self.main_path(source),
            source,
            up_to,
            &mut file,
            &staged.transcript,
        )?;
        // Synced once the fork is in place (see `fork_sync`).
        let mut to_sync = vec![(file, self.main_path(target))];
        // 2. Subagent transcripts, whole.
        let names = jsonl_stems(&self.subagents_dir(source))?;
        if !names.is_empty() {
            let dir = staged.folder.join("subagents");
            create_private_dir_all(&dir, DirSync::Unsynced)?;
            for name in names {
                let from = self.subagents_dir(source).join(format!("{name}.jsonl"));
                let to = dir.join(format!("{name}.jsonl"));
                let mut file = create_new_private(&self.dir, &to)?;
                copy_lines(&self.dir, &from, source, None, &mut file, &to)?;
                to_sync.push((file, to));
            }
            if sync {
                sync_dir(&dir)?;
                sync_dir(&staged.folder)?;
            }
            std::fs::rename(&staged.folder, self.dir.join(target))
                .map_err(io_err("rename", &self.dir.join(target)))?;
        }
        // 3. The meta file, then the transcript: its appearance is the commit.
        let now = now_millis();
        let meta = SessionMeta {
            id: target.to_owned(),
            created_at: now,
            updated_at: now,
            forked_from: Some(ForkOrigin {
                session: source.to_owned(),
                entry: up_to,
            }),
            extra: Default::default(),
        };
        self.write_meta(&meta, sync)?;
        if !move_no_replace(&staged.transcript, &self.main_path(target))? {
            return Err(StoreError::AlreadyExists {
                session: target.to_owned(),
            });
        }
        if self.durability.syncs_dirs() {
            sync_dir(&self.dir)?;
        }
        if sync {
            self.fork_syncs.start(to_sync);
        }
        Ok(())
    }
}

/// Temporary names for a fork in progress, removed whatever happens.
struct Staged {
    transcript: PathBuf,
    folder: PathBuf,
}

impl Staged {
    fn new(dir: &Path, target: &str) -> Self {
        let base = dir.join(format!("{target}.jsonl"));
        Staged {
            transcript: temp_sibling(&base, "fork"),
            folder: temp_sibling(&dir.join(target), "fork"),
        }
    }

    fn clean(&self) {
        let _ = std::fs::remove_file(&self.transcript);
        let _ = std::fs::remove_dir_all(&self.folder);
    }
}

/// The names of the `*.jsonl` files in `dir` (not hidden ones), or none when `dir`
/// does not exist.
pub fn jsonl_stems(dir: &Path) -> Result<Vec<String>, StoreError> {
    let read = match std::fs::read_dir(dir) {
        Ok(read) => read,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(StoreError::Io(IoError::new(
                "list",
                dir.to_path_buf(),
                source,
            )));
        }
    };
    let mut names = Vec::new();
    for item in read {
        let item = item.map_err(io_err("list", dir))?;
        let name = item.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(stem) = name.strip_suffix(".jsonl")
            && !stem.starts_with('.')
            && item.file_type().is_ok_and(|t| t.is_file())
        {
            names.push(stem.to_owned());
        }
    }
    names.sort();
    Ok(names)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::store::session_store::SessionStore;
    use reprise_message::Message;

    async fn forked_store(dir: &Path) -> FileSessionStore {
        let store = FileSessionStore::new(dir);
        let key = SessionKey::session("a").unwrap();
        store
            .append(&key, &[Entry::message(Message::user("hi"))])
            .await
            .unwrap();
        store.fork(SessionFork::whole("a", "b")).await.unwrap();
        store
    }

    #[tokio::test]
    async fn dropping_the_store_leaves_no_fork_sync_pending() {
        let dir = tempfile::tempdir().unwrap();
        let store = forked_store(dir.path()).await;
        assert_eq!(store.pending_fork_syncs(), 1);
        let pending = store.inner.fork_syncs.pending_counter();
        drop(store);
        assert_eq!(pending.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_stopped_session_takes_no_append_from_any_writer_or_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileSessionStore::new(dir.path());
        let main = SessionKey::session("s").unwrap();
        let helper = SessionKey::subagent("s", "helper").unwrap();
        store
            .append(&helper, &[Entry::message(Message::user("task"))])
            .await
            .unwrap();
        // What a failed sync of the subagent's transcript does.
        let cause = IoError::new(
            "sync",
            store.transcript_path(&helper),
            std::io::Error::from_raw_os_error(5),
        );
        crate::store::stopped_writes::stop(
            &crate::store::stopped_writes::session_key(&store.transcript_path(&main)),
            cause,
        );
        let again = FileSessionStore::new(dir.path());
        for (store, key) in [(&store, &main), (&store, &helper), (&again, &main)] {
            let error = store
                .append(key, &[Entry::message(Message::user("more"))])
                .await
                .unwrap_err();
            assert!(
                matches!(&error, StoreError::WritesStopped { session, .. } if session == "s"),
                "{error:?}"
            );
        }
        let loaded = again.load(&main).await.unwrap().unwrap();
        assert!(loaded.entries.is_empty());
        // Other sessions are not stopped.
        store
            .append(
                &SessionKey::session("t").unwrap(),
                &[Entry::message(Message::user("hi"))],
            )
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn closing_the_store_waits_for_its_fork_syncs() {
        let dir = tempfile::tempdir().unwrap();
        let store = forked_store(dir.path()).await;
        let clone = store.clone();
        assert_eq!(clone.pending_fork_syncs(), 1);
        store.close().await.unwrap();
        assert_eq!(clone.pending_fork_syncs(), 0);
    }
}
