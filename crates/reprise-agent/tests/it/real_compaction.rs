//! Compaction against a real server: llama.cpp's own HTTP server with Gemma 3 270M
//! and a 2,048-token window (installed by scripts/install-test-deps.sh). A session
//! of 40 turns whose tool results are a few KB each keeps working past
//! the window; the server never refuses a request as too long; the session resumes
//! with its compaction honoured.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use reprise_agent::tokens::estimate_request;
use reprise_agent::{Agent, AgentError, SUMMARY_HEADING, Tool, tool};
use reprise_provider::{
    ChatRequest, Completion, OpenAiConfig, OpenAiProvider, Provider, ProviderError, StreamEvent,
    error_chain,
};
use reprise_session::{COMPACTION_KIND, FileSessionStore, SessionStore};
use reprise_testkit::llama::LlamaServer;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

const WINDOW: u32 = 2_048;
/// Enough for one whole call (about 25 tokens), few enough to keep the run short.
const MAX_TOKENS: u32 = 32;
const TURNS: usize = 40;

/// What the server was asked and what it counted.
#[derive(Default)]
struct Seen {
    /// (the agent's estimate, the server's `prompt_tokens`) per answered request.
    counted: Vec<(u64, u64)>,
    /// Requests the server refused.
    refused: Vec<String>,
}

/// The real provider, with every request's estimate and real count kept.
struct Counting {
    inner: OpenAiProvider,
    seen: Arc<Mutex<Seen>>,
}

#[async_trait]
impl Provider for Counting {
    async fn complete(
        &self,
        request: &ChatRequest,
        events: Option<&UnboundedSender<StreamEvent>>,
        cancel: &CancellationToken,
    ) -> Result<Completion, ProviderError> {
        let estimate = estimate_request(request);
        let result = self.inner.complete(request, events, cancel).await;
        let mut seen = self.seen.lock().unwrap();
        match &result {
            Ok(completion) => {
                if let Some(usage) = completion.usage {
                    seen.counted.push((estimate, usage.prompt_tokens));
                }
            }
            Err(error) => seen.refused.push(error.to_string()),
        }
        result
    }

    fn model(&self) -> &str {
        self.inner.model()
    }

    fn max_tokens(&self) -> Option<u32> {
        Some(MAX_TOKENS)
    }
}

#[derive(Deserialize, JsonSchema)]
struct ReadFile {
    /// The file to read.
    #[allow(dead_code)]
    path: String,
}

/// A file of about 2.5 KB: numbered lines of a shopping list.
fn file_text() -> String {
    (1..=120)
        .map(|n| format!("item {n}: buy milk\n"))
        .collect::<String>()
}

fn read_file() -> Arc<dyn Tool> {
    Arc::new(tool(
        "read_file",
        "Read a file",
        |_args: ReadFile, _| async move { Ok::<_, String>(file_text()) },
    ))
}

fn provider(server: &LlamaServer, seen: &Arc<Mutex<Seen>>) -> Arc<dyn Provider> {
    provider_with(server, seen, MAX_TOKENS)
}

fn provider_with(
    server: &LlamaServer,
    seen: &Arc<Mutex<Seen>>,
    max_tokens: u32,
) -> Arc<dyn Provider> {
    let config = OpenAiConfig::new(server.model())
        .base_url(server.base_url())
        .body_field("max_tokens", json!(max_tokens))
        .max_attempts(1)
        .request_timeout(Duration::from_secs(300))
        .stream_idle_timeout(Duration::from_secs(300));
    Arc::new(Counting {
        inner: OpenAiProvider::new(config).unwrap(),
        seen: Arc::clone(seen),
    })
}

async fn open_agent(
    server: &LlamaServer,
    seen: &Arc<Mutex<Seen>>,
    store: &Arc<FileSessionStore>,
) -> Agent {
    Agent::builder(provider(server, seen))
        .system("You answer questions about files. Read them with read_file.")
        .tools([read_file()])
        .store(store.clone() as Arc<dyn SessionStore>)
        .session_id("long")
        .context_window(WINDOW)
        // A base model never ends a summary by itself: short ones keep the test quick.
        .summary_max_tokens(MAX_TOKENS)
        // One model call per turn: a 270M base model calls tools again and again,
        // and each call's result is in the next turn's request.
        .max_turns(1)
        .build()
        .await
        .unwrap()
}

fn ended_normally(result: Result<String, AgentError>, server: &LlamaServer) {
    match result {
        Ok(_) | Err(AgentError::MaxTurns { .. }) => {}
        Err(error) => panic!(
            "the run failed: {}\n{}",
            error_chain(&error),
            server.diagnosis()
        ),
    }
}

#[tokio::test]
async fn a_long_session_with_large_tool_results_keeps_working_past_a_small_window() {
    let server = LlamaServer::start(WINDOW).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileSessionStore::new(dir.path()));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut agent = open_agent(&server, &seen, &store).await;
    for turn in 0..TURNS {
        let prompt = format!("Question {turn}: what is in the file list-{turn}.txt?");
        ended_normally(agent.run(prompt).await, &server);
    }
    let history = agent.messages().len();
    let tool_results = agent
        .messages()
        .iter()
        .filter(|m| m.role.as_str() == "tool")
        .count();
    assert!(tool_results >= TURNS / 2, "{tool_results} tool results");
    assert!(
        file_text().len() > 2_000,
        "results of a few KB: {}",
        file_text().len()
    );
    drop(agent);

    let text = std::fs::read_to_string(dir.path().join("long.jsonl")).unwrap();
    let compactions = text
        .lines()
        .filter(|line| line.contains(&format!("\"kind\":\"{COMPACTION_KIND}\"")))
        .count();
    assert!(compactions >= 3, "{compactions} compactions");

    // Resumed after a restart: the summary is sent, the history is whole, and the
    // server takes the next turn.
    let mut resumed = open_agent(&server, &seen, &store).await;
    assert_eq!(resumed.messages().len(), history);
    let view = resumed.model_view().messages.clone();
    assert!(view.len() < history / 4, "{} of {history} sent", view.len());
    assert!(
        view.iter()
            .take(2)
            .any(|m| m.text().contains(SUMMARY_HEADING)),
        "{view:#?}"
    );
    ended_normally(resumed.run("And what was the first item?").await, &server);

    let seen = seen.lock().unwrap();
    assert!(
        seen.refused.is_empty(),
        "refused: {:?}\n{}",
        seen.refused,
        server.diagnosis()
    );
    assert!(
        seen.counted.len() > TURNS,
        "{} requests",
        seen.counted.len()
    );
    for (_, real) in &seen.counted {
        assert!(*real <= u64::from(WINDOW), "a request of {real} tokens");
    }
    let ratios: Vec<f64> = seen
        .counted
        .iter()
        .map(|(estimate, real)| *estimate as f64 / *real as f64)
        .collect();
    let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
    let (low, high) = ratios
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
    println!(
        "estimate / server prompt_tokens over {} requests: mean {mean:.2}, min {low:.2}, max {high:.2}; largest request {} tokens",
        ratios.len(),
        seen.counted.iter().map(|(_, real)| real).max().unwrap()
    );
}

/// How far the byte-based estimate is from llama.cpp's count, on prose, code and a
/// tool result of numbered lines; and the agent's figure, once the server has
/// counted, is the server's count plus a scaled estimate: never below it.
#[tokio::test]
async fn the_estimate_is_compared_with_the_servers_count() {
    let server = LlamaServer::shared();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileSessionStore::new(dir.path()));
    let prose = "The committee met on Tuesday to discuss the budget for next year, and \
                 after a long debate it agreed to fund the library and the park. "
        .repeat(12);
    let code = "fn main() {\n    let xs: Vec<u32> = (0..10).map(|x| x * 2).collect();\n    \
                println!(\"{xs:?}\");\n}\n"
        .repeat(10);
    let mut ratios = Vec::new();
    for (name, text) in [
        ("prose", prose),
        ("code", code),
        ("numbered lines", file_text()),
    ] {
        let mut agent = Agent::builder(provider_with(server, &seen, 1))
            .system("You answer questions.")
            .store(store.clone() as Arc<dyn SessionStore>)
            .session_id(name.replace(' ', "-"))
            .build()
            .await
            .unwrap();
        ended_normally(agent.run(text).await, server);
        let (estimate, real) = *seen.lock().unwrap().counted.last().unwrap();
        assert!(agent.context_used() >= real, "{name}");
        println!("{name}: estimated {estimate}, llama.cpp counted {real}");
        ratios.push(estimate as f64 / real as f64);
    }
    println!("estimate / count: {ratios:.2?}");
}
