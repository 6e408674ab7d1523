//! The chat and the run commands with conversations in PostgreSQL (`--database-url`):
//! two sandboxes stand for two machines sharing one database.

use std::time::Duration;

use reprise_testkit::postgres::TestDb;
use reprise_testkit::{Reply, ScriptedServer, assert_contains};
use serde_json::Value;

use crate::subagents::{SCOUT, assert_one_delegation_shown, one_delegation, write_config};
use crate::support::{Output, Sandbox, roles_and_texts};

/// A machine: its own working directory and runs folder, the shared database.
struct Machine {
    sandbox: Sandbox,
    url: String,
}

impl Machine {
    fn new(db: &TestDb) -> Machine {
        Machine {
            sandbox: Sandbox::new(),
            url: db.url_with_schema(),
        }
    }

    async fn run(&self, args: &[&str], input: &str) -> Output {
        let mut all = vec!["--database-url", &self.url];
        all.extend_from_slice(args);
        self.sandbox.run(&all, input).await
    }

    async fn chat(&self, server: &ScriptedServer, extra: &[&str], input: &str) -> Output {
        let mut all = vec!["--database-url", self.url.as_str()];
        all.extend_from_slice(extra);
        self.sandbox.chat(&server.base_url(), &all, input).await
    }

    async fn runs(&self) -> Vec<Value> {
        let out = self.run(&["runs", "--json"], "").await;
        assert_eq!(out.status, 0, "{}", out.stderr);
        serde_json::from_str(&out.stdout).unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_started_on_one_machine_is_continued_on_another() {
    let db = TestDb::fresh().await;
    let (one, two) = (Machine::new(&db), Machine::new(&db));
    let server = ScriptedServer::start().await;
    server.push_all([Reply::text("Sourdough needs a starter.")]);
    let out = one.chat(&server, &[], "how do I bake bread?\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);

    // The conversation is in the database, not in the run folder; the log is local.
    assert!(one.sandbox.conversations().is_empty());
    let local = one.sandbox.runs();
    assert_eq!(local.len(), 1);
    let log = std::fs::read_to_string(local[0].join("session.log")).unwrap();
    assert_contains!(log, "› how do I bake bread?");

    // The other machine lists and shows it.
    let rows = two.runs().await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    let name = rows[0]["run"].as_str().unwrap().to_owned();
    assert_eq!(name, local[0].file_name().unwrap().to_str().unwrap());
    assert_eq!(rows[0]["messages"], 2);
    assert_eq!(rows[0]["lastMessage"], "how do I bake bread?");
    let out = two.run(&["show", &name[..10]], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        "› how do I bake bread?\n\nSourdough needs a starter.\n\n"
    );
    let out = two.run(&["runs"], "").await;
    assert_contains!(out.stdout, "how do I bake bread?");

    // And continues it: the model gets the whole history from the database.
    server.push_all([Reply::text("Feed it daily.")]);
    let out = two
        .chat(&server, &["--continue"], "and the starter?\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stderr, "Sourdough needs a starter.");
    let bodies = server.request_bodies();
    let texts: Vec<String> = roles_and_texts(&bodies[1])
        .into_iter()
        .skip(1)
        .map(|(role, text)| format!("{role}: {text}"))
        .collect();
    assert_eq!(
        texts,
        [
            "user: how do I bake bread?",
            "assistant: Sourdough needs a starter.",
            "user: and the starter?"
        ]
    );
    // Its own log of that run, in a folder of the same name on this machine.
    let log =
        std::fs::read_to_string(two.sandbox.runs_dir().join(&name).join("session.log")).unwrap();
    assert_contains!(log, "› and the starter?");
    assert!(!log.contains("how do I bake bread?"), "{log}");

    // Back on the first machine: four messages now.
    let rows = one.runs().await;
    assert_eq!(rows[0]["messages"], 4);
    assert_eq!(rows[0]["lastMessage"], "and the starter?");

    // A fork of its first turn, then the original deleted.
    let out = one.run(&["fork", &name, "--at", "1"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let rows = two.runs().await;
    assert_eq!(rows.len(), 2);
    let fork = rows.iter().find(|row| row["run"] != name.as_str()).unwrap()["run"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = two.run(&["show", &fork, "--json"], "").await;
    let shown: Vec<Value> = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(shown.len(), 2);
    assert_eq!(shown[1]["text"], "Sourdough needs a starter.");

    let out = two.run(&["rm", &name, "--yes"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(!two.sandbox.runs_dir().join(&name).exists());
    let rows = one.runs().await;
    let names: Vec<&str> = rows
        .iter()
        .map(|row| row["run"].as_str().unwrap())
        .collect();
    assert_eq!(names, [fork.as_str()]);
    let out = one.run(&["show", &name], "").await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "no run named");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_picks_a_run_of_the_database_by_number() {
    let db = TestDb::fresh().await;
    let (one, two) = (Machine::new(&db), Machine::new(&db));
    let server = ScriptedServer::start().await;
    server.push_all([Reply::text("Use a torque wrench.")]);
    let out = one.chat(&server, &[], "fix my bike\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);

    server.push_all([Reply::text("Five newton metres.")]);
    let out = two.chat(&server, &["--resume"], "1\nhow tight?\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stderr, "fix my bike");
    assert_contains!(out.stdout, "Five newton metres.");
    let rows = one.runs().await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["messages"], 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_cannot_be_reached_gives_one_error_naming_the_host() {
    let sandbox = Sandbox::new();
    // A port nothing listens on.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("postgres://someone:hunter2@127.0.0.1:{port}/agents");
    let out = sandbox.run(&["--database-url", &url, "runs"], "").await;
    assert_eq!(out.status, 1, "{}", out.stdout);
    let error = out.stderr.trim_end();
    assert_eq!(error.lines().count(), 1, "{error}");
    assert_contains!(error, &format!("127.0.0.1:{port}/agents"));
    assert!(!error.contains("hunter2"), "{error}");

    // Another database's URL is refused as such, not tried.
    let out = sandbox
        .run(
            &[
                "--database-url",
                "mysql://someone:hunter2@127.0.0.1/agents",
                "runs",
            ],
            "",
        )
        .await;
    assert_eq!(out.status, 1, "{}", out.stdout);
    assert_contains!(out.stderr, "not mysql://");
    assert!(!out.stderr.contains("hunter2"), "{}", out.stderr);

    // The chat says the same and leaves no run folder behind.
    let server = ScriptedServer::start().await;
    let out = sandbox
        .chat(&server.base_url(), &["--database-url", &url], "hello\n")
        .await;
    assert_eq!(out.status, 1);
    assert_contains!(out.stderr, &format!("127.0.0.1:{port}/agents"));
    assert!(sandbox.runs().is_empty(), "{:?}", sandbox.runs());
    assert!(server.request_bodies().is_empty());
}

/// Lines a child prints, from both streams, as they come.
struct Lines {
    received: tokio::sync::mpsc::UnboundedReceiver<String>,
    seen: Vec<String>,
}

impl Lines {
    fn of(child: &mut tokio::process::Child) -> Lines {
        use tokio::io::{AsyncBufReadExt, BufReader};
        let (sender, received) = tokio::sync::mpsc::unbounded_channel();
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        for (name, stream) in [
            (
                "out",
                Box::new(stdout) as Box<dyn tokio::io::AsyncRead + Unpin + Send>,
            ),
            ("err", Box::new(stderr)),
        ] {
            let sender = sender.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stream).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let _ = sender.send(format!("{name}: {line}"));
                }
            });
        }
        Lines {
            received,
            seen: Vec::new(),
        }
    }

    /// Waits for a line that holds `needle`; returns it. A minute without one fails
    /// the test (a hang, not a slow machine).
    async fn until(&mut self, needle: &str) -> String {
        loop {
            let next = tokio::time::timeout(Duration::from_secs(60), self.received.recv()).await;
            let Ok(Some(line)) = next else {
                panic!("no line with {needle:?}: {:#?}", self.seen);
            };
            self.seen.push(line.clone());
            if line.contains(needle) {
                return line;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_restart_during_a_chat_gives_a_clear_error_then_the_chat_goes_on() {
    use tokio::io::AsyncWriteExt;
    let cluster = reprise_testkit::postgres::cluster::Cluster::start();
    let db = TestDb::fresh_on(&cluster.url()).await;
    let machine = Machine {
        sandbox: Sandbox::new(),
        url: db.url_with_schema(),
    };
    let server = ScriptedServer::start().await;
    server.push_all([Reply::text("First answer."), Reply::text("Second answer.")]);
    let base_url = server.base_url();
    let mut child = machine
        .sandbox
        .command(&[
            "--plain",
            "--base-url",
            &base_url,
            "--model",
            "test-model",
            "--database-url",
            &machine.url,
        ])
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = Lines::of(&mut child);

    stdin.write_all(b"hello\n").await.unwrap();
    lines.until("First answer.").await;

    cluster.stop_server();
    stdin.write_all(b"during the restart\n").await.unwrap();
    let error = lines.until("✗").await;
    assert!(error.starts_with("err: "), "{error}");
    assert_contains!(error, "PostgreSQL at");
    // Why it cannot connect (the server's socket is gone), not that a wait ran out.
    assert_contains!(error, "(os error");
    assert!(!error.contains("timed out"), "{error}");

    cluster.start_server();
    stdin.write_all(b"after the restart\n").await.unwrap();
    lines.until("Second answer.").await;
    drop(stdin);
    let status = child.wait().await.unwrap();
    assert!(status.success(), "the last turn was answered: {status}");

    // The message sent while the server was down was not stored, nor sent.
    let bodies = server.request_bodies();
    assert_eq!(bodies.len(), 2);
    let users: Vec<String> = roles_and_texts(&bodies[1])
        .into_iter()
        .filter(|(role, _)| role == "user")
        .map(|(_, text)| text)
        .collect();
    assert_eq!(users, ["hello", "after the restart"]);
    let out = machine.run(&["show", "last"], "").await;
    assert_eq!(
        out.stdout,
        "› hello\n\nFirst answer.\n\n› after the restart\n\nSecond answer.\n\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_taken_over_while_stopped_says_so_and_that_it_must_be_restarted() {
    use tokio::io::AsyncWriteExt;
    let db = TestDb::fresh().await;
    let (one, two) = (Machine::new(&db), Machine::new(&db));
    let server = ScriptedServer::start().await;
    server.push_all([Reply::text("First answer."), Reply::text("Taken over.")]);
    let base_url = server.base_url();
    let mut child = one
        .sandbox
        .command(&[
            "--plain",
            "--base-url",
            &base_url,
            "--model",
            "test-model",
            "--database-url",
            &one.url,
            "--database-lease",
            "1s",
        ])
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = Lines::of(&mut child);
    stdin.write_all(b"hello\n").await.unwrap();
    lines.until("First answer.").await;

    // Stopped past its lease, the chat is taken over by another machine's, which
    // (with the same short lease) may take it at once, answers and exits.
    let pid = child.id().unwrap().to_string();
    let kill = |signal: &str| {
        let status = std::process::Command::new("kill")
            .args([signal, pid.as_str()])
            .status()
            .unwrap();
        assert!(status.success());
    };
    kill("-STOP");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let out = two
        .chat(
            &server,
            &["--continue", "--database-lease", "1s"],
            "from the other machine\n",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "Taken over.");
    kill("-CONT");

    // Each later message is refused, saying why and what to do.
    let name = two.runs().await[0]["run"].as_str().unwrap().to_owned();
    for message in ["one more\n", "and another\n"] {
        stdin.write_all(message.as_bytes()).await.unwrap();
        let error = lines.until("✗").await;
        assert_contains!(error, "was taken over by");
        let advice = lines.until("restart").await;
        assert_contains!(advice, &format!("reprise --resume {name}"));
    }
    drop(stdin);
    let _ = child.wait().await.unwrap();
    let out = two.run(&["show", &name], "").await;
    assert!(!out.stdout.contains("one more"), "{}", out.stdout);
    assert_eq!(server.request_bodies().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_lists_the_newest_page_of_a_large_database_and_all_with_a_flag() {
    let db = TestDb::fresh().await;
    // 150 sessions named like runs, a minute apart: more than one page.
    let mut connection = db.connection().await;
    let store = reprise_postgres::PgSessionStore::connect_with(
        db.connect_options(),
        reprise_postgres::PgStoreOptions::default(),
    )
    .await
    .unwrap();
    reprise_session::SessionStore::close(&store).await.unwrap();
    sqlx::query(
        "INSERT INTO reprise_sessions (id, created_at, updated_at, message_count, last_message) \
         SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24-MI-SS-MS\"Z\"'), t, t, 2, \
                'question ' || i \
         FROM (SELECT i, timestamptz '2026-01-01 00:00:00+00' + i * interval '1 minute' AS t \
               FROM generate_series(1, 150) AS i) AS s",
    )
    .execute(&mut connection)
    .await
    .unwrap();
    let machine = Machine::new(&db);

    let out = machine.run(&["runs"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let rows: Vec<&str> = out.stdout.lines().skip(1).collect();
    assert_eq!(rows.len(), 100, "{}", out.stdout);
    assert_contains!(rows[0], "question 150");
    assert_contains!(rows[99], "question 51");
    assert_contains!(
        out.stderr,
        "the newest 100 runs; `reprise runs --all` lists every one"
    );

    let out = machine.run(&["runs", "--all"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(out.stdout.lines().count(), 151, "{}", out.stdout);
    assert!(!out.stderr.contains("--all"), "{}", out.stderr);
    let out = machine.run(&["runs", "--json"], "").await;
    let rows: Vec<Value> = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(rows.len(), 100);
    let out = machine.run(&["runs", "--json", "--all"], "").await;
    let rows: Vec<Value> = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(rows.len(), 150);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_in_the_database_are_named_and_tagged_and_found_by_title() {
    let db = TestDb::fresh().await;
    let (one, two) = (Machine::new(&db), Machine::new(&db));
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::text("Use a dutch oven."),
        Reply::text("Bake it longer."),
        Reply::text("Ask a vet."),
    ]);
    let out = one
        .chat(&server, &[], "how do I bake bread?\nand the crust?\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let name = one.runs().await[0]["run"].as_str().unwrap().to_owned();

    // Named and tagged on one machine…
    let out = one.run(&["rename", &name, "Bread", "  notes"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        format!("run {name} is now called “Bread notes”\n")
    );
    let out = one
        .run(&["tag", "last", "kitchen", "baking", "kitchen"], "")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(out.stdout, format!("run {name}: baking kitchen\n"));
    let out = one.run(&["tag", &name, "with space"], "").await;
    assert_ne!(out.status, 0);

    // …listed, shown and continued by title on the other.
    let rows = two.runs().await;
    assert_eq!(rows[0]["title"], "Bread notes");
    assert_eq!(rows[0]["tags"], serde_json::json!(["baking", "kitchen"]));
    assert_eq!(rows[0]["firstMessage"], "how do I bake bread?");
    assert_eq!(rows[0]["lastMessage"], "and the crust?");
    let out = two.run(&["runs"], "").await;
    assert_contains!(out.stdout, "Bread notes #baking #kitchen");
    let out = two.run(&["show", "bread NOTES"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "› how do I bake bread?");
    let out = two
        .run(&["tag", "Bread notes", "--untag", "kitchen"], "")
        .await;
    assert_eq!(out.stdout, format!("run {name}: baking\n"));
    let out = two.run(&["tag", &name[..12]], "").await;
    assert_eq!(out.stdout, format!("run {name}: baking\n"));

    // A second run, named in the chat with /rename, then without a title is listed
    // by its first message; a title two runs share names neither.
    let out = two
        .chat(&server, &[], "my dog is sick\n/rename Dog care\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stderr, "(this run is now called “Dog care”)");
    let rows = two.runs().await;
    let other = rows.iter().find(|row| row["run"] != name.as_str()).unwrap();
    assert_eq!(other["shownAs"], "Dog care");
    let other = other["run"].as_str().unwrap().to_owned();
    let out = two.run(&["rename", &other, ""], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(two.runs().await[0]["shownAs"], "my dog is sick");
    let out = two.run(&["rename", &other, "bread", "notes"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let out = one.run(&["show", "Bread notes"], "").await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "more than one run");
    // An empty title removes it.
    let out = two.run(&["rename", &other, ""], "").await;
    assert_eq!(out.stdout, format!("run {other} has no title now\n"));
    let out = one.run(&["show", "Bread notes", "--json"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);

    // Search, du and prune read the database: machine one finds, measures and
    // prunes what machine two wrote.
    let out = one.run(&["search", "bake bread"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, &name);
    assert_contains!(out.stdout, "«bake bread»");
    assert!(!out.stdout.contains(&other), "{}", out.stdout);
    let out = one.run(&["du", "--json"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let sizes: Value = serde_json::from_str(&out.stdout).unwrap();
    let measured: Vec<&str> = sizes["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| run["run"].as_str().unwrap())
        .collect();
    assert!(
        measured.contains(&name.as_str()) && measured.contains(&other.as_str()),
        "{}",
        out.stdout
    );
    let out = one.run(&["prune", "--keep", "1", "--dry-run"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "would delete 1 ");
    assert_eq!(two.runs().await.len(), 2);
    let out = one.run(&["prune", "--keep", "1", "--yes"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "deleted 1 ");
    assert_eq!(two.runs().await.len(), 1);
}

/// A Claude Code session with a subagent, laid out as `~/.claude` keeps it; the
/// main transcript's path.
fn claude_session(root: &std::path::Path) -> std::path::PathBuf {
    let session = "ef958aa1-0e93-49f0-bb71-150f63befcd1";
    let project = root.join("projects").join("-experiments-worktrees");
    let subagents = project.join(session).join("subagents");
    std::fs::create_dir_all(&subagents).unwrap();
    let main = project.join(format!("{session}.jsonl"));
    std::fs::copy(
        reprise_testkit::testdata("claude_code/cc-2.1.114_ef958aa1_main_with_subagents.jsonl"),
        &main,
    )
    .unwrap();
    std::fs::copy(
        reprise_testkit::testdata(
            "claude_code/cc-2.1.114_ef958aa1_subagent_agent-a52886dc180afb356.jsonl",
        ),
        subagents.join("agent-a52886dc180afb356.jsonl"),
    )
    .unwrap();
    main
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_imported_into_the_database_is_exported_on_another_machine() {
    let db = TestDb::fresh().await;
    let (one, two) = (Machine::new(&db), Machine::new(&db));
    let file = claude_session(one.sandbox.path());
    let file = file.to_str().unwrap();

    let out = one.run(&["import", file], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "created run 2026-04-18T13-10-51");
    assert_contains!(out.stdout, "1 subagent)");
    assert_contains!(out.stdout, "imported 1 session (");
    // In the database, not in a folder of this machine.
    assert!(one.sandbox.conversations().is_empty());
    assert!(one.sandbox.runs().is_empty(), "{:?}", one.sandbox.runs());
    // The same session again: it is there already, and nothing is left behind.
    let out = one.run(&["import", file], "").await;
    assert_eq!(out.status, 1, "{}", out.stdout);
    assert_contains!(out.stderr, "already exists");
    assert!(one.sandbox.runs().is_empty(), "{:?}", one.sandbox.runs());

    let rows = two.runs().await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    let name = rows[0]["run"].as_str().unwrap().to_owned();
    assert!(name.starts_with("2026-04-18T13-10-51"), "{name}");

    // Its entries, main and subagent, are those a run folder gets from the same file.
    let out = two.run(&["export", &name, "--format", "json"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let exported: Value = serde_json::from_str(&out.stdout).unwrap();
    let folders = Sandbox::new();
    let out = folders.run(&["import", file], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let folder = folders.runs()[0]
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let out = folders
        .run(&["export", &folder, "--format", "json"], "")
        .await;
    let expected: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(exported["run"], name.as_str());
    assert!(!exported["entries"].as_array().unwrap().is_empty());
    assert_eq!(exported["entries"], expected["entries"]);
    assert_eq!(exported["subagents"], expected["subagents"]);
    assert_eq!(
        exported["subagents"].as_object().unwrap().len(),
        1,
        "{}",
        exported["subagents"]
    );

    // Markdown and HTML too, from a run a chat started.
    let server = ScriptedServer::start().await;
    server.push_all([Reply::text("Sourdough needs a starter.")]);
    let out = one.chat(&server, &[], "how do I bake bread?\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let out = two.run(&["export", "last"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "how do I bake bread?");
    assert_contains!(out.stdout, "Sourdough needs a starter.");
    let out = two.run(&["export", "last", "--format", "html"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "Sourdough needs a starter.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagents_work_in_the_database_is_shown_and_redrawn_on_another_machine() {
    let db = TestDb::fresh().await;
    let (one, two) = (Machine::new(&db), Machine::new(&db));
    write_config(&one.sandbox, SCOUT);
    write_config(&two.sandbox, SCOUT);
    let server = ScriptedServer::start().await;
    one_delegation(&server, "p1", "The folder holds notes.txt.");
    let out = one.chat(&server, &["--yes"], "what is here?\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    // The subagent's transcript is in the database, not in the run folder.
    assert!(one.sandbox.conversations().is_empty());
    assert!(!one.sandbox.runs()[0].join("subagents").exists());

    // The other machine shows the subagent's work under its call.
    let shown = two.run(&["show", "last", "--subagents"], "").await;
    assert_eq!(shown.status, 0, "{}", shown.stderr);
    assert_one_delegation_shown(&shown.stdout);

    // Continued there, the redraw folds the subagent's past work.
    server.push_all([Reply::text("Nothing changed.")]);
    let out = two
        .chat(&server, &["--yes", "--continue"], "anything new?\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stderr, "▸ [scout] 1 tool call, 1 reply (folded)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_in_the_database_rewinds_files_on_the_machine_that_keeps_the_checkpoints() {
    let db = TestDb::fresh().await;
    let (one, two) = (Machine::new(&db), Machine::new(&db));
    let dir = one.sandbox.path();
    std::fs::create_dir(dir.join("src")).unwrap();
    std::fs::write(dir.join("src/a.txt"), "zero\n").unwrap();
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::tool_call(
            "call_0",
            "write_file",
            r#"{"path":"src/a.txt","content":"one\n"}"#,
        ),
        Reply::text("ok"),
    ]);
    let out = one.chat(&server, &["--yes"], "write\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let name = one.runs().await[0]["run"].as_str().unwrap().to_owned();
    let out = one.run(&["fork", &name], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let fork = one
        .runs()
        .await
        .iter()
        .map(|row| row["run"].as_str().unwrap().to_owned())
        .find(|run| *run != name)
        .unwrap();

    // The checkpoints are in the local folders of this machine: the fork has them.
    assert!(
        one.sandbox
            .runs_dir()
            .join(&fork)
            .join("checkpoints")
            .is_dir()
    );
    let rewind = [
        "rewind",
        fork.as_str(),
        "--to",
        "1",
        "--files-only",
        "--yes",
    ];
    let out = one.run(&rewind, "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(dir.join("src/a.txt")).unwrap(),
        "zero\n"
    );

    // Another machine has the conversation but not the checkpoints, and says so.
    let out = two.run(&rewind, "").await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "no checkpoints of its working folder here");
    assert_contains!(out.stderr, "on the machine that took them");
}

/// Every entry of every run of the database, as `reprise export --format json`
/// gives them (main conversation and subagents), each uuid once.
async fn exported_entries(machine: &Machine) -> Vec<Value> {
    let mut seen = std::collections::HashSet::new();
    let mut entries = Vec::new();
    let mut runs: Vec<String> = machine
        .runs()
        .await
        .iter()
        .map(|row| row["run"].as_str().unwrap().to_owned())
        .collect();
    runs.sort();
    for run in runs {
        let out = machine
            .run(&["export", &run, "--format", "json", "--no-redact"], "")
            .await;
        assert_eq!(out.status, 0, "{}", out.stderr);
        let export: Value = serde_json::from_str(&out.stdout).unwrap();
        let subagents = export["subagents"].as_object().unwrap();
        let all = export["entries"]
            .as_array()
            .unwrap()
            .iter()
            .chain(subagents.values().flat_map(|list| list.as_array().unwrap()));
        for entry in all {
            if seen.insert(entry["uuid"].as_str().unwrap().to_owned()) {
                entries.push(entry.clone());
            }
        }
    }
    entries
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_in_the_database_sums_every_reply_of_every_machine() {
    use crate::usage::{SCRIPTED_INPUT, Sums, recorded_calls, scripted_replies, tool_calls};
    let db = TestDb::fresh().await;
    let (one, two) = (Machine::new(&db), Machine::new(&db));
    write_config(&one.sandbox, SCOUT);
    std::fs::write(one.sandbox.path().join("notes.txt"), "buy milk\n").unwrap();
    let server = ScriptedServer::start().await;
    server.push_all(scripted_replies());
    let out = one.chat(&server, &["--yes"], SCRIPTED_INPUT).await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(server.remaining(), 0);
    let file = claude_session(one.sandbox.path());
    let out = one.run(&["import", file.to_str().unwrap()], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    // Nothing of it is in the run folders of either machine.
    assert!(one.sandbox.conversations().is_empty());

    let entries = exported_entries(&two).await;
    let calls = recorded_calls(&entries);
    assert_eq!(
        calls.iter().filter(|c| c.model == "test-model").count(),
        7,
        "{calls:?}"
    );
    let out = two.run(&["usage", "--json", "--by", "model"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    let mut expected = Sums::default();
    calls.iter().for_each(|c| expected.add(c));
    assert_eq!(Sums::of_json(&report["total"]), expected);
    assert_eq!(report["total"]["toolCalls"], tool_calls(&entries));
    for row in report["rows"].as_array().unwrap() {
        let model = row["key"].as_str().unwrap();
        let mut sums = Sums::default();
        calls
            .iter()
            .filter(|c| c.model == model)
            .for_each(|c| sums.add(c));
        assert_eq!(Sums::of_json(row), sums, "{model}");
    }
    let out = two.run(&["usage", "--by", "run"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(out.stdout.lines().count(), 4, "{}", out.stdout);
}
