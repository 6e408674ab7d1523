//! Replies cut at `max_tokens`, generation settings and timeouts, end to end: the
//! binary in plain mode against a scripted server.

use std::time::Duration;

use crate::support::{Sandbox, jsonl};
use reprise_testkit::assert_contains;
use reprise_testkit::{Reply, ScriptedServer};
use serde_json::json;

fn write_config(sandbox: &Sandbox, text: &str) {
    let dir = sandbox.path().join("xdg/reprise");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

/// Every tool call's arguments in a request body.
fn sent_arguments(body: &serde_json::Value) -> Vec<String> {
    reprise_testkit::tool_calls_of(&reprise_testkit::request_messages(body))
        .iter()
        .map(|call| call["function"]["arguments"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_tool_call_cut_at_max_tokens_is_not_offered_and_continue_is_accepted() {
    let sandbox = Sandbox::new();
    // No --yes: a question would read the next line; none must be asked.
    let server = ScriptedServer::start_with([
        Reply::tool_call("call_cut", "read_file", "{").with_finish_reason("length")
    ])
    .await;
    let first = sandbox
        .chat(
            &server.base_url(),
            &["--max-tokens", "13"],
            "read my notes\n",
        )
        .await;
    assert_eq!(first.status, 1, "{}", first.stderr);
    assert_contains!(
        first.stderr,
        "the reply was cut off at max_tokens (13); ask again or raise max_tokens"
    );
    assert!(!first.stdout.contains("[y]es"), "{}", first.stdout);
    assert_eq!(server.request_bodies()[0]["max_tokens"], 13);
    let run = sandbox.conversations().remove(0);
    let transcript = jsonl(&run.join("transcript.jsonl"));
    let result = transcript
        .iter()
        .find(|record| record["type"] == "tool_result")
        .unwrap_or_else(|| panic!("{transcript:#?}"));
    assert_eq!(result["is_error"], true, "{result}");
    assert_contains!(
        result["content"].as_str().unwrap(),
        "cut off at max_tokens (13)"
    );

    server.push(Reply::text("Here they are."));
    let resumed = sandbox
        .chat(&server.base_url(), &["--continue"], "again\n")
        .await;
    assert_eq!(resumed.status, 0, "{}", resumed.stderr);
    assert_contains!(resumed.stdout, "Here they are.");
    let bodies = server.request_bodies();
    assert_eq!(bodies.len(), 2);
    assert_eq!(sent_arguments(&bodies[1]), ["{}"]);
    server.assert_tool_call_pairing();
}

#[tokio::test]
async fn generation_settings_come_from_flags_the_models_table_and_the_top_of_the_config() {
    let sandbox = Sandbox::new();
    write_config(
        &sandbox,
        r#"
max_tokens = 200
temperature = 0.7
seed = 1
tool_choice = "auto"

[extra_body]
top_k = 40
repeat_penalty = 1.1

[models."test-model"]
temperature = 0.1
parallel_tool_calls = false

[models."test-model".extra_body]
top_k = 10

[models."other-model"]
max_tokens = 5
"#,
    );
    let server = ScriptedServer::start_with([Reply::text("ok")]).await;
    let out = sandbox
        .chat(
            &server.base_url(),
            &["--seed", "9", "--top-p", "0.5"],
            "hi\n",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let body = &server.request_bodies()[0];
    assert_eq!(body["max_tokens"], 200, "{body}");
    assert_eq!(body["temperature"], 0.1, "the model's table wins");
    assert_eq!(body["seed"], 9, "the flag wins");
    assert_eq!(body["top_p"], 0.5);
    assert_eq!(body["tool_choice"], "auto");
    assert_eq!(body["parallel_tool_calls"], false);
    assert_eq!(body["top_k"], 10);
    assert_eq!(body["repeat_penalty"], 1.1);
}

#[tokio::test]
async fn max_tokens_is_sent_by_default_and_zero_sends_none() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start_with([Reply::text("a"), Reply::text("b")]).await;
    sandbox.chat(&server.base_url(), &[], "hi\n").await;
    sandbox
        .chat(
            &server.base_url(),
            &["--max-tokens", "0", "--tool-choice", "read_file"],
            "hi\n",
        )
        .await;
    let bodies = server.request_bodies();
    assert_eq!(
        bodies[0]["max_tokens"],
        reprise_provider::DEFAULT_MAX_TOKENS
    );
    assert!(bodies[1].get("max_tokens").is_none(), "{}", bodies[1]);
    assert_eq!(
        bodies[1]["tool_choice"],
        json!({"type": "function", "function": {"name": "read_file"}})
    );
}

#[tokio::test]
async fn a_bad_duration_in_the_config_is_refused_with_its_key() {
    let sandbox = Sandbox::new();
    write_config(&sandbox, "request_timeout = \"soon\"\n");
    let out = sandbox.chat("http://127.0.0.1:9/v1", &[], "hi\n").await;
    assert_ne!(out.status, 0);
    assert_contains!(out.stderr, "request_timeout");
    assert_contains!(out.stderr, "soon");
}

#[tokio::test]
async fn a_silent_server_fails_once_naming_the_timeout_and_how_to_raise_it() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start_with([
        Reply::text("too late").delayed(Duration::from_secs(30)),
        Reply::text("must not be asked for"),
    ])
    .await;
    let out = sandbox
        .chat(&server.base_url(), &["--request-timeout", "1s"], "hi\n")
        .await;
    assert_eq!(out.status, 1, "{}", out.stderr);
    assert_contains!(
        out.stderr,
        "did not start answering within 1s (request_timeout)"
    );
    assert_contains!(out.stderr, "--request-timeout");
    assert!(!out.stderr.contains("ollama"), "not Ollama: {}", out.stderr);
    assert_eq!(server.request_count(), 1, "a timeout is not retried");
}

#[tokio::test]
async fn a_stalled_stream_names_the_idle_timeout() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start_with([
        Reply::text("starts then stalls").stall_after(2, Duration::from_secs(30))
    ])
    .await;
    let out = sandbox
        .chat(&server.base_url(), &["--idle-timeout", "1"], "hi\n")
        .await;
    assert_eq!(out.status, 1, "{}", out.stderr);
    assert_contains!(out.stderr, "(idle_timeout)");
    assert_contains!(out.stderr, "--idle-timeout");
}

#[tokio::test]
async fn a_turn_over_its_budget_stops_and_says_why() {
    let sandbox = Sandbox::new();
    let server =
        ScriptedServer::start_with([Reply::text("slow").delayed(Duration::from_secs(30))]).await;
    let out = sandbox
        .chat(&server.base_url(), &["--turn-timeout", "1s"], "hi\n")
        .await;
    assert_eq!(out.status, 1, "{}", out.stderr);
    assert_contains!(out.stderr, "the turn was stopped after 1s (turn_timeout)");
    assert_contains!(out.stderr, "--turn-timeout");
}
