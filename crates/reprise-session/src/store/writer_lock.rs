//! The one-writer-per-session rule for the file stores: an exclusive OS lock
//! (`flock` through std's `File::try_lock`) on a lock file, with the holder's pid
//! written into it so that the next writer can name who holds the session.
//!
//! A lock belongs to the store instance that took it: while a [`WriterLock`] from
//! [`LockRegistry::lock`] is alive, that store's appends go ahead; anyone else's
//! (another store instance in this process, or another process) fail at once with
//! [`StoreError::Locked`].

use std::collections::HashMap;
use std::fs::{File, TryLockError};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::fs::{IoError, open_beneath};
use crate::store::session_store::{StoreError, WriterLock};

/// An open, locked lock file. Closing it (drop) releases the lock.
#[derive(Debug)]
pub struct HeldLock {
    _file: File,
}

/// Retries (1 ms apart) when the holder seems to be this very process; see [`acquire`].
const FORK_WINDOW_RETRIES: u32 = 20;

/// How long a refused writer waits for the holder's pid to appear, when the holder
/// took the lock an instant ago and has not written it yet.
const PID_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// Bytes of the pid record: the pid left-aligned, padded with spaces, then `\n`. A
/// fixed width means the holder replaces the previous holder's pid with one
/// positioned write, so a reader sees one pid or the other, never a mix or nothing.
const PID_RECORD: usize = 11;

/// Takes the OS lock on `path` for `session`, creating the file 0600 if needed. No
/// symbolic link below `root` is followed to reach it: a link is refused.
pub fn acquire(root: &Path, path: &Path, session: &str) -> Result<HeldLock, StoreError> {
    let file = open_beneath(
        root,
        path,
        rustix::fs::OFlags::RDWR | rustix::fs::OFlags::CREATE,
        "open lock",
    )?;
    let mut attempts = 0;
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(TryLockError::WouldBlock) => {
                let pid = wait_for_pid(&file);
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
                    free_at: None,
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
    let record = format!("{:<width$}\n", std::process::id(), width = PID_RECORD - 1);
    if file.write_all_at(record.as_bytes(), 0).is_ok() {
        let _ = file.set_len(PID_RECORD as u64);
    }
    Ok(HeldLock { _file: file })
}

/// The holder's pid; when the file holds none yet (the holder has the lock but has not
/// written its pid), read again for up to [`PID_WAIT`].
fn wait_for_pid(file: &File) -> Option<u32> {
    let start = std::time::Instant::now();
    loop {
        if let Some(pid) = read_pid(file) {
            return Some(pid);
        }
        if start.elapsed() >= PID_WAIT {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

fn read_pid(file: &File) -> Option<u32> {
    let mut text = String::new();
    let mut reader = file;
    std::io::Seek::seek(&mut reader, std::io::SeekFrom::Start(0)).ok()?;
    reader.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

/// The writer locks one store instance holds, by session id.
#[derive(Debug, Default)]
pub struct LockRegistry {
    held: Mutex<HashMap<String, Weak<HeldLock>>>,
}

impl LockRegistry {
    fn held(&self) -> MutexGuard<'_, HashMap<String, Weak<HeldLock>>> {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes the writer lock of `session` for the caller to keep.
    pub fn lock(&self, session: &str, root: &Path, path: &Path) -> Result<WriterLock, StoreError> {
        let mut held = self.held();
        if held
            .get(session)
            .is_some_and(|weak| weak.strong_count() > 0)
        {
            return Err(StoreError::Locked {
                session: session.to_owned(),
                pid: Some(std::process::id()),
                host: None,
                free_at: None,
            });
        }
        let lock = Arc::new(acquire(root, path, session)?);
        held.insert(session.to_owned(), Arc::downgrade(&lock));
        Ok(WriterLock::new(lock))
    }

    /// Whether this store holds the writer lock of `session` (a guard is alive).
    pub fn holds(&self, session: &str) -> bool {
        self.held()
            .get(session)
            .is_some_and(|weak| weak.strong_count() > 0)
    }

    /// Runs `write` as the writer of `session`: under the lock this store already
    /// holds, or under one taken for the duration of the call.
    pub fn with_writer<T>(
        &self,
        session: &str,
        root: &Path,
        path: &Path,
        write: impl FnOnce() -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let existing = self.held().get(session).and_then(Weak::upgrade);
        let _guard = match existing {
            Some(lock) => lock,
            None => Arc::new(acquire(root, path, session)?),
        };
        write()
    }
}
