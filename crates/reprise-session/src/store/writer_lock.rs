//! The one-writer-per-session rule for the file stores: an exclusive OS lock
//! (`flock` through std's `File::try_lock`) on a lock file, with the holder's pid
//! written into it so that the next writer can name who holds the session.
//!
//! A lock belongs to the store instance that took it: while a [`WriterLock`] from
//! [`LockRegistry::lock`] is alive, that store's appends go ahead; anyone else's
//! (another store instance in this process, or another process) fail at once with
//! [`StoreError::Locked`].

use std::collections::HashMap;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::fs::{FILE_MODE, IoError, io_err};
use crate::store::session_store::{StoreError, WriterLock};

/// An open, locked lock file. Closing it (drop) releases the lock.
#[derive(Debug)]
pub(crate) struct HeldLock {
    _file: File,
}

/// Retries (1 ms apart) when the holder seems to be this very process; see [`acquire`].
const FORK_WINDOW_RETRIES: u32 = 20;

/// Takes the OS lock on `path` for `session`, creating the file 0600 if needed.
pub(crate) fn acquire(path: &Path, session: &str) -> Result<HeldLock, StoreError> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(FILE_MODE)
        .open(path)
        .map_err(io_err("open lock", path))?;
    let mut attempts = 0;
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(TryLockError::WouldBlock) => {
                let pid = read_pid(&mut file);
                // A lock this process just released can still be held for a moment by
                // a child being spawned (it shares the descriptor until its `exec`
                // closes it). Only then, retry briefly; a real holder fails at once.
                if pid == Some(std::process::id()) && attempts < FORK_WINDOW_RETRIES {
                    attempts += 1;
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    continue;
                }
                return Err(StoreError::Locked {
                    session: session.to_owned(),
                    pid,
                    host: None,
                });
            }
            Err(TryLockError::Error(source)) => {
                return Err(StoreError::Io(IoError::new(
                    "lock",
                    path.to_path_buf(),
                    source,
                )));
            }
        }
    }
    // The pid is informative only: a failure to write it does not weaken the lock.
    let pid = format!("{}\n", std::process::id());
    let _ = file
        .set_len(0)
        .and_then(|()| file.seek(SeekFrom::Start(0)))
        .and_then(|_| file.write_all(pid.as_bytes()));
    Ok(HeldLock { _file: file })
}

fn read_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

/// The writer locks one store instance holds, by session id.
#[derive(Debug, Default)]
pub(crate) struct LockRegistry {
    held: Mutex<HashMap<String, Weak<HeldLock>>>,
}

impl LockRegistry {
    fn held(&self) -> MutexGuard<'_, HashMap<String, Weak<HeldLock>>> {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes the writer lock of `session` for the caller to keep.
    pub(crate) fn lock(&self, session: &str, path: &Path) -> Result<WriterLock, StoreError> {
        let mut held = self.held();
        if held
            .get(session)
            .is_some_and(|weak| weak.strong_count() > 0)
        {
            return Err(StoreError::Locked {
                session: session.to_owned(),
                pid: Some(std::process::id()),
                host: None,
            });
        }
        let lock = Arc::new(acquire(path, session)?);
        held.insert(session.to_owned(), Arc::downgrade(&lock));
        Ok(WriterLock::new(lock))
    }

    /// Whether this store holds the writer lock of `session` (a guard is alive).
    pub(crate) fn holds(&self, session: &str) -> bool {
        self.held()
            .get(session)
            .is_some_and(|weak| weak.strong_count() > 0)
    }

    /// Runs `write` as the writer of `session`: under the lock this store already
    /// holds, or under one taken for the duration of the call.
    pub(crate) fn with_writer<T>(
        &self,
        session: &str,
        path: &Path,
        write: impl FnOnce() -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let existing = self.held().get(session).and_then(Weak::upgrade);
        let _guard = match existing {
            Some(lock) => lock,
            None => Arc::new(acquire(path, session)?),
        };
        write()
    }
}
