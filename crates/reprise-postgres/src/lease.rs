//! Writer leases: the guard a `lock` returns, its background renewal, and the leases
//! this process has let go of.
//!
//! A lock released with `WriterLock::release` ends its lease on the server before
//! returning. Dropping a guard cannot wait for the server, so the release is sent from a task;
//! until it lands, the lease is still live in the database. The holder tokens of
//! such leases are kept in a process-wide set and passed to `lock` and `append`, which
//! treat them as released: a lock dropped in this process can be taken again at once,
//! by any store instance of the process. Other processes see the lease until the
//! release lands, or until it expires if it never does.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use reprise_session::{ReleasableLock, StoreError};
use sqlx::PgPool;
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::error::backend;

/// Holder tokens of leases dropped in this process whose release has not landed.
static RELEASED: Mutex<Option<HashSet<Uuid>>> = Mutex::new(None);

fn released() -> MutexGuard<'static, Option<HashSet<Uuid>>> {
    RELEASED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The tokens of leases this process let go of whose release has not landed.
pub(crate) fn released_tokens() -> Vec<Uuid> {
    released()
        .as_ref()
        .map(|set| set.iter().copied().collect())
        .unwrap_or_default()
}

/// A lease this store holds: the session's epoch when it was granted, and the token
/// that names this acquisition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Held {
    pub(crate) epoch: i64,
    pub(crate) holder: Uuid,
}

/// The leases one store instance holds, by session id.
pub(crate) type HeldLeases = Arc<Mutex<HashMap<String, Held>>>;

pub(crate) fn lock_held(held: &HeldLeases) -> MutexGuard<'_, HashMap<String, Held>> {
    held.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Release tasks still in flight, awaited by `SessionStore::close` of `PgSessionStore`.
pub(crate) type PendingReleases = Arc<Mutex<Vec<JoinHandle<()>>>>;

/// What a `WriterLock` from `PgSessionStore::lock` holds.
pub(crate) struct LeaseGuard {
    pub(crate) pool: PgPool,
    pub(crate) session: String,
    pub(crate) lease: Held,
    pub(crate) held: HeldLeases,
    pub(crate) pending: PendingReleases,
    pub(crate) renewal: JoinHandle<()>,
    /// Set once `release` has let go of the lease: the drop has nothing left to do.
    pub(crate) released: bool,
}

impl LeaseGuard {
    /// Stops renewing and forgets the lease in this process (lock and append treat it
    /// as released from now on).
    fn let_go(&mut self) {
        self.renewal.abort();
        {
            let mut held = lock_held(&self.held);
            if held.get(&self.session) == Some(&self.lease) {
                held.remove(&self.session);
            }
        }
        released()
            .get_or_insert_with(HashSet::new)
            .insert(self.lease.holder);
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        self.let_go();
        // Without a runtime the lease is left to expire.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (pool, session, lease) = (self.pool.clone(), self.session.clone(), self.lease);
            let task = runtime.spawn(async move {
                if let Err(error) = release(&pool, &session, lease).await {
                    // The lease expires on its own; this process keeps treating it as
                    // released.
                    tracing::warn!(%error, session, "releasing a writer lease");
                }
            });
            let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            pending.retain(|task| !task.is_finished());
            pending.push(task);
        }
    }
}

#[async_trait]
impl ReleasableLock for LeaseGuard {
    async fn release(mut self: Box<Self>) -> Result<(), StoreError> {
        self.let_go();
        self.released = true;
        release(&self.pool, &self.session, self.lease)
            .await
            .map_err(|error| {
                backend(
                    format!("releasing the writer lease of {}", self.session),
                    error,
                )
            })
    }
}

/// Ends the lease on the server; the process stops counting it as its own once that
/// landed.
async fn release(pool: &PgPool, session: &str, lease: Held) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT reprise_release($1, $2)")
        .bind(session)
        .bind(lease.epoch)
        .execute(pool)
        .await?;
    if let Some(set) = released().as_mut() {
        set.remove(&lease.holder);
    }
    Ok(())
}

/// Renews a lease every third of its duration until it is taken over (or the task is
/// aborted when the guard drops).
pub(crate) async fn renew_until_lost(pool: PgPool, session: String, epoch: i64, lease: Duration) {
    let every = lease / 3;
    let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
    loop {
        tokio::time::sleep(every).await;
        let renewed = sqlx::query_scalar::<_, bool>("SELECT reprise_renew($1, $2, $3)")
            .bind(&session)
            .bind(epoch)
            .bind(lease_ms)
            .fetch_one(&pool)
            .await;
        match renewed {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(session, epoch, "writer lease taken over by another writer");
                return;
            }
            // A server away for a moment: the next tick tries again, and appends are
            // fenced by the epoch whatever happens here.
            Err(error) => tracing::warn!(%error, session, "renewing a writer lease"),
        }
    }
}
