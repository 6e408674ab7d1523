//! `MemoryStore`: a [`SessionStore`] that keeps everything in this process.
//!
//! For tests and for agents that need no persistence. It follows the same rules as
//! the file stores (uuid de-duplication, one writer per session, fork with
//! `forked_from`) so that code tested against it behaves the same on disk.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use reprise_message::{Entry, now_millis};
use uuid::Uuid;

use crate::store::id::{SessionKey, validate_id};
use crate::store::session_store::{
    AppendReport, ForkOrigin, Loaded, SessionFork, SessionInfo, SessionStore, StoreError,
    WriterLock,
};

/// One transcript: its entries in order and the uuids they hold.
#[derive(Clone, Debug, Default)]
struct Transcript {
    entries: Vec<Entry>,
    uuids: HashSet<Uuid>,
}

impl Transcript {
    fn append(&mut self, entries: &[Entry]) -> AppendReport {
        let mut report = AppendReport::default();
        for entry in entries {
            if self.uuids.insert(entry.uuid) {
                self.entries.push(entry.clone());
                report.written += 1;
            } else {
                report.skipped += 1;
            }
        }
        report
    }
}

/// A session: its main transcript and its subagents' transcripts.
#[derive(Clone, Debug)]
struct MemSession {
    info: SessionInfo,
    main: Transcript,
    subagents: BTreeMap<String, Transcript>,
}

impl MemSession {
    fn new(id: &str, forked_from: Option<ForkOrigin>) -> Self {
        let now = now_millis();
        MemSession {
            info: SessionInfo {
                id: id.to_owned(),
                created_at: now,
                updated_at: now,
                forked_from,
            },
            main: Transcript::default(),
            subagents: BTreeMap::new(),
        }
    }

    fn transcript(&self, key: &SessionKey) -> Option<&Transcript> {
        match key.subagent_name() {
            None => Some(&self.main),
            Some(name) => self.subagents.get(name),
        }
    }
}

/// Sessions whose writer lock is held, shared by a store and the guards it hands out.
type LockRegistry = Arc<Mutex<HashSet<String>>>;

/// Holds a session's slot in the lock registry; dropping it frees the slot.
struct RegistrySlot {
    registry: LockRegistry,
    session: String,
}

impl Drop for RegistrySlot {
    fn drop(&mut self) {
        lock_ignoring_poison(&self.registry).remove(&self.session);
    }
}

fn lock_ignoring_poison<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic in another thread while holding the lock leaves plain data behind that
    // is still consistent (every mutation here is a single insert/remove/push).
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A [`SessionStore`] held in memory: nothing survives the process.
///
/// Appending to any key of a session creates the session (its main transcript may
/// stay empty). The writer lock is a registry inside the store: [`SessionStore::lock`]
/// on a session whose guard is alive fails with [`StoreError::Locked`]; `append`
/// itself never conflicts, since every writer of a `MemoryStore` is in this process.
#[derive(Clone, Default)]
pub struct MemoryStore {
    sessions: Arc<Mutex<BTreeMap<String, MemSession>>>,
    locks: LockRegistry,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn sessions(&self) -> MutexGuard<'_, BTreeMap<String, MemSession>> {
        lock_ignoring_poison(&self.sessions)
    }
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("sessions", &self.sessions().len())
            .finish()
    }
}

#[async_trait]
impl SessionStore for MemoryStore {
    async fn append(
        &self,
        key: &SessionKey,
        entries: &[Entry],
    ) -> Result<AppendReport, StoreError> {
        let mut sessions = self.sessions();
        let session = sessions
            .entry(key.session_id().to_owned())
            .or_insert_with(|| MemSession::new(key.session_id(), None));
        let transcript = match key.subagent_name() {
            None => &mut session.main,
            Some(name) => session.subagents.entry(name.to_owned()).or_default(),
        };
        let report = transcript.append(entries);
        if report.written > 0 {
            session.info.updated_at = now_millis().max(session.info.updated_at);
        }
        Ok(report)
    }

    async fn load(&self, key: &SessionKey) -> Result<Option<Loaded>, StoreError> {
        let sessions = self.sessions();
        Ok(sessions
            .get(key.session_id())
            .and_then(|session| session.transcript(key))
            .map(|transcript| Loaded {
                entries: transcript.entries.clone(),
                warnings: Vec::new(),
            }))
    }

    async fn list_subkeys(&self, session_id: &str) -> Result<Vec<SessionKey>, StoreError> {
        validate_id("session", session_id)?;
        let sessions = self.sessions();
        let Some(session) = sessions.get(session_id) else {
            return Ok(Vec::new());
        };
        session
            .subagents
            .keys()
            .map(|name| SessionKey::subagent(session_id, name).map_err(StoreError::from))
            .collect()
    }

    async fn list_sessions(&self) -> Result<Vec<SessionInfo>, StoreError> {
        Ok(self
            .sessions()
            .values()
            .map(|session| session.info.clone())
            .collect())
    }

    async fn delete(&self, key: &SessionKey) -> Result<(), StoreError> {
        let mut sessions = self.sessions();
        match key.subagent_name() {
            None => {
                sessions.remove(key.session_id());
            }
            Some(name) => {
                if let Some(session) = sessions.get_mut(key.session_id()) {
                    session.subagents.remove(name);
                }
            }
        }
        Ok(())
    }

    async fn lock(&self, session_id: &str) -> Result<WriterLock, StoreError> {
        validate_id("session", session_id)?;
        let mut held = lock_ignoring_poison(&self.locks);
        if !held.insert(session_id.to_owned()) {
            return Err(StoreError::Locked {
                session: session_id.to_owned(),
                pid: Some(std::process::id()),
                host: None,
                free_at: None,
            });
        }
        Ok(WriterLock::new(RegistrySlot {
            registry: Arc::clone(&self.locks),
            session: session_id.to_owned(),
        }))
    }

    async fn fork(&self, fork: SessionFork) -> Result<(), StoreError> {
        fork.validate()?;
        let (source, target, up_to) = (fork.source.as_str(), fork.target.as_str(), fork.up_to);
        let mut sessions = self.sessions();
        if sessions.contains_key(target) {
            return Err(StoreError::AlreadyExists {
                session: target.to_owned(),
            });
        }
        let origin = sessions.get(source).ok_or_else(|| StoreError::NotFound {
            session: source.to_owned(),
        })?;
        let entries = match up_to {
            None => origin.main.entries.as_slice(),
            Some(uuid) => {
                let end = origin
                    .main
                    .entries
                    .iter()
                    .position(|entry| entry.uuid == uuid)
                    .ok_or(StoreError::EntryNotFound {
                        session: source.to_owned(),
                        entry: uuid,
                    })?;
                &origin.main.entries[..=end]
            }
        };
        let mut copy = MemSession::new(
            target,
            Some(ForkOrigin {
                session: source.to_owned(),
                entry: up_to,
            }),
        );
        copy.main.append(entries);
        copy.subagents = origin.subagents.clone();
        sessions.insert(target.to_owned(), copy);
        Ok(())
    }
}
