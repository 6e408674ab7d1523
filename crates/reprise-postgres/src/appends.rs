//! Appends that wait for one another share a transaction.
//!
//! A small append costs the server far less in rows than in the statement, the
//! transaction and the commit around them: with many sessions written at once (a
//! service's workers), sending each append on its own spends the database on that.
//! So a store sends one batch at a time: an append that arrives while a batch is on
//! its way joins a queue, and the next batch takes the whole queue to the server in
//! one call of `reprise_append_calls`: one statement, one transaction, each call still
//! fenced and counted on its own. An append that finds nothing on its way goes at
//! once, alone (one call of `reprise_append_one` when it holds one entry), from its
//! caller's task, so a single writer waits for nothing.
//!
//! Each call's entries are still stored all together or not at all, and a call
//! returns only once the transaction holding them has committed. A batch runs in a
//! task of its own: a caller that stops waiting does not cut the others' transaction
//! short (a lone append runs in its caller's task, like any other query).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, PgPool, Postgres};
use tokio::sync::oneshot;
use uuid::Uuid;

use crate::lease::released_tokens;

/// Calls in one batch at most, so that one transaction stays small.
const MOST_CALLS: usize = 64;

/// One append: entries for one transcript.
pub(crate) struct Call {
    pub(crate) session: String,
    /// `''` for the main transcript.
    pub(crate) subagent: String,
    /// The writer's lease epoch, when it holds one.
    pub(crate) epoch: Option<i64>,
    /// The person's first and last messages in the call, redacted, for listings.
    pub(crate) first_message: Option<String>,
    pub(crate) last_message: Option<String>,
    pub(crate) uuids: Vec<Uuid>,
    pub(crate) bodies: Vec<String>,
    /// Which entries are messages.
    pub(crate) messages: Vec<bool>,
}

/// What the server did with one call.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Rows written (the rest were uuids the transcript held).
    Written(usize),
    /// Another writer holds the session's lease.
    Refused {
        host: Option<String>,
        pid: Option<i32>,
    },
}

/// The driver's error for every call of a failed batch.
pub(crate) type Failure = Arc<sqlx::Error>;

type Reply = oneshot::Sender<Result<Outcome, Failure>>;

/// The appends waiting for a batch, and whether one is on its way.
#[derive(Default)]
struct Queue {
    waiting: Vec<(Call, Reply)>,
    sending: bool,
}

/// Sends appends to the server, several calls to one transaction when they wait for
/// one another.
#[derive(Clone)]
pub(crate) struct Appender {
    pool: PgPool,
    queue: Arc<Mutex<Queue>>,
    kept: Arc<Mutex<Keeper>>,
}

/// The kept connection, if any (see [`Kept`]), and whether one may be kept: not
/// when the pool has a single connection, nor once the store is closing (the pool's
/// closing waits for every connection).
struct Keeper {
    kept: Option<Kept>,
    keeping: bool,
}

/// The connection the last append went on, kept for the next one.
///
/// sqlx hands a connection back to its pool from a task of its own, after a round
/// trip to the server that tests it: a writer appending in a loop paid for that round
/// trip, and for the hand-over between threads, on every append. Appends go one
/// transaction at a time, so one connection kept here serves them. It is kept only
/// while the pool has room for others (two connections or more), and only for a
/// moment: one that sat idle longer goes back to the pool, which tests it.
struct Kept {
    connection: Option<PoolConnection<Postgres>>,
    since: Instant,
}

/// How long a kept connection is used without a test: as long as the pool uses one
/// without a test.
const KEPT_FOR: Duration = CHECKED_AFTER_IDLE;

/// How long a pooled connection may sit idle before it is checked with a ping on
/// its next use.
pub(crate) const CHECKED_AFTER_IDLE: Duration = Duration::from_millis(100);

impl Drop for Kept {
    fn drop(&mut self) {
        // A pooled connection goes back from a task, which needs a runtime: without
        // one (a store dropped after its runtime), it is closed instead.
        if tokio::runtime::Handle::try_current().is_err()
            && let Some(connection) = self.connection.take()
        {
            drop(connection.detach());
        }
    }
}

impl Appender {
    pub(crate) fn new(pool: PgPool) -> Self {
        let keeper = Keeper {
            kept: None,
            keeping: pool.options().get_max_connections() >= 2,
        };
        Appender {
            pool,
            queue: Arc::default(),
            kept: Arc::new(Mutex::new(keeper)),
        }
    }

    /// The kept connection when it is fresh, or one from the pool.
    async fn connection(&self) -> Result<PoolConnection<Postgres>, sqlx::Error> {
        let kept = self
            .kept
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .kept
            .take();
        if let Some(mut kept) = kept
            && kept.since.elapsed() < KEPT_FOR
            && let Some(connection) = kept.connection.take()
        {
            return Ok(connection);
        }
        self.pool.acquire().await
    }

    /// Keeps `connection` for the next append: it just answered.
    fn keep(&self, connection: PoolConnection<Postgres>) {
        let mut keeper = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if keeper.keeping && keeper.kept.is_none() {
            keeper.kept = Some(Kept {
                connection: Some(connection),
                since: Instant::now(),
            });
        }
    }

    /// Gives the kept connection back to the pool and keeps none from now on: the
    /// pool is about to close, and waits for every connection to come back.
    pub(crate) fn release(&self) {
        let kept = {
            let mut keeper = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
            keeper.keeping = false;
            keeper.kept.take()
        };
        drop(kept);
    }

    /// `calls` in one transaction, on the kept connection: one outcome per call.
    async fn write(&self, calls: &[Call]) -> Result<Vec<Outcome>, sqlx::Error> {
        let mut connection = self.connection().await?;
        let outcomes = match calls {
            [call] if call.uuids.len() == 1 => vec![write_entry(&mut connection, call).await?],
            _ => write_calls(&mut connection, calls).await?,
        };
        // A connection whose call failed goes back to the pool, which tests it.
        self.keep(connection);
        Ok(outcomes)
    }

    /// `call` alone, on the kept connection.
    async fn write_one(&self, call: &Call) -> Result<Outcome, sqlx::Error> {
        let mut outcomes = self.write(std::slice::from_ref(call)).await?;
        // write answers one outcome per call.
        outcomes
            .pop()
            .ok_or_else(|| sqlx::Error::Protocol("an append answered no outcome".into()))
    }

    /// Appends `call`, alone or with others; resolves once its transaction is over.
    pub(crate) async fn append(&self, call: Call) -> Result<Outcome, Failure> {
        let queued = {
            let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
            if queue.sending || !queue.waiting.is_empty() {
                let (reply, answer) = oneshot::channel();
                queue.waiting.push((call, reply));
                Err(answer)
            } else {
                queue.sending = true;
                Ok(call)
            }
        };
        let answer = match queued {
            Err(answer) => answer,
            Ok(call) => {
                // Nothing else on its way: sent from this task, with no hand-over to
                // another; what queues meanwhile goes next.
                let mut turn = Turn {
                    appender: self,
                    passed: false,
                };
                let outcome = self.write_one(&call).await.map_err(Arc::new);
                turn.pass_on();
                return outcome;
            }
        };
        match answer.await {
            Ok(outcome) => outcome,
            // The batch's task ended without an answer: it panicked or the runtime is
            // shutting down.
            Err(_) => Err(Arc::new(sqlx::Error::WorkerCrashed)),
        }
    }

    /// Sends what queued, batch after batch, until nothing waits.
    async fn send_queued(self) {
        let mut sending = Sending {
            queue: Arc::clone(&self.queue),
            finished: false,
        };
        loop {
            // Callers that write in a loop append again as soon as they are answered:
            // let them run first, so that the next batch takes them all (measured: most
            // batches then hold every session of the process, rather than one or two).
            tokio::task::yield_now().await;
            let batch = {
                let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
                if queue.waiting.is_empty() {
                    queue.sending = false;
                    sending.finished = true;
                    return;
                }
                take_batch(&mut queue)
            };
            self.send(batch).await;
        }
    }

    async fn send(&self, batch: Vec<(Call, Reply)>) {
        let (calls, replies): (Vec<Call>, Vec<Reply>) = batch.into_iter().unzip();
        match self.write(&calls).await {
            Ok(outcomes) => {
                for (reply, outcome) in replies.into_iter().zip(outcomes) {
                    let _ = reply.send(Ok(outcome));
                }
            }
            // The server refused the statement and rolled the transaction back: one
            // call may be the cause, so each goes again alone and fails on its own.
            Err(sqlx::Error::Database(_)) if calls.len() > 1 => {
                for (call, reply) in calls.into_iter().zip(replies) {
                    let outcome = self.write_one(&call).await.map_err(Arc::new);
                    let _ = reply.send(outcome);
                }
            }
            Err(error) => {
                // The last caller gets the last handle, so that a lone append's error
                // can be taken back out of the Arc.
                let mut error = Some(Arc::new(error));
                let count = replies.len();
                for (index, reply) in replies.into_iter().enumerate() {
                    let shared = match index + 1 == count {
                        true => error.take(),
                        false => error.clone(),
                    };
                    if let Some(shared) = shared {
                        let _ = reply.send(Err(shared));
                    }
                }
            }
        }
    }
}

/// A lone append sent from its caller's task: when it is over (or its caller stops
/// waiting), the appends that queued meanwhile go in a task of their own.
struct Turn<'a> {
    appender: &'a Appender,
    passed: bool,
}

impl Turn<'_> {
    fn pass_on(&mut self) {
        self.passed = true;
        let mut queue = self
            .appender
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if queue.waiting.is_empty() {
            queue.sending = false;
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(self.appender.clone().send_queued());
            }
            // No runtime to send them from: they are answered with an error.
            Err(_) => {
                queue.sending = false;
                queue.waiting.clear();
            }
        }
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        if !self.passed {
            self.pass_on();
        }
    }
}

/// Clears the way when the task sending batches ends before the queue is empty: its
/// runtime shut down. The appends still waiting are answered with an error (their
/// senders are dropped), and the next append starts a new task.
struct Sending {
    queue: Arc<Mutex<Queue>>,
    finished: bool,
}

impl Drop for Sending {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        queue.sending = false;
        queue.waiting.clear();
    }
}

fn take_batch(queue: &mut Queue) -> Vec<(Call, Reply)> {
    let count = queue.waiting.len().min(MOST_CALLS);
    queue.waiting.drain(..count).collect()
}

/// `reprise_append_one` for `call`, which holds one entry; the lease's holder is read
/// only when the append is refused.
async fn write_entry(connection: &mut PgConnection, call: &Call) -> Result<Outcome, sqlx::Error> {
    // With one entry, the person's first and last messages in the call are one.
    let written: Option<i32> =
        sqlx::query_scalar("SELECT reprise_append_one($1, $2, $3, $4, $5, $6, $7, $8)")
            .bind(&call.session)
            .bind(&call.subagent)
            .bind(call.epoch)
            .bind(released_tokens())
            .bind(call.uuids.first())
            .bind(call.bodies.first())
            .bind(call.messages.first().copied().unwrap_or(false))
            .bind(call.last_message.as_deref())
            .fetch_one(&mut *connection)
            .await?;
    if written.is_some() {
        return Ok(outcome(written, None, None));
    }
    let holder: Option<(String, i32)> =
        sqlx::query_as("SELECT host, pid FROM reprise_leases WHERE session_id = $1")
            .bind(&call.session)
            .fetch_optional(&mut *connection)
            .await?;
    let (host, pid) = holder.unzip();
    Ok(outcome(None, host, pid))
}

fn outcome(written: Option<i32>, host: Option<String>, pid: Option<i32>) -> Outcome {
    match written {
        Some(written) => Outcome::Written(usize::try_from(written).unwrap_or(0)),
        None => Outcome::Refused { host, pid },
    }
}

/// One call of `reprise_append_calls` for `calls`: one outcome per call, in order.
async fn write_calls(
    connection: &mut PgConnection,
    calls: &[Call],
) -> Result<Vec<Outcome>, sqlx::Error> {
    let entries: usize = calls.iter().map(|call| call.uuids.len()).sum();
    let mut sessions = Vec::with_capacity(calls.len());
    let mut subagents = Vec::with_capacity(calls.len());
    let mut epochs = Vec::with_capacity(calls.len());
    let mut first_messages = Vec::with_capacity(calls.len());
    let mut last_messages = Vec::with_capacity(calls.len());
    let mut owners = Vec::with_capacity(entries);
    let mut uuids = Vec::with_capacity(entries);
    let mut bodies = Vec::with_capacity(entries);
    let mut messages = Vec::with_capacity(entries);
    for (index, call) in calls.iter().enumerate() {
        sessions.push(call.session.as_str());
        subagents.push(call.subagent.as_str());
        epochs.push(call.epoch);
        first_messages.push(call.first_message.as_deref());
        last_messages.push(call.last_message.as_deref());
        // Calls are counted from 1, as PostgreSQL counts.
        let owner = i32::try_from(index + 1).unwrap_or(i32::MAX);
        owners.extend(std::iter::repeat_n(owner, call.uuids.len()));
        uuids.extend_from_slice(&call.uuids);
        bodies.extend(call.bodies.iter().map(String::as_str));
        messages.extend_from_slice(&call.messages);
    }
    let rows: Vec<(Option<i32>, Option<String>, Option<i32>)> = sqlx::query_as(
        "SELECT written, holder_host, holder_pid \
         FROM reprise_append_calls($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(&sessions)
    .bind(&subagents)
    .bind(&epochs)
    .bind(&first_messages)
    .bind(&last_messages)
    .bind(released_tokens())
    .bind(&owners)
    .bind(&uuids)
    .bind(&bodies)
    .bind(&messages)
    .fetch_all(&mut *connection)
    .await?;
    if rows.len() != calls.len() {
        return Err(sqlx::Error::Protocol(format!(
            "reprise_append_calls answered {} rows for {} calls",
            rows.len(),
            calls.len()
        )));
    }
    Ok(rows
        .into_iter()
        .map(|(written, host, pid)| outcome(written, host, pid))
        .collect())
}
