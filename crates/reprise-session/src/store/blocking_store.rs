//! The async [`SessionStore`] face of the file-backed stores.
//!
//! Their work is file I/O with fsyncs. An append to a session whose file the store
//! has already read is one `write` and one `fdatasync`, and runs right in the task:
//! sending it to another thread would add two thread wake-ups, a quarter of its cost
//! on a fast disk. Anything longer (a load, a fork, a listing, the first append to a
//! file, which reads it to learn its uuids) runs on the blocking pool, where it
//! cannot stall the runtime's other tasks (see [`off_runtime`]).

use std::sync::Arc;

use async_trait::async_trait;
use reprise_message::Entry;

use crate::store::id::SessionKey;
use crate::store::session_store::{
    AppendReport, Loaded, LoadedView, SessionFork, SessionInfo, SessionStore, StoreError,
    WriterLock,
};

/// A store's synchronous operations, one per [`SessionStore`] method, with its meaning.
pub trait BlockingStore: Send + Sync + 'static {
    /// [`SessionStore::append`].
    fn append(&self, key: &SessionKey, entries: &[Entry]) -> Result<AppendReport, StoreError>;
    /// [`SessionStore::load`].
    fn load(&self, key: &SessionKey) -> Result<Option<Loaded>, StoreError>;
    /// [`SessionStore::load_view`]; by default the whole transcript.
    fn load_view(&self, key: &SessionKey) -> Result<Option<LoadedView>, StoreError> {
        Ok(self.load(key)?.map(|loaded| LoadedView {
            loaded,
            skipped_bytes: None,
        }))
    }
    /// [`SessionStore::list_subkeys`].
    fn list_subkeys(&self, session_id: &str) -> Result<Vec<SessionKey>, StoreError>;
    /// [`SessionStore::list_sessions`].
    fn list_sessions(&self) -> Result<Vec<SessionInfo>, StoreError>;
    /// [`SessionStore::delete`].
    fn delete(&self, key: &SessionKey) -> Result<(), StoreError>;
    /// [`SessionStore::lock`].
    fn lock(&self, session_id: &str) -> Result<WriterLock, StoreError>;
    /// [`SessionStore::fork`].
    fn fork(&self, fork: &SessionFork) -> Result<(), StoreError>;
    /// Whether appending to `key` now is only a write and a sync: its writer has read
    /// the file already, so no whole-file read comes first.
    fn append_is_short(&self, key: &SessionKey) -> bool;
    /// [`SessionStore::close`]: waits for the background work of the store.
    fn close(&self) -> Result<(), StoreError>;
}

/// A public store type whose state is a shared [`BlockingStore`]; it is a
/// [`SessionStore`] through the impl below.
pub trait OverBlockingStore: Send + Sync {
    /// The state the blocking work runs on.
    type Inner: BlockingStore;
    /// The shared state, cloned into each blocking call.
    fn blocking_store(&self) -> &Arc<Self::Inner>;
}

/// Runs `work` on `store` without stalling the async runtime's other tasks: on the
/// blocking pool, on any runtime (a multi-threaded one and a current-thread one
/// alike), and directly when polled outside tokio.
async fn off_runtime<S: BlockingStore, T: Send + 'static>(
    store: &Arc<S>,
    work: impl FnOnce(&S) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    if tokio::runtime::Handle::try_current().is_err() {
        // Polled outside tokio: there is no runtime to keep responsive.
        return work(store);
    }
    let store = Arc::clone(store);
    tokio::task::spawn_blocking(move || work(&store))
        .await
        .map_err(|error| StoreError::Unsupported(format!("store task failed: {error}")))?
}

#[async_trait]
impl<S: OverBlockingStore> SessionStore for S {
    async fn append(
        &self,
        key: &SessionKey,
        entries: &[Entry],
    ) -> Result<AppendReport, StoreError> {
        let store = self.blocking_store();
        if store.append_is_short(key) {
            return store.append(key, entries);
        }
        let (key, entries) = (key.clone(), entries.to_vec());
        off_runtime(store, move |store| store.append(&key, &entries)).await
    }

    async fn load(&self, key: &SessionKey) -> Result<Option<Loaded>, StoreError> {
        let key = key.clone();
        off_runtime(self.blocking_store(), move |store| store.load(&key)).await
    }

    async fn load_view(&self, key: &SessionKey) -> Result<Option<LoadedView>, StoreError> {
        let key = key.clone();
        off_runtime(self.blocking_store(), move |store| store.load_view(&key)).await
    }

    async fn list_subkeys(&self, session_id: &str) -> Result<Vec<SessionKey>, StoreError> {
        let id = session_id.to_owned();
        off_runtime(self.blocking_store(), move |store| store.list_subkeys(&id)).await
    }

    async fn list_sessions(&self) -> Result<Vec<SessionInfo>, StoreError> {
        off_runtime(self.blocking_store(), |store| store.list_sessions()).await
    }

    async fn delete(&self, key: &SessionKey) -> Result<(), StoreError> {
        let key = key.clone();
        off_runtime(self.blocking_store(), move |store| store.delete(&key)).await
    }

    async fn lock(&self, session_id: &str) -> Result<WriterLock, StoreError> {
        let id = session_id.to_owned();
        off_runtime(self.blocking_store(), move |store| store.lock(&id)).await
    }

    async fn fork(&self, fork: SessionFork) -> Result<(), StoreError> {
        off_runtime(self.blocking_store(), move |store| store.fork(&fork)).await
    }

    async fn close(&self) -> Result<(), StoreError> {
        off_runtime(self.blocking_store(), |store| store.close()).await
    }
}
