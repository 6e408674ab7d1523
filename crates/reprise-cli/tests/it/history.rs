//! `reprise rename | tag | search | du | prune`, `/rename` in both chats, titles in
//! listings, the picker and run names.

use std::path::{Path, PathBuf};
use std::time::Duration;

use reprise_testkit::assert_contains;
use reprise_testkit::{Reply, ScriptedServer};
use serde_json::Value;

use crate::support::Sandbox;
use reprise_runs::{create_run_folder, create_run_store, list_runs, read_labels, set_title};
use reprise_session::{Entry, Message, SessionKey, SessionStore, ToolCall};

/// A run whose conversation is `entries`; returns its folder and session key.
async fn run_with(runs_dir: &Path, entries: Vec<Entry>) -> (PathBuf, SessionKey) {
    let folder = create_run_folder(runs_dir).unwrap();
    let store = create_run_store(&folder.dir);
    let key = SessionKey::session(&uuid::Uuid::now_v7().to_string()).unwrap();
    store.append(&key, &entries).await.unwrap();
    // Distinct update times, so "newest first" has one answer.
    std::thread::sleep(Duration::from_millis(5));
    (folder.dir, key)
}

/// A run where the person said each of `prompts`, each answered.
async fn make_run(runs_dir: &Path, prompts: &[&str]) -> PathBuf {
    let mut entries = Vec::new();
    for prompt in prompts {
        entries.push(Entry::message(Message::user(*prompt)));
        entries.push(Entry::message(Message::assistant(format!(
            "answer to {prompt}"
        ))));
    }
    run_with(runs_dir, entries).await.0
}

/// A run folder written by hand, last used at `updated_at`.
fn old_run(runs_dir: &Path, name: &str, updated_at: &str, prompt: &str) -> PathBuf {
    let dir = runs_dir.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let session = format!("s-{}", name.to_lowercase());
    std::fs::write(
        dir.join("session.json"),
        serde_json::json!({"sessionId": session, "updatedAt": updated_at, "messageCount": 1})
            .to_string(),
    )
    .unwrap();
    let entry = Entry::message(Message::user(prompt));
    std::fs::write(
        dir.join("conversation.jsonl"),
        format!("{}\n", serde_json::to_string(&entry).unwrap()),
    )
    .unwrap();
    dir
}

fn name(dir: &Path) -> String {
    dir.file_name().unwrap().to_string_lossy().into_owned()
}

/// `text` with run names replaced by labels and every `YYYY-MM-DD HH:MM` by a
/// placeholder of the same width, so snapshots do not depend on the clock.
fn mask(text: &str, runs: &[(&Path, &str)]) -> String {
    let mut text = text.to_owned();
    for (dir, label) in runs {
        text = text.replace(&name(dir), label);
    }
    let bytes = text.as_bytes();
    let shape = b"dddd-dd-dd dd:dd";
    let mut out = String::new();
    let mut i = 0;
    while i < bytes.len() {
        let fits = i + shape.len() <= bytes.len()
            && shape.iter().zip(&bytes[i..]).all(|(s, b)| match s {
                b'd' => b.is_ascii_digit(),
                other => other == b,
            });
        if fits {
            out.push_str("YYYY-MM-DD hh:mm");
            i += shape.len();
        } else {
            let c = text[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

#[tokio::test]
async fn titles_and_tags_show_in_runs_and_json_and_an_untitled_run_shows_its_first_prompt() {
    let sandbox = Sandbox::new();
    let runs = sandbox.runs_dir();
    let bread = make_run(&runs, &["bake bread", "and rye?"]).await;
    let bike = make_run(&runs, &["fix the bike", "and the brakes?"]).await;
    let evil = make_run(&runs, &["hello"]).await;

    let out = sandbox
        .run(&["rename", &name(&bike), "Bike", "repairs"], "")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "is now called “Bike repairs”");
    // A title names the run for the next command, whatever its case.
    let out = sandbox
        .run(&["tag", "bike REPAIRS", "diy", "urgent"], "")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, ": diy urgent");
    let out = sandbox
        .run(&["tag", &name(&bike), "--untag", "urgent"], "")
        .await;
    assert_contains!(out.stdout, ": diy");
    let out = sandbox.run(&["tag", &name(&bike), "two words"], "").await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "a tag is one word");
    // A title is untrusted text on the terminal.
    let out = sandbox
        .run(&["rename", &name(&evil), "\x1b]0;owned\x07evil"], "")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(!out.stdout.contains('\x1b'), "{:?}", out.stdout);

    let out = sandbox.run(&["runs"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(!out.stdout.contains('\x1b'), "{:?}", out.stdout);
    insta::assert_snapshot!(mask(
        &out.stdout,
        &[
            (&bike, "RUN-BIKE"),
            (&bread, "RUN-BREAD"),
            (&evil, "RUN-EVIL")
        ]
    ));

    let out = sandbox.run(&["runs", "--json"], "").await;
    let rows: Vec<Value> = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(rows[1]["run"], name(&bike));
    assert_eq!(rows[1]["title"], "Bike repairs");
    assert_eq!(rows[1]["tags"], serde_json::json!(["diy"]));
    assert_eq!(rows[2]["title"], Value::Null);
    assert_eq!(rows[2]["shownAs"], "bake bread");
    assert_eq!(rows[2]["firstMessage"], "bake bread");
    assert_eq!(rows[2]["lastMessage"], "and rye?");

    // An empty title removes it.
    let out = sandbox.run(&["rename", &name(&bike), ""], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(read_labels(&bike).unwrap().title, None);
    assert_eq!(read_labels(&bike).unwrap().tags, ["diy"]);
}

#[tokio::test]
async fn a_title_names_one_run_and_an_ambiguous_title_is_refused_with_its_runs() {
    let sandbox = Sandbox::new();
    let runs = sandbox.runs_dir();
    let first = make_run(&runs, &["one"]).await;
    let second = make_run(&runs, &["two"]).await;
    let unique = make_run(&runs, &["the unique run"]).await;
    set_title(&first, "Same name").unwrap();
    set_title(&second, "Same  name").unwrap();
    set_title(&unique, "Only one").unwrap();

    let out = sandbox.run(&["show", "only ONE"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "› the unique run");

    let out = sandbox.run(&["show", "Same name"], "").await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "is the title of 2 runs");
    assert_contains!(out.stderr, &name(&first));
    assert_contains!(out.stderr, &name(&second));

    let out = sandbox.run(&["show", "no such title"], "").await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "no run matches");

    // `--resume TITLE` starts with the run it names.
    let start = reprise_chat::start::StartWith::Named("Only one".into());
    let target = reprise_chat::start::start_target(&folders(&runs), &start)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(target.dir, unique);
    let start = reprise_chat::start::StartWith::Named("same name".into());
    let error = reprise_chat::start::start_target(&folders(&runs), &start)
        .await
        .unwrap_err();
    assert_contains!(format!("{error:#}"), "is the title of 2 runs");
}

#[tokio::test]
async fn a_rename_made_while_a_chat_appends_is_kept_and_listings_follow_it() {
    let sandbox = Sandbox::new();
    let runs = sandbox.runs_dir();
    let folder = create_run_folder(&runs).unwrap();
    let store = create_run_store(&folder.dir);
    let key = SessionKey::session(&uuid::Uuid::now_v7().to_string()).unwrap();
    store
        .append(&key, &[Entry::message(Message::user("the first prompt"))])
        .await
        .unwrap();
    let out = sandbox
        .run(&["rename", &name(&folder.dir), "Kept title"], "")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    // The chat goes on writing its conversation and summary.
    store
        .append(
            &key,
            &[
                Entry::message(Message::assistant("sure")),
                Entry::message(Message::user("a later message")),
            ],
        )
        .await
        .unwrap();
    let listed = list_runs(&runs).unwrap().runs.remove(0);
    assert_eq!(listed.title.as_deref(), Some("Kept title"));
    assert_eq!(listed.first_message.as_deref(), Some("the first prompt"));
    assert_eq!(listed.last_message.as_deref(), Some("a later message"));
    assert_eq!(listed.message_count, 3);

    // Once cached (files older than the cache's margin), a rename still shows.
    std::thread::sleep(Duration::from_millis(1100));
    list_runs(&runs).unwrap();
    assert_eq!(
        list_runs(&runs).unwrap().runs[0].title.as_deref(),
        Some("Kept title")
    );
    set_title(&folder.dir, "Newer title").unwrap();
    assert_eq!(
        list_runs(&runs).unwrap().runs[0].title.as_deref(),
        Some("Newer title")
    );
}

#[tokio::test]
async fn rename_in_the_plain_chat_titles_the_run() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    server.push(Reply::text("Hello!"));
    let out = sandbox
        .chat(
            &server.base_url(),
            &[],
            "hi\n/rename  My plain run \n/exit\n",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stderr, "(this run is now called “My plain run”)");
    let run = sandbox.conversations().remove(0);
    assert_eq!(
        read_labels(&run).unwrap().title.as_deref(),
        Some("My plain run")
    );
    let out = sandbox.run(&["runs"], "").await;
    assert_contains!(out.stdout, "My plain run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rename_in_the_full_screen_chat_titles_the_run() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    server.push(Reply::text("Hello there."));
    let base_url = server.base_url();
    let mut pty = sandbox.pty(&["--base-url", base_url.as_str(), "--model", "test-model"]);
    pty.wait_text("/help · /resume").await;
    pty.line("hi");
    pty.wait_text("Hello there.").await;
    pty.wait_for("the turn to end", |s| !s.contains("working"))
        .await;
    pty.line("/rename Screen run");
    pty.wait_text("this run is now called “Screen run”").await;
    pty.send("\x04");
    assert!(pty.wait_exit().await);
    let run = sandbox.conversations().remove(0);
    assert_eq!(
        read_labels(&run).unwrap().title.as_deref(),
        Some("Screen run")
    );
}

#[tokio::test]
async fn the_picker_filter_matches_titles_and_every_message_of_the_person() {
    let sandbox = Sandbox::new();
    let runs = sandbox.runs_dir();
    let bread = make_run(&runs, &["a Sourdough starter", "how warm?"]).await;
    let bike = make_run(&runs, &["the bike", "brakes"]).await;
    set_title(&bike, "Workshop").unwrap();

    // The first message, not the last one, holds the word.
    let found = reprise_chat::start::picker_message_matches(&folders(&runs), "sourdough").await;
    assert_eq!(found.into_iter().collect::<Vec<_>>(), [name(&bread)]);
    // The model's answers are not the person's messages.
    assert!(
        reprise_chat::start::picker_message_matches(&folders(&runs), "answer to")
            .await
            .is_empty()
    );

    let rows = reprise_chat::start::picker_rows(&folders(&runs), None)
        .await
        .unwrap();
    assert_eq!(rows[0].title, "Workshop");
    assert_eq!(rows[1].title, "a Sourdough starter");
    let mut picker = reprise_cli::screens::tui::view::Picker {
        rows,
        filter: "workshop".into(),
        ..Default::default()
    };
    let shown: Vec<_> = picker.visible().iter().map(|r| r.name.clone()).collect();
    assert_eq!(shown, [name(&bike)]);
    picker.filter = "starter".into();
    assert_eq!(picker.visible().len(), 1);
    // A word only in an earlier message: found once the chat searched for it.
    picker.filter = "SOURDOUGH".into();
    picker.rows[1].title.clear();
    assert!(picker.visible().is_empty());
    picker.message_matches = Some((
        "SOURDOUGH".into(),
        reprise_chat::start::picker_message_matches(&folders(&runs), "SOURDOUGH").await,
    ));
    let shown: Vec<_> = picker.visible().iter().map(|r| r.name.clone()).collect();
    assert_eq!(shown, [name(&bread)]);
}

const SECRET: &str = "sk-abcdefghijklmnopqrstuvwxyz0123456789ABCD";

/// Two runs: an older one with a user message, a tool call and a tool result, and
/// a newer one with a subagent.
async fn searchable_runs(runs: &Path) -> (PathBuf, PathBuf) {
    let older = run_with(
        runs,
        vec![
            Entry::message(Message::user(
                "please say \"hello wörld\"\nand list C:\\temp\\x",
            )),
            Entry::message(Message::assistant_tool_calls(
                Some("running it".into()),
                vec![ToolCall::function(
                    "c1",
                    "shell",
                    r#"{"cmd":"echo \"hello wörld\""}"#,
                )],
            )),
            Entry::message(Message::tool("c1", "hello wörld\n")),
        ],
    )
    .await
    .0;
    let (newer, key) = run_with(
        runs,
        vec![Entry::message(Message::user(format!(
            "hello wörld again, my key is {SECRET}"
        )))],
    )
    .await;
    let store = create_run_store(&newer);
    let sub = SessionKey::subagent(key.session_id(), "researcher").unwrap();
    store
        .append(
            &sub,
            &[Entry::message(Message::tool(
                "c9",
                "found hello wörld \x1b]0;owned\x07 in a file",
            ))],
        )
        .await
        .unwrap();
    (older, newer)
}

#[tokio::test]
async fn search_finds_what_the_person_typed_in_every_run_and_subagent_newest_first() {
    let sandbox = Sandbox::new();
    let runs = sandbox.runs_dir();
    let (older, newer) = searchable_runs(&runs).await;
    set_title(&older, "Greetings").unwrap();

    let out = sandbox.run(&["search", "hello wörld"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(!out.stdout.contains(SECRET), "{}", out.stdout);
    assert!(!out.stdout.contains('\x1b'), "{:?}", out.stdout);
    insta::assert_snapshot!(mask(
        &out.stdout,
        &[(&older, "RUN-OLDER"), (&newer, "RUN-NEWER")]
    ));

    // Quotes, a newline and backslashes, as typed (escaped on disk).
    let out = sandbox
        .run(&["search", "say \"hello wörld\"\nand list C:\\temp"], "")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(out.stdout.matches("  user: ").count(), 1, "{}", out.stdout);
    assert_contains!(out.stdout, "«say \"hello wörld\" and list C:\\temp»");
    // Inside a tool call's arguments (escaped twice on disk).
    let out = sandbox.run(&["search", "echo \"hello"], "").await;
    assert_contains!(out.stdout, "  assistant: shell «echo \"hello» wörld\"");

    let out = sandbox
        .run(&["search", "hello wörld", "--role", "tool", "--json"], "")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let hits: Vec<Value> = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(hits.len(), 2, "{hits:?}");
    assert_eq!(hits[0]["run"], name(&newer));
    assert_eq!(hits[0]["agent"], "researcher");
    assert_eq!(hits[1]["run"], name(&older));
    assert_eq!(hits[1]["title"], "Greetings");
    for hit in &hits {
        assert_eq!(hit["role"], "tool");
        let snippet = hit["snippet"].as_str().unwrap();
        let start = hit["highlights"][0][0].as_u64().unwrap() as usize;
        let end = hit["highlights"][0][1].as_u64().unwrap() as usize;
        assert_eq!(&snippet[start..end], "hello wörld");
    }

    let out = sandbox
        .run(&["search", "HELLO WÖRLD AGAIN", "--ignore-case"], "")
        .await;
    assert_contains!(out.stdout, "«hello wörld again»");
    let out = sandbox.run(&["search", "HELLO WÖRLD AGAIN"], "").await;
    assert_eq!(out.stdout, "no matches\n");
    // As with grep and rg, nothing found is status 1.
    assert_eq!(out.status, 1, "{}", out.stderr);
    let out = sandbox
        .run(&["search", "HELLO WÖRLD AGAIN", "--json"], "")
        .await;
    assert_eq!((out.status, out.stdout.as_str()), (1, "[]\n"));

    let out = sandbox
        .run(
            &["search", "--regex", r"w\w+ld\s+again", "--role", "user"],
            "",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "«wörld again»");
    assert!(!out.stdout.contains(&name(&older)), "{}", out.stdout);

    let out = sandbox
        .run(&["search", "hello", "--run", "Greetings"], "")
        .await;
    assert!(!out.stdout.contains(&name(&newer)), "{}", out.stdout);
    assert_contains!(out.stdout, &name(&older));

    let out = sandbox.run(&["search", "--regex", "(unclosed"], "").await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "not a valid search pattern");
}

/// The roles of the messages `reprise search --json ARGS` finds.
async fn search_roles(sandbox: &Sandbox, args: &[&str]) -> Vec<String> {
    let mut all = vec!["search", "--json"];
    all.extend_from_slice(args);
    let out = sandbox.run(&all, "").await;
    let hits: Vec<Value> = serde_json::from_str(&out.stdout).unwrap();
    hits.iter()
        .map(|hit| hit["role"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn search_is_smart_case_unless_told_otherwise() {
    let sandbox = Sandbox::new();
    run_with(
        &sandbox.runs_dir(),
        vec![
            Entry::message(Message::user("PINEAPPLE on pizza?")),
            Entry::message(Message::assistant("pineapple juice, rather")),
        ],
    )
    .await;
    // All in lower case: any case.
    assert_eq!(
        search_roles(&sandbox, &["pineapple"]).await,
        ["user", "assistant"]
    );
    // An upper-case letter: that case only.
    assert_eq!(search_roles(&sandbox, &["PINEAPPLE"]).await, ["user"]);
    assert_eq!(
        search_roles(&sandbox, &["Pineapple"]).await,
        Vec::<String>::new()
    );
    // Forced either way; the last of the two flags wins, as with rg.
    assert_eq!(
        search_roles(&sandbox, &["-s", "pineapple"]).await,
        ["assistant"]
    );
    assert_eq!(
        search_roles(&sandbox, &["-i", "Pineapple"]).await,
        ["user", "assistant"]
    );
    assert_eq!(
        search_roles(&sandbox, &["-i", "-s", "PINEAPPLE"]).await,
        ["user"]
    );
    assert_eq!(
        search_roles(
            &sandbox,
            &["--case-sensitive", "--ignore-case", "pineapple"]
        )
        .await,
        ["user", "assistant"]
    );
    // In a regular expression an escape's letter is not an upper-case letter.
    assert_eq!(
        search_roles(&sandbox, &["--regex", r"pineapple\s"]).await,
        ["user", "assistant"]
    );
}

#[tokio::test]
async fn search_shows_the_first_hits_of_each_run_and_says_where_there_are_more() {
    let sandbox = Sandbox::new();
    let runs = sandbox.runs_dir();
    let says = |n: usize| Entry::message(Message::user(format!("lantern number {n}")));
    let three = run_with(&runs, (1..=3).map(says).collect()).await.0;
    let (seven, key) = run_with(&runs, (1..=5).map(says).collect()).await;
    create_run_store(&seven)
        .append(
            &SessionKey::subagent(key.session_id(), "scout").unwrap(),
            &[says(6), says(7)],
        )
        .await
        .unwrap();
    let numbers = |stdout: &str| -> Vec<String> {
        stdout
            .lines()
            .filter_map(|line| line.split("lantern» number ").nth(1))
            .map(str::to_owned)
            .collect()
    };

    // By default three per run, and a line under a run that has more.
    let out = sandbox.run(&["search", "lantern"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(numbers(&out.stdout), ["1", "2", "3", "1", "2", "3"]);
    let more = format!(
        "  … more in this run (--run {} shows every match)",
        name(&seven)
    );
    assert_eq!(
        out.stdout.matches("more in this run").count(),
        1,
        "{}",
        out.stdout
    );
    let lines: Vec<&str> = out.stdout.lines().collect();
    let at = lines.iter().position(|line| *line == more).unwrap();
    assert_eq!(
        lines[at - 1],
        "  user: «lantern» number 3",
        "{}",
        out.stdout
    );
    assert!(lines[at + 2].starts_with(&name(&three)), "{}", out.stdout);

    // One run, --all, --max-per-run.
    let out = sandbox
        .run(&["search", "lantern", "--run", &name(&seven)], "")
        .await;
    assert_eq!(numbers(&out.stdout), ["1", "2", "3", "4", "5", "6", "7"]);
    assert!(!out.stdout.contains("more in this run"), "{}", out.stdout);
    let out = sandbox.run(&["search", "lantern", "--all"], "").await;
    assert_eq!(numbers(&out.stdout).len(), 10, "{}", out.stdout);
    let out = sandbox.run(&["search", "lantern", "-m", "5"], "").await;
    assert_eq!(
        numbers(&out.stdout),
        ["1", "2", "3", "4", "5", "1", "2", "3"]
    );
    assert_contains!(out.stdout, &more);
    let out = sandbox.run(&["search", "lantern", "-m", "0"], "").await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "--max-per-run must be 1 or more");
    let out = sandbox
        .run(&["search", "lantern", "-m", "2", "--all"], "")
        .await;
    assert_ne!(out.status, 0);

    // JSON holds every hit unless limited, and marks a run's last hit kept.
    let out = sandbox.run(&["search", "lantern", "--json"], "").await;
    let hits: Vec<Value> = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(hits.len(), 10);
    assert!(hits.iter().all(|hit| hit["moreInRun"] == false));
    let out = sandbox
        .run(&["search", "lantern", "--json", "-m", "3"], "")
        .await;
    let hits: Vec<Value> = serde_json::from_str(&out.stdout).unwrap();
    let more: Vec<bool> = hits.iter().map(|hit| hit["moreInRun"] == true).collect();
    assert_eq!(more, [false, false, true, false, false, false]);
}

#[tokio::test]
async fn du_lists_runs_largest_first_with_a_total() {
    let sandbox = Sandbox::new();
    let runs = sandbox.runs_dir();
    let small = make_run(&runs, &["hi"]).await;
    let long = "x".repeat(50_000);
    let big = make_run(&runs, &[long.as_str()]).await;
    set_title(&big, "Big one").unwrap();

    let out = sandbox.run(&["du"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(lines[0].starts_with("      SIZE"), "{}", out.stdout);
    assert!(
        lines[1].contains(&name(&big)) && lines[1].contains("Big one"),
        "{}",
        out.stdout
    );
    assert!(lines[2].contains(&name(&small)), "{}", out.stdout);
    assert_contains!(lines[3], "total: 2 runs");

    let out = sandbox.run(&["du", "--json"], "").await;
    let value: Value = serde_json::from_str(&out.stdout).unwrap();
    let sizes: Vec<u64> = value["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| run["bytes"].as_u64().unwrap())
        .collect();
    assert!(sizes[0] > 50_000 && sizes[1] < sizes[0], "{sizes:?}");
    assert_eq!(
        value["runsBytes"].as_u64().unwrap(),
        sizes.iter().sum::<u64>()
    );
    assert!(value["totalBytes"].as_u64().unwrap() >= sizes.iter().sum::<u64>());
    // Nothing was deleted by looking.
    assert!(small.exists() && big.exists());
}

#[tokio::test]
async fn prune_lists_refuses_without_a_terminal_and_never_touches_an_open_run() {
    let sandbox = Sandbox::new();
    let runs = sandbox.runs_dir();
    let fresh = make_run(&runs, &["recent work"]).await;
    let open = old_run(
        &runs,
        "2026-01-01T10-00-00-000Z",
        "2026-01-01T10:00:00Z",
        "old a",
    );
    let stale = old_run(
        &runs,
        "2026-01-02T10-00-00-000Z",
        "2026-01-02T10:00:00Z",
        "old b",
    );
    let staler = old_run(
        &runs,
        "2026-01-03T10-00-00-000Z",
        "2026-01-03T10:00:00Z",
        "old c",
    );
    let all = [&fresh, &open, &stale, &staler];

    let out = sandbox.run(&["prune"], "").await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "--older-than AGE, --keep N, or both");
    // No terminal to ask on, and no --yes: nothing is deleted, even with "y" piped.
    let out = sandbox.run(&["prune", "--older-than", "90d"], "y\n").await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "pass --yes");
    let out = sandbox
        .run(&["prune", "--older-than", "90d", "--dry-run"], "")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "would delete 3 runs");
    assert!(all.iter().all(|dir| dir.exists()));

    // A chat has this one open: it holds the run's writer lock.
    let store = create_run_store(&open);
    let _lock = store.lock("s-2026-01-01t10-00-00-000z").await.unwrap();
    let out = sandbox
        .run(&["prune", "--older-than", "90d", "--yes"], "")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, &format!("deleted {}", name(&stale)));
    assert_contains!(out.stdout, &format!("deleted {}", name(&staler)));
    assert_contains!(out.stdout, &format!("kept {}: open in a chat", name(&open)));
    assert_contains!(out.stdout, "deleted 2 runs");
    assert!(open.exists() && fresh.exists());
    assert!(!stale.exists() && !staler.exists());
    drop(_lock);

    // --keep 1 keeps the newest run only.
    let out = sandbox.run(&["prune", "--keep", "1", "--yes"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(!open.exists() && fresh.exists());
    let out = sandbox.run(&["prune", "--keep", "1", "--yes"], "").await;
    assert_eq!(out.stdout, "no run to delete\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_asks_in_a_terminal_and_a_no_keeps_everything() {
    let sandbox = Sandbox::new();
    let runs = sandbox.runs_dir();
    let old = old_run(
        &runs,
        "2026-01-01T10-00-00-000Z",
        "2026-01-01T10:00:00Z",
        "old",
    );
    let mut pty = sandbox.pty(&["prune", "--older-than", "30d"]);
    pty.wait_text("delete this run? [y/N]").await;
    pty.line("n");
    pty.wait_text("nothing deleted").await;
    assert!(pty.wait_exit().await);
    assert!(old.exists());
    let mut pty = sandbox.pty(&["prune", "--older-than", "30d"]);
    pty.wait_text("delete this run? [y/N]").await;
    pty.line("y");
    pty.wait_text("deleted 1 run").await;
    assert!(pty.wait_exit().await);
    assert!(!old.exists());
}

/// The runs of a runs folder, as the chat reads them.
fn folders(runs_dir: &std::path::Path) -> reprise_runs::FolderCatalog {
    reprise_runs::FolderCatalog::new(runs_dir)
}
