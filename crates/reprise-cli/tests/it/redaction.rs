//! Secrets stay out of every file but the model's history: the whole secret corpus
//! through real chats (prompt echo and replies in `session.log`, `history.jsonl`, the
//! listing's last message) and through `reprise runs`; the API key and `*_TOKEN`
//! variables, which the redactor knows by value, everywhere.

use std::collections::HashMap;
use std::path::Path;

use reprise_redact::{MASK, Redactor};
use reprise_runs::{RunStore, SESSION_JSON};
use reprise_session::Durability;
use reprise_session::{Entry, Message, SessionKey, SessionStore};
use reprise_testkit::secret_corpus::{corpus_cases, masked_pieces};
use reprise_testkit::{Reply, ScriptedServer};
use serde_json::Value;

use crate::support::{Output, Sandbox, jsonl};

/// What the redactor masks in `text` alone, leaving out what the redacted text shows
/// anyway.
fn secrets_of(redactor: &Redactor, text: &str) -> Vec<String> {
    let redacted = redactor.redact(text);
    masked_pieces(text, &redacted, MASK)
        .into_iter()
        .filter(|piece| !redacted.contains(piece.as_str()))
        .collect()
}

/// A corpus case as one chat turn: the prompt (the case on one line, since plain mode
/// reads a prompt per line) and the reply (the case as it is).
struct Turn {
    case: u64,
    prompt: String,
    reply: String,
    /// What the redactor masks in the prompt alone.
    prompt_secrets: Vec<String>,
    /// What it masks in the reply alone.
    reply_secrets: Vec<String>,
}

/// The cases whose prompt or reply holds something the redactor masks.
fn corpus_turns() -> Vec<Turn> {
    let redactor = Redactor::new();
    let turns: Vec<Turn> = corpus_cases()
        .into_iter()
        .filter_map(|case| {
            let prompt = case.text.split_whitespace().collect::<Vec<_>>().join(" ");
            // A line starting with `/` is a slash command, not a message.
            if prompt.is_empty() || (prompt.starts_with('/') && !prompt.starts_with("//")) {
                return None;
            }
            let prompt_secrets = secrets_of(&redactor, &prompt);
            let reply_secrets = secrets_of(&redactor, &case.text);
            (!prompt_secrets.is_empty() || !reply_secrets.is_empty()).then_some(Turn {
                case: case.case,
                prompt,
                reply: case.text,
                prompt_secrets,
                reply_secrets,
            })
        })
        .collect();
    assert!(turns.len() > 550, "only {} cases caught", turns.len());
    turns
}

fn leaks<'a>(secrets: &'a [String], shown: &str) -> Vec<&'a str> {
    secrets
        .iter()
        .map(String::as_str)
        .filter(|secret| shown.contains(secret))
        .collect()
}

/// Sections of `session.log`, one per prompt echo (`› …` line).
fn log_sections(log: &str) -> Vec<String> {
    let mut sections: Vec<String> = Vec::new();
    for line in log.split_inclusive('\n') {
        if line.starts_with("› ") {
            sections.push(String::new());
        }
        if let Some(section) = sections.last_mut() {
            section.push_str(line);
        }
    }
    sections
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chats_of_the_whole_corpus_keep_no_secret_outside_the_conversation() {
    let turns = corpus_turns();
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    let mut leaked = Vec::new();
    // A few chats, each a batch of turns.
    let batches: Vec<&[Turn]> = turns.chunks(turns.len().div_ceil(4)).collect();
    for batch in &batches {
        let before = sandbox.conversations();
        server.push_all(batch.iter().map(|turn| Reply::text(turn.reply.clone())));
        let input: String = batch
            .iter()
            .map(|turn| format!("{}\n", turn.prompt))
            .collect();
        // A window that holds every batch: no compaction takes a scripted reply.
        let out = sandbox
            .chat(&server.base_url(), &["--context-window", "1000000"], &input)
            .await;
        assert_eq!(out.status, 0, "{}", out.stderr);
        assert_eq!(server.remaining(), 0, "every turn was sent");
        let run = sandbox
            .conversations()
            .into_iter()
            .find(|run| !before.contains(run))
            .unwrap();

        let log = std::fs::read_to_string(run.join("session.log")).unwrap();
        let sections = log_sections(&log);
        assert_eq!(sections.len(), batch.len(), "one prompt echo per turn");
        for (turn, section) in batch.iter().zip(&sections) {
            // The prompt echo is the first line; the reply follows.
            let (echo, reply) = section.split_once('\n').unwrap_or((section, ""));
            let mut found = leaks(&turn.prompt_secrets, echo);
            found.extend(leaks(&turn.reply_secrets, reply));
            if !found.is_empty() {
                leaked.push(format!("session.log, case {}: {found:?}", turn.case));
            }
        }

        // The listing's last message: the batch's last prompt.
        let last = batch.last().unwrap();
        for file in [".summary.json", SESSION_JSON] {
            // The last message field (times and hashes vary and are not the text).
            let text = std::fs::read_to_string(run.join(file)).unwrap_or_default();
            let json = text.lines().next().unwrap_or("{}");
            let shown = if json.trim() == "{" {
                // session.json is pretty-printed: the whole file is the object.
                serde_json::from_str::<Value>(&text).unwrap()
            } else {
                serde_json::from_str::<Value>(json).unwrap()
            };
            let shown = shown["lastMessage"].as_str().unwrap_or_default();
            let found = leaks(&last.prompt_secrets, shown);
            if !found.is_empty() {
                leaked.push(format!("{file}, case {}: {found:?}", last.case));
            }
        }
    }
    // history.jsonl: one entry per prompt, in order.
    let history = jsonl(&sandbox.runs_dir().join("history.jsonl"));
    assert_eq!(history.len(), turns.len());
    for (turn, entry) in turns.iter().zip(&history) {
        let found = leaks(&turn.prompt_secrets, entry["text"].as_str().unwrap());
        if !found.is_empty() {
            leaked.push(format!("history.jsonl, case {}: {found:?}", turn.case));
        }
    }
    assert!(
        leaked.is_empty(),
        "{} leaks:\n{}",
        leaked.len(),
        leaked.join("\n")
    );
    // The model got every prompt as typed: the conversation is its history.
    let bodies = server.request_bodies();
    let first_prompt = &bodies[0]["messages"][1]["content"];
    assert_eq!(first_prompt.as_str(), Some(turns[0].prompt.as_str()));
}

#[tokio::test]
async fn runs_output_keeps_no_secret_of_the_corpus() {
    let redactor = Redactor::new();
    let sandbox = Sandbox::new();
    let runs_dir = sandbox.runs_dir();
    std::fs::create_dir_all(&runs_dir).unwrap();
    // One run per caught case, written by the run store as the chat writes it.
    let mut secrets: HashMap<String, (u64, Vec<String>)> = HashMap::new();
    for case in corpus_cases() {
        let found = secrets_of(&redactor, &case.text);
        if found.is_empty() {
            continue;
        }
        let name = format!("2026-01-01T00-00-00-000Z-{}", case.case);
        let store = RunStore::with_durability(runs_dir.join(&name), Durability::None);
        let key = SessionKey::session(&format!("session-{}", case.case)).unwrap();
        store
            .append(&key, &[Entry::message(Message::user(case.text.clone()))])
            .await
            .unwrap();
        secrets.insert(name, (case.case, found));
    }
    assert!(secrets.len() > 550);

    let mut leaked = Vec::new();
    let json = sandbox.run(&["runs", "--json"], "").await;
    assert_eq!(json.status, 0, "{}", json.stderr);
    let rows: Vec<Value> = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(rows.len(), secrets.len());
    for row in &rows {
        let (case, found) = &secrets[row["run"].as_str().unwrap()];
        // The first message (what an untitled run is shown as) is redacted alike.
        for field in ["lastMessage", "firstMessage", "shownAs"] {
            let shown = leaks(found, row[field].as_str().unwrap());
            if !shown.is_empty() {
                leaked.push(format!("runs --json {field}, case {case}: {shown:?}"));
            }
        }
    }
    let table = sandbox.run(&["runs"], "").await;
    assert_eq!(table.status, 0, "{}", table.stderr);
    let lines: Vec<&str> = table.stdout.lines().skip(1).collect();
    assert_eq!(lines.len(), secrets.len());
    for line in lines {
        let name = line.rsplit(' ').next().unwrap();
        let (case, found) = &secrets[name];
        // The message column only: the date beside it changes from run to run.
        let message: String = line.chars().skip(28).take(48).collect();
        let shown = leaks(found, &message);
        if !shown.is_empty() {
            leaked.push(format!("runs, case {case}: {shown:?}"));
        }
    }
    assert!(
        leaked.is_empty(),
        "{} leaks:\n{}",
        leaked.len(),
        leaked.join("\n")
    );
}

/// A chat in plain mode with extra environment variables.
async fn chat_with_env(
    sandbox: &Sandbox,
    args: &[&str],
    env: &[(&str, &str)],
    input: &str,
) -> Output {
    let mut command = sandbox.command(args);
    for (name, value) in env {
        command.env(name, value);
    }
    crate::support::run_command(command, input).await
}

fn files_of(run: &Path) -> Vec<(String, String)> {
    [
        "session.log",
        ".summary.json",
        SESSION_JSON,
        "transcript.jsonl",
    ]
    .iter()
    .map(|file| {
        (
            (*file).to_owned(),
            std::fs::read_to_string(run.join(file)).unwrap_or_default(),
        )
    })
    .collect()
}

#[tokio::test]
async fn the_api_key_and_token_variables_are_masked_by_value_everywhere() {
    // Values no pattern knows: only their exact values identify them.
    let api_key = "plain-words-as-a-key-7731";
    let token = "another-opaque-value-5519";
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    server.push(Reply::text(format!(
        "Your key is {api_key}\nand the token is {token}."
    )));
    let base_url = server.base_url();
    let args = [
        "--plain",
        "--base-url",
        base_url.as_str(),
        "--model",
        "test-model",
        "--api-key-env",
        "REPRISE_TEST_CREDENTIAL",
    ];
    let prompt = format!("remember {api_key} and {token}\n");
    let out = chat_with_env(
        &sandbox,
        &args,
        &[
            ("REPRISE_TEST_CREDENTIAL", api_key),
            ("DEPLOY_SERVICE_TOKEN", token),
        ],
        &prompt,
    )
    .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let run = sandbox.conversations().remove(0);
    let log = std::fs::read_to_string(run.join("session.log")).unwrap();
    assert!(
        log.contains(&format!("› remember {MASK} and {MASK}")),
        "{log}"
    );
    assert!(log.contains(&format!("Your key is {MASK}")), "{log}");
    let mut files = files_of(&run);
    files.push((
        "history.jsonl".into(),
        std::fs::read_to_string(sandbox.runs_dir().join("history.jsonl")).unwrap(),
    ));
    let runs = sandbox.run(&["runs", "--json"], "").await;
    files.push(("reprise runs --json".into(), runs.stdout));
    let runs = sandbox.run(&["runs"], "").await;
    files.push(("reprise runs".into(), runs.stdout));
    for (file, text) in &files {
        assert!(!text.contains(api_key), "the API key in {file}: {text}");
        assert!(!text.contains(token), "the token in {file}: {text}");
    }
    assert!(files[1].1.contains(MASK), "{}", files[1].1);
    // Only the model's history keeps them: a resumed chat sends what the model saw.
    let conversation = std::fs::read_to_string(run.join("conversation.jsonl")).unwrap();
    assert!(conversation.contains(api_key) && conversation.contains(token));
}

#[tokio::test]
async fn the_context_window_cache_is_private_and_keeps_no_password_of_the_url() {
    use std::os::unix::fs::PermissionsExt;
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start_with([Reply::text("hello")]).await;
    server.report_context_window(8_192);
    let base_url = format!("http://bob:hunter2-in-the-url@{}/v1", server.addr());
    let args = [
        "--plain",
        "--base-url",
        base_url.as_str(),
        "--model",
        "scripted-model",
    ];
    let out = sandbox.run(&args, "hi\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let run = sandbox.conversations().remove(0);
    let path = run.join("context-window.json");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    let cached: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(cached["tokens"], 8_192, "{cached}");
    assert_eq!(
        cached["base_url"],
        format!("http://bob:{MASK}@{}/v1", server.addr()),
        "{cached}"
    );
}

#[tokio::test]
async fn an_aws_secret_key_typed_after_its_key_id_stays_out_of_every_file() {
    let key = "Zk3/9xQvR2mT+8bLw4NcY7pH1sJd6fGa0eUoKiVn";
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start_with([Reply::text("noted")]).await;
    let prompt = format!("deploy with AKIAJ3X7QW2ZK5N8RT4Y {key} please\n");
    let out = sandbox.chat(&server.base_url(), &[], &prompt).await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    // Files changed less than a second before a listing are not cached.
    tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
    let runs = sandbox.run(&["runs"], "").await;
    assert_eq!(runs.status, 0, "{}", runs.stderr);
    let run = sandbox.conversations().remove(0);
    let mut files = files_of(&run);
    // The list cache is binary: its text is read as it is, bytes and all.
    for shared in ["history.jsonl", reprise_runs::LIST_CACHE] {
        let bytes = std::fs::read(sandbox.runs_dir().join(shared)).unwrap();
        files.push((
            shared.to_owned(),
            String::from_utf8_lossy(&bytes).into_owned(),
        ));
    }
    files.push(("reprise runs".into(), runs.stdout));
    for (file, text) in &files {
        assert!(!text.contains(key), "the secret key in {file}: {text}");
    }
    let summary = &files[1].1;
    assert!(
        summary.contains(&format!("deploy with {MASK} {MASK} please")),
        "{summary}"
    );
}
