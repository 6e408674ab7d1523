//! The background data syncs of forks, owned by the store that made them.
//!
//! A fork returns once its copy is in place; writing its data to disk takes several
//! times as long as copying it in the page cache, so that runs on a thread of its own.
//! The store keeps the thread's handle: [`ForkSyncs::wait`] (a store's `close`) joins
//! every pending one, and so does dropping the store, so a program cannot end with a
//! fork's data still only in the page cache because it forgot a call.

use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

/// A store's fork syncs that were started and not yet joined. Joined on drop.
#[derive(Debug, Default)]
pub struct ForkSyncs {
    handles: Mutex<Vec<JoinHandle<()>>>,
    /// Syncs started and not yet joined (shared, so that a test can watch it after
    /// the store is gone).
    unjoined: Arc<AtomicUsize>,
}

impl ForkSyncs {
    /// Syncs `files` (data and metadata) on a thread of its own. Failures are logged:
    /// the copy is already complete in the page cache, every byte of it is on disk in
    /// the source, and the fork's first durable append syncs the file again.
    pub fn start(&self, files: Vec<(File, PathBuf)>) {
        let work = move || {
            for (file, path) in &files {
                if let Err(error) = file.sync_all() {
                    tracing::warn!(file = %path.display(), "syncing a fork failed: {error}");
                }
            }
        };
        let work = Arc::new(Mutex::new(Some(work)));
        let job = Arc::clone(&work);
        let spawned = std::thread::Builder::new()
            .name("reprise-fork-sync".to_owned())
            .spawn(move || run_once(&job));
        match spawned {
            Ok(handle) => {
                self.unjoined.fetch_add(1, Ordering::SeqCst);
                self.handles
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(handle);
            }
            // No thread to be had: sync here instead.
            Err(_) => run_once(&work),
        }
    }

    /// Waits until every sync started so far has finished. Blocking.
    pub fn wait(&self) {
        let handles =
            std::mem::take(&mut *self.handles.lock().unwrap_or_else(PoisonError::into_inner));
        for handle in handles {
            // A panic in a sync thread was reported by the panic hook; nothing to add.
            let _ = handle.join();
            self.unjoined.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// How many syncs were started and not yet joined.
    pub fn pending(&self) -> usize {
        self.unjoined.load(Ordering::SeqCst)
    }

    /// The count behind [`ForkSyncs::pending`], to watch it once the store is dropped
    /// (a store's tests check that dropping it joins every sync).
    pub fn pending_counter(&self) -> Arc<AtomicUsize> {
        Arc::clone(&self.unjoined)
    }
}

impl Drop for ForkSyncs {
    fn drop(&mut self) {
        self.wait();
    }
}

fn run_once(work: &Mutex<Option<impl FnOnce()>>) {
    let job = work.lock().unwrap_or_else(PoisonError::into_inner).take();
    if let Some(job) = job {
        job();
    }
}

/// Runs the blocking `work` from async code without stalling the runtime's other
/// tasks: on the blocking pool (on any runtime), and directly outside tokio.
pub async fn without_stalling(work: impl FnOnce() + Send + 'static) {
    if tokio::runtime::Handle::try_current().is_err() {
        work();
        return;
    }
    // A join error is a panic in `work`, already reported by the panic hook.
    let _ = tokio::task::spawn_blocking(work).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_joins_every_pending_sync() {
        let dir = tempfile::tempdir().unwrap();
        let syncs = ForkSyncs::default();
        for n in 0..3 {
            let path = dir.path().join(format!("{n}.jsonl"));
            std::fs::write(&path, b"{}\n").unwrap();
            let file = File::open(&path).unwrap();
            syncs.start(vec![(file, path)]);
        }
        assert_eq!(syncs.pending(), 3);
        syncs.wait();
        assert_eq!(syncs.pending(), 0);
        assert!(syncs.handles.lock().unwrap().is_empty());
    }

    #[test]
    fn dropping_joins_every_pending_sync() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        std::fs::write(&path, b"{}\n").unwrap();
        let syncs = ForkSyncs::default();
        syncs.start(vec![(File::open(&path).unwrap(), path)]);
        let counter = syncs.pending_counter();
        assert_eq!(counter.load(Ordering::SeqCst), 1);
        drop(syncs);
        assert_eq!(counter.load(Ordering::SeqCst), 0);
    }
}
