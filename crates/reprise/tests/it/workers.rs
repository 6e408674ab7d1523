//! The workers example (`examples/workers.rs`) on a real PostgreSQL server: a worker
//! killed mid-turn, and another that finishes its conversation once the lease expires,
//! with no message lost or doubled.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use reprise_testkit::postgres::TestDb;
use reprise_testkit::{Reply, ScriptedServer};

/// The example's binary, which `cargo test` builds beside this test's.
fn example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let debug = exe.parent().unwrap().parent().unwrap();
    debug.join("examples").join("workers")
}

fn command(url: &str, server: &ScriptedServer, args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(example());
    command
        .args(["--database-url", url, "--base-url"])
        .arg(server.base_url())
        .args(["--model", "test-model", "--lease", "2s"])
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

async fn run(url: &str, server: &ScriptedServer, args: &[&str]) -> String {
    let output = command(url, server, args).output().await.unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Polls until `check` holds; two minutes without fails the test (a hang, not a slow
/// machine).
async fn until<F: AsyncFn() -> bool>(check: F) {
    let poll = async {
        while !check().await {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(120), poll)
        .await
        .expect("the workers got stuck");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_turn_is_taken_over_with_no_message_lost_or_doubled() {
    let db = TestDb::fresh().await;
    let url = db.url_with_schema();
    let server = ScriptedServer::start().await;
    server.push_all([
        // The first worker to ask hangs in the middle of this answer.
        Reply::text("The key is under the well.").stall_after(1, Duration::from_secs(600)),
        Reply::text("The key is under the well."),
        Reply::text("Bring a torch."),
    ]);
    run(&url, &server, &["enqueue", "quest-1", "Where is the key?"]).await;
    run(
        &url,
        &server,
        &["enqueue", "quest-1", "What should I bring?"],
    )
    .await;

    let mut workers = command(&url, &server, &["run", "--workers", "2", "--until-idle"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();

    // Mid-turn: the question is stored and the model is answering.
    let mut connection = db.connection().await;
    until(async || server.request_bodies().len() == 1).await;
    let holder: i32 =
        sqlx::query_scalar("SELECT pid FROM reprise_leases WHERE session_id = 'quest-1'")
            .fetch_one(&mut connection)
            .await
            .unwrap();
    let stored: i64 =
        sqlx::query_scalar("SELECT count(*) FROM reprise_entries WHERE session_id = 'quest-1'")
            .fetch_one(&mut connection)
            .await
            .unwrap();
    assert_eq!(stored, 1);
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(holder).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();

    let status = tokio::time::timeout(Duration::from_secs(120), workers.wait())
        .await
        .expect("the workers end once the queue is empty")
        .unwrap();
    assert!(status.success());

    // The whole conversation, each message once.
    let shown = run(&url, &server, &["show", "quest-1"]).await;
    assert_eq!(
        shown,
        "user: Where is the key?\n\
         assistant: The key is under the well.\n\
         user: What should I bring?\n\
         assistant: Bring a torch.\n"
    );
    // The worker that took over sent the stored question once, not again.
    let bodies = server.request_bodies();
    assert_eq!(bodies.len(), 3);
    let users = |body: &serde_json::Value| -> Vec<String> {
        reprise_testkit::request_messages(body)
            .iter()
            .filter(|m| m["role"] == "user")
            .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(users(&bodies[1]), ["Where is the key?"]);
    assert_eq!(
        users(&bodies[2]),
        ["Where is the key?", "What should I bring?"]
    );

    let jobs: Vec<(i32, i32, Option<String>, i32)> =
        sqlx::query_as("SELECT turn, attempts, answer, taken_by FROM worker_jobs ORDER BY turn")
            .fetch_all(&mut connection)
            .await
            .unwrap();
    assert_eq!(jobs.len(), 2);
    assert_eq!(jobs[0].2.as_deref(), Some("The key is under the well."));
    assert!(jobs[0].1 >= 2, "taken again after the kill: {jobs:?}");
    assert_ne!(jobs[0].3, holder, "finished by another worker");
    assert_eq!(jobs[1].2.as_deref(), Some("Bring a torch."));
}
