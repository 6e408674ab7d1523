//! Every real transcript in the project's test data, imported into a run folder and
//! resumed against the scripted server: the request it sends must pair every tool
//! call with one result, as a server demands.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use reprise_agent::Agent;
use reprise_import::{Importer, Outcome, SourceTool};
use reprise_provider::{OpenAiConfig, OpenAiProvider};
use reprise_runs::{RunStore, SESSION_JSON};
use reprise_session::{Durability, Role, SessionKey, SessionStore};
use reprise_testkit::{Reply, ScriptedServer, request_messages, testdata, tool_calls_of};
use serde_json::Value;

const MAIN_SESSION: &str = "ef958aa1-0e93-49f0-bb71-150f63befcd1";

/// The Claude Code session with subagents, laid out as Claude Code keeps it:
/// `<session>.jsonl` beside `<session>/subagents/agent-*.jsonl`.
fn claude_layout(root: &Path) -> PathBuf {
    let project = root.join("projects").join("-experiments-worktrees");
    let subagents = project.join(MAIN_SESSION).join("subagents");
    std::fs::create_dir_all(&subagents).unwrap();
    let main = project.join(format!("{MAIN_SESSION}.jsonl"));
    std::fs::copy(
        testdata("claude_code/cc-2.1.114_ef958aa1_main_with_subagents.jsonl"),
        &main,
    )
    .unwrap();
    for ext in ["jsonl", "meta.json"] {
        std::fs::copy(
            testdata(&format!(
                "claude_code/cc-2.1.114_ef958aa1_subagent_agent-a52886dc180afb356.{ext}"
            )),
            subagents.join(format!("agent-a52886dc180afb356.{ext}")),
        )
        .unwrap();
    }
    main
}

/// Every transcript of the test data, the Claude Code one with subagents in its
/// real layout.
fn every_transcript(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![claude_layout(root)];
    for folder in ["claude_code", "codex", "opencode"] {
        let mut found: Vec<PathBuf> = std::fs::read_dir(testdata(folder))
            .unwrap()
            .map(|item| item.unwrap().path())
            .filter(|path| {
                let name = path.file_name().unwrap().to_str().unwrap();
                !name.contains("ef958aa1") && (name.ends_with(".jsonl") || name.ends_with(".json"))
            })
            .collect();
        found.sort();
        files.extend(found);
    }
    files
}

fn session_json(run: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(run.join(SESSION_JSON)).unwrap()).unwrap()
}

async fn resume(server: &ScriptedServer, run: &Path) -> Value {
    let session = session_json(run)["sessionId"].as_str().unwrap().to_owned();
    let config = OpenAiConfig::new("test-model")
        .base_url(server.base_url())
        .api_key("sk-test")
        .max_attempts(1)
        .request_timeout(Duration::from_secs(5));
    let provider = Arc::new(OpenAiProvider::new(config).unwrap());
    let store = Arc::new(RunStore::with_durability(run, Durability::None));
    let mut agent = Agent::builder(provider)
        .system("You are a careful assistant.")
        .store(store)
        .session_id(&session)
        .build()
        .await
        .unwrap();
    agent.run("Where were we?").await.unwrap();
    server.request_bodies().last().cloned().unwrap()
}

#[tokio::test]
async fn every_real_transcript_imports_and_resumes_with_every_call_paired() {
    let source = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let mut importer = Importer::new(runs.path())
        .unwrap()
        .with_durability(Durability::None);
    let files = every_transcript(source.path());
    assert_eq!(files.len(), 8, "{files:?}");
    for file in &files {
        let imported = importer.import_file(file, false).await.unwrap();
        println!(
            "{} [{}] {}: {}",
            file.file_name().unwrap().to_string_lossy(),
            imported.tool.as_str(),
            imported.session_id,
            imported.report
        );
        let Outcome::Created { run } = &imported.outcome else {
            panic!("{file:?}: {:?}", imported.outcome);
        };
        let meta = session_json(run);
        let from = &meta["importedFrom"];
        assert_eq!(from["tool"], imported.tool.as_str());
        assert_eq!(from["sessionId"], imported.session_id.as_str());
        assert_eq!(
            from["path"],
            std::path::absolute(file).unwrap().to_str().unwrap()
        );

        let server =
            ScriptedServer::start_with([Reply::text("We were in the middle of it.")]).await;
        let body = resume(&server, run).await;
        server.assert_tool_call_pairing();
        let messages = request_messages(&body);
        // Every imported message of the main conversation is sent back, plus the
        // system prompt and the new question.
        let store = RunStore::with_durability(run, Durability::None);
        let session = meta["sessionId"].as_str().unwrap();
        let loaded = store
            .load(&SessionKey::session(session).unwrap())
            .await
            .unwrap()
            .unwrap();
        let stored: Vec<_> = loaded
            .entries
            .iter()
            .filter_map(|e| e.as_message())
            .collect();
        let calls: usize = stored.iter().map(|m| m.calls().len()).sum();
        let results = stored.iter().filter(|m| m.role == Role::Tool).count();
        assert_eq!(calls, results, "{file:?}: one result per call");
        assert_eq!(tool_calls_of(&messages).len(), calls, "{file:?}");
        assert_eq!(
            messages.last().unwrap()["content"],
            "Where were we?",
            "{file:?}"
        );
        // A compaction brought in from the other tool is honoured: the messages after
        // it are sent, with its summary; without one, every message is.
        match reprise_session::compacted_tail(&loaded.entries) {
            Some((compaction, start)) => {
                let kept = loaded.entries[start..]
                    .iter()
                    .filter(|e| e.as_message().is_some())
                    .count();
                // `kept` counts the stored answer to the new question, which the
                // request cannot hold; the system prompt makes up for it.
                assert!(
                    messages.len() >= kept && messages.len() < stored.len(),
                    "{file:?}: {} sent, {kept} after the compaction, {} stored",
                    messages.len(),
                    stored.len()
                );
                let summary_sent = messages.iter().take(2).any(|m| {
                    m["content"]
                        .as_str()
                        .is_some_and(|t| t.contains(&compaction.summary))
                });
                assert!(summary_sent, "{file:?}: {messages:#?}");
            }
            None => assert!(
                messages.len() >= stored.len(),
                "{file:?}: {} sent, {} stored",
                messages.len(),
                stored.len()
            ),
        }
        assert!(
            calls > 0 || imported.tool == SourceTool::ClaudeCode,
            "{file:?}: no tool call kept"
        );
    }
}

#[tokio::test]
async fn importing_the_same_files_twice_creates_nothing_new() {
    let source = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let files = every_transcript(source.path());
    let mut first = Importer::new(runs.path())
        .unwrap()
        .with_durability(Durability::None);
    for file in &files {
        assert!(matches!(
            first.import_file(file, false).await.unwrap().outcome,
            Outcome::Created { .. }
        ));
    }
    let count = || std::fs::read_dir(runs.path()).unwrap().count();
    let before = count();
    // A new importer reads what the runs folder already holds.
    let mut second = Importer::new(runs.path()).unwrap();
    for file in &files {
        let outcome = second.import_file(file, false).await.unwrap().outcome;
        assert!(
            matches!(outcome, Outcome::AlreadyImported { .. }),
            "{file:?}: {outcome:?}"
        );
    }
    assert_eq!(count(), before);
}

/// The entries of a run's conversation as JSON.
fn run_entries(run: &Path, file: &str) -> Vec<Value> {
    std::fs::read_to_string(run.join(file))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[tokio::test]
async fn a_session_that_grew_since_its_import_has_its_new_part_appended_to_the_same_run() {
    let whole = std::fs::read(testdata(
        "claude_code/cc-2.0.42_7acd37a8_thinking_queue-ops.jsonl",
    ))
    .unwrap();
    let full = reprise_import::convert(Path::new("s.jsonl"), &whole).unwrap();
    // The session as it was part way: cut where no call waits for its result.
    let line_ends: Vec<usize> = whole
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .map(|(i, _)| i + 1)
        .collect();
    let cut = line_ends[line_ends.len() / 2..]
        .iter()
        .copied()
        .find(|&end| {
            reprise_import::convert(Path::new("s.jsonl"), &whole[..end]).is_ok_and(|part| {
                part.report.interrupted == 0
                    && part.main.len() < full.main.len()
                    && part.main.iter().zip(&full.main).all(|(a, b)| {
                        serde_json::to_value(a).unwrap() == serde_json::to_value(b).unwrap()
                    })
            })
        })
        .expect("a point where the session could have been imported");
    let source = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let file = source
        .path()
        .join("7acd37a8-2745-4b58-a8a9-46164b22ad9e.jsonl");
    std::fs::write(&file, &whole[..cut]).unwrap();
    let mut importer = Importer::new(runs.path())
        .unwrap()
        .with_durability(Durability::None);
    let Outcome::Created { run } = importer.import_file(&file, false).await.unwrap().outcome else {
        panic!("the first import creates a run");
    };
    let first_part = run_entries(&run, "conversation.jsonl");

    std::fs::write(&file, &whole).unwrap();
    // A new importer, as a later `reprise import` is.
    let mut later = Importer::new(runs.path())
        .unwrap()
        .with_durability(Durability::None);
    let dry = later.import_file(&file, true).await.unwrap().outcome;
    assert!(
        matches!(&dry, Outcome::Appended { run: r, dry_run: true, .. } if *r == run),
        "{dry:?}"
    );
    assert_eq!(
        run_entries(&run, "conversation.jsonl"),
        first_part,
        "a dry run wrote"
    );
    let imported = later.import_file(&file, false).await.unwrap();
    let Outcome::Appended {
        run: grown,
        entries,
        dry_run: false,
    } = imported.outcome
    else {
        panic!("{:?}", imported.outcome);
    };
    assert_eq!(grown, run);
    assert_eq!(entries, full.main.len() - first_part.len());
    assert_eq!(std::fs::read_dir(runs.path()).unwrap().count(), 1);
    let all = run_entries(&run, "conversation.jsonl");
    let expected: Vec<Value> = full
        .main
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    assert_eq!(all.len(), expected.len());
    for (had, want) in all.iter().zip(&expected) {
        assert_eq!(had["uuid"], want["uuid"]);
    }
    let meta = session_json(&run);
    assert_eq!(meta["importedFrom"]["entries"], full.main.len());
    // Once more: nothing new.
    let again = Importer::new(runs.path())
        .unwrap()
        .import_file(&file, false)
        .await
        .unwrap()
        .outcome;
    assert!(
        matches!(again, Outcome::AlreadyImported { .. }),
        "{again:?}"
    );
}

#[tokio::test]
async fn a_grown_session_whose_run_went_on_in_reprise_is_imported_anew_and_says_why() {
    let whole = std::fs::read(testdata(
        "claude_code/cc-1.0.51_326189cf_summaries_system.jsonl",
    ))
    .unwrap();
    let source = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let file = source
        .path()
        .join("326189cf-5676-4237-8cde-1ce80aae4a9f.jsonl");
    let half = whole.len() / 2;
    let cut = half + whole[half..].iter().position(|b| *b == b'\n').unwrap() + 1;
    std::fs::write(&file, &whole[..cut]).unwrap();
    let mut importer = Importer::new(runs.path())
        .unwrap()
        .with_durability(Durability::None);
    let Outcome::Created { run } = importer.import_file(&file, false).await.unwrap().outcome else {
        panic!("the first import creates a run");
    };
    // The person resumed the run in reprise and it went on.
    let session = session_json(&run)["sessionId"].as_str().unwrap().to_owned();
    let store = RunStore::with_durability(&run, Durability::None);
    store
        .append(
            &SessionKey::session(&session).unwrap(),
            &[reprise_session::Entry::message(
                reprise_session::Message::user("and now?"),
            )],
        )
        .await
        .unwrap();
    drop(store);
    std::fs::write(&file, &whole).unwrap();
    let imported = Importer::new(runs.path())
        .unwrap()
        .with_durability(Durability::None)
        .import_file(&file, false)
        .await
        .unwrap();
    assert!(
        matches!(imported.outcome, Outcome::Created { .. }),
        "{:?}",
        imported.outcome
    );
    assert!(
        imported
            .not_appended
            .as_deref()
            .is_some_and(|why| why.contains("went on in reprise")),
        "{:?}",
        imported.not_appended
    );
}
