//! The agent against a real server: llama.cpp's own HTTP server running Gemma 3 270M
//! (installed by scripts/install-test-deps.sh; one server for this test binary). A
//! 270M base model loops on tool calls and never ends a turn by itself, so every
//! request asks for few tokens and every run has a small turn budget. The assertions
//! are about the protocol: calls run, results accepted, ids kept.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use reprise_agent::{Agent, AgentError, AgentEvent, Tool, tool};
use reprise_provider::{OpenAiConfig, OpenAiProvider, Provider};
use reprise_session::{FileSessionStore, Message, SessionStore};
use reprise_testkit::llama::LlamaServer;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const FILE_TEXT: &str = "buy milk";

/// Enough tokens for one whole call (`<tool_call>{"name": "read_file", …}</tool_call>`
/// takes about 20), few enough to keep a request short.
const MAX_TOKENS: u32 = 32;

fn provider() -> Arc<dyn Provider> {
    let server = LlamaServer::shared();
    let config = OpenAiConfig::new(server.model())
        .base_url(server.base_url())
        .body_field("max_tokens", json!(MAX_TOKENS))
        // One attempt: a refused request is an error at once, not a retry.
        .max_attempts(1)
        .request_timeout(Duration::from_secs(300))
        .stream_idle_timeout(Duration::from_secs(300));
    Arc::new(OpenAiProvider::new(config).unwrap())
}

#[derive(Deserialize, JsonSchema)]
struct ReadFile {
    /// The file to read.
    #[allow(dead_code)]
    path: String,
}

/// A `read_file` tool that counts its calls and always returns [`FILE_TEXT`].
fn read_file(calls: Arc<AtomicUsize>) -> Arc<dyn Tool> {
    Arc::new(tool(
        "read_file",
        "Read a file",
        move |_args: ReadFile, _| {
            let calls = calls.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok::<_, String>(FILE_TEXT.to_owned())
            }
        },
    ))
}

async fn agent(
    store: &Arc<FileSessionStore>,
    id: &str,
    calls: &Arc<AtomicUsize>,
    max_turns: usize,
) -> Agent {
    Agent::builder(provider())
        .tools([read_file(calls.clone())])
        .store(store.clone() as Arc<dyn SessionStore>)
        .session_id(id)
        .max_turns(max_turns)
        .build()
        .await
        .unwrap()
}

/// The run ended because the model answered, or because it kept calling tools until
/// the budget ran out; any other error (a refused request above all) fails the test.
fn ended_normally(result: Result<String, AgentError>, max_turns: usize) {
    match result {
        Ok(_) => {}
        Err(AgentError::MaxTurns { max_turns: spent }) => assert_eq!(spent, max_turns),
        Err(error) => panic!(
            "the run failed: {}\n{}",
            reprise_provider::error_chain(&error),
            LlamaServer::shared().diagnosis()
        ),
    }
}

/// Every call of every assistant message is answered by the tool message right after
/// it, and each result is the tool's output.
fn assert_paired(messages: &[Message]) {
    for (position, message) in messages.iter().enumerate() {
        for (offset, call) in message.calls().iter().enumerate() {
            let result = &messages[position + 1 + offset];
            assert_eq!(result.role.as_str(), "tool");
            assert_eq!(result.tool_call_id.as_deref(), Some(call.id.as_str()));
            assert_eq!(result.text(), FILE_TEXT);
        }
    }
}

#[tokio::test]
async fn a_tool_call_is_run_and_the_server_accepts_its_result() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileSessionStore::new(dir.path()));
    let calls = Arc::new(AtomicUsize::new(0));
    // Two turns: the call, then a request that carries its result.
    let mut agent = agent(&store, "tool-round", &calls, 2).await;
    ended_normally(agent.run("What is in the file notes.txt?").await, 2);

    let messages = agent.messages();
    let roles: Vec<&str> = messages.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(roles[..3], ["user", "assistant", "tool"], "{messages:#?}");
    let first = &messages[1].calls()[0];
    assert_eq!(first.function.name, "read_file");
    let arguments: Value = serde_json::from_str(&first.function.arguments).unwrap();
    assert!(arguments.is_object(), "{arguments}");
    assert_paired(messages);
    // The second request carried the result and was answered: its reply is recorded.
    assert_eq!(roles[3], "assistant", "{messages:#?}");
    let tool_messages = roles.iter().filter(|role| **role == "tool").count();
    assert_eq!(calls.load(Ordering::SeqCst), tool_messages);
}

#[tokio::test]
async fn the_session_keeps_the_servers_tool_call_ids_and_resumes_with_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileSessionStore::new(dir.path()));
    let calls = Arc::new(AtomicUsize::new(0));
    // One turn: the model's call is run, then the budget ends the run.
    let mut first = agent(&store, "ids", &calls, 1).await;
    let (sender, mut receiver) = mpsc::unbounded_channel();
    let result = first
        .run_streaming(
            "What is in the file notes.txt?",
            sender,
            CancellationToken::new(),
        )
        .await;
    ended_normally(result, 1);
    let mut streamed = Vec::new();
    while let Some(event) = receiver.recv().await {
        if let AgentEvent::ToolCallStreaming { id, .. } = event {
            streamed.push(id);
        }
    }
    assert!(!streamed.is_empty(), "the model made no tool call");
    drop(first);

    // What the session file holds, read back by a new agent.
    let mut resumed = agent(&store, "ids", &calls, 1).await;
    let stored: Vec<String> = resumed
        .messages()
        .iter()
        .flat_map(|message| message.calls().iter().map(|call| call.id.clone()))
        .collect();
    assert_eq!(
        stored, streamed,
        "the stored ids are the ones the server sent"
    );
    for id in &stored {
        assert_eq!(id.len(), 32, "{id}");
        assert!(id.chars().all(|c| c.is_ascii_alphanumeric()), "{id}");
    }
    assert_paired(resumed.messages());
    let before = resumed.messages().len();

    // The server accepts the history with those calls and results.
    ended_normally(resumed.run("And what else?").await, 1);
    let messages = resumed.messages();
    assert_eq!(messages[before].text(), "And what else?");
    assert_eq!(messages[before + 1].role.as_str(), "assistant");
    assert_paired(messages);
}
