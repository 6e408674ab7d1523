//! The async [`SessionStore`] face of the file-backed stores.
//!
//! Their work is file I/O with fsyncs, which would stall every task sharing an async
//! runtime's worker thread; so each call runs on tokio's blocking pool instead, with
//! owned copies of its arguments and a handle on the store's shared state.

use std::sync::Arc;

use async_trait::async_trait;
use uuid::Uuid;

use crate::entry::Entry;
use crate::id::SessionKey;
use crate::store::{AppendReport, Loaded, SessionInfo, SessionStore, StoreError, WriterLock};

/// A store's synchronous operations, one per [`SessionStore`] method, with its meaning.
pub(crate) trait BlockingStore: Send + Sync + 'static {
    /// [`SessionStore::append`].
    fn append(&self, key: &SessionKey, entries: &[Entry]) -> Result<AppendReport, StoreError>;
    /// [`SessionStore::load`].
    fn load(&self, key: &SessionKey) -> Result<Option<Loaded>, StoreError>;
    /// [`SessionStore::list_subkeys`].
    fn list_subkeys(&self, session_id: &str) -> Result<Vec<SessionKey>, StoreError>;
    /// [`SessionStore::list_sessions`].
    fn list_sessions(&self) -> Result<Vec<SessionInfo>, StoreError>;
    /// [`SessionStore::delete`].
    fn delete(&self, key: &SessionKey) -> Result<(), StoreError>;
    /// [`SessionStore::lock`].
    fn lock(&self, session_id: &str) -> Result<WriterLock, StoreError>;
    /// [`SessionStore::fork`].
    fn fork(&self, source: &str, target: &str, up_to: Option<Uuid>) -> Result<(), StoreError>;
}

/// A public store type whose state is a shared [`BlockingStore`]; it is a
/// [`SessionStore`] through the impl below.
pub(crate) trait OverBlockingStore: Send + Sync {
    /// The state the blocking work runs on.
    type Inner: BlockingStore;
    /// The shared state, cloned into each blocking call.
    fn blocking_store(&self) -> &Arc<Self::Inner>;
}

/// Runs `work` on `store` off the async runtime's worker threads.
async fn off_runtime<S: BlockingStore, T: Send + 'static>(
    store: &Arc<S>,
    work: impl FnOnce(&S) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
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
        let (key, entries) = (key.clone(), entries.to_vec());
        off_runtime(self.blocking_store(), move |store| {
            store.append(&key, &entries)
        })
        .await
    }

    async fn load(&self, key: &SessionKey) -> Result<Option<Loaded>, StoreError> {
        let key = key.clone();
        off_runtime(self.blocking_store(), move |store| store.load(&key)).await
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

    async fn fork(
        &self,
        source: &str,
        target: &str,
        up_to: Option<Uuid>,
    ) -> Result<(), StoreError> {
        let (source, target) = (source.to_owned(), target.to_owned());
        off_runtime(self.blocking_store(), move |store| {
            store.fork(&source, &target, up_to)
        })
        .await
    }
}
