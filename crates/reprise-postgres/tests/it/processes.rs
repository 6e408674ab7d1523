//! Writers in other processes: this test binary re-runs itself with an environment
//! variable naming the role to play (`child_role`) and the schema to play it on.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use reprise_postgres::{PgSessionStore, PgStoreOptions};
use reprise_session::{Entry, Message, SessionKey, SessionStore, StoreError, WriterLock};
use serde_json::json;

use crate::support::{StoreOn, TestDb};

const ROLE: &str = "REPRISE_TEST_CHILD_ROLE";
/// Leases in these tests: short, so that takeovers come quickly.
const LEASE: Duration = Duration::from_secs(1);

fn spawn_child(role: &str, db: &TestDb) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "processes::child_role",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, role)
        .envs(db.env())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Reads the child's lines until one holds `prefix` and returns what follows it (the
/// harness prints its own text too, the test's name on the same line as the first).
fn expect_line(stdout: &mut BufReader<ChildStdout>, prefix: &str) -> String {
    loop {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "child exited before printing {prefix:?}"
        );
        if let Some((_, rest)) = line.split_once(prefix) {
            return rest.trim().to_owned();
        }
    }
}

fn signal(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

fn key(id: &str) -> SessionKey {
    SessionKey::session(id).unwrap()
}

fn tagged(text: &str, batch: &str, size: usize) -> Entry {
    let mut entry = Entry::message(Message::user(text));
    entry.extra.insert("batch".into(), json!(batch));
    entry.extra.insert("size".into(), json!(size));
    entry
}

/// Takes the lock of `session`, waiting out a lease left by a writer that died.
async fn lock_when_free(store: &PgSessionStore, session: &str) -> WriterLock {
    loop {
        match store.lock(session).await {
            Ok(guard) => return guard,
            Err(StoreError::Locked { .. }) => tokio::time::sleep(LEASE / 10).await,
            Err(error) => panic!("lock {session}: {error}"),
        }
    }
}

/// The child's side. Run directly (no role set) it checks that a lock dropped in one
/// store instance is free at once for another instance of the same process.
#[test]
fn child_role() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let role = std::env::var(ROLE).unwrap_or_default();
    runtime.block_on(async {
        match role.as_str() {
            "" => {
                let db = TestDb::fresh().await;
                let (one, two) = (db.store(LEASE).await, db.store(LEASE).await);
                let guard = one.lock("s").await.unwrap();
                assert!(matches!(
                    two.lock("s").await,
                    Err(StoreError::Locked { .. })
                ));
                drop(guard);
                drop(two.lock("s").await.unwrap());
            }
            role => {
                let db = TestDb::from_env();
                let store = db.store(LEASE).await;
                match role {
                    "hold" => hold(&store).await,
                    "stall" => stall(&store).await,
                    "append-forever" => append_forever(&store).await,
                    other => panic!("unknown role {other}"),
                }
                store.close().await.unwrap();
            }
        }
    });
}

/// Reads a line from stdin off the runtime's threads, so that lease renewal goes on.
async fn read_stdin_line() -> String {
    tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
        line
    })
    .await
    .unwrap()
}

/// Holds the lock of `s` until stdin closes.
async fn hold(store: &PgSessionStore) {
    let guard = store.lock("s").await.unwrap();
    println!("locked {}", std::process::id());
    std::io::stdout().flush().unwrap();
    read_stdin_line().await;
    drop(guard);
}

/// Locks `s`, appends, then (after the parent's go, whatever happened meanwhile)
/// appends again and says what came of it.
async fn stall(store: &PgSessionStore) {
    let _guard = store.lock("s").await.unwrap();
    store
        .append(&key("s"), &[tagged("before the stall", "a1", 1)])
        .await
        .unwrap();
    println!("appended {}", std::process::id());
    std::io::stdout().flush().unwrap();
    read_stdin_line().await;
    let late = [tagged("after the stall", "a2", 1)];
    match store.append(&key("s"), &late).await {
        Ok(_) => println!("outcome stored"),
        Err(StoreError::Locked { pid, host, .. }) => {
            println!(
                "outcome refused {} {}",
                host.unwrap_or_default(),
                pid.unwrap_or(0)
            );
        }
        Err(error @ StoreError::TakenOver { .. }) => {
            let text = error.to_string();
            let StoreError::TakenOver { pid, host, .. } = error else {
                unreachable!()
            };
            println!(
                "outcome taken over {} {} ({text})",
                host.unwrap_or_default(),
                pid.unwrap_or(0)
            );
        }
        Err(error) => println!("outcome error {error}"),
    }
    std::io::stdout().flush().unwrap();
}

/// Appends batches of 1 to 3 entries, some of them large, printing each batch's uuids
/// once its append returned, until killed.
async fn append_forever(store: &PgSessionStore) {
    let _guard = lock_when_free(store, "crash").await;
    let round = std::process::id();
    let mut out = std::io::stdout().lock();
    for i in 0u64.. {
        let size = usize::try_from(1 + i % 3).unwrap();
        let filler = if i % 2 == 1 { 2_000_000 } else { 100 };
        let batch: Vec<Entry> = (0..size)
            .map(|j| {
                tagged(
                    &format!("{j} {}", "x".repeat(filler)),
                    &format!("{round}.{i}"),
                    size,
                )
            })
            .collect();
        store.append(&key("crash"), &batch).await.unwrap();
        for entry in &batch {
            writeln!(out, "stored {}", entry.uuid).unwrap();
        }
        out.flush().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_process_is_refused_naming_the_holder_until_the_first_lets_go() {
    let db = TestDb::fresh().await;
    let mut child = spawn_child("hold", &db);
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let pid: u32 = expect_line(&mut stdout, "locked ").parse().unwrap();
    assert_eq!(pid, child.id());

    let store = db.store(LEASE).await;
    let this_host = PgStoreOptions::default().host_name;
    match store.lock("s").await {
        Err(error @ StoreError::Locked { .. }) => {
            let text = error.to_string();
            let StoreError::Locked {
                session,
                pid: holder,
                host,
                free_at,
            } = error
            else {
                unreachable!()
            };
            assert_eq!(session, "s");
            assert_eq!(holder, Some(pid));
            assert_eq!(host.as_deref(), Some(this_host.as_str()));
            assert!(
                text.contains(&pid.to_string()) && text.contains(&this_host),
                "{text}"
            );
            // It says when the session is free if the holder has stopped.
            let free_at = free_at.expect("a lease's end");
            let now = jiff::Timestamp::now();
            assert!(
                free_at > now && free_at <= now.checked_add(LEASE).unwrap(),
                "{free_at} {now}"
            );
            let shown = free_at
                .round(jiff::Unit::Second)
                .unwrap()
                .strftime("%H:%M:%S")
                .to_string();
            assert!(text.contains(&shown), "{text}");
        }
        other => panic!("expected Locked, got {other:?}"),
    }
    // The lease outlives several renewals: the child's writer stays the one writer.
    tokio::time::sleep(LEASE * 2).await;
    let entry = tagged("intruder", "b", 1);
    assert!(matches!(
        store.append(&key("s"), std::slice::from_ref(&entry)).await,
        Err(StoreError::Locked { pid: Some(p), .. }) if p == pid
    ));
    assert!(store.load(&key("s")).await.unwrap().is_none());

    // The child drops its lock and closes its store: the release reaches the server.
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    let _guard = store.lock("s").await.unwrap();
    store
        .append(&key("s"), std::slice::from_ref(&entry))
        .await
        .unwrap();
    assert_eq!(
        store.load(&key("s")).await.unwrap().unwrap().entries,
        vec![entry]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_writers_lease_expires_and_another_takes_over() {
    let db = TestDb::fresh().await;
    let mut child = spawn_child("hold", &db);
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let pid: u32 = expect_line(&mut stdout, "locked ").parse().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();

    let store = db.store(LEASE).await;
    // Nobody released the lease: it is live until it expires.
    assert!(matches!(
        store.lock("s").await,
        Err(StoreError::Locked { pid: Some(p), .. }) if p == pid
    ));
    let _guard = lock_when_free(&store, "s").await;
    store
        .append(&key("s"), &[tagged("after the crash", "b", 1)])
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_writer_is_fenced_once_taken_over() {
    let db = TestDb::fresh().await;
    let mut child = spawn_child("stall", &db);
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    expect_line(&mut stdout, "appended ");

    // A pause longer than the lease: the child can neither renew nor append.
    signal(&child, "STOP");
    let store = db.store(LEASE).await;
    let guard = lock_when_free(&store, "s").await;
    let mine = tagged("the new writer", "b1", 1);
    store
        .append(&key("s"), std::slice::from_ref(&mine))
        .await
        .unwrap();

    signal(&child, "CONT");
    writeln!(child.stdin.as_mut().unwrap(), "go").unwrap();
    let outcome = expect_line(&mut stdout, "outcome ");
    let this_host = PgStoreOptions::default().host_name;
    // The stalled writer learns that it was taken over, and by whom.
    assert!(
        outcome.starts_with(&format!("taken over {this_host} {} (", std::process::id())),
        "the stalled writer's late append: {outcome}"
    );
    assert!(outcome.contains("was taken over by"), "{outcome}");
    assert!(child.wait().unwrap().success());

    let entries = store.load(&key("s")).await.unwrap().unwrap().entries;
    let batches: Vec<&str> = entries
        .iter()
        .map(|entry| entry.extra["batch"].as_str().unwrap())
        .collect();
    assert_eq!(batches, ["a1", "b1"]);
    // The new writer still writes after the old one woke up.
    let more = tagged("still mine", "b2", 1);
    store.append(&key("s"), &[more]).await.unwrap();
    drop(guard);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_mid_append_stores_the_whole_batch_or_none_of_it() {
    let db = TestDb::fresh().await;
    let mut acknowledged = HashSet::new();
    // Kill after a few acknowledged batches, at varying points; the odd batches carry
    // 2 MB entries, so a kill often lands while one is on the wire.
    for (round, lines) in [2usize, 3, 5, 6].into_iter().enumerate() {
        let mut child = spawn_child("append-forever", &db);
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        for _ in 0..lines {
            acknowledged.insert(expect_line(&mut stdout, "stored "));
        }
        std::thread::sleep(Duration::from_millis(7 * round as u64));
        child.kill().unwrap();
        child.wait().unwrap();
    }

    let store = db.store(LEASE).await;
    let loaded = store.load(&key("crash")).await.unwrap().unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let mut per_batch: HashMap<String, (usize, usize)> = HashMap::new();
    let mut uuids = HashSet::new();
    for entry in &loaded.entries {
        assert!(uuids.insert(entry.uuid), "{} stored twice", entry.uuid);
        let batch = entry.extra["batch"].as_str().unwrap().to_owned();
        let size = usize::try_from(entry.extra["size"].as_u64().unwrap()).unwrap();
        per_batch.entry(batch).or_insert((0, size)).0 += 1;
    }
    for (batch, (found, size)) in &per_batch {
        assert_eq!(
            found, size,
            "batch {batch}: {found} of {size} entries stored"
        );
    }
    for uuid in &acknowledged {
        assert!(
            uuids.contains(&uuid.parse().unwrap()),
            "acknowledged entry {uuid} missing"
        );
    }
}
