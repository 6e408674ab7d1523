//! The provider against a scripted OpenAI-compatible server, over real HTTP.

use std::time::Duration;

use reprise_message::{Message, ToolCall};
use reprise_provider::{
    ChatRequest, Completion, Generation, OpenAiConfig, OpenAiProvider, Provider, ProviderError,
    StreamEvent, TimeoutPhase, ToolSpec, Usage,
};
use reprise_testkit::{Reply, ScriptedCall, ScriptedServer, unreachable_base_url};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

fn config(base_url: &str) -> OpenAiConfig {
    OpenAiConfig::new("test-model")
        .base_url(base_url)
        .backoff_base(Duration::from_millis(1))
}

fn provider(config: OpenAiConfig) -> OpenAiProvider {
    OpenAiProvider::new(config).unwrap()
}

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::system("You are terse."), Message::user("hello")],
        tools: vec![ToolSpec {
            name: "buy".to_owned(),
            description: "Buy an item".to_owned(),
            parameters: json!({"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}),
        }],
        max_tokens: None,
    }
}

/// Runs one call and returns its result and every event it emitted.
async fn run(provider: &OpenAiProvider) -> (Result<Completion, ProviderError>, Vec<StreamEvent>) {
    let (sender, mut receiver) = mpsc::unbounded_channel();
    let result = provider
        .complete(&request(), Some(&sender), &CancellationToken::new())
        .await;
    drop(sender);
    let mut events = Vec::new();
    while let Some(event) = receiver.recv().await {
        events.push(event);
    }
    (result, events)
}

type CallHandle = tokio::task::JoinHandle<Result<Completion, ProviderError>>;

/// Starts one streaming call in the background; returns it, its events and its token.
fn spawn_call(
    server: &ScriptedServer,
) -> (
    CallHandle,
    mpsc::UnboundedReceiver<StreamEvent>,
    CancellationToken,
) {
    let provider = provider(config(&server.base_url()));
    let cancel = CancellationToken::new();
    let (sender, receiver) = mpsc::unbounded_channel();
    let call = {
        let cancel = cancel.clone();
        tokio::spawn(async move { provider.complete(&request(), Some(&sender), &cancel).await })
    };
    (call, receiver, cancel)
}

/// Cancels a call started by `spawn_call` and asserts it ends with `Cancelled`.
async fn cancel_and_expect_cancelled(call: CallHandle, cancel: &CancellationToken) {
    cancel.cancel();
    let result = call.await.unwrap();
    assert!(
        matches!(result, Err(ProviderError::Cancelled)),
        "{result:?}"
    );
}

fn text_of(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::TextDelta(text) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn retries(events: &[StreamEvent]) -> Vec<(u32, String, Duration)> {
    events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::Retrying {
                attempt,
                reason,
                delay,
            } => Some((*attempt, reason.clone(), *delay)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn streams_text_and_sends_a_well_formed_request() {
    let server =
        ScriptedServer::start_with([Reply::text("Hello there, traveller.").with_usage(11, 6)])
            .await;
    let provider = provider(
        config(&server.base_url())
            .api_key("sk-test-123")
            .header("x-org", "acme")
            .body_field("temperature", json!(0.2)),
    );
    let (result, events) = run(&provider).await;
    let completion = result.unwrap();
    assert_eq!(
        completion.message,
        Message::assistant("Hello there, traveller.")
    );
    assert_eq!(completion.finish_reason.as_deref(), Some("stop"));
    assert_eq!(
        completion.usage,
        Some(Usage {
            prompt_tokens: 11,
            completion_tokens: 6,
            total_tokens: 17,
            cached_tokens: None,
        })
    );
    assert_eq!(text_of(&events), "Hello there, traveller.");
    assert!(
        events
            .iter()
            .filter(|e| matches!(e, StreamEvent::TextDelta(_)))
            .count()
            > 1,
        "text arrives in pieces"
    );
    assert_eq!(
        events.last(),
        Some(&StreamEvent::Usage(completion.usage.unwrap()))
    );

    let recorded = &server.requests()[0];
    assert_eq!(recorded.header("authorization"), Some("Bearer sk-test-123"));
    assert_eq!(recorded.header("x-org"), Some("acme"));
    assert_eq!(
        recorded.body,
        json!({
            "model": "test-model",
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "hello"},
            ],
            "tools": [{"type": "function", "function": {
                "name": "buy",
                "description": "Buy an item",
                "parameters": {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]},
            }}],
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_tokens": reprise_provider::DEFAULT_MAX_TOKENS,
            "temperature": 0.2,
        })
    );
}

#[tokio::test]
async fn generation_settings_are_sent_and_extra_body_is_passed_as_is() {
    let server = ScriptedServer::start_with([Reply::text("a"), Reply::text("b")]).await;
    let generation = Generation {
        max_tokens: Some(64),
        temperature: Some(0.0),
        top_p: Some(0.9),
        seed: Some(42),
        tool_choice: Some(json!("required")),
        parallel_tool_calls: Some(false),
    };
    let provider = provider(
        config(&server.base_url())
            .generation(generation)
            .body_field("top_k", json!(20))
            .body_field("chat_template_kwargs", json!({"enable_thinking": false}))
            .body_field("seed", json!(7)),
    );
    assert_eq!(provider.max_tokens(), Some(64));
    run(&provider).await.0.unwrap();
    let no_tools = ChatRequest {
        messages: vec![Message::user("hi")],
        tools: Vec::new(),
        max_tokens: None,
    };
    provider
        .complete(&no_tools, None, &CancellationToken::new())
        .await
        .unwrap();
    let bodies = server.request_bodies();
    let with_tools = &bodies[0];
    assert_eq!(with_tools["max_tokens"], 64);
    assert_eq!(with_tools["temperature"], 0.0);
    assert_eq!(with_tools["top_p"], 0.9);
    assert_eq!(with_tools["seed"], 7, "extra_body wins over a setting");
    assert_eq!(with_tools["tool_choice"], "required");
    assert_eq!(with_tools["parallel_tool_calls"], false);
    assert_eq!(with_tools["top_k"], 20);
    assert_eq!(
        with_tools["chat_template_kwargs"],
        json!({"enable_thinking": false})
    );
    // Servers refuse tool_choice without tools: it is left out then.
    assert!(bodies[1].get("tool_choice").is_none(), "{}", bodies[1]);
    assert!(bodies[1].get("parallel_tool_calls").is_none());
    assert_eq!(bodies[1]["max_tokens"], 64);
}

#[tokio::test]
async fn extra_body_never_replaces_the_conversation_the_model_or_the_tools() {
    let server = ScriptedServer::start_with([Reply::text("a")]).await;
    let provider = provider(
        config(&server.base_url())
            .body_field("messages", json!([]))
            .body_field("model", json!("other-model"))
            .body_field("tools", json!([]))
            .body_field("stream", json!(false))
            .body_field("top_k", json!(20)),
    );
    run(&provider).await.0.unwrap();
    let body = &server.request_bodies()[0];
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["messages"].as_array().unwrap().len(), 2, "{body}");
    assert_eq!(body["tools"].as_array().unwrap().len(), 1, "{body}");
    assert_eq!(body["stream"], true);
    assert_eq!(body["top_k"], 20);
}

#[tokio::test]
async fn no_max_tokens_sends_none() {
    let server = ScriptedServer::start_with([Reply::text("a")]).await;
    let provider = provider(config(&server.base_url()).max_tokens(None));
    assert_eq!(provider.max_tokens(), None);
    run(&provider).await.0.unwrap();
    assert!(server.request_bodies()[0].get("max_tokens").is_none());
}

#[tokio::test]
async fn a_server_asking_for_max_completion_tokens_gets_it_from_then_on() {
    let server = ScriptedServer::start_with([
        Reply::error(
            400,
            "Unsupported parameter: 'max_tokens' is not supported with this model. \
             Use 'max_completion_tokens' instead.",
        ),
        Reply::text("first"),
        Reply::text("second"),
    ])
    .await;
    let provider = provider(config(&server.base_url()).max_tokens(Some(100)));
    let (result, events) = run(&provider).await;
    assert_eq!(result.unwrap().message.text(), "first");
    assert!(retries(&events).is_empty());
    run(&provider).await.0.unwrap();
    let bodies = server.request_bodies();
    assert_eq!(bodies[0]["max_tokens"], 100);
    for body in &bodies[1..] {
        assert!(body.get("max_tokens").is_none(), "{body}");
        assert_eq!(body["max_completion_tokens"], 100);
    }
}

#[tokio::test]
async fn parallel_tool_calls_come_back_in_index_order_with_whole_arguments() {
    let server = ScriptedServer::start_with([Reply::tool_calls([
        ScriptedCall::new(
            "call_talk",
            "talk_to",
            r#"{"who":"the smith","topic":"echoes"}"#,
        ),
        ScriptedCall::new("id-without-prefix", "buy", r#"{"item":"torch","qty":2}"#),
    ])
    .chunk_chars(3)])
    .await;
    let (result, events) = run(&provider(config(&server.base_url()))).await;
    let completion = result.unwrap();
    assert_eq!(completion.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(
        completion.message,
        Message::assistant_tool_calls(
            None,
            vec![
                ToolCall::function(
                    "call_talk",
                    "talk_to",
                    r#"{"who":"the smith","topic":"echoes"}"#
                ),
                ToolCall::function("id-without-prefix", "buy", r#"{"item":"torch","qty":2}"#),
            ]
        )
    );
    let started: Vec<_> = events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::ToolCallStarted { index, name, .. } => Some((*index, name.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        started,
        vec![(0, "talk_to".to_owned()), (1, "buy".to_owned())]
    );
    // The message serializes back the way servers expect it in the next request.
    let wire = serde_json::to_value(&completion.message).unwrap();
    assert_eq!(wire["content"], Value::Null);
    assert_eq!(wire["tool_calls"][1]["type"], "function");
}

#[tokio::test]
async fn non_streaming_answer_is_read_whole() {
    let server =
        ScriptedServer::start_with([Reply::tool_call("call_1", "buy", r#"{"item":"rope"}"#)
            .with_text("Buying rope.")
            .with_reasoning("The cave is deep.")
            .with_usage(20, 4)])
        .await;
    let (result, events) = run(&provider(config(&server.base_url()).stream(false))).await;
    let completion = result.unwrap();
    assert_eq!(completion.message.text(), "Buying rope.");
    assert_eq!(
        completion.message.calls(),
        &[ToolCall::function("call_1", "buy", r#"{"item":"rope"}"#)]
    );
    assert_eq!(
        completion.message.extra["reasoning_content"],
        "The cave is deep."
    );
    assert_eq!(
        completion.usage,
        Some(Usage {
            prompt_tokens: 20,
            completion_tokens: 4,
            total_tokens: 24,
            cached_tokens: None,
        })
    );
    assert_eq!(text_of(&events), "Buying rope.");
    let body = &server.request_bodies()[0];
    assert_eq!(body["stream"], false);
    assert!(body.get("stream_options").is_none());
}

#[tokio::test]
async fn a_server_that_ignores_stream_true_and_answers_json_is_understood() {
    let server = ScriptedServer::start_with([Reply::json(json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "plain"}, "finish_reason": "stop"}]
    }))])
    .await;
    let (result, _) = run(&provider(config(&server.base_url()))).await;
    assert_eq!(result.unwrap().message, Message::assistant("plain"));
}

#[tokio::test]
async fn a_200_json_error_body_is_retried_with_its_message() {
    let server = ScriptedServer::start_with([
        Reply::json(json!({"error": {"message": "upstream model crashed"}})),
        Reply::text("recovered"),
    ])
    .await;
    let (result, events) = run(&provider(config(&server.base_url()).stream(false))).await;
    assert_eq!(result.unwrap().message.text(), "recovered");
    assert!(
        retries(&events)[0].1.contains("upstream model crashed"),
        "{:?}",
        retries(&events)
    );
}

#[tokio::test]
async fn every_capture_replayed_over_http_gives_its_tool_calls() {
    let dir = reprise_testkit::testdata("sse");
    let cases = [
        (
            "openai_gpt-4o-2024-08-06_parallel-tool-calls_split-args_usage-chunk.sse",
            vec!["GetWeatherArgs", "get_stock_price"],
        ),
        (
            "vllm_llama-3.1-8b-instruct_tool-call_usage-every-chunk.sse",
            vec!["searchGoogle"],
        ),
        (
            "scripted_parallel-tool-calls_whole_no-usage_no-done.sse",
            vec!["run_command", "run_command"],
        ),
        (
            "llamacpp_b7010_gpt-oss-20b_reasoning-content_tool-call.sse",
            vec!["weather"],
        ),
    ];
    for (file, names) in cases {
        let server =
            ScriptedServer::start_with([Reply::raw_sse(std::fs::read(dir.join(file)).unwrap())])
                .await;
        let (result, _) = run(&provider(config(&server.base_url()))).await;
        let completion = result.unwrap_or_else(|error| panic!("{file}: {error}"));
        let got: Vec<_> = completion
            .message
            .calls()
            .iter()
            .map(|call| call.function.name.as_str())
            .collect();
        assert_eq!(got, names, "{file}");
        assert_eq!(server.request_count(), 1, "{file}: no retry needed");
    }
}

#[tokio::test]
async fn rate_limit_with_retry_after_is_honoured_then_succeeds() {
    let server = ScriptedServer::start_with([
        Reply::error(429, "Rate limit reached").with_header("Retry-After", "1"),
        Reply::text("after the wait"),
    ])
    .await;
    let (result, events) = run(&provider(config(&server.base_url()))).await;
    assert_eq!(result.unwrap().message.text(), "after the wait");
    let retries = retries(&events);
    assert_eq!(retries.len(), 1);
    assert_eq!(retries[0].0, 2);
    assert_eq!(
        retries[0].2,
        Duration::from_secs(1),
        "the wait is the server's Retry-After"
    );
    assert!(
        retries[0].1.contains("429") && retries[0].1.contains("Rate limit reached"),
        "{}",
        retries[0].1
    );
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn retry_after_longer_than_the_limit_is_cut_to_the_limit() {
    let server = ScriptedServer::start_with([
        Reply::error(503, "busy").with_header("Retry-After", "3600"),
        Reply::text("ok"),
    ])
    .await;
    let provider = provider(config(&server.base_url()).max_retry_after(Duration::from_millis(20)));
    let (result, events) = run(&provider).await;
    assert_eq!(result.unwrap().message.text(), "ok");
    assert_eq!(retries(&events)[0].2, Duration::from_millis(20));
}

#[tokio::test]
async fn server_error_is_retried_then_succeeds() {
    let server = ScriptedServer::start_with([
        Reply::status(500, "Internal Server Error"),
        Reply::text("fine now"),
    ])
    .await;
    let (result, events) = run(&provider(config(&server.base_url()))).await;
    assert_eq!(result.unwrap().message.text(), "fine now");
    assert_eq!(retries(&events).len(), 1);
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn the_same_server_error_twice_is_not_sent_a_third_time() {
    // llama.cpp's answer to a history holding cut-off arguments.
    let refusal = "Failed to parse tool call arguments as JSON: [json.exception.parse_error.101]";
    let server = ScriptedServer::start_with([
        Reply::error(500, refusal),
        Reply::error(500, refusal),
        Reply::text("must not be asked for"),
    ])
    .await;
    let (result, events) = run(&provider(config(&server.base_url()))).await;
    match result.unwrap_err() {
        ProviderError::RetriesExhausted { attempts, last } => {
            assert_eq!(attempts, 2);
            assert!(
                matches!(*last, ProviderError::Status { status: 500, ref message, .. } if message == refusal),
                "{last}"
            );
        }
        other => panic!("expected RetriesExhausted, got {other}"),
    }
    assert_eq!(retries(&events).len(), 1);
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn conflict_and_timeout_statuses_are_retried() {
    for status in [408u16, 409] {
        let server = ScriptedServer::start_with([
            Reply::error(status, "try later"),
            Reply::text("fine now"),
        ])
        .await;
        let (result, events) = run(&provider(config(&server.base_url()))).await;
        assert_eq!(result.unwrap().message.text(), "fine now", "{status}");
        assert_eq!(retries(&events).len(), 1, "{status}");
    }
}

#[tokio::test]
async fn server_errors_every_time_end_in_retries_exhausted_with_the_last_error() {
    let server =
        ScriptedServer::start_with((0..4).map(|n| Reply::error(502, format!("bad gateway {n}"))))
            .await;
    let (result, events) = run(&provider(config(&server.base_url()))).await;
    match result.unwrap_err() {
        ProviderError::RetriesExhausted { attempts, last } => {
            assert_eq!(attempts, 4);
            assert!(
                matches!(*last, ProviderError::Status { status: 502, ref message, .. } if message == "bad gateway 3"),
                "{last}"
            );
        }
        other => panic!("expected RetriesExhausted, got {other}"),
    }
    assert_eq!(
        retries(&events).iter().map(|r| r.0).collect::<Vec<_>>(),
        vec![2, 3, 4]
    );
    assert_eq!(server.request_count(), 4);
}

#[tokio::test]
async fn a_stream_cut_mid_message_is_retried_and_never_returned() {
    let server = ScriptedServer::start_with([
        Reply::text("The first answer, which dies").cut_after(3),
        Reply::text("The second answer, whole"),
    ])
    .await;
    let (result, events) = run(&provider(config(&server.base_url()))).await;
    assert_eq!(
        result.unwrap().message,
        Message::assistant("The second answer, whole")
    );
    let retries = retries(&events);
    assert_eq!(retries.len(), 1);
    assert!(retries[0].1.contains("cut off"), "{}", retries[0].1);
    // The UI saw the start of the first answer, then the retry, then the second one.
    let retry_at = events
        .iter()
        .position(|e| matches!(e, StreamEvent::Retrying { .. }))
        .unwrap();
    assert!(text_of(&events[..retry_at]).starts_with("The "));
    assert_eq!(text_of(&events[retry_at..]), "The second answer, whole");
}

#[tokio::test]
async fn a_stream_cut_every_time_is_an_error_not_a_message() {
    let server =
        ScriptedServer::start_with((0..3).map(|_| Reply::text("never finished").cut_after(2)))
            .await;
    let (result, _) = run(&provider(config(&server.base_url()).max_attempts(3))).await;
    match result.unwrap_err() {
        ProviderError::RetriesExhausted { attempts: 3, last } => {
            assert!(matches!(*last, ProviderError::StreamCut { .. }), "{last}");
        }
        other => panic!("expected RetriesExhausted after 3 attempts, got {other}"),
    }
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn a_stream_that_ends_cleanly_before_any_finish_reason_counts_as_cut() {
    let partial = r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Half a"},"finish_reason":null}]}"#;
    let server = ScriptedServer::start_with([
        Reply::sse([partial]).without_done(),
        Reply::sse([partial]).without_done(),
    ])
    .await;
    let (result, _) = run(&provider(config(&server.base_url()).max_attempts(2))).await;
    match result.unwrap_err() {
        ProviderError::RetriesExhausted { last, .. } => {
            assert!(matches!(*last, ProviderError::StreamCut { .. }), "{last}")
        }
        other => panic!("expected a cut, got {other}"),
    }
}

#[tokio::test]
async fn an_idle_stream_times_out_once_and_is_not_sent_again() {
    let server = ScriptedServer::start_with([
        Reply::text("stalls after two chunks").stall_after(2, Duration::from_secs(20)),
        Reply::text("must not be asked for"),
    ])
    .await;
    let provider = provider(config(&server.base_url()).stream_idle_timeout(Duration::from_secs(1)));
    let (result, events) = run(&provider).await;
    let error = result.unwrap_err();
    assert!(
        matches!(error, ProviderError::Timeout { after, phase: TimeoutPhase::Idle } if after == Duration::from_secs(1)),
        "{error:?}"
    );
    assert!(error.to_string().contains("next piece"), "{error}");
    assert!(retries(&events).is_empty());
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn a_silent_server_hits_the_request_timeout_once() {
    let server = ScriptedServer::start_with([
        Reply::text("too late").delayed(Duration::from_secs(20)),
        Reply::text("must not be asked for"),
    ])
    .await;
    let provider = provider(config(&server.base_url()).request_timeout(Duration::from_secs(1)));
    let (result, events) = run(&provider).await;
    let error = result.unwrap_err();
    assert!(
        matches!(error, ProviderError::Timeout { after, phase: TimeoutPhase::FirstByte } if after == Duration::from_secs(1)),
        "{error:?}"
    );
    assert!(retries(&events).is_empty());
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn a_stream_whose_first_piece_never_comes_hits_the_request_timeout() {
    // Headers at once, then nothing: the wait for the first piece is the request
    // timeout's, not the (longer, here) idle timeout's.
    let server =
        ScriptedServer::start_with([Reply::text("never").stall_after(0, Duration::from_secs(20))])
            .await;
    let provider = provider(
        config(&server.base_url())
            .request_timeout(Duration::from_secs(1))
            .stream_idle_timeout(Duration::from_secs(15)),
    );
    let (result, _) = run(&provider).await;
    let error = result.unwrap_err();
    assert!(
        matches!(error, ProviderError::Timeout { after, phase: TimeoutPhase::FirstByte } if after == Duration::from_secs(1)),
        "{error:?}"
    );
}

#[test]
fn the_default_timeouts_fail_a_hung_server_within_a_minute() {
    // A hung server costs one request timeout (timeouts are not retried); the
    // stream's idle limit is of the same order.
    let defaults = OpenAiConfig::new("m");
    assert!(defaults.request_timeout < Duration::from_secs(60));
    assert!(defaults.stream_idle_timeout < Duration::from_secs(60));
}

#[tokio::test]
async fn a_malformed_chunk_is_retried_and_reported_clearly_if_it_persists() {
    // Decision: a chunk that is not JSON is treated like a cut (the bytes were
    // damaged or the server glitched), so the call is retried.
    let server = ScriptedServer::start_with([Reply::malformed_chunk(), Reply::text("clean")]).await;
    let (result, events) = run(&provider(config(&server.base_url()))).await;
    assert_eq!(result.unwrap().message.text(), "clean");
    assert!(
        retries(&events)[0].1.contains("not valid JSON"),
        "{:?}",
        retries(&events)
    );

    let server =
        ScriptedServer::start_with([Reply::malformed_chunk(), Reply::malformed_chunk()]).await;
    let (result, _) = run(&provider(config(&server.base_url()).max_attempts(2))).await;
    match result.unwrap_err() {
        ProviderError::RetriesExhausted { attempts: 2, last } => {
            assert!(
                matches!(*last, ProviderError::Malformed { ref what, .. } if what.contains("\"Hel")),
                "{last}"
            );
        }
        other => panic!("expected RetriesExhausted(Malformed), got {other}"),
    }
}

#[tokio::test]
async fn an_error_event_in_the_stream_is_retried() {
    let server = ScriptedServer::start_with([
        Reply::sse([r#"{"error":{"message":"model overloaded","type":"server_error"}}"#]),
        Reply::text("ok"),
    ])
    .await;
    let (result, events) = run(&provider(config(&server.base_url()))).await;
    assert_eq!(result.unwrap().message.text(), "ok");
    assert!(retries(&events)[0].1.contains("model overloaded"));
}

#[tokio::test]
async fn unauthorized_fails_at_once_with_the_servers_message() {
    let server = ScriptedServer::start_with([
        Reply::error(401, "Incorrect API key provided: sk-wrong."),
        Reply::text("must not be reached"),
    ])
    .await;
    let (result, events) = run(&provider(config(&server.base_url()).api_key("sk-wrong"))).await;
    match result.unwrap_err() {
        ProviderError::Status {
            status,
            message,
            url,
        } => {
            assert_eq!(status, 401);
            assert_eq!(message, "Incorrect API key provided: sk-wrong.");
            assert_eq!(url, format!("{}/chat/completions", server.base_url()));
        }
        other => panic!("expected Status, got {other}"),
    }
    assert!(retries(&events).is_empty());
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn other_unfixable_client_errors_fail_at_once_with_the_body_text() {
    for status in [400u16, 403, 404, 405, 410, 413, 422] {
        let server = ScriptedServer::start_with([
            Reply::status(status, format!("plain refusal {status}")),
            Reply::text("no"),
        ])
        .await;
        let (result, _) = run(&provider(config(&server.base_url()))).await;
        assert!(
            matches!(result, Err(ProviderError::Status { status: s, ref message, .. }) if s == status && *message == format!("plain refusal {status}")),
            "{status}: {result:?}"
        );
        assert_eq!(server.request_count(), 1);
    }
}

#[tokio::test]
async fn a_server_rejecting_stream_options_is_asked_again_without_and_remembered() {
    let server = ScriptedServer::start_with([
        Reply::error(
            400,
            "Unrecognized request argument supplied: stream_options",
        ),
        Reply::text("first"),
        Reply::text("second"),
    ])
    .await;
    let provider = provider(config(&server.base_url()));
    let (result, events) = run(&provider).await;
    assert_eq!(result.unwrap().message.text(), "first");
    assert!(retries(&events).is_empty(), "not a fault, no retry event");
    let (result, _) = run(&provider).await;
    assert_eq!(result.unwrap().message.text(), "second");
    let bodies = server.request_bodies();
    assert_eq!(bodies.len(), 3);
    assert_eq!(bodies[0]["stream_options"], json!({"include_usage": true}));
    assert!(bodies[1].get("stream_options").is_none());
    assert!(bodies[2].get("stream_options").is_none());
}

#[tokio::test]
async fn no_server_listening_is_a_connect_error_naming_the_url() {
    let base = unreachable_base_url();
    let (result, events) = run(&provider(config(&base).max_attempts(2))).await;
    match result.unwrap_err() {
        error @ ProviderError::Connect { .. } => {
            let ProviderError::Connect { url, attempts, .. } = &error else {
                unreachable!()
            };
            assert_eq!(*url, format!("{base}/chat/completions"));
            assert_eq!(*attempts, 2);
            assert!(error.to_string().contains("2 attempts"), "{error}");
            let source = std::error::Error::source(&error).expect("the client's error is kept");
            assert!(
                source.downcast_ref::<reqwest::Error>().is_some(),
                "{source:?}"
            );
        }
        other => panic!("expected Connect, got {other}"),
    }
    assert_eq!(retries(&events).len(), 1, "connection failures are retried");
}

#[tokio::test]
async fn cancelling_mid_stream_ends_at_once_with_cancelled() {
    let server = ScriptedServer::start_with([
        Reply::text("a long answer that stalls").stall_after(3, Duration::from_secs(30))
    ])
    .await;
    let (call, mut receiver, cancel) = spawn_call(&server);
    // Wait until text is streaming, then cancel.
    loop {
        match receiver.recv().await {
            Some(StreamEvent::TextDelta(_)) => break,
            Some(_) => continue,
            None => panic!("the call ended before streaming"),
        }
    }
    // Had cancellation not worked, the call would end in 30 s with the whole text.
    cancel_and_expect_cancelled(call, &cancel).await;
}

#[tokio::test]
async fn a_cancelled_token_stops_before_sending() {
    let server = ScriptedServer::start_with([Reply::text("x")]).await;
    let cancel = CancellationToken::new();
    cancel.cancel();
    let result = provider(config(&server.base_url()))
        .complete(&request(), None, &cancel)
        .await;
    assert!(matches!(result, Err(ProviderError::Cancelled)));
    assert_eq!(server.request_count(), 0);
}

#[tokio::test]
async fn bad_configuration_is_refused() {
    assert!(matches!(
        OpenAiProvider::new(OpenAiConfig::new("m").base_url("localhost:11434")),
        Err(ProviderError::Config { .. })
    ));
    assert!(matches!(
        OpenAiProvider::new(OpenAiConfig::new("m").header("bad header", "x")),
        Err(ProviderError::Config { .. })
    ));
    let provider = provider(OpenAiConfig::new("m").base_url("http://127.0.0.1:9/v1/"));
    assert_eq!(provider.url(), "http://127.0.0.1:9/v1/chat/completions");
    assert_eq!(provider.model(), "m");
    let keyed = OpenAiProvider::new(OpenAiConfig::new("m").api_key("sk-do-not-print")).unwrap();
    assert!(!format!("{keyed:?}").contains("sk-do-not-print"));
}

#[tokio::test]
async fn cancelling_while_waiting_to_retry_ends_at_once() {
    let server = ScriptedServer::start_with([
        Reply::error(429, "wait a minute").with_header("Retry-After", "30"),
        Reply::text("must not be reached"),
    ])
    .await;
    let (call, mut receiver, cancel) = spawn_call(&server);
    loop {
        match receiver.recv().await {
            Some(StreamEvent::Retrying { delay, .. }) => {
                assert_eq!(delay, Duration::from_secs(30));
                break;
            }
            Some(_) => continue,
            None => panic!("the call ended without a retry"),
        }
    }
    cancel_and_expect_cancelled(call, &cancel).await;
    assert_eq!(server.request_count(), 1);
}

/// A link of an error chain as a provider error (`RetriesExhausted` holds its last
/// error boxed, so that link is a `Box<ProviderError>`).
fn as_provider_error<'a>(link: &'a (dyn std::error::Error + 'static)) -> Option<&'a ProviderError> {
    link.downcast_ref::<ProviderError>().or_else(|| {
        link.downcast_ref::<Box<ProviderError>>()
            .map(|boxed| &**boxed)
    })
}

/// `error` and the errors under it, outermost first.
fn causes(error: &ProviderError) -> Vec<&(dyn std::error::Error + 'static)> {
    let mut chain: Vec<&(dyn std::error::Error + 'static)> = vec![error];
    while let Some(source) = chain[chain.len() - 1].source() {
        chain.push(source);
    }
    chain
}

#[tokio::test]
async fn a_cut_body_keeps_the_client_error_as_its_source() {
    let server = ScriptedServer::start_with([Reply::text("never finished").cut_after(2)]).await;
    let (result, _) = run(&provider(config(&server.base_url()).max_attempts(1))).await;
    let error = result.unwrap_err();
    let chain = causes(&error);
    let cut = chain
        .iter()
        .position(|e| matches!(as_provider_error(*e), Some(ProviderError::StreamCut { .. })))
        .unwrap_or_else(|| panic!("no StreamCut in {chain:?}"));
    let under = chain
        .get(cut + 1)
        .unwrap_or_else(|| panic!("the cut has no source: {chain:?}"));
    assert!(
        under.downcast_ref::<reqwest::Error>().is_some(),
        "{under:?}"
    );
    // The text says what happened; the client's own text is left to the chain.
    let text = chain[cut].to_string();
    assert!(!text.contains(&under.to_string()), "{text}");
    let whole = reprise_provider::error_chain(&error);
    assert!(whole.contains(&under.to_string()), "{whole}");
}

#[tokio::test]
async fn a_malformed_chunk_keeps_the_json_error_as_its_source() {
    let server = ScriptedServer::start_with([Reply::malformed_chunk()]).await;
    let (result, _) = run(&provider(config(&server.base_url()).max_attempts(1))).await;
    let error = result.unwrap_err();
    let ProviderError::RetriesExhausted { last, .. } = &error else {
        panic!("expected RetriesExhausted, got {error:?}");
    };
    assert!(
        matches!(
            as_provider_error(causes(&error)[1]),
            Some(ProviderError::Malformed { .. })
        ),
        "the last attempt's error is the source of RetriesExhausted"
    );
    assert!(!error.to_string().contains(&last.to_string()), "{error}");
    let json = causes(last)
        .into_iter()
        .find_map(|e| e.downcast_ref::<serde_json::Error>())
        .unwrap_or_else(|| panic!("no serde_json::Error under {last:?}"));
    assert!(!last.to_string().contains(&json.to_string()), "{last}");
}

/// Reads one HTTP/1.1 request (headers, then a body of its Content-Length) from
/// `stream`; `None` when the client closed the connection first.
async fn read_request(stream: &mut tokio::net::TcpStream) -> Option<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .map_or(0, |value| value.trim().parse().unwrap());
            if buffer.len() >= end + 4 + length {
                return Some(buffer);
            }
        }
        let read = stream.read(&mut chunk).await.unwrap();
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
}

/// A whole non-streamed answer saying `text`, kept alive as HTTP/1.1 has it.
fn keep_alive_answer(text: &str) -> Vec<u8> {
    let body = json!({
        "id": "c",
        "object": "chat.completion",
        "model": "test-model",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": "stop"
        }]
    })
    .to_string();
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Keep-Alive: timeout=5, max=100\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// llama.cpp's server advertises keep-alive but closes the connection after a
/// streamed reply; when the next request goes out on it before the close arrives,
/// the server closes it without a word. Here the server reads the second request
/// and then closes: the call is sent again on a new connection, without a retry
/// notice and without using up an attempt (there is only one).
#[tokio::test]
async fn a_kept_alive_connection_the_server_closed_is_replaced_and_the_request_sent_again() {
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let mut requests = 0;
        let (mut first, _) = listener.accept().await.unwrap();
        read_request(&mut first).await.unwrap();
        requests += 1;
        first.write_all(&keep_alive_answer("first")).await.unwrap();
        // The second request comes on the kept-alive connection; it is dropped.
        read_request(&mut first).await.unwrap();
        requests += 1;
        drop(first);
        let (mut second, _) = listener.accept().await.unwrap();
        read_request(&mut second).await.unwrap();
        requests += 1;
        second
            .write_all(&keep_alive_answer("second"))
            .await
            .unwrap();
        second.flush().await.unwrap();
        // Held open until the client has read the answer.
        let _ = read_request(&mut second).await;
        requests
    });
    let provider = provider(
        config(&format!("http://{address}/v1"))
            .stream(false)
            .max_attempts(1),
    );
    let (result, _) = run(&provider).await;
    assert_eq!(result.unwrap().message.text(), "first");
    let (result, events) = run(&provider).await;
    assert_eq!(result.unwrap().message.text(), "second");
    assert!(retries(&events).is_empty(), "{events:?}");
    drop(provider);
    assert_eq!(server.await.unwrap(), 3);
}

#[tokio::test]
async fn a_history_with_large_tool_arguments_is_sent_whole_with_its_length() {
    let server = ScriptedServer::start_with([Reply::text("Done.")]).await;
    let provider = provider(config(&server.base_url()));
    // Arguments of several pieces of the body, full of escapes for the body's
    // encoding to add ("\"", "\\n").
    let content = "line \"quoted\" and \\ slashed\n".repeat(40_000);
    let arguments = json!({ "path": "big.txt", "content": content }).to_string();
    let mut request = request();
    request.messages.extend([
        Message::assistant_tool_calls(
            None,
            vec![ToolCall::function(
                "call_1",
                "write_file",
                arguments.as_str(),
            )],
        ),
        Message::tool("call_1", "wrote big.txt"),
    ]);
    let completion = provider
        .complete(&request, None, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(completion.message, Message::assistant("Done."));
    let expected = provider.request_body(&request).unwrap();
    assert!(expected.len() > 1_000_000, "{}", expected.len());
    let recorded = &server.requests()[0];
    assert_eq!(
        recorded.header("content-length"),
        Some(expected.len().to_string().as_str())
    );
    assert_eq!(
        recorded.body,
        serde_json::from_slice::<Value>(&expected).unwrap()
    );
    assert_eq!(
        recorded.body["messages"][2]["tool_calls"][0]["function"]["arguments"],
        json!(arguments)
    );
}
