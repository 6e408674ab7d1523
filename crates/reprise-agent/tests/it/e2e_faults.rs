//! Faults at the agent level over real HTTP: whatever the server does, the session
//! file holds only complete messages afterwards, and the session stays resumable.

use reprise_testkit::assert_contains;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::support::http::{buy, file_roles, provider_for, talk_to};
use reprise_agent::{Agent, AgentError, AgentEvent};
use reprise_provider::ProviderError;
use reprise_session::FileSessionStore;
use reprise_testkit::{Reply, ScriptedServer};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

async fn agent(server: &ScriptedServer, dir: &Path, attempts: u32) -> Agent {
    Agent::builder(provider_for(server, attempts))
        .tools([talk_to(), buy()])
        .store(Arc::new(FileSessionStore::new(dir)))
        .session_id("faulty")
        .build()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_stream_cut_mid_answer_records_no_half_message() {
    let dir = tempfile::tempdir().unwrap();
    let server =
        ScriptedServer::start_with([Reply::text("The Silver Key opens the cave.").cut_after(3)])
            .await;
    let mut agent = agent(&server, dir.path(), 1).await;
    let error = agent.run("What opens the cave?").await.unwrap_err();
    assert!(matches!(error, AgentError::Provider(_)), "{error}");
    assert_eq!(file_roles(&dir.path().join("faulty.jsonl")), ["user"]);
    assert_eq!(agent.messages().len(), 1);
}

#[tokio::test]
async fn a_cut_after_tool_results_keeps_them_and_the_session_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedServer::start_with([
        Reply::tool_call("call_1", "talk_to", r#"{"npc":"elder"}"#),
        Reply::text("The elder says the key is needed.").cut_after(2),
    ])
    .await;
    let mut first = agent(&server, dir.path(), 1).await;
    first.run("Ask the elder.").await.unwrap_err();
    let file = dir.path().join("faulty.jsonl");
    assert_eq!(file_roles(&file), ["user", "assistant", "tool"]);
    drop(first);

    server.push(Reply::text("The elder wants the Silver Key."));
    let mut second = agent(&server, dir.path(), 1).await;
    assert_eq!(
        second.run("And?").await.unwrap(),
        "The elder wants the Silver Key."
    );
    assert_eq!(
        file_roles(&file),
        ["user", "assistant", "tool", "user", "assistant"]
    );
    server.assert_tool_call_pairing();
}

#[tokio::test]
async fn a_401_fails_at_once_with_the_servers_message() {
    let dir = tempfile::tempdir().unwrap();
    let server =
        ScriptedServer::start_with([Reply::error(401, "Incorrect API key provided")]).await;
    // Several attempts allowed: a 401 must not use them.
    let mut agent = agent(&server, dir.path(), 4).await;
    let error = agent.run("hello").await.unwrap_err();
    match &error {
        AgentError::Provider(ProviderError::Status {
            status, message, ..
        }) => {
            assert_eq!(*status, 401);
            assert_contains!(message, "Incorrect API key");
        }
        other => panic!("expected a 401 status error, got {other:?}"),
    }
    assert_eq!(server.request_count(), 1);
    assert_eq!(file_roles(&dir.path().join("faulty.jsonl")), ["user"]);
}

#[tokio::test]
async fn a_silent_stream_times_out_without_a_record() {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedServer::start_with([
        Reply::text("A slow answer that stops halfway").stall_after(2, Duration::from_secs(5))
    ])
    .await;
    let mut agent = agent(&server, dir.path(), 1).await;
    let error = agent.run("hello").await.unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("timed out") || text.contains("gave up"),
        "{text}"
    );
    assert_eq!(file_roles(&dir.path().join("faulty.jsonl")), ["user"]);
}

#[tokio::test]
async fn a_429_is_retried_and_the_agent_reports_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedServer::start_with([
        Reply::error(429, "slow down").with_header("Retry-After", "0"),
        Reply::malformed_chunk(),
        Reply::text("Third time lucky."),
    ])
    .await;
    let mut agent = agent(&server, dir.path(), 3).await;
    let (events_tx, mut events_rx) = mpsc::unbounded_channel();
    let answer = agent
        .run_streaming("hello", events_tx, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(answer, "Third time lucky.");
    let mut retries = 0;
    while let Ok(event) = events_rx.try_recv() {
        if let AgentEvent::Retrying { agent, .. } = event {
            assert_eq!(agent, "main");
            retries += 1;
        }
    }
    assert!(retries >= 1, "a retry was reported");
    assert_eq!(server.request_count(), 3);
    assert_eq!(
        file_roles(&dir.path().join("faulty.jsonl")),
        ["user", "assistant"]
    );
}

#[tokio::test]
async fn usage_reasoning_and_text_reach_the_events() {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedServer::start_with([Reply::text("The key.")
        .with_reasoning("They asked about doors.")
        .with_usage(120, 7)])
    .await;
    let mut agent = agent(&server, dir.path(), 1).await;
    let (events_tx, mut events_rx) = mpsc::unbounded_channel();
    agent
        .run_streaming("What opens it?", events_tx, CancellationToken::new())
        .await
        .unwrap();
    let (mut text, mut reasoning, mut usage) = (String::new(), String::new(), Vec::new());
    while let Ok(event) = events_rx.try_recv() {
        match event {
            AgentEvent::TextDelta { text: delta, .. } => text.push_str(&delta),
            AgentEvent::ReasoningDelta { text: delta, .. } => reasoning.push_str(&delta),
            AgentEvent::Usage { usage: counts, .. } => {
                usage.push((counts.prompt_tokens, counts.completion_tokens))
            }
            _ => {}
        }
    }
    assert_eq!(text, "The key.");
    assert_eq!(reasoning, "They asked about doors.");
    assert_eq!(usage, [(120, 7)]);
}
