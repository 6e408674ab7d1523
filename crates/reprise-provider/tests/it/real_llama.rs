//! Against a real server: llama.cpp's own HTTP server running Gemma 3 270M (installed
//! by scripts/install-test-deps.sh; one server for this test binary). The assertions
//! are about the protocol, never about what the model says.

use std::sync::Arc;
use std::time::Duration;

use reprise_message::{Message, ToolCall};
use reprise_provider::{
    ChatRequest, Completion, OpenAiConfig, OpenAiProvider, Provider, ProviderError, StreamEvent,
    ToolSpec,
};
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
                "the server refused: {}\n{}",
                reprise_provider::error_chain(&error),
                LlamaServer::shared().diagnosis()
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
        max_tokens: None,
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

fn read_file_spec() -> ToolSpec {
    ToolSpec {
        name: "read_file".to_owned(),
        description: "Read a file".to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        }),
    }
}

fn ask_for_a_file(history: Vec<Message>) -> ChatRequest {
    let mut messages = vec![Message::user("What is in the file notes.txt?")];
    messages.extend(history);
    ChatRequest {
        messages,
        tools: vec![read_file_spec()],
        max_tokens: None,
    }
}

#[tokio::test]
async fn a_streamed_tool_call_carries_the_servers_id_and_json_arguments() {
    let provider = provider(32);
    let request = ask_for_a_file(vec![]);
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

/// The shape the chat must cope with: `max_tokens` reached in the middle of a call's
/// arguments. The provider hands it over as a complete message, `length` and all.
#[tokio::test]
async fn a_tool_call_cut_by_max_tokens_arrives_with_length_and_arguments_that_are_not_json() {
    // 13 tokens: `<tool_call>{"name": "read_file", "arguments": {` and no further.
    let provider = provider(13);
    let (completion, _) = complete(provider.as_ref(), &ask_for_a_file(vec![])).await;

    assert_eq!(completion.finish_reason.as_deref(), Some("length"));
    assert_eq!(
        completion.usage.map(|usage| usage.completion_tokens),
        Some(13)
    );
    let calls = completion.message.calls();
    assert_eq!(calls.len(), 1, "{:?}", completion.message);
    assert_eq!(calls[0].function.name, "read_file");
    let arguments = &calls[0].function.arguments;
    assert!(arguments.starts_with('{'), "{arguments:?}");
    assert!(
        serde_json::from_str::<Value>(arguments).is_err(),
        "{arguments:?} is whole"
    );
}

/// Why a cut call must never be sent back as it is: llama.cpp refuses the whole
/// history with a 500, while the same history with whole arguments is answered.
#[tokio::test]
async fn the_server_refuses_a_history_holding_arguments_that_are_not_json() {
    let provider = provider(1);
    let history = |arguments: &str| {
        let call: ToolCall = serde_json::from_value(json!({
            "id": "MCA0i0lu94r5VkAvri9UUtfkHVdpBgI8",
            "type": "function",
            "function": {"name": "read_file", "arguments": arguments},
        }))
        .unwrap();
        vec![
            Message::assistant_tool_calls(None, vec![call]),
            Message::tool("MCA0i0lu94r5VkAvri9UUtfkHVdpBgI8", "buy milk"),
        ]
    };

    let refused = provider
        .complete(
            &ask_for_a_file(history("{")),
            None,
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
    let refusal = match &refused {
        ProviderError::RetriesExhausted { last, .. } => last.as_ref(),
        other => other,
    };
    match refusal {
        ProviderError::Status {
            status, message, ..
        } => {
            assert_eq!(*status, 500, "{message}");
            assert!(
                message.contains("Failed to parse tool call arguments as JSON"),
                "{message}"
            );
        }
        other => panic!("expected the server's 500, got {other}"),
    }

    let answered = complete(
        provider.as_ref(),
        &ask_for_a_file(history(r#"{"path": "notes.txt"}"#)),
    )
    .await
    .0;
    assert_eq!(answered.usage.map(|usage| usage.completion_tokens), Some(1));
}

#[tokio::test]
async fn the_context_window_is_read_from_llama_cpp_props() {
    let server = LlamaServer::shared();
    let found = reprise_provider::discover_context_window(
        &server.base_url(),
        server.model(),
        None,
        Duration::from_secs(5),
    )
    .await
    .expect("llama.cpp says its window");
    assert_eq!(found.tokens, reprise_testkit::llama::SHARED_CTX_SIZE);
    assert_eq!(found.source, "llama.cpp /props");
}

#[tokio::test]
async fn no_server_means_no_window_and_no_wait() {
    let started = std::time::Instant::now();
    let found = reprise_provider::discover_context_window(
        &reprise_testkit::unreachable_base_url(),
        "any",
        None,
        Duration::from_secs(2),
    )
    .await;
    assert_eq!(found, None);
    // Connection refused answers at once; the four lookups run together.
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn a_request_past_the_window_is_refused_as_context_exceeded_and_not_retried() {
    let server = LlamaServer::shared();
    let config = OpenAiConfig::new(server.model())
        .base_url(server.base_url())
        .body_field("max_tokens", json!(8))
        .max_attempts(4)
        .request_timeout(Duration::from_secs(300))
        .stream_idle_timeout(Duration::from_secs(300));
    let provider = OpenAiProvider::new(config).unwrap();
    let request = ChatRequest {
        messages: vec![Message::user("word ".repeat(3 * 4096))],
        tools: Vec::new(),
        max_tokens: None,
    };
    let error = provider
        .complete(&request, None, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(error.is_context_exceeded(), "{error:?}");
    // Refused once, not retried: the error is the server's answer itself.
    assert!(matches!(error, ProviderError::Status { .. }), "{error:?}");
}
