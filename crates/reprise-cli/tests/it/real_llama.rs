//! The chat against a real server: the `reprise` binary in plain mode, talking to
//! llama.cpp's own HTTP server running Gemma 3 270M (installed by
//! scripts/install-test-deps.sh; one server for this test binary, replies capped by
//! the server). The model loops on tool calls, so the config allows one model call
//! per turn. The assertions are about the protocol, not the answers.

use crate::support::{Output, Sandbox, jsonl};
use reprise_testkit::llama::LlamaServer;
use serde_json::Value;

async fn chat(sandbox: &Sandbox, extra: &[&str], input: &str) -> Output {
    let server = LlamaServer::shared();
    let base_url = server.base_url();
    let mut args = vec!["--plain", "--yes", "--base-url", &base_url];
    args.extend_from_slice(&["--model", server.model()]);
    args.extend_from_slice(extra);
    sandbox.run(&args, input).await
}

fn one_model_call_per_turn(sandbox: &Sandbox) {
    let config = sandbox.path().join("xdg/reprise");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.toml"), "max_turns = 1\n").unwrap();
}

/// The messages of a run's conversation.jsonl.
fn conversation(run: &std::path::Path) -> Vec<Value> {
    jsonl(&run.join("conversation.jsonl"))
        .into_iter()
        .filter_map(|entry| entry.get("message").cloned())
        .collect()
}

fn tool_call_ids(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .flat_map(|message| {
            message["tool_calls"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|call| call["id"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The chat ended because the input did, or because the model kept calling tools for
/// the whole budget; no request was refused or retried.
fn assert_ended_normally(out: &Output) {
    let printed = format!("{}{}", out.stdout, out.stderr);
    if out.status != 0 {
        assert!(
            printed.contains("no final answer after 1 turns"),
            "exit status {}:\n{printed}",
            out.status
        );
    }
    for refusal in ["500", "Failed to parse", "retrying", "no model server"] {
        assert!(
            !printed.contains(refusal),
            "{refusal:?} in the output (server log: {}):\n{printed}",
            LlamaServer::shared().log().display()
        );
    }
}

#[tokio::test]
async fn continue_of_a_run_with_tool_calls_is_accepted_and_keeps_the_servers_ids() {
    let sandbox = Sandbox::new();
    one_model_call_per_turn(&sandbox);
    let first = chat(&sandbox, &[], "What is in the file notes.txt?\n").await;
    assert_ended_normally(&first);
    let run = sandbox.conversations().remove(0);
    let messages = conversation(&run);
    let ids = tool_call_ids(&messages);
    assert!(
        !ids.is_empty(),
        "the model made no tool call: {messages:#?}"
    );
    for id in &ids {
        // llama.cpp's ids, stored as sent: 32 letters and digits.
        assert_eq!(id.len(), 32, "{id}");
        assert!(id.chars().all(|c| c.is_ascii_alphanumeric()), "{id}");
    }
    let answered: Vec<&str> = messages
        .iter()
        .filter_map(|message| message["tool_call_id"].as_str())
        .collect();
    assert_eq!(answered, ids, "every call has its result");

    let resumed = chat(&sandbox, &["--continue"], "And what else?\n").await;
    assert_ended_normally(&resumed);
    assert_eq!(sandbox.conversations(), vec![run.clone()]);
    let after = conversation(&run);
    assert_eq!(after[..messages.len()], messages[..], "the history is kept");
    assert_eq!(after[messages.len()]["content"], "And what else?");
    assert_eq!(
        after[messages.len() + 1]["role"],
        "assistant",
        "the server answered the resumed history"
    );
}
