//! Figures for `reprise runs --database-url …` over 100,000 sessions in PostgreSQL
//! (the newest page, as it lists by default, and `--all`), printed (no assertions):
//! wall time of the whole process (start, connect, check the
//! schema, list, print), median of rounds after an untimed pass, against a throwaway
//! cluster of its own (`reprise_testkit::postgres::cluster`). Needs the PostgreSQL
//! server (`scripts/install-test-deps.sh postgres`). Run with
//! `cargo bench -p reprise-cli --bench database`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed bench run

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use reprise_postgres::{PgSessionStore, PgStoreOptions};
use reprise_testkit::postgres::cluster::Cluster;

const SESSIONS: u32 = 100_000;
const ROUNDS: usize = 7;

/// Runs `reprise` to its end, its output read and dropped; returns its wall time and
/// how many bytes it printed.
fn timed(reprise: &str, args: &[&str], cwd: &Path) -> (Duration, usize) {
    let start = Instant::now();
    let mut child = Command::new(reprise)
        .args(args)
        .current_dir(cwd)
        .env("XDG_CONFIG_HOME", cwd.join("xdg"))
        .env_remove("REPRISE_DATABASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    let elapsed = start.elapsed();
    assert!(status.success(), "reprise {args:?} failed: {err}");
    (elapsed, out.len())
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let cluster = Cluster::start_with("-c shared_buffers=256MB");
    let url = cluster.url();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Sessions named like run folders, a minute apart, each with a message count and
    // a last message of about 100 characters, as the chat leaves them.
    runtime.block_on(async {
        let store = PgSessionStore::connect(&url, PgStoreOptions::default())
            .await
            .unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "INSERT INTO reprise_sessions (id, created_at, updated_at, message_count, last_message) \
             SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24-MI-SS-MS\"Z\"'), t, t, \
                    2 + i % 40, \
                    'Could you look at why the build of step ' || i || \
                    ' fails on the second machine but not on the first one?' \
             FROM (SELECT i, timestamptz '2026-01-01 00:00:00+00' + i * interval '1 minute' AS t \
                   FROM generate_series(1, {SESSIONS}) AS i) AS s"
        )))
        .execute(store.pool())
        .await
        .unwrap();
        sqlx::raw_sql("VACUUM ANALYZE reprise_sessions")
            .execute(store.pool())
            .await
            .unwrap();
        reprise_session::SessionStore::close(&store).await.unwrap();
    });

    let dir = tempfile::tempdir().unwrap();
    let runs_dir = dir.path().join("runs");
    let reprise = env!("CARGO_BIN_EXE_reprise");
    let base = [
        "--runs-dir",
        runs_dir.to_str().unwrap(),
        "--database-url",
        &url,
        "runs",
    ];
    for (what, extra) in [("", None), (" --all", Some("--all"))] {
        let args: Vec<&str> = base.iter().copied().chain(extra).collect();
        let (_, bytes) = timed(reprise, &args, dir.path());
        let rounds: Vec<Duration> = (0..ROUNDS)
            .map(|_| timed(reprise, &args, dir.path()).0)
            .collect();
        let fastest = *rounds.iter().min().unwrap();
        println!(
            "reprise runs{what} --database-url, {SESSIONS} sessions: median {:.1} ms, \
             fastest {:.1} ms ({ROUNDS} rounds), {bytes} bytes printed",
            median(rounds).as_secs_f64() * 1e3,
            fastest.as_secs_f64() * 1e3,
        );
    }
}
