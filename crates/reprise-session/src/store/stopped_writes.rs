//! The sessions this process writes no more to: after a sync fails, what the write
//! left may or may not be on disk (the kernel may have dropped the dirty pages and
//! cleared the error, so a later sync that succeeds proves nothing about them). Going
//! on would let the process and the file tell two stories: an entry the process
//! dropped could still be in the file, and whatever it wrote next (a second prompt,
//! an "interrupted" result for a call whose real result is there) would follow it.
//! So the session stops taking appends in this process, whichever store or writer
//! asks; opening it in a new process reads back what is on disk, one story again.
//!
//! The list is process-wide because a session can be opened again by a new store in
//! the same process (the chat's `/resume`); it holds absolute paths of sessions' main
//! transcripts.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::fs::IoError;

/// The sessions stopped, by the absolute path of their main transcript, with the
/// failure that stopped each.
static STOPPED: Mutex<Vec<(PathBuf, Arc<IoError>)>> = Mutex::new(Vec::new());

/// Set once any session is stopped, so that an append in a process where none is
/// takes no lock.
static ANY_STOPPED: AtomicBool = AtomicBool::new(false);

/// The key of the session whose main transcript is `path`.
pub(crate) fn session_key(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

fn stopped_list() -> std::sync::MutexGuard<'static, Vec<(PathBuf, Arc<IoError>)>> {
    // A plain list of paths: nothing a panic elsewhere could leave half-made.
    STOPPED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Stops the session keyed `key` (see [`session_key`]) because of `cause`; returns
/// the cause that stopped it (the first one, when it was stopped already).
pub(crate) fn stop(key: &Path, cause: IoError) -> Arc<IoError> {
    let mut stopped = stopped_list();
    if let Some((_, first)) = stopped.iter().find(|(path, _)| path == key) {
        return Arc::clone(first);
    }
    let cause = Arc::new(cause);
    stopped.push((key.to_path_buf(), Arc::clone(&cause)));
    ANY_STOPPED.store(true, Ordering::Release);
    cause
}

/// The failure that stopped the session keyed `key`, if it was stopped.
pub(crate) fn stopped(key: &Path) -> Option<Arc<IoError>> {
    if !ANY_STOPPED.load(Ordering::Acquire) {
        return None;
    }
    stopped_list()
        .iter()
        .find(|(path, _)| path == key)
        .map(|(_, cause)| Arc::clone(cause))
}
