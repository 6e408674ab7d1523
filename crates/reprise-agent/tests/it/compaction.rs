//! Compaction: a history longer than the context window is summarised into one
//! entry, the model is sent the summary and the recent messages, every request is
//! one a server accepts, and nothing of the history is lost.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use reprise_agent::tokens::estimate_request;
use reprise_agent::{Agent, AgentError, AgentEvent, SUMMARY_HEADING, Subagent, Tool, tool};
use reprise_provider::{ChatRequest, Completion, Provider, ProviderError, StreamEvent};
use reprise_session::{
    COMPACTION_KIND, Compaction, FileSessionStore, Message, Role, SessionFork, SessionKey,
    SessionStore, ToolCall,
};
use reprise_testkit::{Reply, ScriptedServer, check_tool_call_pairing};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};
use tokio_util::sync::CancellationToken;

use crate::support::body_of;
use crate::support::http::provider_for;

const WINDOW: u32 = 2_048;

/// A model that reads a file for every question, answers once it has the result,
/// and writes a short summary when asked for one. Every request is checked as a
/// server would check it, and kept.
#[derive(Default)]
struct Reader {
    requests: Mutex<Vec<ChatRequest>>,
    summaries: AtomicUsize,
    /// Fail the next summary request with this status and message.
    fail_summary: Mutex<Option<(u16, String)>>,
}

fn is_summary_request(request: &ChatRequest) -> bool {
    request.tools.is_empty()
        && request
            .messages
            .first()
            .is_some_and(|m| m.text().starts_with("You compact a conversation"))
}

#[async_trait]
impl Provider for Reader {
    async fn complete(
        &self,
        request: &ChatRequest,
        _events: Option<&UnboundedSender<StreamEvent>>,
        _cancel: &CancellationToken,
    ) -> Result<Completion, ProviderError> {
        let body = body_of(request);
        if let Err(problem) = check_tool_call_pairing(&body) {
            panic!("a server would refuse this request: {problem}\n{body:#}");
        }
        self.requests.lock().unwrap().push(request.clone());
        let message = if is_summary_request(request) {
            if let Some((status, message)) = self.fail_summary.lock().unwrap().take() {
                return Err(ProviderError::Status {
                    url: "mock".into(),
                    status,
                    message,
                });
            }
            let n = self.summaries.fetch_add(1, Ordering::SeqCst) + 1;
            Message::assistant(format!("summary {n}: the person read many files."))
        } else {
            let last = request.messages.last().unwrap();
            if last.role == Role::Tool {
                Message::assistant(format!("The file says {} bytes.", last.text().len()))
            } else {
                let n = request.messages.len();
                Message::assistant_tool_calls(
                    None,
                    vec![ToolCall::function(
                        format!("call_{n}"),
                        "read_file",
                        r#"{"path":"notes.txt"}"#,
                    )],
                )
            }
        };
        let finish = if message.calls().is_empty() {
            "stop"
        } else {
            "tool_calls"
        };
        Ok(Completion {
            message,
            finish_reason: Some(finish.into()),
            usage: None,
        })
    }

    fn model(&self) -> &str {
        "reader"
    }

    fn max_tokens(&self) -> Option<u32> {
        Some(256)
    }
}

#[derive(Deserialize, JsonSchema)]
struct ReadFile {
    /// The file to read.
    #[allow(dead_code)]
    path: String,
}

/// A tool whose result is a few KB.
fn read_file() -> Arc<dyn Tool> {
    Arc::new(tool(
        "read_file",
        "Read a file",
        |_args: ReadFile, _| async move { Ok::<_, String>("line of the file\n".repeat(200)) },
    ))
}

async fn reader_agent(
    provider: Arc<Reader>,
    store: &Arc<FileSessionStore>,
    id: &str,
) -> Result<Agent, AgentError> {
    Agent::builder(provider)
        .system("You read files.")
        .tools([read_file()])
        .store(store.clone() as Arc<dyn SessionStore>)
        .session_id(id)
        .context_window(WINDOW)
        .build()
        .await
}

fn compactions_in(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|entry| entry["kind"] == COMPACTION_KIND)
        .collect()
}

fn session_file(dir: &std::path::Path, id: &str) -> std::path::PathBuf {
    dir.join(format!("{id}.jsonl"))
}

#[tokio::test]
async fn forty_turns_with_large_tool_results_stay_under_the_window_and_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileSessionStore::new(dir.path()));
    let provider = Arc::new(Reader::default());
    let mut agent = reader_agent(provider.clone(), &store, "long")
        .await
        .unwrap();
    let (events, mut received) = unbounded_channel();
    for turn in 0..40 {
        agent
            .run_streaming(
                format!("question {turn}: what is in notes.txt?"),
                events.clone(),
                CancellationToken::new(),
            )
            .await
            .unwrap();
    }
    drop(events);
    let mut compacted = 0;
    while let Some(event) = received.recv().await {
        if let AgentEvent::Compacted {
            tokens_before,
            tokens_after,
            messages,
            ..
        } = event
        {
            assert!(tokens_after < tokens_before);
            assert!(messages > 0);
            compacted += 1;
        }
    }
    assert!(compacted >= 5, "{compacted} compactions");

    // Every request fits the window by the estimate the agent uses.
    for request in provider.requests.lock().unwrap().iter() {
        let size = estimate_request(request);
        assert!(size <= u64::from(WINDOW), "a request of {size} tokens");
    }
    // Every message is in the session: 40 × (question, call, result, answer).
    assert_eq!(agent.messages().len(), 160);
    let file = session_file(dir.path(), "long");
    let entries = compactions_in(&file);
    assert_eq!(entries.len(), compacted);
    for entry in &entries {
        for field in ["uuid", "ts", "summary", "through"] {
            assert!(entry[field].is_string(), "{field} in {entry}");
        }
        assert!(entry["tokens_before"].is_u64() && entry["tokens_after"].is_u64());
        assert!(entry.get("message").is_none());
    }
    // The file holds each message once: compaction never copies them.
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.matches("question 0: what").count(), 1);

    // The next request starts with the system prompt and the latest summary.
    let view = agent.model_view().messages.clone();
    let latest = entries.last().unwrap()["summary"].as_str().unwrap();
    assert!(view[0].text().starts_with("You read files."));
    assert!(
        view[..2].iter().any(|m| m.text().contains(latest)),
        "{view:#?}"
    );
    assert!(view.len() < 20, "{} messages sent", view.len());

    // A new agent on the same session sends the same thing.
    drop(agent);
    let resumed = reader_agent(provider.clone(), &store, "long")
        .await
        .unwrap();
    assert_eq!(resumed.model_view().messages, view);
    assert_eq!(resumed.messages().len(), 160);
}

#[tokio::test]
async fn the_summary_follows_the_system_prompt_in_a_form_templates_accept() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileSessionStore::new(dir.path()));
    let provider = Arc::new(Reader::default());
    let mut agent = reader_agent(provider.clone(), &store, "roles")
        .await
        .unwrap();
    for turn in 0..12 {
        agent.run(format!("question {turn}")).await.unwrap();
    }
    for request in provider.requests.lock().unwrap().iter() {
        let roles: Vec<&Role> = request.messages.iter().map(|m| &m.role).collect();
        // One system message, first; then never two user or two assistant
        // messages in a row (tool results aside).
        assert_eq!(roles[0], &Role::System);
        assert_eq!(roles.iter().filter(|r| ***r == Role::System).count(), 1);
        for pair in roles[1..].windows(2) {
            if *pair[0] != Role::Tool {
                assert_ne!(pair[0], pair[1], "{roles:?}");
            }
        }
        assert_eq!(roles[1], &Role::User, "{roles:?}");
    }
    let view = &agent.model_view().messages;
    assert!(
        view.iter()
            .take(2)
            .any(|m| m.text().contains(SUMMARY_HEADING)),
        "{view:#?}"
    );
}

#[tokio::test]
async fn a_failed_summary_writes_nothing_and_a_torn_compaction_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileSessionStore::new(dir.path()));
    let provider = Arc::new(Reader::default());
    let mut agent = reader_agent(provider.clone(), &store, "crash")
        .await
        .unwrap();
    // Enough turns to reach the threshold, without a compaction yet.
    let mut turns = 0;
    while provider.summaries.load(Ordering::SeqCst) == 0 {
        *provider.fail_summary.lock().unwrap() = Some((500, "the server went away".into()));
        let result = agent.run(format!("question {turns}")).await;
        turns += 1;
        if result.is_err() {
            break;
        }
        assert!(turns < 40, "never compacted");
    }
    let file = session_file(dir.path(), "crash");
    assert!(compactions_in(&file).is_empty());
    let full_view = agent.model_view().messages.len();
    assert_eq!(full_view, agent.messages().len() + 1);
    drop(agent);

    // A crash while the entry was being written leaves a torn last line.
    let last_uuid = {
        let text = std::fs::read_to_string(&file).unwrap();
        let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        last["uuid"].as_str().unwrap().to_owned()
    };
    let mut torn = serde_json::to_string(
        &Compaction {
            summary: "half of it".into(),
            through: last_uuid.parse().unwrap(),
            tokens_before: 2_000,
            tokens_after: 100,
        }
        .to_entry(),
    )
    .unwrap();
    torn.truncate(torn.len() / 2);
    {
        use std::io::Write;
        let mut handle = std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap();
        handle.write_all(torn.as_bytes()).unwrap();
    }
    let resumed = reader_agent(provider.clone(), &store, "crash")
        .await
        .unwrap();
    assert!(!resumed.load_warnings().is_empty());
    assert!(
        resumed
            .model_view()
            .messages
            .iter()
            .all(|m| !m.text().contains("half of it"))
    );
    assert_eq!(resumed.model_view().messages.len(), full_view);
    // The next run compacts for real.
    drop(resumed);
    let mut resumed = reader_agent(provider.clone(), &store, "crash")
        .await
        .unwrap();
    resumed.run("and now?").await.unwrap();
    assert_eq!(compactions_in(&file).len(), 1);
}

#[tokio::test]
async fn a_fork_before_a_compaction_has_the_full_context_and_one_after_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileSessionStore::new(dir.path()));
    let provider = Arc::new(Reader::default());
    let mut agent = reader_agent(provider.clone(), &store, "source")
        .await
        .unwrap();
    // One turn: under the threshold, so the only compaction is the one asked for.
    agent.run("question 0").await.unwrap();
    let report = agent
        .compact(Some("the file names"), None, CancellationToken::new())
        .await
        .unwrap()
        .expect("something to compact");
    let summary_request = provider.requests.lock().unwrap().last().unwrap().clone();
    assert!(
        summary_request.messages[0]
            .text()
            .contains("Keep in particular: the file names")
    );
    agent.run("question 1").await.unwrap();
    let loaded = store
        .load(&SessionKey::session("source").unwrap())
        .await
        .unwrap()
        .unwrap();
    let at = loaded
        .entries
        .iter()
        .position(|entry| entry.uuid == report.uuid)
        .unwrap();
    let before = loaded.entries[at - 1].uuid;

    store
        .fork(SessionFork::up_to("source", "before", before))
        .await
        .unwrap();
    store
        .fork(SessionFork::whole("source", "after"))
        .await
        .unwrap();
    let before = reader_agent(provider.clone(), &store, "before")
        .await
        .unwrap();
    let view = &before.model_view().messages;
    assert_eq!(view.len(), before.messages().len() + 1);
    assert!(view.iter().all(|m| !m.text().contains(SUMMARY_HEADING)));
    let after = reader_agent(provider.clone(), &store, "after")
        .await
        .unwrap();
    assert_eq!(after.model_view().messages, agent.model_view().messages);
    assert!(after.model_view().messages.len() < after.messages().len());
}

#[tokio::test]
async fn too_little_history_is_not_compacted() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileSessionStore::new(dir.path()));
    let provider = Arc::new(Reader::default());
    let mut agent = reader_agent(provider.clone(), &store, "short")
        .await
        .unwrap();
    let none = agent
        .compact(None, None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(none, None);
    assert!(provider.requests.lock().unwrap().is_empty());
    // One question and its answer: asked for, still nothing worth a summary.
    let server = ScriptedServer::start_with([Reply::text("hello")]).await;
    let mut agent = scripted_agent(&server, &store, "one-exchange", 1).await;
    agent.run("hi").await.unwrap();
    let none = agent
        .compact(None, None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(none, None);
    assert_eq!(server.request_count(), 1);
}

const LLAMA_EXCEEDED: &str = r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}}"#;

async fn scripted_agent(
    server: &ScriptedServer,
    store: &Arc<FileSessionStore>,
    id: &str,
    attempts: u32,
) -> Agent {
    Agent::builder(provider_for(server, attempts))
        .system("You help.")
        .store(store.clone() as Arc<dyn SessionStore>)
        .session_id(id)
        .build()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_context_exceeded_answer_compacts_once_and_retries_once() {
    for (status, body) in [
        (400, LLAMA_EXCEEDED.to_owned()),
        (
            400,
            r#"{"object":"error","message":"This model's maximum context length is 8192 tokens. However, you requested 9000 tokens.","type":"BadRequestError","code":400}"#.to_owned(),
        ),
        (
            400,
            r#"{"error":{"message":"Too long.","type":"invalid_request_error","code":"context_length_exceeded"}}"#.to_owned(),
        ),
        (400, "prompt too long for the context".to_owned()),
        (500, LLAMA_EXCEEDED.to_owned()),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(FileSessionStore::new(dir.path()));
        let server = ScriptedServer::start_with([
            Reply::text("first answer"),
            Reply::text("second answer"),
            Reply::status(status, body.clone()),
            Reply::text("they talked twice"),
            Reply::text("third answer"),
        ])
        .await;
        // Four attempts allowed: the refusal must not be retried blindly.
        let mut agent = scripted_agent(&server, &store, "exceeded", 4).await;
        agent.run("one ".repeat(200)).await.unwrap();
        agent.run("two ".repeat(200)).await.unwrap();
        let answer = agent.run("three").await.unwrap();
        assert_eq!(answer, "third answer", "{body}");
        assert_eq!(server.request_count(), 5, "{body}");
        server.assert_tool_call_pairing();
        let bodies = server.request_bodies();
        let refused = serde_json::to_string(&bodies[2]).unwrap();
        let retried = serde_json::to_string(&bodies[4]).unwrap();
        assert!(retried.len() < refused.len(), "{body}");
        assert!(retried.contains("they talked twice"));
        assert!(retried.contains("three"));
        assert_eq!(
            compactions_in(&session_file(dir.path(), "exceeded")).len(),
            1
        );
    }
}

#[tokio::test]
async fn a_second_refusal_after_the_compaction_fails_the_turn() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileSessionStore::new(dir.path()));
    let server = ScriptedServer::start_with([
        Reply::text("first answer"),
        Reply::status(400, LLAMA_EXCEEDED),
        Reply::text("they talked"),
        Reply::status(400, LLAMA_EXCEEDED),
        Reply::text("never sent"),
    ])
    .await;
    let mut agent = scripted_agent(&server, &store, "twice", 4).await;
    agent.run("one").await.unwrap();
    let error = agent.run("two").await.unwrap_err();
    match &error {
        AgentError::Provider(inner) => assert!(inner.is_context_exceeded(), "{error}"),
        other => panic!("{other}"),
    }
    assert_eq!(server.request_count(), 4);
    // The prompt is kept, and the next turn works.
    assert_eq!(agent.messages().last().unwrap().text(), "two");
}

#[tokio::test]
async fn a_refusal_with_nothing_to_compact_fails_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileSessionStore::new(dir.path()));
    let server = ScriptedServer::start_with([Reply::status(400, LLAMA_EXCEEDED)]).await;
    let mut agent = scripted_agent(&server, &store, "alone", 4).await;
    let error = agent.run("x".repeat(50_000)).await.unwrap_err();
    assert!(matches!(error, AgentError::Provider(ref e) if e.is_context_exceeded()));
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn a_subagent_compacts_its_own_transcript() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileSessionStore::new(dir.path()));
    let provider = Arc::new(SubagentScript::default());
    let mut agent = Agent::builder(provider.clone())
        .system("You delegate.")
        .subagent(Subagent::new("scout", "Reads files", "You read files.").tools([read_file()]))
        .store(store.clone() as Arc<dyn SessionStore>)
        .session_id("parent")
        .context_window(WINDOW)
        .build()
        .await
        .unwrap();
    for turn in 0..12 {
        agent.run(format!("task {turn}")).await.unwrap();
    }
    let child = dir
        .path()
        .join("parent")
        .join("subagents")
        .join("scout.jsonl");
    let child = if child.exists() {
        child
    } else {
        find_file(dir.path(), "scout.jsonl")
    };
    assert!(!compactions_in(&child).is_empty());
    assert_eq!(
        agent.subagent_messages("scout").await.unwrap().len(),
        12 * 4
    );
}

fn find_file(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    for entry in walk(dir) {
        if entry.file_name().is_some_and(|n| n == name) {
            return entry;
        }
    }
    panic!("no {name} under {}", dir.display());
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// The parent hands each task to the scout; the scout reads a file and answers.
#[derive(Default)]
struct SubagentScript {
    inner: Reader,
}

#[async_trait]
impl Provider for SubagentScript {
    async fn complete(
        &self,
        request: &ChatRequest,
        events: Option<&UnboundedSender<StreamEvent>>,
        cancel: &CancellationToken,
    ) -> Result<Completion, ProviderError> {
        let parent = request.messages[0].text().starts_with("You delegate.");
        if !parent {
            return self.inner.complete(request, events, cancel).await;
        }
        let last = request.messages.last().unwrap();
        let message = if last.role == Role::Tool {
            Message::assistant("done")
        } else {
            Message::assistant_tool_calls(
                None,
                vec![ToolCall::function(
                    format!("task_{}", request.messages.len()),
                    "scout",
                    r#"{"task":"read notes.txt"}"#,
                )],
            )
        };
        Ok(Completion {
            message,
            finish_reason: None,
            usage: None,
        })
    }

    fn model(&self) -> &str {
        "script"
    }
}

#[tokio::test]
async fn a_summary_cut_off_mid_stream_writes_nothing_and_the_next_turn_compacts() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileSessionStore::new(dir.path()));
    let server = ScriptedServer::start_with([
        Reply::text("first answer"),
        Reply::status(400, LLAMA_EXCEEDED),
        // The summary's stream dies: as if the process had been killed there.
        Reply::text("a summary that never ends").cut_after(1),
    ])
    .await;
    let mut agent = scripted_agent(&server, &store, "cut", 1).await;
    agent.run("one").await.unwrap();
    let error = agent.run("two").await.unwrap_err();
    assert!(matches!(error, AgentError::Provider(_)), "{error}");
    let file = session_file(dir.path(), "cut");
    assert!(compactions_in(&file).is_empty());
    let before = agent.model_view().messages.len();
    assert_eq!(before, agent.messages().len() + 1);

    server.push_all([
        Reply::status(400, LLAMA_EXCEEDED),
        Reply::text("they talked"),
        Reply::text("second answer"),
    ]);
    assert_eq!(agent.run("three").await.unwrap(), "second answer");
    assert_eq!(compactions_in(&file).len(), 1);
    server.assert_tool_call_pairing();
    // The file only grew: every message once, the compaction once.
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.matches("\"one\"").count(), 1);
}

#[tokio::test]
async fn the_servers_count_is_used_and_scales_the_estimate_of_what_came_after() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileSessionStore::new(dir.path()));
    // The server counts far more tokens than the bytes suggest (digits, symbols).
    let server = ScriptedServer::start_with([Reply::text("an answer").with_usage(10_000, 3)]).await;
    let mut agent = scripted_agent(&server, &store, "scaled", 1).await;
    agent.run("hi").await.unwrap();
    let reply = agent.model_view().messages.last().unwrap().clone();
    let reply_estimate = reprise_agent::tokens::estimate_message(&reply);
    // The ratio is capped at 4 real tokens per estimated one.
    assert_eq!(agent.context_used(), 10_000 + 4 * reply_estimate);
}

#[tokio::test]
async fn a_compaction_records_its_summary_calls_counts_and_the_totals_include_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileSessionStore::new(dir.path()));
    let server = ScriptedServer::start_with([
        Reply::text("first answer").with_usage(50, 4),
        Reply::text("second answer").with_usage(70, 3),
        Reply::text("they talked twice").with_usage(90, 8),
    ])
    .await;
    let mut agent = scripted_agent(&server, &store, "counted", 1).await;
    agent.run("one").await.unwrap();
    agent.run("two").await.unwrap();
    let (events_tx, mut events_rx) = tokio::sync::mpsc::unbounded_channel();
    let report = agent
        .compact(None, Some(events_tx.into()), CancellationToken::new())
        .await
        .unwrap();
    assert!(report.is_some());
    let mut reported = Vec::new();
    while let Ok(event) = events_rx.try_recv() {
        if let AgentEvent::Usage { usage, .. } = event {
            reported.push((usage.prompt_tokens, usage.completion_tokens));
        }
    }
    assert_eq!(
        reported,
        [(90, 8)],
        "the summary call's counts are reported"
    );
    let compactions = compactions_in(&session_file(dir.path(), "counted"));
    assert_eq!(compactions.len(), 1);
    assert_eq!(compactions[0]["usage"]["prompt_tokens"], 90);
    assert_eq!(compactions[0]["usage"]["completion_tokens"], 8);
    drop(agent);
    let reopened = scripted_agent(&server, &store, "counted", 1).await;
    let totals = reopened.usage_totals().await.unwrap();
    assert_eq!((totals.prompt_tokens, totals.completion_tokens), (210, 15));
}

#[tokio::test]
async fn the_totals_keep_the_calls_of_what_a_rewind_took_out_of_view() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileSessionStore::new(dir.path()));
    let server = ScriptedServer::start_with([
        Reply::text("first answer").with_usage(50, 4),
        Reply::text("second answer").with_usage(70, 3),
    ])
    .await;
    let mut agent = scripted_agent(&server, &store, "rewound", 1).await;
    agent.run("one").await.unwrap();
    agent.run("two").await.unwrap();
    let live = agent.usage_totals().await.unwrap();
    let second = agent
        .entries()
        .iter()
        .find(|entry| entry.as_message().is_some_and(|m| m.text() == "two"))
        .unwrap()
        .uuid;
    drop(agent);
    let rewind = reprise_session::Rewind {
        to: Some(second),
        files: None,
        undo: None,
        undoes: None,
    }
    .to_entry();
    let key = SessionKey::session("rewound").unwrap();
    store.append(&key, &[rewind]).await.unwrap();
    let reopened = scripted_agent(&server, &store, "rewound", 1).await;
    assert!(
        reopened.entries().iter().all(|entry| entry
            .as_message()
            .is_none_or(|m| m.text() != "second answer")),
        "the rewound reply is out of the model's view"
    );
    let totals = reopened.usage_totals().await.unwrap();
    assert_eq!(
        (totals.prompt_tokens, totals.completion_tokens),
        (live.prompt_tokens, live.completion_tokens)
    );
    assert_eq!((totals.prompt_tokens, totals.completion_tokens), (120, 7));
}

#[tokio::test]
async fn the_size_of_the_next_request_is_the_same_before_and_after_the_request_is_built() {
    use reprise_session::Entry;
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileSessionStore::new(dir.path()));
    let key = SessionKey::session("sized").unwrap();
    let old = Entry::message(Message::user("an old question ".repeat(40)));
    let compaction = Compaction {
        summary: "They asked an old question.".to_owned(),
        through: old.uuid,
        tokens_before: 500,
        tokens_after: 40,
    };
    let calls = Message::assistant_tool_calls(
        Some("looking".to_owned()),
        vec![
            ToolCall::function("c1", "read_file", r#"{"path":"a"}"#),
            // Left without a result: the view answers it as interrupted.
            ToolCall::function("c2", "read_file", r#"{"path":"b"}"#),
        ],
    );
    let entries = [
        old,
        Entry::message(Message::assistant("an old answer ".repeat(40))),
        compaction.to_entry(),
        Entry::message(Message::assistant("after the summary, the assistant first")),
        Entry::message(Message::user("read them")),
        Entry::message(calls),
        Entry::message(Message::tool("c1", "contents of a ".repeat(30))),
        Entry::message(Message::user("and now?")),
    ];
    store.append(&key, &entries).await.unwrap();
    for system in [false, true] {
        let mut builder = Agent::builder(Arc::new(NeverCalled) as Arc<dyn Provider>)
            .tools([read_file()])
            .store(store.clone() as Arc<dyn SessionStore>)
            .session_id("sized");
        if system {
            builder = builder.system("You help.");
        }
        let agent = builder.build().await.unwrap();
        let unbuilt = agent.context_used();
        let built = estimate_request(agent.model_view());
        assert_eq!(unbuilt, built, "with a system prompt: {system}");
        assert_eq!(agent.context_used(), built);
    }
}

/// A resumed session's next request is sized as a live one's: the server's count
/// of the last request (its reply's `usage`) plus an estimate of what came after,
/// before and after the request is built; a count from before a compaction is not
/// taken, since that request held what the summary replaced.
#[tokio::test]
async fn a_resumed_session_counts_from_the_last_reply_s_usage() {
    use reprise_agent::tokens::estimate_messages;
    use reprise_session::{Entry, TokenCounts};
    let counted = |text: &str, prompt_tokens: u64| {
        let mut entry = Entry::message(Message::assistant(text));
        entry.usage = Some(
            TokenCounts {
                prompt_tokens,
                completion_tokens: 20,
                total_tokens: prompt_tokens + 20,
            }
            .into(),
        );
        entry
    };
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileSessionStore::new(dir.path()));
    let open = |id: &'static str| {
        let store = store.clone();
        async move {
            Agent::builder(Arc::new(NeverCalled) as Arc<dyn Provider>)
                .store(store as Arc<dyn SessionStore>)
                .session_id(id)
                .build()
                .await
                .unwrap()
        }
    };

    let key = SessionKey::session("counted").unwrap();
    let reply = counted("the answer", 9_000);
    let after = Message::user("and then? ".repeat(30));
    let entries = [
        Entry::message(Message::user("a question ".repeat(50))),
        counted("an early answer", 4_000),
        Entry::message(Message::user("another")),
        reply.clone(),
        Entry::message(after.clone()),
    ];
    store.append(&key, &entries).await.unwrap();
    let agent = open("counted").await;
    let expected = 9_000 + estimate_messages(&[reply.message.clone().unwrap(), after.clone()]);
    assert_eq!(agent.context_used(), expected);
    // Far below the whole history's estimate would be wrong: the count is the server's.
    assert!(expected > estimate_request(agent.model_view()));
    assert_eq!(
        agent.context_used(),
        expected,
        "the same once the request is built"
    );

    let key = SessionKey::session("compacted").unwrap();
    let old = Entry::message(Message::user("an old question ".repeat(40)));
    let compaction = Compaction {
        summary: "They asked an old question.".to_owned(),
        through: old.uuid,
        tokens_before: 500,
        tokens_after: 40,
    };
    let entries = [
        old,
        counted("an old answer, after a long request", 90_000),
        compaction.to_entry(),
        Entry::message(Message::user("go on")),
    ];
    store.append(&key, &entries).await.unwrap();
    let agent = open("compacted").await;
    assert_eq!(agent.context_used(), estimate_request(agent.model_view()));
}

/// A provider for tests that make no model call.
struct NeverCalled;

#[async_trait]
impl Provider for NeverCalled {
    async fn complete(
        &self,
        _request: &ChatRequest,
        _events: Option<&UnboundedSender<StreamEvent>>,
        _cancel: &CancellationToken,
    ) -> Result<Completion, ProviderError> {
        panic!("no model call was expected")
    }

    fn model(&self) -> &str {
        "never"
    }

    fn max_tokens(&self) -> Option<u32> {
        None
    }
}

#[tokio::test]
async fn a_summary_is_asked_for_with_its_own_limit_and_a_cut_one_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileSessionStore::new(dir.path()));
    let server = ScriptedServer::start_with([
        Reply::text("first answer"),
        Reply::text("second answer"),
        // The summary runs into the limit it was sent with.
        Reply::text("they talked about").with_finish_reason("length"),
    ])
    .await;
    let config = reprise_provider::OpenAiConfig::new("test-model")
        .base_url(server.base_url())
        .max_tokens(Some(16))
        .max_attempts(1);
    let provider = Arc::new(reprise_provider::OpenAiProvider::new(config).unwrap());
    let mut agent = Agent::builder(provider)
        .system("You help.")
        .store(store.clone() as Arc<dyn SessionStore>)
        .session_id("limited")
        .context_window(WINDOW)
        .build()
        .await
        .unwrap();
    agent.run("one").await.unwrap();
    agent.run("two").await.unwrap();
    let (events_tx, mut events_rx) = tokio::sync::mpsc::unbounded_channel();
    agent
        .compact(None, Some(events_tx.into()), CancellationToken::new())
        .await
        .unwrap()
        .unwrap();
    let bodies = server.request_bodies();
    // The chat's replies are capped at 16 tokens; the summary is not held to that.
    assert_eq!(bodies[0]["max_tokens"], 16);
    let summary_limit = bodies[2]["max_tokens"].as_u64().unwrap();
    assert!(summary_limit > 16, "{}", bodies[2]);
    assert!(summary_limit <= u64::from(WINDOW / 4), "{}", bodies[2]);
    let mut events = Vec::new();
    while let Ok(event) = events_rx.try_recv() {
        events.push(event);
    }
    let compacted = events
        .iter()
        .position(|event| matches!(event, AgentEvent::Compacted { .. }))
        .expect("compacted");
    let cut = events
        .iter()
        .position(|event| {
            matches!(event, AgentEvent::SummaryCutOff { max_tokens, .. }
                if u64::from(*max_tokens) == summary_limit)
        })
        .unwrap_or_else(|| panic!("no SummaryCutOff: {events:#?}"));
    assert!(compacted < cut);
}
