//! The approvals example (`examples/approvals.rs`) as two processes: the first runs
//! a turn whose payment waits for a decision and exits; the second approves it and
//! finishes the turn. On a sessions folder and on a real PostgreSQL server; a
//! decision for changed arguments and a second decision are refused.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use reprise_testkit::postgres::TestDb;
use reprise_testkit::{Reply, ScriptedServer};

const ARGUMENTS: &str = r#"{"to":"the smith","amount":5}"#;

/// The example's binary, which `cargo test` builds beside this test's.
fn example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let debug = exe.parent().unwrap().parent().unwrap();
    debug.join("examples").join("approvals")
}

/// Where the sessions are: a folder, or a database.
enum Place<'a> {
    Folder(&'a Path),
    Database(&'a str),
}

async fn run(place: &Place<'_>, server: &ScriptedServer, ledger: &Path, args: &[&str]) -> Output {
    let mut command = tokio::process::Command::new(example());
    match place {
        Place::Folder(dir) => command.arg("--sessions").arg(dir),
        Place::Database(url) => command.args(["--database-url", url]),
    };
    command
        .args(["--base-url", &server.base_url(), "--model", "test-model"])
        .arg("--ledger")
        .arg(ledger)
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .env_remove("REPRISE_DATABASE_URL")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command.output().await.unwrap()
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

/// The whole story on `place`: a turn that waits, a refused decision for other
/// arguments, the approval in another process, a refused second decision.
async fn a_payment_waits_and_another_process_approves_it(place: Place<'_>) {
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::tool_call("call_1", "pay", ARGUMENTS),
        Reply::text("Paid the smith 5 gold."),
    ]);
    let scratch = tempfile::tempdir().unwrap();
    let ledger = scratch.path().join("ledger.txt");

    // First process: the turn stops with the payment waiting, and the process exits.
    let asked = stdout(
        &run(
            &place,
            &server,
            &ledger,
            &["ask", "bill-7", "Pay the smith."],
        )
        .await,
    );
    let hash = reprise::session::arguments_hash(ARGUMENTS);
    assert_eq!(asked, format!("waiting: call_1 pay {ARGUMENTS} {hash}\n"));
    assert!(!ledger.exists(), "nothing paid before a decision");
    assert_eq!(server.request_bodies().len(), 1);

    // A decision made after looking at other arguments is refused, and writes
    // nothing: the call still waits.
    let other = reprise::session::arguments_hash(r#"{"to":"the smith","amount":500}"#);
    let refused = run(
        &place,
        &server,
        &ledger,
        &["approve", "bill-7", "call_1", "--hash", &other],
    )
    .await;
    assert!(!refused.status.success());
    let error = String::from_utf8_lossy(&refused.stderr);
    assert!(error.contains("are not the ones decided about"), "{error}");
    let pending = stdout(&run(&place, &server, &ledger, &["pending", "bill-7"]).await);
    assert_eq!(pending, asked);

    // Second process: approves and finishes the turn.
    let approved = stdout(
        &run(
            &place,
            &server,
            &ledger,
            &["approve", "bill-7", "call_1", "--hash", &hash],
        )
        .await,
    );
    assert_eq!(approved, "answer: Paid the smith 5 gold.\n");
    let paid = std::fs::read_to_string(&ledger).unwrap();
    assert_eq!(paid.lines().count(), 1, "{paid}");
    assert!(paid.starts_with("the smith 5 "), "{paid}");
    let bodies = server.request_bodies();
    assert_eq!(bodies.len(), 2);
    let messages = reprise_testkit::request_messages(&bodies[1]);
    let result = messages.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(result["content"], "paid 5 gold to the smith");

    // Decided once: a second decision is refused, and nothing runs again.
    let again = run(
        &place,
        &server,
        &ledger,
        &["deny", "bill-7", "call_1", "too late"],
    )
    .await;
    assert!(!again.status.success());
    let error = String::from_utf8_lossy(&again.stderr);
    assert!(error.contains("was already decided"), "{error}");
    assert_eq!(std::fs::read_to_string(&ledger).unwrap(), paid);
    assert_eq!(server.request_bodies().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payment_waits_and_another_process_approves_it_on_a_sessions_folder() {
    let sessions = tempfile::tempdir().unwrap();
    a_payment_waits_and_another_process_approves_it(Place::Folder(sessions.path())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payment_waits_and_another_process_approves_it_on_postgres() {
    let db = TestDb::fresh().await;
    let url = db.url_with_schema();
    a_payment_waits_and_another_process_approves_it(Place::Database(&url)).await;
}
