//! The scripted server over real HTTP.

use std::time::Duration;

use reprise_testkit::{Reply, ScriptedCall, ScriptedServer, check_tool_call_pairing};
use serde_json::{Value, json};

fn chat_url(server: &ScriptedServer) -> String {
    format!("{}/chat/completions", server.base_url())
}

async fn post(server: &ScriptedServer, body: Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(chat_url(server))
        .header("authorization", "Bearer test-key")
        .json(&body)
        .send()
        .await
        .unwrap()
}

fn data_payloads(text: &str) -> Vec<String> {
    text.split("\n\n")
        .filter_map(|event| event.strip_prefix("data: "))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn streamed_text_reply_is_split_into_chunks_and_ends_with_done() {
    let server =
        ScriptedServer::start_with([Reply::text("Hello, world").chunk_chars(5).with_usage(3, 4)])
            .await;
    let response = post(
        &server,
        json!({"model": "m1", "stream": true, "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let payloads = data_payloads(&response.text().await.unwrap());
    assert_eq!(payloads.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = payloads[..payloads.len() - 1]
        .iter()
        .map(|p| serde_json::from_str(p).unwrap())
        .collect();
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"].get(0)?["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "Hello, world");
    let pieces = chunks
        .iter()
        .filter(|c| {
            c["choices"]
                .get(0)
                .is_some_and(|ch| ch["delta"]["content"].is_string())
        })
        .count();
    assert_eq!(pieces, 3, "12 chars in pieces of 5");
    assert_eq!(chunks[0]["model"], "m1");
    let finish = chunks
        .iter()
        .find_map(|c| c["choices"].get(0)?["finish_reason"].as_str())
        .unwrap();
    assert_eq!(finish, "stop");
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["total_tokens"], 7);
    let recorded = server.requests();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].header("Authorization"), Some("Bearer test-key"));
    assert_eq!(recorded[0].body["messages"][0]["content"], "hi");
}

#[tokio::test]
async fn streamed_tool_calls_carry_ids_names_and_split_arguments() {
    let server = ScriptedServer::start_with([Reply::tool_calls([
        ScriptedCall::new("call_a", "talk_to", r#"{"who":"smith"}"#),
        ScriptedCall::new("b", "buy", r#"{"item":"torch","qty":2}"#),
    ])])
    .await;
    let response = post(&server, json!({"stream": true, "messages": []})).await;
    let payloads = data_payloads(&response.text().await.unwrap());
    let mut args = [String::new(), String::new()];
    let mut heads = Vec::new();
    for payload in &payloads[..payloads.len() - 1] {
        let chunk: Value = serde_json::from_str(payload).unwrap();
        for call in chunk["choices"][0]["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let index = call["index"].as_u64().unwrap() as usize;
            if let Some(id) = call["id"].as_str() {
                heads.push((
                    index,
                    id.to_owned(),
                    call["function"]["name"].as_str().unwrap().to_owned(),
                ));
            }
            args[index].push_str(call["function"]["arguments"].as_str().unwrap());
        }
    }
    assert_eq!(
        heads,
        vec![
            (0, "call_a".into(), "talk_to".into()),
            (1, "b".into(), "buy".into())
        ]
    );
    assert_eq!(
        args,
        [
            r#"{"who":"smith"}"#.to_owned(),
            r#"{"item":"torch","qty":2}"#.to_owned()
        ]
    );
}

#[tokio::test]
async fn non_streaming_request_gets_one_json_completion() {
    let server = ScriptedServer::start_with([Reply::tool_call("call_1", "f", "{}")
        .with_text("thinking")
        .with_usage(1, 2)])
    .await;
    let response = post(&server, json!({"stream": false, "messages": []})).await;
    assert_eq!(response.headers()["content-type"], "application/json");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "thinking");
    assert_eq!(
        body["choices"][0]["message"]["tool_calls"][0]["function"]["name"],
        "f"
    );
    assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(body["usage"]["prompt_tokens"], 1);
}

#[tokio::test]
async fn error_reply_carries_status_headers_and_message() {
    let server =
        ScriptedServer::start_with(
            [Reply::error(429, "slow down").with_header("Retry-After", "7")],
        )
        .await;
    let response = post(&server, json!({"messages": []})).await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "7");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["message"], "slow down");
}

#[tokio::test]
async fn exhausted_script_answers_418() {
    let server = ScriptedServer::start().await;
    let response = post(&server, json!({"messages": []})).await;
    assert_eq!(response.status(), 418);
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn cut_reply_aborts_the_body_midway() {
    let server =
        ScriptedServer::start_with([Reply::text("Hello there, friend").cut_after(2)]).await;
    let response = post(&server, json!({"stream": true, "messages": []})).await;
    assert_eq!(response.status(), 200);
    let error = response.text().await.unwrap_err();
    assert!(error.is_body() || error.is_decode(), "{error:?}");
}

#[tokio::test]
async fn raw_sse_is_replayed_byte_for_byte() {
    let bytes = std::fs::read(reprise_testkit::testdata(
        "sse/scripted_parallel-tool-calls_whole_no-usage_no-done.sse",
    ))
    .unwrap();
    let server = ScriptedServer::start_with([Reply::raw_sse(bytes.clone())]).await;
    let response = post(&server, json!({"stream": true, "messages": []})).await;
    assert_eq!(response.bytes().await.unwrap().to_vec(), bytes);
}

#[tokio::test]
async fn stalled_reply_pauses_then_completes() {
    let server =
        ScriptedServer::start_with([Reply::text("abc").stall_after(1, Duration::from_millis(50))])
            .await;
    let response = post(&server, json!({"stream": true, "messages": []})).await;
    let text = response.text().await.unwrap();
    assert!(text.ends_with("data: [DONE]\n\n"));
}

#[tokio::test]
async fn models_endpoint_lists_a_model() {
    let server = ScriptedServer::start().await;
    let body: Value = reqwest::get(format!("{}/models", server.base_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["data"][0]["id"], "scripted-model");
}

#[tokio::test]
async fn assert_tool_call_pairing_checks_every_request() {
    let server = ScriptedServer::start_with([Reply::text("a"), Reply::text("b")]).await;
    let good = json!({"messages": [{"role": "user", "content": "x"}]});
    post(&server, good.clone()).await;
    server.assert_tool_call_pairing();
    let bad = json!({"messages": [{"role": "tool", "tool_call_id": "nope", "content": "x"}]});
    post(&server, bad.clone()).await;
    assert!(check_tool_call_pairing(&bad).is_err());
    let outcome = std::panic::catch_unwind(|| server.assert_tool_call_pairing());
    assert!(outcome.is_err());
}
