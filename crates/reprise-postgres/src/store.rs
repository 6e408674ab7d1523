//! [`PgSessionStore`]: the [`SessionStore`] trait on PostgreSQL.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, PoisonError};

use async_trait::async_trait;
use futures::TryStreamExt;
use jiff::Timestamp;
use reprise_redact::Redactor;
use reprise_runs::{clean_tag, clean_title, last_message_text, typed_text};
use reprise_session::{
    AppendReport, Entry, EntryLineDecoder, ForkOrigin, LoadWarning, Loaded, SessionFork,
    SessionInfo, SessionKey, SessionStore, StoreError, WriterLock, validate_id,
};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgPool, Row};
use uuid::Uuid;

use crate::appends::{Appender, CHECKED_AFTER_IDLE, Call, Outcome};
use crate::error::{PgStoreError, backend, diagnosed, shared_backend};
use crate::lease::{
    Held, HeldLeases, LeaseGuard, PendingReleases, lock_held, released_tokens, renew_until_lost,
};
use crate::options::PgStoreOptions;
use crate::schema::{self, Compatibility};
use crate::stored_text::{decode, encode, encode_option};

/// Sessions in a PostgreSQL database, shared by every process that connects to it.
///
/// Cheap to clone (clones share the pool and the leases held). See the crate
/// documentation for the writer leases.
///
/// ```no_run
/// use std::time::Duration;
/// use reprise_postgres::{PgSessionStore, PgStoreOptions};
/// use reprise_session::{Entry, Message, SessionKey, SessionStore};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let options = PgStoreOptions::default().with_lease(Duration::from_secs(30));
/// let store = PgSessionStore::connect("postgres://app@db.internal/agents", options).await?;
/// let key = SessionKey::session("conversation-42")?;
/// let writer = store.lock("conversation-42").await?; // StoreError::Locked if another worker has it
/// store.append(&key, &[Entry::message(Message::user("hello"))]).await?;
/// writer.release().await?; // the next worker may take it at once
/// store.close().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PgSessionStore {
    inner: Arc<Inner>,
    /// What the person's last message passes before listings keep it.
    redactor: Redactor,
}

struct Inner {
    pool: PgPool,
    options: PgStoreOptions,
    /// Where the database is, for error messages.
    server: String,
    held: HeldLeases,
    pending: PendingReleases,
    appender: Appender,
    /// Why this store may not write, when the schema says so.
    read_only: Option<String>,
}

/// Where a page of [`PgSessionStore::list_sessions_page`] ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionCursor {
    updated_us: i64,
    id: String,
}

/// One row of `reprise_sessions` as listed.
type SessionRow = (String, i64, i64, Option<String>, Option<Uuid>);

/// The columns of a [`SessionRow`], times in microseconds since the epoch.
macro_rules! select_sessions {
    ($($rest:expr),+) => {
        concat!(
            "SELECT id, (extract(epoch FROM created_at) * 1000000)::int8, ",
            "(extract(epoch FROM updated_at) * 1000000)::int8, forked_from, forked_from_entry ",
            "FROM reprise_sessions ",
            $($rest),+
        )
    };
}

/// Listings' order, newest first: by `updated_at`, then id. `updated_cs` (its hundredth
/// of a second) comes first so that the index on it serves the order.
macro_rules! newest_first {
    () => {
        "ORDER BY updated_cs DESC, updated_at DESC, id DESC"
    };
}

/// What a listing shows of a session, from its row alone.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionSummary {
    /// The session, its times and origin.
    pub info: SessionInfo,
    /// How many messages its main transcript holds.
    pub message_count: u64,
    /// The person's first message, redacted and cut like the last (`None` for
    /// sessions written before the store kept it).
    pub first_message: Option<String>,
    /// The person's last message, redacted by the writer's redactor and cut to
    /// [`LAST_MESSAGE_CHARS`](reprise_runs::LAST_MESSAGE_CHARS).
    pub last_message: Option<String>,
    /// The title the session was given ([`PgSessionStore::set_title`]).
    pub title: Option<String>,
    /// Its tags, sorted, each once ([`PgSessionStore::change_tags`]).
    pub tags: Vec<String>,
}

/// One row of `reprise_sessions` with the listing fields.
type SummaryRow = (
    String,
    i64,
    i64,
    Option<String>,
    Option<Uuid>,
    i64,
    Option<String>,
    Option<String>,
    Option<String>,
    Vec<String>,
);

/// The columns of a [`SummaryRow`].
macro_rules! summary_columns {
    () => {
        concat!(
            "id, (extract(epoch FROM created_at) * 1000000)::int8, ",
            "(extract(epoch FROM updated_at) * 1000000)::int8, forked_from, forked_from_entry, ",
            "message_count, first_message, last_message, title, tags"
        )
    };
}

/// A query of [`SummaryRow`]s.
macro_rules! select_summaries {
    ($($rest:expr),+) => {
        concat!(
            "SELECT ",
            summary_columns!(),
            " FROM reprise_sessions ",
            $($rest),+
        )
    };
}

fn session_summary(row: SummaryRow) -> SessionSummary {
    let (id, created, updated, forked_from, entry, count, first_message, last_message, title, tags) =
        row;
    SessionSummary {
        info: session_info((id, created, updated, forked_from, entry)),
        message_count: u64::try_from(count).unwrap_or(0),
        first_message: first_message.map(decode),
        last_message: last_message.map(decode),
        title: title.map(decode),
        tags: tags.into_iter().map(decode).collect(),
    }
}

impl PgSessionStore {
    /// Connects to `url` (`postgres://user:pass@host:port/db?sslmode=…`) and, unless
    /// turned off, brings the schema up to date.
    pub async fn connect(url: &str, options: PgStoreOptions) -> Result<Self, PgStoreError> {
        check_scheme(url)?;
        let connect: PgConnectOptions = url
            .parse()
            .map_err(|error: sqlx::Error| PgStoreError::Url(error.into()))?;
        Self::connect_with(connect, options).await
    }

    /// [`connect`](Self::connect) with options built by hand (a search path, TLS
    /// settings, …).
    pub async fn connect_with(
        connect: PgConnectOptions,
        options: PgStoreOptions,
    ) -> Result<Self, PgStoreError> {
        let server = describe(&connect);
        // One connection first: a pool retries a refused connection until its timeout
        // and then reports only the timeout, where this says why (refused, no such
        // host, bad password) at once.
        let probe = tokio::time::timeout(options.acquire_timeout, connect.connect())
            .await
            .unwrap_or_else(|_| {
                Err(sqlx::Error::Io(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no answer in {:?}", options.acquire_timeout),
                )))
            })
            .map_err(|source| PgStoreError::Connect {
                server: server.clone(),
                source: source.into(),
            })?;
        let _ = probe.close().await;
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections)
            .acquire_timeout(options.acquire_timeout)
            .test_before_acquire(false)
            .before_acquire(|connection, meta| {
                Box::pin(async move {
                    // A connection back from its last use a moment ago is used as it
                    // is: a ping before every call would double the round trips of a
                    // busy writer. One that sat idle (a chat waiting for its person,
                    // across a server restart) is checked first, and replaced when
                    // the server no longer answers on it.
                    if meta.idle_for < CHECKED_AFTER_IDLE {
                        return Ok(true);
                    }
                    Ok(connection.ping().await.is_ok())
                })
            })
            .connect_with(connect)
            .await
            .map_err(|source| PgStoreError::Connect {
                server: server.clone(),
                source: source.into(),
            })?;
        if options.run_migrations {
            schema::migrate(&pool)
                .await
                .map_err(|source| PgStoreError::Migrate {
                    server: server.clone(),
                    source,
                })?;
        }
        let compatibility =
            schema::compatibility(&pool)
                .await
                .map_err(|source| PgStoreError::Connect {
                    server: server.clone(),
                    source: source.into(),
                })?;
        let read_only = match compatibility {
            Compatibility::Writable => None,
            Compatibility::ReadOnly { schema, needed } => Some(format!(
                "the sessions on PostgreSQL at {server} have schema version {schema}, which \
                 only a release that knows schema version {needed} or later may write; this \
                 one knows up to {known}: it reads them, and writes once upgraded",
                known = schema::known_version(),
            )),
            Compatibility::TooNew { schema, needed } => {
                return Err(PgStoreError::SchemaTooNew {
                    server,
                    schema,
                    needed,
                    known: schema::known_version(),
                });
            }
        };
        let mut store = Self::with_pool(pool, options, server);
        if let Some(inner) = Arc::get_mut(&mut store.inner) {
            inner.read_only = read_only;
        }
        Ok(store)
    }

    /// A store on a pool the caller made; runs no migrations (see
    /// [`MIGRATOR`](crate::MIGRATOR)).
    pub fn from_pool(pool: PgPool, options: PgStoreOptions) -> Self {
        Self::with_pool(pool, options, "the pool's server".to_owned())
    }

    fn with_pool(pool: PgPool, options: PgStoreOptions, server: String) -> Self {
        PgSessionStore {
            inner: Arc::new(Inner {
                appender: Appender::new(pool.clone()),
                pool,
                options,
                server,
                held: HeldLeases::default(),
                pending: PendingReleases::default(),
                read_only: None,
            }),
            redactor: Redactor::new(),
        }
    }

    /// Redacts the person's last message, which the session row keeps for listings,
    /// with `redactor` (by default the built-in patterns only: give the one that knows
    /// the exact secret values, such as an API key). Entries are kept as they were
    /// sent.
    pub fn with_redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    /// Where the database is (`host:port/database`), for messages.
    pub fn server(&self) -> &str {
        &self.inner.server
    }

    /// The connection pool.
    pub fn pool(&self) -> &PgPool {
        &self.inner.pool
    }

    /// The sessions, most recently updated first, `limit` at a time: pass the cursor
    /// returned with a page to get the next one (`None` after the last page).
    pub async fn list_sessions_page(
        &self,
        limit: u32,
        after: Option<&SessionCursor>,
    ) -> Result<(Vec<SessionInfo>, Option<SessionCursor>), StoreError> {
        let rows: Vec<SessionRow> = match after {
            None => sqlx::query_as(select_sessions!(
                newest_first!(), " LIMIT $1"
            ))
            .bind(i64::from(limit))
            .fetch_all(&self.inner.pool)
            .await,
            // The hundredths at or before the cursor's bound the index scan; the rows
            // of the cursor's own hundredth are then cut at the cursor itself.
            Some(cursor) => sqlx::query_as(select_sessions!(
                "WHERE updated_cs <= reprise_centiseconds(timestamptz 'epoch' + $2 * interval '1 microsecond') \
                   AND (updated_at, id) < (timestamptz 'epoch' + $2 * interval '1 microsecond', $3) ",
                newest_first!(),
                " LIMIT $1"
            ))
            .bind(i64::from(limit))
            .bind(cursor.updated_us)
            .bind(&cursor.id)
            .fetch_all(&self.inner.pool)
            .await,
        }
        .or_failed(self, "listing sessions")
.await?;
        let next = match rows.last() {
            Some(last) if rows.len() == limit as usize => Some(SessionCursor {
                updated_us: last.2,
                id: last.0.clone(),
            }),
            _ => None,
        };
        Ok((rows.into_iter().map(session_info).collect(), next))
    }

    /// The sessions with what a listing shows of each, most recently updated first
    /// (the newest `limit`, or all): read from the session rows alone.
    pub async fn list_summaries(
        &self,
        limit: Option<u32>,
    ) -> Result<Vec<SessionSummary>, StoreError> {
        let rows: Vec<SummaryRow> = sqlx::query_as(select_summaries!(newest_first!(), " LIMIT $1"))
            .bind(limit.map(i64::from))
            .fetch_all(&self.inner.pool)
            .await
            .or_failed(self, "listing sessions")
            .await?;
        Ok(rows.into_iter().map(session_summary).collect())
    }

    /// One session's listing row, `None` when there is no such session.
    pub async fn summary(&self, session_id: &str) -> Result<Option<SessionSummary>, StoreError> {
        let row: Option<SummaryRow> = sqlx::query_as(select_summaries!("WHERE id = $1"))
            .bind(session_id)
            .fetch_optional(&self.inner.pool)
            .await
            .or_failed(self, &format!("looking up {session_id}"))
            .await?;
        Ok(row.map(session_summary))
    }

    /// The ids of sessions that start with `prefix`, in order, at most `limit`: one
    /// range of the primary key, whatever the number of sessions.
    pub async fn ids_starting_with(
        &self,
        prefix: &str,
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        // Ids are ASCII and compare byte by byte: those starting with the prefix lie
        // between it and the prefix with its last character moved one up.
        let Some(end) = prefix_end(prefix) else {
            return Ok(Vec::new());
        };
        sqlx::query_scalar(
            "SELECT id FROM reprise_sessions WHERE id >= $1 AND id < $2 ORDER BY id LIMIT $3",
        )
        .bind(prefix)
        .bind(end)
        .bind(i64::from(limit))
        .fetch_all(&self.inner.pool)
        .await
        .or_failed(self, &format!("looking up sessions named {prefix}…"))
        .await
    }

    /// Gives a session a title, cleaned as the run folders clean one
    /// ([`clean_title`]); an empty one removes it. Returns the session's listing row,
    /// `None` when there is no such session.
    pub async fn set_title(
        &self,
        session_id: &str,
        title: &str,
    ) -> Result<Option<SessionSummary>, StoreError> {
        self.writable()?;
        let title = clean_title(title);
        let row: Option<SummaryRow> = sqlx::query_as(concat!(
            "UPDATE reprise_sessions SET title = $2 WHERE id = $1 RETURNING ",
            summary_columns!()
        ))
        .bind(session_id)
        .bind(encode_option(title.as_deref()))
        .fetch_optional(&self.inner.pool)
        .await
        .or_failed(self, &format!("naming {session_id}"))
        .await?;
        Ok(row.map(session_summary))
    }

    /// Adds and removes tags of a session (each checked by [`clean_tag`]); returns
    /// its listing row, `None` when there is no such session.
    pub async fn change_tags(
        &self,
        session_id: &str,
        add: &[String],
        remove: &[String],
    ) -> Result<Option<SessionSummary>, StoreError> {
        self.writable()?;
        let clean = |tags: &[String]| {
            tags.iter()
                .map(|tag| {
                    clean_tag(tag)
                        .map(|tag| encode(&tag).into_owned())
                        .map_err(|reason| StoreError::Unsupported(format!("tag: {reason}")))
                })
                .collect::<Result<Vec<_>, _>>()
        };
        let (add, remove) = (clean(add)?, clean(remove)?);
        let row: Option<SummaryRow> = sqlx::query_as(concat!(
            "UPDATE reprise_sessions SET tags = ( \
                 SELECT coalesce(array_agg(DISTINCT t ORDER BY t), '{}') \
                 FROM unnest(tags || $2::text[]) AS t WHERE t <> ALL ($3::text[])) \
             WHERE id = $1 RETURNING ",
            summary_columns!()
        ))
        .bind(session_id)
        .bind(&add)
        .bind(&remove)
        .fetch_optional(&self.inner.pool)
        .await
        .or_failed(self, &format!("tagging {session_id}"))
        .await?;
        Ok(row.map(session_summary))
    }

    /// The ids and titles of the sessions that have a title.
    pub async fn titles(&self) -> Result<Vec<(String, String)>, StoreError> {
        let titles: Vec<(String, String)> =
            sqlx::query_as("SELECT id, title FROM reprise_sessions WHERE title IS NOT NULL")
                .fetch_all(&self.inner.pool)
                .await
                .or_failed(self, "looking up titles")
                .await?;
        Ok(titles
            .into_iter()
            .map(|(id, title)| (id, decode(title)))
            .collect())
    }

    /// A driver error as a [`StoreError`] naming what was being done and where; a pool
    /// that timed out is asked why first ([`diagnosed`]).
    pub(crate) async fn failed(&self, what: &str, error: sqlx::Error) -> StoreError {
        let error = diagnosed(&self.inner.pool, error).await;
        backend(
            format!("{what} on PostgreSQL at {}", self.inner.server),
            error,
        )
    }

    /// Refuses a write when the schema is newer than this library may write.
    fn writable(&self) -> Result<(), StoreError> {
        match &self.inner.read_only {
            None => Ok(()),
            Some(why) => Err(StoreError::Unsupported(why.clone())),
        }
    }

    fn lease_ms(&self) -> i64 {
        i64::try_from(self.inner.options.lease.as_millis()).unwrap_or(i64::MAX)
    }
}

fn session_info((id, created_us, updated_us, forked_from, entry): SessionRow) -> SessionInfo {
    let time = |us: i64| Timestamp::from_microsecond(us).unwrap_or(Timestamp::UNIX_EPOCH);
    SessionInfo {
        id,
        created_at: time(created_us),
        updated_at: time(updated_us),
        forked_from: forked_from.map(|session| ForkOrigin { session, entry }),
    }
}

/// A driver's result, its error as [`PgSessionStore::failed`] makes it.
pub(crate) trait OrFailed<T> {
    /// The value, or the error with what was being done.
    async fn or_failed(self, store: &PgSessionStore, what: &str) -> Result<T, StoreError>;
}

impl<T> OrFailed<T> for Result<T, sqlx::Error> {
    async fn or_failed(self, store: &PgSessionStore, what: &str) -> Result<T, StoreError> {
        match self {
            Ok(value) => Ok(value),
            Err(error) => Err(store.failed(what, error).await),
        }
    }
}

/// Refuses a URL that is not a PostgreSQL one (the driver parses any scheme); the URL
/// itself is not repeated, as it may hold a password.
fn check_scheme(url: &str) -> Result<(), PgStoreError> {
    let scheme = url.split_once("://").map(|(scheme, _)| scheme);
    match scheme {
        Some(scheme) if scheme.eq_ignore_ascii_case("postgres") => Ok(()),
        Some(scheme) if scheme.eq_ignore_ascii_case("postgresql") => Ok(()),
        Some(scheme)
            if !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')) =>
        {
            Err(PgStoreError::Scheme(format!(
                "a database URL starts with postgres:// or postgresql://, not {scheme}://"
            )))
        }
        _ => Err(PgStoreError::Scheme(
            "a database URL starts with postgres:// or postgresql://".to_owned(),
        )),
    }
}

/// `host:port/database`, or the socket directory for a local socket.
fn describe(connect: &PgConnectOptions) -> String {
    let place = match connect.get_socket() {
        Some(socket) => socket.display().to_string(),
        None => format!("{}:{}", connect.get_host(), connect.get_port()),
    };
    match connect.get_database() {
        Some(database) => format!("{place}/{database}"),
        None => place,
    }
}

/// The least string above every id that starts with `prefix`; `None` when no id can
/// start with it (it is empty or holds a character ids never hold).
fn prefix_end(prefix: &str) -> Option<String> {
    let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if prefix.is_empty() || !prefix.chars().all(valid) {
        return None;
    }
    let mut end = prefix.as_bytes().to_vec();
    let last = end.last_mut()?;
    // An id character is below 0x7f, so the next byte is still ASCII.
    *last += 1;
    String::from_utf8(end).ok()
}

/// The subagent column of a key: `''` for the main transcript.
fn subagent(key: &SessionKey) -> &str {
    key.subagent_name().unwrap_or("")
}

impl PgSessionStore {
    /// A write to `session` refused by the lease of the process `pid` on `host`. A
    /// writer that held the session (`had_lease`) was taken over; any other is told
    /// when the lease ends unless its holder renews it.
    async fn refused(
        &self,
        session: &str,
        had_lease: bool,
        host: Option<String>,
        pid: Option<i32>,
    ) -> StoreError {
        let session = session.to_owned();
        let pid = pid.and_then(|pid| u32::try_from(pid).ok());
        if had_lease {
            return StoreError::TakenOver { session, pid, host };
        }
        let free_at = self.lease_end(&session).await;
        StoreError::Locked {
            session,
            pid,
            host,
            free_at,
        }
    }

    /// When the lease of `session` ends unless it is renewed; `None` when it cannot
    /// be read (the refusal is still reported).
    async fn lease_end(&self, session: &str) -> Option<Timestamp> {
        let micros: Option<i64> = sqlx::query_scalar(
            "SELECT (extract(epoch FROM expires_at) * 1000000)::int8 \
             FROM reprise_leases WHERE session_id = $1",
        )
        .bind(session)
        .fetch_optional(&self.inner.pool)
        .await
        .ok()
        .flatten();
        micros.and_then(|micros| Timestamp::from_microsecond(micros).ok())
    }

    /// The listing fields of a fork of `source` up to `entry`, counted from the
    /// entries it copies: its messages, the person's first and last messages as
    /// listings keep them. `None` when the source has no such entry (the fork says
    /// so).
    async fn fork_listing(
        &self,
        source: &str,
        entry: Uuid,
    ) -> Result<Option<(i64, Option<String>, Option<String>)>, StoreError> {
        let key = SessionKey::session(source)?;
        let Some(loaded) = self.load(&key).await? else {
            return Ok(None);
        };
        let Some(end) = loaded
            .entries
            .iter()
            .position(|copied| copied.uuid == entry)
        else {
            return Ok(None);
        };
        let copied = &loaded.entries[..=end];
        let count = copied
            .iter()
            .filter(|copied| copied.as_message().is_some())
            .count();
        let shown =
            |text: String| encode(&last_message_text(&self.redactor.redact(&text))).into_owned();
        let first = copied.iter().find_map(typed_text).map(shown);
        let last = copied.iter().rev().find_map(typed_text).map(shown);
        Ok(Some((
            i64::try_from(count).unwrap_or(i64::MAX),
            first,
            last,
        )))
    }
}

#[async_trait]
impl SessionStore for PgSessionStore {
    async fn append(
        &self,
        key: &SessionKey,
        entries: &[Entry],
    ) -> Result<AppendReport, StoreError> {
        if entries.is_empty() {
            return Ok(AppendReport::default());
        }
        self.writable()?;
        // Repeats within the batch are dropped here; the database skips uuids it holds.
        let mut seen = HashSet::with_capacity(entries.len());
        let mut uuids = Vec::with_capacity(entries.len());
        let mut bodies = Vec::with_capacity(entries.len());
        let mut messages = Vec::with_capacity(entries.len());
        // The person's first and last messages, for listings: only the main
        // transcript's count.
        let main = key.subagent_name().is_none();
        let mut first_message: Option<(uuid::Uuid, String)> = None;
        let mut last_message: Option<(uuid::Uuid, String)> = None;
        for entry in entries {
            if !seen.insert(entry.uuid) {
                continue;
            }
            messages.push(entry.as_message().is_some());
            if let Some(text) = typed_text(entry).filter(|_| main) {
                if first_message.is_none() {
                    first_message = Some((entry.uuid, text.clone()));
                }
                last_message = Some((entry.uuid, text));
            }
            let body = serde_json::to_string(entry).map_err(|error| StoreError::Format {
                path: PathBuf::from(key.to_string()),
                message: format!("entry {} cannot be encoded: {error}", entry.uuid),
            })?;
            uuids.push(entry.uuid);
            bodies.push(body);
        }
        let session = key.session_id();
        let epoch = lock_held(&self.inner.held)
            .get(session)
            .map(|lease| lease.epoch);
        // Each passes the redactor before it is cut, like the run folders' listing
        // fields; a call with one such message redacts it once.
        let shown =
            |text: &str| encode(&last_message_text(&self.redactor.redact(text))).into_owned();
        let last_shown = last_message.as_ref().map(|(_, text)| shown(text));
        let first_shown = match (&first_message, &last_message) {
            (Some((first, _)), Some((last, _))) if first == last => last_shown.clone(),
            (first, _) => first.as_ref().map(|(_, text)| shown(text)),
        };
        let call = Call {
            session: session.to_owned(),
            subagent: subagent(key).to_owned(),
            epoch,
            first_message: first_shown,
            last_message: last_shown,
            uuids,
            bodies,
            messages,
        };
        match self.inner.appender.append(call).await {
            Ok(Outcome::Written(written)) => Ok(AppendReport {
                written,
                skipped: entries.len().saturating_sub(written),
            }),
            Ok(Outcome::Refused { host, pid }) => {
                Err(self.refused(session, epoch.is_some(), host, pid).await)
            }
            Err(error) => {
                let context = format!("appending to {key} on PostgreSQL at {}", self.inner.server);
                match *error {
                    sqlx::Error::PoolTimedOut => Err(backend(
                        context,
                        diagnosed(&self.inner.pool, sqlx::Error::PoolTimedOut).await,
                    )),
                    _ => Err(shared_backend(context, error)),
                }
            }
        }
    }

    async fn load(&self, key: &SessionKey) -> Result<Option<Loaded>, StoreError> {
        // One statement, one snapshot: no row means no transcript; a row without an
        // entry is an empty one. No ORDER BY: the server sends the rows in whatever
        // order its plan reads them (a sort of a large transcript would spill to
        // disk), and they are put in order here.
        let mut rows = sqlx::query(
            "SELECT e.seq, e.body FROM reprise_transcripts t \
             LEFT JOIN reprise_entries e \
               ON e.session_id = t.session_id AND e.subagent = t.subagent \
             WHERE t.session_id = $1 AND t.subagent = $2",
        )
        .bind(key.session_id())
        .bind(subagent(key))
        .fetch(&self.inner.pool);
        let what = format!("loading {key}");
        let mut found = false;
        let mut decoded: Vec<(i64, Entry)> = Vec::new();
        let mut broken: Vec<(i64, String)> = Vec::new();
        let mut decoder = EntryLineDecoder::default();
        while let Some(row) = rows.try_next().await.or_failed(self, &what).await? {
            found = true;
            let Some(seq) = row
                .try_get::<Option<i64>, _>(0)
                .or_failed(self, &what)
                .await?
            else {
                continue;
            };
            // The body as the server sent it, without a copy into a String: the
            // decoder checks its UTF-8 as it parses.
            let body = row.try_get_raw(1).or_failed(self, &what).await?;
            let result = match body.as_bytes() {
                Ok(bytes) => decoder.decode(bytes).map_err(|error| error.to_string()),
                Err(error) => Err(error.to_string()),
            };
            match result {
                Ok(entry) => decoded.push((seq, entry)),
                Err(error) => broken.push((seq, error)),
            }
        }
        if !found {
            return Ok(None);
        }
        // A sequential scan sends them in the order they lie in the table (the order of
        // writing, unless rows were rewritten); an index scan in the order of uuids.
        if !decoded.is_sorted_by_key(|(seq, _)| *seq) {
            decoded.sort_unstable_by_key(|(seq, _)| *seq);
        }
        broken.sort_unstable_by_key(|(seq, _)| *seq);
        // A warning names its row by its place in the transcript, counting from 1.
        let warnings = broken
            .into_iter()
            .enumerate()
            .map(|(earlier_broken, (seq, error))| {
                let row =
                    decoded.partition_point(|(decoded, _)| *decoded < seq) + earlier_broken + 1;
                LoadWarning {
                    file: PathBuf::from(format!("postgres:{key}")),
                    line: row,
                    message: format!("entry row {row} skipped: {error}"),
                }
            })
            .collect();
        Ok(Some(Loaded {
            entries: decoded.into_iter().map(|(_, entry)| entry).collect(),
            warnings,
        }))
    }

    async fn list_subkeys(&self, session_id: &str) -> Result<Vec<SessionKey>, StoreError> {
        validate_id("session", session_id)?;
        let names: Vec<String> = sqlx::query_scalar(
            "SELECT subagent FROM reprise_transcripts \
             WHERE session_id = $1 AND subagent <> '' ORDER BY subagent",
        )
        .bind(session_id)
        .fetch_all(&self.inner.pool)
        .await
        .or_failed(self, &format!("listing subagents of {session_id}"))
        .await?;
        names
            .iter()
            .map(|name| SessionKey::subagent(session_id, name).map_err(StoreError::from))
            .collect()
    }

    async fn list_sessions(&self) -> Result<Vec<SessionInfo>, StoreError> {
        let rows: Vec<SessionRow> = sqlx::query_as(select_sessions!(newest_first!()))
            .fetch_all(&self.inner.pool)
            .await
            .or_failed(self, "listing sessions")
            .await?;
        Ok(rows.into_iter().map(session_info).collect())
    }

    async fn delete(&self, key: &SessionKey) -> Result<(), StoreError> {
        self.writable()?;
        sqlx::query("SELECT reprise_delete($1, $2)")
            .bind(key.session_id())
            .bind(key.subagent_name())
            .execute(&self.inner.pool)
            .await
            .or_failed(self, &format!("deleting {key}"))
            .await?;
        Ok(())
    }

    async fn lock(&self, session_id: &str) -> Result<WriterLock, StoreError> {
        validate_id("session", session_id)?;
        self.writable()?;
        let holder = Uuid::new_v4();
        let options = &self.inner.options;
        let pid = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
        let (epoch, host, holder_pid): (Option<i64>, Option<String>, Option<i32>) = sqlx::query_as(
            "SELECT granted_epoch, holder_host, holder_pid \
                 FROM reprise_lock($1, $2, $3, $4, $5, $6)",
        )
        .bind(session_id)
        .bind(holder)
        .bind(&options.host_name)
        .bind(pid)
        .bind(self.lease_ms())
        .bind(released_tokens())
        .fetch_one(&self.inner.pool)
        .await
        .or_failed(self, &format!("locking {session_id}"))
        .await?;
        let Some(epoch) = epoch else {
            return Err(self.refused(session_id, false, host, holder_pid).await);
        };
        let lease = Held { epoch, holder };
        lock_held(&self.inner.held).insert(session_id.to_owned(), lease);
        let renewal = tokio::spawn(renew_until_lost(
            self.inner.pool.clone(),
            session_id.to_owned(),
            epoch,
            options.lease,
        ));
        Ok(WriterLock::releasable(LeaseGuard {
            pool: self.inner.pool.clone(),
            session: session_id.to_owned(),
            lease,
            held: Arc::clone(&self.inner.held),
            pending: Arc::clone(&self.inner.pending),
            renewal,
            released: false,
        }))
    }

    async fn fork(&self, fork: SessionFork) -> Result<(), StoreError> {
        fork.validate()?;
        let (source, target, up_to) = (fork.source.as_str(), fork.target.as_str(), fork.up_to);
        self.writable()?;
        // A whole copy takes its source's listing fields on the server; a copy up to an
        // entry has them counted here (the server keeps the entries as text, and counts
        // no JSON).
        let listing = match up_to {
            Some(entry) => self.fork_listing(source, entry).await?,
            None => None,
        };
        let (count, first, last) = listing.unwrap_or_default();
        let outcome: String =
            sqlx::query_scalar("SELECT reprise_fork_listed($1, $2, $3, $4, $5, $6)")
                .bind(source)
                .bind(target)
                .bind(up_to)
                .bind(count)
                .bind(first)
                .bind(last)
                .fetch_one(&self.inner.pool)
                .await
                .or_failed(self, &format!("forking {source} into {target}"))
                .await?;
        match (outcome.as_str(), up_to) {
            ("ok", _) => Ok(()),
            ("exists", _) => Err(StoreError::AlreadyExists {
                session: target.to_owned(),
            }),
            ("not-found", _) => Err(StoreError::NotFound {
                session: source.to_owned(),
            }),
            ("no-entry", Some(entry)) => Err(StoreError::EntryNotFound {
                session: source.to_owned(),
                entry,
            }),
            (other, _) => Err(StoreError::Unsupported(format!(
                "reprise_fork answered {other:?}: the schema is newer than this library"
            ))),
        }
    }

    /// Waits for the releases of dropped locks to reach the server, then closes the
    /// pool: every clone of the store is closed. Without it a dropped lock's lease
    /// may stay live (for other processes) until it expires; a lock let go of with
    /// `WriterLock::release` (or `Agent::close`) needs no close.
    async fn close(&self) -> Result<(), StoreError> {
        let tasks: Vec<_> = std::mem::take(
            &mut *self
                .inner
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for task in tasks {
            let _ = task.await;
        }
        self.inner.appender.release();
        self.inner.pool.close().await;
        Ok(())
    }
}
