//! The `SessionStore` trait: where an agent's transcript is appended and read back.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use jiff::Timestamp;
use reprise_message::Entry;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::fs::IoError;
use crate::store::id::{IdError, SessionKey, validate_id};

/// What went wrong in a store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An id or key was refused before any path was built.
    #[error(transparent)]
    InvalidId(#[from] IdError),
    /// A file operation failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// Another writer holds the session.
    #[error(
        "session {session} is open for writing by {}{}",
        holder_text(*.pid, host.as_deref()),
        free_text(*.free_at)
    )]
    Locked {
        /// The session.
        session: String,
        /// The process that holds the lock, when known.
        pid: Option<u32>,
        /// The machine the holder runs on, for stores shared across machines; `None`
        /// for stores that live on one machine.
        host: Option<String>,
        /// When the holder's lease ends unless it renews it, for stores whose locks
        /// are leases; `None` for locks held as long as their process lives.
        free_at: Option<Timestamp>,
    },
    /// This writer's lock was taken over by another writer (its lease ran out while
    /// it was stopped or cut off): nothing more it appends is stored. Taking the lock
    /// again, with the session loaded anew, is the only way on.
    #[error(
        "session {session} was taken over by {} while this writer's lease had run out; \
         nothing more this writer sends is stored",
        holder_text(*.pid, host.as_deref())
    )]
    TakenOver {
        /// The session.
        session: String,
        /// The process that took it over, when known.
        pid: Option<u32>,
        /// The machine that process runs on, when known.
        host: Option<String>,
    },
    /// The target of a fork or create already exists.
    #[error("session {session} already exists")]
    AlreadyExists {
        /// The session.
        session: String,
    },
    /// The session does not exist.
    #[error("session {session} does not exist")]
    NotFound {
        /// The session.
        session: String,
    },
    /// A fork point that the source does not hold.
    #[error("session {session} has no entry {entry}")]
    EntryNotFound {
        /// The session.
        session: String,
        /// The entry asked for.
        entry: Uuid,
    },
    /// An entry could not be encoded, or a metadata file could not be read.
    #[error("{path}: {message}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The store cannot do this (for example two sessions in one run folder).
    #[error("{0}")]
    Unsupported(String),
    /// A write to the session may or may not have reached the disk (its sync
    /// failed), so nothing more is written to the session in this process, by any
    /// store: going on would make what this process holds and what the file holds
    /// differ. A new process that opens the session reads back what is on disk.
    #[error(
        "session {session}: a write may or may not have reached the disk, so nothing \
         more is written to this session in this process"
    )]
    WritesStopped {
        /// The session.
        session: String,
        /// The failure that stopped it.
        #[source]
        source: Arc<IoError>,
    },
    /// The store's backend (a database server) failed or could not be reached.
    #[error("{context}")]
    Backend {
        /// What the store was doing, and where.
        context: String,
        /// The backend's own error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

fn holder_text(pid: Option<u32>, host: Option<&str>) -> String {
    match (pid, host) {
        (Some(pid), Some(host)) => format!("process {pid} on {host}"),
        (Some(pid), None) => format!("process {pid}"),
        (None, Some(host)) => format!("a process on {host}"),
        (None, None) => "another process".to_owned(),
    }
}

fn free_text(free_at: Option<Timestamp>) -> String {
    match free_at.and_then(|at| at.round(jiff::Unit::Second).ok()) {
        Some(at) => format!(
            " (its lease runs until {} UTC and is renewed while it runs: the session is \
             free then if that process has stopped)",
            at.strftime("%Y-%m-%d %H:%M:%S")
        ),
        None => String::new(),
    }
}

/// A problem found while reading a transcript that did not stop the read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadWarning {
    /// The file read.
    pub file: PathBuf,
    /// The 1-based line.
    pub line: usize,
    /// What was wrong and what was done about it.
    pub message: String,
}

impl std::fmt::Display for LoadWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.file.display(), self.line, self.message)
    }
}

/// A transcript read back, with the problems met on the way.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Loaded {
    /// Every complete, valid entry, in file order, without duplicates.
    pub entries: Vec<Entry>,
    /// Torn tails ignored or cut, corrupt lines skipped.
    pub warnings: Vec<LoadWarning>,
}

/// A transcript read back for a resume ([`SessionStore::load_view`]): perhaps from
/// the latest compaction's `through` on rather than whole.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadedView {
    /// The entries read, in file order, and the problems met reading them.
    pub loaded: Loaded,
    /// How many bytes at the start of the file were not read (the history before
    /// the latest compaction's `through`); `None` when the whole file was read.
    pub skipped_bytes: Option<u64>,
}

/// The copy [`SessionStore::fork`] makes: the session `source`, whole or up to and
/// including the entry `up_to`, into the new session `target`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionFork {
    /// The session copied.
    pub source: String,
    /// The new session; it must not exist.
    pub target: String,
    /// The last entry copied, or `None` for the whole history.
    pub up_to: Option<Uuid>,
}

impl SessionFork {
    /// A copy of `source` up to and including `up_to` (or all of it) into `target`.
    pub fn new(source: impl Into<String>, target: impl Into<String>, up_to: Option<Uuid>) -> Self {
        Self {
            source: source.into(),
            target: target.into(),
            up_to,
        }
    }

    /// A copy of the whole of `source` into `target`.
    pub fn whole(source: impl Into<String>, target: impl Into<String>) -> Self {
        Self::new(source, target, None)
    }

    /// A copy of `source` up to and including the entry `entry` into `target`.
    pub fn up_to(source: impl Into<String>, target: impl Into<String>, entry: Uuid) -> Self {
        Self::new(source, target, Some(entry))
    }

    /// Checks both ids, as every store does before it builds a path or a query from
    /// them.
    pub fn validate(&self) -> Result<(), IdError> {
        validate_id("session", &self.source)?;
        validate_id("session", &self.target)
    }
}

/// Where a forked session came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkOrigin {
    /// The source session.
    pub session: String,
    /// The last entry copied, or `None` for the whole history.
    pub entry: Option<Uuid>,
}

/// What a store knows about one session without reading its transcript.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionInfo {
    /// The session id.
    pub id: String,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it was last appended to.
    pub updated_at: Timestamp,
    /// Where it was forked from.
    pub forked_from: Option<ForkOrigin>,
}

/// What an append did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AppendReport {
    /// Entries written.
    pub written: usize,
    /// Entries skipped because the transcript already held their uuid.
    pub skipped: usize,
}

/// What keeps a writer lock held when letting go of it is work that can wait or fail
/// (a message to a database server). Dropped without [`release`](Self::release), it
/// lets go as it can (in the background).
#[async_trait]
pub trait ReleasableLock: Send + Sync + 'static {
    /// Lets go of the lock; once it returns, any writer may take the session.
    async fn release(self: Box<Self>) -> Result<(), StoreError>;
}

/// Proof of being the one writer of a session. [`release`](Self::release) lets go of
/// it before returning; dropping it lets go too, but a store shared across processes
/// may finish that in the background, after the drop.
pub struct WriterLock {
    held: Held,
}

enum Held {
    /// Let go of when dropped.
    Dropped(#[allow(dead_code)] Box<dyn Send + Sync>),
    /// Let go of by its own `release`.
    Released(Box<dyn ReleasableLock>),
}

impl WriterLock {
    /// Wraps whatever keeps the lock held and lets go of it when dropped (an open lock
    /// file, a registry slot).
    pub fn new(held: impl Send + Sync + 'static) -> Self {
        WriterLock {
            held: Held::Dropped(Box::new(held)),
        }
    }

    /// Wraps a lock whose release is work of its own (a lease on a server).
    pub fn releasable(held: impl ReleasableLock) -> Self {
        WriterLock {
            held: Held::Released(Box::new(held)),
        }
    }

    /// Lets go of the lock: when this returns, another writer (in this process or
    /// another) can take the session at once.
    pub async fn release(self) -> Result<(), StoreError> {
        match self.held {
            Held::Dropped(held) => {
                drop(held);
                Ok(())
            }
            Held::Released(held) => held.release().await,
        }
    }
}

impl std::fmt::Debug for WriterLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WriterLock")
    }
}

/// Where transcripts live. Object-safe: agents hold an `Arc<dyn SessionStore>`.
///
/// Every implementation passes the same conformance suite
/// (the `conformance` module, run by `tests/it/conformance.rs`).
///
/// ```
/// use reprise_session::{Entry, MemoryStore, Message, SessionKey, SessionStore, StoreError};
///
/// # async fn demo() -> Result<(), StoreError> {
/// let store: &dyn SessionStore = &MemoryStore::new();
/// let key = SessionKey::session("quest-1")?;
/// let writer = store.lock("quest-1").await?;            // one writer per session
/// assert!(matches!(store.lock("quest-1").await, Err(StoreError::Locked { .. })));
/// let hello = Entry::message(Message::user("hello"));
/// store.append(&key, &[hello.clone()]).await?;        // durable when it returns
/// let again = store.append(&key, &[hello]).await?;    // a uuid it holds is skipped
/// assert_eq!(again.skipped, 1);
/// writer.release().await?;
/// assert_eq!(store.load(&key).await?.unwrap_or_default().entries.len(), 1);
/// store.close().await
/// # }
/// # tokio::runtime::Runtime::new().unwrap().block_on(demo()).unwrap();
/// ```
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// Appends entries in order, skipping those whose uuid the transcript already
    /// holds. Durable when it returns. Fails with [`StoreError::Locked`] when another
    /// writer holds the session, and with [`StoreError::TakenOver`] when this store's
    /// lock of it was taken over (stores whose locks are leases).
    async fn append(&self, key: &SessionKey, entries: &[Entry])
    -> Result<AppendReport, StoreError>;

    /// Reads a transcript back; `None` when it does not exist.
    async fn load(&self, key: &SessionKey) -> Result<Option<Loaded>, StoreError>;

    /// Reads a transcript back for a resume: everything the model view is built
    /// from, and perhaps nothing of the history a compaction's summary replaced
    /// (see [`LoadedView::skipped_bytes`]). The file stores read from the latest
    /// compaction's `through` on when it is near the end of the file and what
    /// follows it holds the whole view; every other store reads it whole.
    async fn load_view(&self, key: &SessionKey) -> Result<Option<LoadedView>, StoreError> {
        Ok(self.load(key).await?.map(|loaded| LoadedView {
            loaded,
            skipped_bytes: None,
        }))
    }

    /// The subagent transcripts of a session.
    async fn list_subkeys(&self, session_id: &str) -> Result<Vec<SessionKey>, StoreError>;

    /// Every session in the store.
    async fn list_sessions(&self) -> Result<Vec<SessionInfo>, StoreError>;

    /// Deletes a transcript; deleting a session's main key deletes its subkeys too.
    async fn delete(&self, key: &SessionKey) -> Result<(), StoreError>;

    /// Takes the exclusive writer lock of a session, failing at once if another
    /// writer (in this process or another) holds it.
    async fn lock(&self, session_id: &str) -> Result<WriterLock, StoreError>;

    /// Makes the copy `fork` names (a session, whole or up to an entry, into a new
    /// session), with `forked_from` recorded. Atomic: a crash leaves no half
    /// session. The target must not exist.
    ///
    /// The file stores return once the copy is in place; with [`Durability::Full`]
    /// its data is then synced in the background (every byte of it is on disk in the
    /// source already), and the target's first append syncs it in any case. The store
    /// owns those syncs: closing it, or dropping its last handle, waits for them (see
    /// [`FileSessionStore`](crate::FileSessionStore)).
    ///
    /// [`Durability::Full`]: crate::Durability::Full
    async fn fork(&self, fork: SessionFork) -> Result<(), StoreError>;

    /// Finishes what the store does in the background and lets go of what it holds:
    /// the file stores wait for their forks' data syncs, the database store for the
    /// releases of dropped locks, and then closes its connections. Call it once,
    /// before the process ends, on any handle of the store (clones share it); what
    /// else a closed store can do depends on the store.
    async fn close(&self) -> Result<(), StoreError> {
        Ok(())
    }
}
