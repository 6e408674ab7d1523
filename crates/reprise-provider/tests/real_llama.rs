//! Against a real server: llama.cpp's own HTTP server running Gemma 3 270M (installed
//! by scripts/install-test-deps.sh; one server for this test binary). The assertions
//! are about the protocol, never about what the model says.

use std::sync::Arc;
use std::time::Duration;

use reprise_provider::{
    ChatRequest, Completion, OpenAiConfig, OpenAiProvider, Provider, StreamEvent, ToolSpec,
};
use reprise_session::Message;
use reprise_testkit::llama::LlamaServer;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A provider for the shared server that asks for at most `max_tokens` tokens: the
/// base model never ends a turn by itself. One attempt, so that an error shows as is.
fn provider(max_tokens: u32) -> Arc<dyn Provider> {
    let server = LlamaServer::shared();
    let config = OpenAiConfig::new(server.model())
        .base_url(server.base_url())
        .body_field("max_tokens", json!(max_tokens))
        .max_attempts(1)
        .request_timeout(Duration::from_secs(300))
        .stream_idle_timeout(Duration::from_secs(300));
    Arc::new(OpenAiProvider::new(config).unwrap())
}

async fn complete(
    provider: &dyn Provider,
    request: &ChatRequest,
) -> (Completion, Vec<StreamEvent>) {
    let (sender, mut receiver) = mpsc::unbounded_channel();
    let completion = provider
        .complete(request, Some(&sender), &CancellationToken::new())
        .await
        .unwrap_or_else(|error| {
            panic!(
                "the server refused: {error} (log: {})",
                LlamaServer::shared().log().display()
            )
        });
    drop(sender);
    let mut events = Vec::new();
    while let Some(event) = receiver.recv().await {
        events.push(event);
    }
    (completion, events)
}

#[tokio::test]
async fn a_streamed_reply_counts_its_usage() {
    let provider = provider(8);
    let request = ChatRequest {
        messages: vec![Message::user("Say hello in one short sentence.")],
        tools: vec![],
    };
    let (completion, events) = complete(provider.as_ref(), &request).await;

    assert_eq!(completion.finish_reason.as_deref(), Some("length"));
    let usage = completion
        .usage
        .expect("llama.cpp reports usage when asked");
    assert_eq!(usage.completion_tokens, 8, "max_tokens was sent and obeyed");
    assert!(usage.prompt_tokens > 0);
    assert_eq!(
        usage.total_tokens,
        usage.prompt_tokens + usage.completion_tokens
    );

    let mut streamed = String::new();
    let mut reported = Vec::new();
    for event in events {
        match event {
            StreamEvent::TextDelta(piece) => streamed.push_str(&piece),
            StreamEvent::Usage(usage) => reported.push(usage),
            other => panic!("a text reply sends no {other:?}"),
        }
    }
    assert!(!streamed.is_empty());
    assert_eq!(streamed, completion.message.text());
    assert_eq!(reported, vec![usage], "usage comes once, at the end");
}

#[tokio::test]
async fn a_streamed_tool_call_carries_the_servers_id_and_json_arguments() {
    let provider = provider(32);
    let request = ChatRequest {
        messages: vec![Message::user("What is in the file notes.txt?")],
        tools: vec![ToolSpec {
            name: "read_file".to_owned(),
            description: "Read a file".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            }),
        }],
    };
    let (completion, events) = complete(provider.as_ref(), &request).await;

    let calls = completion.message.calls();
    assert!(
        !calls.is_empty(),
        "no tool call in {:?}",
        completion.message
    );
    let started: Vec<(usize, String, String)> = events
        .into_iter()
        .filter_map(|event| match event {
            StreamEvent::ToolCallStarted { index, id, name } => Some((index, id, name)),
            _ => None,
        })
        .collect();
    assert_eq!(started.len(), calls.len());
    for (position, (call, (index, id, name))) in calls.iter().zip(&started).enumerate() {
        assert_eq!(*index, position);
        assert_eq!(call.id, *id, "the id is the one the server streamed");
        // llama.cpp's ids: 32 random letters and digits.
        assert_eq!(call.id.len(), 32, "{}", call.id);
        assert!(call.id.chars().all(|c| c.is_ascii_alphanumeric()));
        assert_eq!(call.function.name, *name);
        assert_eq!(call.function.name, "read_file");
        let arguments: Value = serde_json::from_str(&call.function.arguments)
            .unwrap_or_else(|error| panic!("{:?}: {error}", call.function.arguments));
        assert!(arguments.is_object());
    }
}
