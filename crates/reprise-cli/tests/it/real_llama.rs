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
    // The machine may be busy: give a server reading a prompt on a CPU its time.
    std::fs::write(
        config.join("config.toml"),
        "max_turns = 1\nmax_tokens = 32\nrequest_timeout = 300\nidle_timeout = 300\n",
    )
    .unwrap();
}

/// The messages of a run's conversation.jsonl.
fn conversation(run: &std::path::Path) -> Vec<Value> {
    jsonl(&run.join("conversation.jsonl"))
        .into_iter()
        .filter_map(|entry| entry.get("message").cloned())
        .collect()
}

fn tool_call_ids(messages: &[Value]) -> Vec<String> {
    reprise_testkit::tool_calls_of(messages)
        .iter()
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
            "{refusal:?} in the output:\n{printed}\n{}",
            LlamaServer::shared().diagnosis()
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
    // transcript.jsonl names the calls and results by the same ids, unredacted.
    let transcript = jsonl(&run.join("transcript.jsonl"));
    let recorded = |kind: &str| -> Vec<String> {
        transcript
            .iter()
            .filter(|record| record["type"] == kind)
            .map(|record| record["id"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(recorded("tool_call"), ids, "{transcript:#?}");
    assert_eq!(recorded("tool_result"), ids, "{transcript:#?}");

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

/// A reply cut by the server's token limit right after `{` of a tool call's
/// arguments leaves a session that the same server accepts on `--continue`.
#[tokio::test]
async fn a_tool_call_cut_by_max_tokens_leaves_a_session_that_continue_resumes() {
    // 13 tokens: `<tool_call>{"name": "read_file", "arguments": {` and no more.
    let server = tokio::task::spawn_blocking(|| LlamaServer::start_with_reply_cap(4096, 13))
        .await
        .unwrap()
        .unwrap_or_else(|error| panic!("{error}"));
    let sandbox = Sandbox::new();
    one_model_call_per_turn(&sandbox);
    let base_url = server.base_url();
    // The request's max_tokens, not only the server's cap, cuts the reply.
    let args = [
        "--plain",
        "--yes",
        "--base-url",
        &base_url,
        "--model",
        server.model(),
        "--max-tokens",
        "13",
    ];
    let first = sandbox.run(&args, "What is in the file notes.txt?\n").await;
    let run = sandbox.conversations().remove(0);
    let messages = conversation(&run);
    let cut: Vec<&Value> = messages
        .iter()
        .flat_map(|message| message["tool_calls"].as_array().into_iter().flatten())
        .filter(|call| call["function"]["arguments"] == "{")
        .collect();
    assert_eq!(cut.len(), 1, "the server cut a call at `{{`: {messages:#?}");
    assert!(
        first
            .stderr
            .contains("the reply was cut off at max_tokens (13); ask again or raise max_tokens"),
        "{}",
        first.stderr
    );
    let results: Vec<&Value> = messages
        .iter()
        .filter(|message| message["role"] == "tool")
        .collect();
    assert_eq!(results.len(), 1, "{messages:#?}");
    assert!(
        results[0]["content"]
            .as_str()
            .unwrap_or_default()
            .contains("not run"),
        "{messages:#?}"
    );

    let mut resumed_args = args.to_vec();
    resumed_args.push("--continue");
    let resumed = sandbox.run(&resumed_args, "Try again.\n").await;
    let printed = format!("{}{}", resumed.stdout, resumed.stderr);
    for refusal in ["500", "Failed to parse", "retrying"] {
        assert!(
            !printed.contains(refusal),
            "{refusal:?}:\n{printed}\n{}",
            server.diagnosis()
        );
    }
    let after = conversation(&run);
    assert_eq!(after[..messages.len()], messages[..], "the history is kept");
    assert_eq!(after[messages.len()]["content"], "Try again.");
    assert_eq!(
        after[messages.len() + 1]["role"],
        "assistant",
        "the server answered the resumed history (200)"
    );
}

/// A subagent on the real server: a scripted main agent hands it tasks, llama.cpp
/// answers as the subagent, and on `--continue` the subagent's own history goes
/// back to the server, which accepts it.
#[tokio::test]
async fn a_subagent_on_the_real_server_answers_and_resumes_its_own_history() {
    let llama = LlamaServer::shared();
    let main = reprise_testkit::ScriptedServer::start().await;
    let sandbox = Sandbox::new();
    let config = sandbox.path().join("xdg/reprise");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!(
            "max_tokens = 32\nrequest_timeout = 300\nidle_timeout = 300\n\n\
             [agents.scout]\ndescription = \"Answers questions.\"\n\
             system_prompt = \"Answer in one short sentence.\"\nmax_turns = 1\n\
             base_url = \"{}\"\nmodel = \"{}\"\n",
            llama.base_url(),
            llama.model()
        ),
    )
    .unwrap();
    let delegate = |id: &str, task: &str| {
        reprise_testkit::Reply::tool_call(id, "scout", format!(r#"{{"task":"{task}"}}"#))
    };
    main.push_all([
        delegate("p1", "What colour is the sky?"),
        reprise_testkit::Reply::text("Done."),
    ]);
    let base_url = main.base_url();
    let args = [
        "--plain",
        "--yes",
        "--base-url",
        &base_url,
        "--model",
        "test-model",
    ];
    let first = sandbox.run(&args, "ask the scout\n").await;
    assert_ended_normally(&first);
    let run = sandbox.conversations().remove(0);
    let child = conversation_of(&run.join("subagents/scout.jsonl"));
    assert_eq!(child.len(), 2, "{child:#?}");
    assert_eq!(child[0]["content"], "What colour is the sky?");
    assert_eq!(child[1]["role"], "assistant", "{child:#?}");
    // Its answer is the main agent's result for the call.
    let bodies = main.request_bodies();
    let result = reprise_testkit::request_messages(&bodies[1])
        .last()
        .cloned()
        .unwrap();
    assert_eq!(result["tool_call_id"], "p1");
    assert_eq!(result["content"], child[1]["content"]);

    main.push_all([
        delegate("p2", "And at night?"),
        reprise_testkit::Reply::text("Done again."),
    ]);
    let mut resumed_args = args.to_vec();
    resumed_args.push("--continue");
    let second = sandbox.run(&resumed_args, "again\n").await;
    assert_ended_normally(&second);
    let after = conversation_of(&run.join("subagents/scout.jsonl"));
    assert_eq!(after[..2], child[..], "the subagent's history is kept");
    assert_eq!(after[2]["content"], "And at night?");
    assert_eq!(
        after[3]["role"], "assistant",
        "the server answered the subagent's resumed history: {after:#?}"
    );
    assert_eq!(
        reprise_testkit::request_messages(&main.request_bodies()[3])
            .last()
            .unwrap()["content"],
        after[3]["content"]
    );
    main.assert_tool_call_pairing();
}

/// The messages of a JSONL transcript.
fn conversation_of(path: &std::path::Path) -> Vec<Value> {
    jsonl(path)
        .into_iter()
        .filter_map(|entry| entry.get("message").cloned())
        .collect()
}

/// A chat killed once the real server's tool call is recorded, with the file cut
/// back to that call (what a kill before the tool's start leaves: no start record,
/// no result); `--continue` runs the call and the same server answers its result.
#[tokio::test]
async fn a_turn_killed_before_its_tool_started_is_finished_by_continue_with_a_200() {
    let server = LlamaServer::shared();
    let sandbox = Sandbox::new();
    one_model_call_per_turn(&sandbox);
    std::fs::write(sandbox.path().join("notes.txt"), "buy milk\n").unwrap();
    let base_url = server.base_url();
    let args = [
        "--plain",
        "--yes",
        "--base-url",
        &base_url,
        "--model",
        server.model(),
    ];
    let mut child = sandbox.command(&args).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stdin, b"What is in the file notes.txt?\n")
        .await
        .unwrap();
    let conversation_file = |sandbox: &Sandbox| {
        sandbox
            .conversations()
            .first()
            .map(|run| run.join("conversation.jsonl"))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(600);
    let called = loop {
        let entries = conversation_file(&sandbox)
            .map(|path| jsonl(&path))
            .unwrap_or_default();
        if let Some(at) = entries
            .iter()
            .position(|entry| entry["message"]["tool_calls"].is_array())
        {
            child.start_kill().unwrap();
            break at;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the chat ended ({status}) and the model made no tool call: {entries:#?}");
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no tool call in 10 minutes\n{}",
            server.diagnosis()
        );
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    };
    child.wait().await.unwrap();
    drop(stdin);
    let path = conversation_file(&sandbox).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let kept: String = text.split_inclusive('\n').take(called + 1).collect();
    std::fs::write(&path, kept).unwrap();
    let run = sandbox.conversations().remove(0);
    let before = conversation(&run);
    let calls = tool_call_ids(&before);
    assert!(!calls.is_empty());

    let resumed = chat(&sandbox, &["--continue"], "").await;
    assert_ended_normally(&resumed);
    let printed = format!("{}{}", resumed.stdout, resumed.stderr);
    assert!(
        ["re-asked: ", "ran again (read-only): "]
            .iter()
            .any(|line| printed.contains(line)),
        "{printed}"
    );
    let after = conversation(&run);
    assert_eq!(after[..before.len()], before[..], "the history is kept");
    let results: Vec<&str> = after[before.len()..before.len() + calls.len()]
        .iter()
        .filter_map(|message| message["tool_call_id"].as_str())
        .collect();
    assert_eq!(results, calls, "every call ran once, in order");
    assert_eq!(
        after[before.len() + calls.len()]["role"],
        "assistant",
        "the server answered the finished turn (200)"
    );
}
