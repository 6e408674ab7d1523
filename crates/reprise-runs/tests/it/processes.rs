//! Tests with a second process: this test binary re-runs itself with an environment
//! variable naming the role to play (`child_role`), as a writer that holds a lock or
//! as an appender that gets SIGKILLed at random moments.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use reprise_runs::create_run_store;
use reprise_session::{
    Durability, Entry, FileSessionStore, Message, SessionKey, SessionStore, StoreError,
};

const ROLE: &str = "REPRISE_TEST_CHILD_ROLE";
const DIR: &str = "REPRISE_TEST_CHILD_DIR";

/// Starts this test binary as a child running only `child_role`.
fn spawn_child(role: &str, dir: &Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "processes::child_role",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, role)
        .env(DIR, dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The child's side. Run directly (no role set) it checks that a lock is released
/// when its guard drops, so that it is a real test on its own too.
#[test]
fn child_role() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let role = std::env::var(ROLE).unwrap_or_default();
    let dir = std::env::var(DIR).map(std::path::PathBuf::from);
    match (role.as_str(), dir) {
        ("hold-lock", Ok(dir)) => runtime.block_on(hold_lock(&dir)),
        ("append-forever", Ok(dir)) => runtime.block_on(append_forever(&dir)),
        _ => runtime.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let store = FileSessionStore::new(dir.path());
            let guard = store.lock("s").await.unwrap();
            assert!(store.lock("s").await.is_err());
            drop(guard);
            drop(store.lock("s").await.unwrap());
        }),
    }
}

async fn hold_lock(dir: &Path) {
    let file_store = FileSessionStore::new(dir.join("store"));
    let run_store = create_run_store(dir.join("run"));
    let _a = file_store.lock("s").await.unwrap();
    let _b = run_store.lock("s").await.unwrap();
    println!("locked {}", std::process::id());
    std::io::stdout().flush().unwrap();
    // Hold until the parent closes stdin.
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}

async fn append_forever(dir: &Path) {
    let store = FileSessionStore::with_durability(dir, Durability::Full);
    let key = SessionKey::session("crash").unwrap();
    let _guard = store.lock("crash").await.unwrap();
    // As the writer, cut off whatever the previous child left torn.
    store.load(&key).await.unwrap();
    let mut out = std::io::stdout().lock();
    for i in 0u64.. {
        // Mostly small entries, sometimes a large one, so that a kill can land mid-write.
        let size = if i % 7 == 3 { 300_000 } else { 200 };
        let batch: Vec<Entry> = (0..1 + i % 3)
            .map(|j| Entry::message(Message::user(format!("{i}.{j} {}", "x".repeat(size)))))
            .collect();
        store.append(&key, &batch).await.unwrap();
        for entry in &batch {
            writeln!(out, "{}", entry.uuid).unwrap();
        }
        out.flush().unwrap();
    }
}

#[tokio::test]
async fn a_second_writer_in_another_process_fails_naming_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn_child("hold-lock", dir.path());
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    // The test harness prints its own lines too; find ours.
    let pid: u32 = loop {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "child exited early"
        );
        if let Some((_, rest)) = line.split_once("locked ") {
            break rest.trim().parse().unwrap();
        }
    };
    assert_eq!(pid, child.id());

    let key = SessionKey::session("s").unwrap();
    let entry = Entry::message(Message::user("mine"));
    let file_store = FileSessionStore::new(dir.path().join("store"));
    let run_store = create_run_store(dir.path().join("run"));
    let stores: [&dyn SessionStore; 2] = [&file_store, &run_store];
    for store in stores {
        match store.lock("s").await {
            Err(StoreError::Locked {
                session,
                pid: holder,
                host,
                free_at,
            }) => {
                assert_eq!(host, None);
                assert_eq!(free_at, None);
                assert_eq!(session, "s");
                assert_eq!(holder, Some(pid));
                let text = StoreError::Locked {
                    session,
                    pid: holder,
                    host: None,
                    free_at: None,
                }
                .to_string();
                assert!(
                    text.contains(&pid.to_string()) && text.contains('s'),
                    "{text}"
                );
            }
            other => panic!("expected Locked, got {other:?}"),
        }
        // An append without the lock takes it for its duration: it fails too.
        assert!(matches!(
            store.append(&key, std::slice::from_ref(&entry)).await,
            Err(StoreError::Locked { pid: Some(p), .. }) if p == pid
        ));
        // Readers do not need the lock.
        assert!(store.load(&key).await.unwrap().is_none());
        assert!(store.list_sessions().await.is_ok());
    }

    // Once the holder exits, the lock is free.
    drop(child.stdin.take());
    child.wait().unwrap();
    let _guard = file_store.lock("s").await.unwrap();
    file_store
        .append(&key, std::slice::from_ref(&entry))
        .await
        .unwrap();
    drop(run_store.lock("s").await.unwrap());
}

/// A small xorshift generator: random kill moments without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn every_acknowledged_append_survives_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("crash test seed {seed}");
    let mut rng = Rng(seed);
    let mut acknowledged: Vec<uuid::Uuid> = Vec::new();
    for round in 0..50 {
        let mut child = spawn_child("append-forever", dir.path());
        let stdout = child.stdout.take().unwrap();
        // Read acknowledgements on a thread while the main thread picks the moment.
        let (started, wait_start) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut lines = Vec::new();
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.trim().parse::<uuid::Uuid>().is_ok() {
                    let _ = started.send(());
                }
                lines.push(line);
            }
            lines
        });
        // The child is appending once it prints; kill it at a random moment after.
        let _ = wait_start.recv_timeout(Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(rng.next() % 40));
        child.kill().unwrap();
        child.wait().unwrap();
        let lines = reader.join().unwrap();
        // Harness chatter and a line cut by the kill are not acknowledgements.
        acknowledged.extend(
            lines
                .iter()
                .flat_map(|l| l.split_whitespace())
                .filter_map(|token| token.parse::<uuid::Uuid>().ok()),
        );

        let loaded = reprise_session::load_file(&dir.path().join("crash.jsonl"), "crash")
            .unwrap_or_else(|error| panic!("round {round}: the file does not load: {error}"));
        let Some(loaded) = loaded else {
            assert!(
                acknowledged.is_empty(),
                "round {round}: acknowledged but no file"
            );
            continue;
        };
        // Only a torn tail may be warned about; never a corrupt complete line.
        for warning in &loaded.warnings {
            assert!(warning.message.contains("torn"), "round {round}: {warning}");
        }
        let on_disk: HashSet<uuid::Uuid> = loaded.entries.iter().map(|e| e.uuid).collect();
        assert_eq!(
            on_disk.len(),
            loaded.entries.len(),
            "round {round}: duplicates"
        );
        for uuid in &acknowledged {
            assert!(
                on_disk.contains(uuid),
                "round {round}: acknowledged {uuid} lost"
            );
        }
    }
    // Each round waited for a first acknowledgement before killing.
    assert!(
        acknowledged.len() >= 50,
        "only {} acknowledged",
        acknowledged.len()
    );
    eprintln!(
        "{} acknowledged appends survived 50 kills",
        acknowledged.len()
    );
}
