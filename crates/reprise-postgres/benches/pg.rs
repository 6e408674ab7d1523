//! What the PostgreSQL store costs over the server itself, on a throwaway cluster with
//! the server's default durability (fsync and synchronous_commit on).
//!
//! The floor is `pgbench` running a script of one single-row INSERT of 1 KB (its own
//! transaction, so one commit), against the same server in the same run. Printed:
//! appends of a 1 KB entry (one writer, taking turns with the floor's single client;
//! 64 sessions written concurrently from 4 processes, 16 each) against that floor,
//! loading and forking a 100 MB session (the fork against an `INSERT … SELECT` of its
//! rows done by hand), and listing the newest 50 of 100,000 sessions.
//!
//! `cargo bench -p reprise-postgres --bench pg -- appends` runs only the appends
//! (likewise `big` for load and fork, `list` for the listing).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use reprise_testkit::postgres::cluster;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reprise_postgres::{PgSessionStore, PgStoreOptions};
use reprise_session::{Entry, Message, SessionFork, SessionKey, SessionStore};

const RUN: Duration = Duration::from_secs(5);
/// The one writer and its floor run in turns of this long, this many of each.
const TURN: Duration = Duration::from_secs(2);
const ONE_WRITER_TURNS: usize = 4;

fn entry(size: usize) -> Entry {
    Entry::message(Message::user("x".repeat(size)))
}

fn key(id: &str) -> SessionKey {
    SessionKey::session(id).unwrap()
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index].as_secs_f64() * 1000.0
}

/// Runs pgbench for `run` with `clients` clients; returns (tps, mean latency ms).
fn pgbench(
    cluster: &cluster::Cluster,
    script: &std::path::Path,
    clients: u32,
    run: Duration,
) -> (f64, f64) {
    let output = Command::new("pgbench")
        .args(["-n", "-f"])
        .arg(script)
        .args([
            "-c",
            &clients.to_string(),
            "-j",
            &clients.min(4).to_string(),
        ])
        .args(["-T", &run.as_secs().to_string(), "-h"])
        .arg(cluster.socket_dir())
        .args(["-p", "5432", "-U", "postgres", "postgres"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "pgbench: {text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let number = |prefix: &str| -> f64 {
        let line = text.lines().find(|line| line.starts_with(prefix)).unwrap();
        line[prefix.len()..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    (number("tps = "), number("latency average = "))
}

/// Appends one 1 KB entry per call to `session` for `run`, once every writer of the
/// process holds its lock (`ready`); returns the latencies and how long the appends
/// ran. Taking the lock (and connecting) is left out, as pgbench leaves out its
/// connections.
async fn append_for(
    store: PgSessionStore,
    session: String,
    ready: Arc<tokio::sync::Barrier>,
    run: Duration,
) -> (Vec<Duration>, Duration) {
    let _guard = store.lock(&session).await.unwrap();
    let key = key(&session);
    let mut latencies = Vec::new();
    ready.wait().await;
    let start = Instant::now();
    while start.elapsed() < run {
        let batch = [entry(1024)];
        let began = Instant::now();
        store.append(&key, &batch).await.unwrap();
        latencies.push(began.elapsed());
    }
    (latencies, start.elapsed())
}

/// The CPU time this process has used, user and system (from /proc, in ticks of
/// 10 ms: exact enough over a run of seconds).
fn process_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .collect();
    // utime and stime are fields 14 and 15 of the whole line.
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

fn report(name: &str, mut latencies: Vec<Duration>, rate: f64, floor_tps: f64) {
    latencies.sort();
    println!(
        "{name}: {rate:.0} appends/s ({:.2}x the floor's time per call), p50 {:.2} ms, p99 {:.2} ms",
        floor_tps / rate,
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99)
    );
}

/// Writer processes of the concurrent append run, and sessions in each.
const PROCESSES: usize = 4;
const SESSIONS_PER_PROCESS: usize = 16;
/// Set in a writer process: the server, and its sessions' name prefix.
const CHILD_URL: &str = "REPRISE_PG_BENCH_URL";
const CHILD_PREFIX: &str = "REPRISE_PG_BENCH_PREFIX";

/// A writer process: appends to its sessions for `RUN`, prints each call's latency
/// in microseconds, then `rate` and its appends per second.
async fn writer_process(url: &str, prefix: &str) {
    let options = PgStoreOptions {
        max_connections: SESSIONS_PER_PROCESS as u32,
        run_migrations: false,
        ..PgStoreOptions::default()
    };
    let store = PgSessionStore::connect(url, options).await.unwrap();
    let ready = Arc::new(tokio::sync::Barrier::new(SESSIONS_PER_PROCESS));
    let tasks: Vec<_> = (0..SESSIONS_PER_PROCESS)
        .map(|i| {
            tokio::spawn(append_for(
                store.clone(),
                format!("{prefix}-{i}"),
                Arc::clone(&ready),
                RUN,
            ))
        })
        .collect();
    let mut out = String::new();
    let mut rate = 0.0;
    for task in tasks {
        let (latencies, took) = task.await.unwrap();
        rate += latencies.len() as f64 / took.as_secs_f64();
        for latency in latencies {
            out.push_str(&format!("{}\n", latency.as_micros()));
        }
    }
    store.close().await.unwrap();
    println!("{out}rate {rate}");
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if let (Ok(url), Ok(prefix)) = (std::env::var(CHILD_URL), std::env::var(CHILD_PREFIX)) {
        writer_process(&url, &prefix).await;
        return;
    }
    let only = std::env::args().skip(1).find(|arg| !arg.starts_with('-'));
    let runs = |section: &str| only.as_deref().is_none_or(|only| only == section);
    let cluster = cluster::Cluster::start_with("-c shared_buffers=256MB");
    let options = PgStoreOptions {
        max_connections: 64,
        ..PgStoreOptions::default()
    };
    let store = PgSessionStore::connect(&cluster.url(), options)
        .await
        .unwrap();
    sqlx::raw_sql("CREATE TABLE floor (id bigserial PRIMARY KEY, body text NOT NULL)")
        .execute(store.pool())
        .await
        .unwrap();
    let script = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        script.path(),
        "INSERT INTO floor (body) VALUES (repeat('x', 1024));\n",
    )
    .unwrap();
    std::fs::set_permissions(
        script.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();

    if runs("appends") {
        appends(&cluster, &store, script.path()).await;
    }
    if runs("big") {
        big_session(&store).await;
    }
    if runs("list") {
        listing(&store).await;
    }
    store.close().await.unwrap();
}

/// Appends: one writer, then 64 sessions at once, each against pgbench's floor.
async fn appends(cluster: &cluster::Cluster, store: &PgSessionStore, script: &std::path::Path) {
    // The floor and the appends take turns, so that both see the same machine (the
    // speed of a shared machine's disk changes from one second to the next).
    let mut floor_tps = Vec::new();
    let mut floor_ms = Vec::new();
    let mut latencies = Vec::new();
    let mut took = Duration::ZERO;
    let mut client_cpu = Duration::ZERO;
    for _ in 0..ONE_WRITER_TURNS {
        let (tps, ms) = pgbench(cluster, script, 1, TURN);
        floor_tps.push(tps);
        floor_ms.push(ms);
        let cpu_before = process_cpu();
        // On a worker of the runtime, as a service's tasks run (the main thread's
        // future waits for the workers to poll its sockets and wake it).
        let (turn, turn_took) = tokio::spawn(append_for(
            store.clone(),
            "one".into(),
            Arc::new(tokio::sync::Barrier::new(1)),
            TURN,
        ))
        .await
        .unwrap();
        client_cpu += process_cpu() - cpu_before;
        latencies.extend(turn);
        took += turn_took;
    }
    let turns = ONE_WRITER_TURNS as f64;
    let floor_one = floor_tps.iter().sum::<f64>() / turns;
    let floor_one_ms = floor_ms.iter().sum::<f64>() / turns;
    println!(
        "floor, pgbench 1 client: {floor_one:.0} tps, latency average {floor_one_ms:.2} ms \
         ({ONE_WRITER_TURNS} turns of {TURN:?}, taken in turn with the appends)"
    );
    let client_cpu = client_cpu / latencies.len() as u32;
    let rate = latencies.len() as f64 / took.as_secs_f64();
    report("append 1 KB, one writer", latencies, rate, floor_one);
    println!(
        "  the client's CPU per append (this process, user and system): {:.0} µs",
        client_cpu.as_secs_f64() * 1e6
    );

    let (floor_many, floor_many_ms) = pgbench(cluster, script, 64, RUN);
    println!(
        "floor, pgbench 64 clients: {floor_many:.0} tps, latency average {floor_many_ms:.2} ms"
    );
    // What the writes of an append cost by hand: the entry row (its key and uuid
    // indexes) and the session row's listing fields, in one statement, without the
    // fencing check. Context for the ratio above, not the floor.
    sqlx::raw_sql(
        "CREATE TABLE floor_entries (LIKE reprise_entries INCLUDING ALL); \
         CREATE TABLE floor_sessions (LIKE reprise_sessions INCLUDING ALL); \
         CREATE SEQUENCE floor_seq; \
         INSERT INTO floor_sessions (id, updated_cs) \
         SELECT 's' || i, reprise_centiseconds(clock_timestamp()) FROM generate_series(0, 63) AS i",
    )
    .execute(store.pool())
    .await
    .unwrap();
    let by_hand = tempfile::NamedTempFile::new().unwrap();
    // The body as long as the store's row of a 1 KB entry.
    let body = serde_json::to_string(&entry(1024)).unwrap().len();
    std::fs::write(
        by_hand.path(),
        format!(
            "WITH e AS (INSERT INTO floor_entries VALUES ('s' || :client_id, '', \
             nextval('floor_seq'), gen_random_uuid(), repeat('x', {body})) RETURNING 1) \
             UPDATE floor_sessions SET updated_at = clock_timestamp(), \
             updated_cs = reprise_centiseconds(clock_timestamp()), \
             message_count = message_count + 1 WHERE id = 's' || :client_id;\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        by_hand.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    let (hand_many, hand_many_ms) = pgbench(cluster, by_hand.path(), 64, RUN);
    println!(
        "an append's writes by hand (entry row, session row), pgbench 64 clients: \
         {hand_many:.0} tps ({:.2}x the floor's time), latency average {hand_many_ms:.2} ms",
        floor_many / hand_many
    );
    let children: Vec<_> = (0..PROCESSES)
        .map(|process| {
            Command::new(std::env::current_exe().unwrap())
                .env(CHILD_URL, cluster.url())
                .env(CHILD_PREFIX, format!("many-{process}"))
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut all = Vec::new();
    let mut rate = 0.0;
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success());
        for line in String::from_utf8(output.stdout).unwrap().lines() {
            match line.strip_prefix("rate ") {
                Some(appends) => rate += appends.parse::<f64>().unwrap(),
                None => all.push(Duration::from_micros(line.parse().unwrap())),
            }
        }
    }
    report(
        &format!("append 1 KB, 64 sessions from {PROCESSES} processes"),
        all,
        rate,
        floor_many,
    );
}

/// A 100 MB session: load it, fork it, copy its rows by hand.
async fn big_session(store: &PgSessionStore) {
    let big = key("big");
    let mut bytes = 0usize;
    for _ in 0..100 {
        let batch: Vec<Entry> = (0..1000).map(|_| entry(1000)).collect();
        bytes += batch
            .iter()
            .map(|e| serde_json::to_string(e).unwrap().len())
            .sum::<usize>();
        store.append(&big, &batch).await.unwrap();
    }
    let mb = bytes as f64 / 1e6;
    for round in 1..=3 {
        let start = Instant::now();
        let loaded = store.load(&big).await.unwrap().unwrap();
        let took = start.elapsed();
        assert_eq!(loaded.entries.len(), 100_000);
        println!(
            "load {mb:.0} MB (round {round}): {:.0} ms, {:.0} MB/s",
            took.as_secs_f64() * 1e3,
            mb / took.as_secs_f64()
        );
    }
    for round in 1..=2 {
        let start = Instant::now();
        store
            .fork(SessionFork::whole("big", format!("fork-{round}")))
            .await
            .unwrap();
        let fork = start.elapsed();
        let start = Instant::now();
        let hand = format!("hand-{round}");
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "BEGIN; \
             INSERT INTO reprise_sessions (id) VALUES ('{hand}'); \
             INSERT INTO reprise_transcripts VALUES ('{hand}', ''); \
             INSERT INTO reprise_entries SELECT '{hand}', subagent, seq, uuid, body \
               FROM reprise_entries WHERE session_id = 'big'; \
             COMMIT;"
        )))
        .execute(store.pool())
        .await
        .unwrap();
        let by_hand = start.elapsed();
        println!(
            "fork {mb:.0} MB (round {round}): {:.0} ms; INSERT … SELECT by hand {:.0} ms; ratio {:.2}x",
            fork.as_secs_f64() * 1e3,
            by_hand.as_secs_f64() * 1e3,
            fork.as_secs_f64() / by_hand.as_secs_f64()
        );
    }
}

/// Listing: the newest 50 of 100,000 sessions.
async fn listing(store: &PgSessionStore) {
    sqlx::raw_sql(
        "INSERT INTO reprise_sessions (id, created_at, updated_at) \
         SELECT 'listed-' || i, now() - i * interval '1 second', now() - i * interval '1 second' \
         FROM generate_series(1, 100000 - (SELECT count(*) FROM reprise_sessions)) AS i; ANALYZE",
    )
    .execute(store.pool())
    .await
    .unwrap();
    let mut times = Vec::new();
    for _ in 0..20 {
        let start = Instant::now();
        let (page, _) = store.list_sessions_page(50, None).await.unwrap();
        times.push(start.elapsed());
        assert_eq!(page.len(), 50);
    }
    times.sort();
    println!(
        "list the newest 50 of 100,000 sessions: median {:.2} ms, max {:.2} ms (20 calls)",
        percentile(&times, 0.5),
        percentile(&times, 1.0)
    );
}
