//! What a service builds on: prompts with ids, one definition for many sessions,
//! bounded event channels, forks of empty sessions, the context of subagents' calls.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::{MockProvider, Step, answer, calls, request_messages};
use reprise_agent::{Agent, AgentError, AgentEvent, Prompt, Subagent, ToolContext, tool};
use reprise_provider::ProviderError;
use reprise_session::{MemoryStore, Message, Role, SessionKey, SessionStore, StoreError};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

#[derive(Deserialize, JsonSchema)]
struct Nothing {}

fn builder(provider: Arc<MockProvider>, store: &Arc<MemoryStore>) -> reprise_agent::AgentBuilder {
    Agent::builder(provider).store(store.clone() as Arc<dyn SessionStore>)
}

fn user_texts(agent: &Agent) -> Vec<String> {
    agent
        .messages()
        .iter()
        .filter(|m| m.role == Role::User)
        .map(Message::text)
        .collect()
}

#[tokio::test]
async fn a_prompt_with_an_id_is_stored_and_sent_once_however_often_it_is_run() {
    let provider = MockProvider::new([
        Step::Fail(ProviderError::StreamCut {
            reason: "reset".into(),
            source: None,
        }),
        answer("Under the well."),
    ]);
    let store = Arc::new(MemoryStore::new());
    let mut agent = builder(provider.clone(), &store)
        .session_id("retry")
        .build()
        .await
        .unwrap();
    let id = Uuid::from_u128(0xfeed);
    let prompt = || Prompt::new("Where is the key?").with_id(id);

    assert!(matches!(
        agent.run(prompt()).await,
        Err(AgentError::Provider(_))
    ));
    // Tried again: the stored prompt is answered, not stored or sent a second time.
    assert_eq!(agent.run(prompt()).await.unwrap(), "Under the well.");
    assert_eq!(user_texts(&agent), ["Where is the key?"]);
    let second = request_messages(&provider.requests()[1]);
    let sent: Vec<_> = second.iter().filter(|m| m["role"] == "user").collect();
    assert_eq!(sent.len(), 1);

    // Answered already (its caller never saw the answer): the answer, no model call
    // (the script is empty and would fail the test).
    assert_eq!(agent.run(prompt()).await.unwrap(), "Under the well.");
    // A new agent on the session (another process) knows it too.
    agent.close().await.unwrap();
    let mut again = builder(provider.clone(), &store)
        .session_id("retry")
        .build()
        .await
        .unwrap();
    assert_eq!(again.run(prompt()).await.unwrap(), "Under the well.");
    assert_eq!(provider.requests().len(), 2);
    let key = SessionKey::session("retry").unwrap();
    let stored = store.load(&key).await.unwrap().unwrap().entries;
    assert_eq!(stored.iter().filter(|e| e.uuid == id).count(), 1);

    // Later prompts do not change its answer.
    provider.push(answer("A torch."));
    again.run("What should I bring?").await.unwrap();
    assert_eq!(again.run(prompt()).await.unwrap(), "Under the well.");
    assert_eq!(
        user_texts(&again),
        ["Where is the key?", "What should I bring?"]
    );

    // A prompt left unanswered and followed by another is refused, not answered
    // out of its place.
    let lost = Uuid::from_u128(0xdead);
    provider.push(Step::Fail(ProviderError::StreamCut {
        reason: "reset".into(),
        source: None,
    }));
    provider.push(answer("Noon."));
    assert!(again.run(Prompt::new("Lost?").with_id(lost)).await.is_err());
    again.run("What time is it?").await.unwrap();
    match again.run(Prompt::new("Lost?").with_id(lost)).await {
        Err(AgentError::PromptSuperseded { id: refused }) => assert_eq!(refused, lost),
        other => panic!("expected PromptSuperseded, got {other:?}"),
    }
    assert_eq!(provider.requests().len(), 5);
}

#[tokio::test]
async fn one_definition_opens_many_sessions_and_a_busy_one_is_recognised() {
    let provider = MockProvider::new([answer("One."), answer("Two.")]);
    let store = Arc::new(MemoryStore::new());
    let agents = builder(provider, &store).system("You count.");
    let mut first = agents.open("one").await.unwrap();
    let mut second = agents.clone().session_id("two").build().await.unwrap();
    assert_eq!(first.run("count").await.unwrap(), "One.");
    assert_eq!(second.run("count").await.unwrap(), "Two.");
    let busy = agents.open("one").await.unwrap_err();
    assert!(busy.is_locked(), "{busy:?}");
    assert!(matches!(
        busy,
        AgentError::Store(StoreError::Locked { ref session, .. }) if session == "one"
    ));
    first.close().await.unwrap();
    let reopened = agents.open("one").await.unwrap();
    assert_eq!(reopened.messages().len(), 2);
    // A bad id is one error, the store's.
    assert!(matches!(
        agents.open("../x").await.unwrap_err(),
        AgentError::Store(StoreError::InvalidId(_))
    ));
}

#[tokio::test]
async fn a_bounded_channel_holds_the_run_back_until_the_reader_reads() {
    let provider = MockProvider::new([calls(&[("c1", "look", "{}")]), answer("A quiet square.")]);
    let store = Arc::new(MemoryStore::new());
    let look = tool("look", "Look around.", |_: Nothing, _| async move {
        Ok::<_, String>("a square")
    });
    let mut agent = builder(provider.clone(), &store)
        .tool(look)
        .session_id("slow")
        .build()
        .await
        .unwrap();
    let (events_tx, mut events_rx) = tokio::sync::mpsc::channel(1);
    let run = tokio::spawn(async move {
        let answer = agent
            .run_streaming("Look around.", events_tx, CancellationToken::new())
            .await;
        (agent, answer)
    });
    // The first event fills the channel; the run waits there, before its model call.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(provider.requests().is_empty());
    assert!(!run.is_finished());

    let mut events = Vec::new();
    while let Some(event) = tokio::time::timeout(Duration::from_secs(20), events_rx.recv())
        .await
        .expect("the run got stuck")
    {
        events.push(event);
    }
    let (_agent, answer) = run.await.unwrap();
    assert_eq!(answer.unwrap(), "A quiet square.");
    let finished = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::ToolCallFinished { denied: false, .. }))
        .count();
    assert_eq!(finished, 1);
    assert!(matches!(
        events.first(),
        Some(AgentEvent::MessageRecorded { .. })
    ));
    assert!(matches!(
        events.last(),
        Some(AgentEvent::MessageRecorded { message, .. }) if message.text() == "A quiet square."
    ));
}

#[tokio::test]
async fn a_fork_of_an_empty_session_is_an_empty_session() {
    let provider = MockProvider::new([answer("Hello from the fork.")]);
    let store = Arc::new(MemoryStore::new());
    let empty = builder(provider, &store)
        .session_id("empty")
        .build()
        .await
        .unwrap();
    let mut fork = empty.fork("empty-fork").await.unwrap();
    assert!(fork.messages().is_empty());
    assert_eq!(fork.session_id(), "empty-fork");
    fork.run("hi").await.unwrap();
    assert_eq!(fork.messages().len(), 2);
    // The fork is its own session; the source is still empty.
    assert!(empty.messages().is_empty());
    fork.close().await.unwrap();
    // A target that exists is refused, as for any fork.
    let taken = empty.fork("empty-fork").await.unwrap_err();
    assert!(
        matches!(taken, AgentError::Store(StoreError::AlreadyExists { .. })),
        "{taken:?}"
    );
}

#[tokio::test]
async fn a_subagents_calls_carry_the_parents_session_and_the_subagents_name() {
    let provider = MockProvider::new([
        calls(&[("p1", "scout", r#"{"task":"look around"}"#)]),
        calls(&[("s1", "look", "{}")]),
        answer("A cave."),
        answer("The scout saw a cave."),
    ]);
    let store = Arc::new(MemoryStore::new());
    let seen: Arc<Mutex<Vec<ToolContext>>> = Arc::default();
    let seen_by_look = seen.clone();
    let look = tool("look", "Look.", move |_: Nothing, call: ToolContext| {
        seen_by_look.lock().unwrap().push(call);
        async move { Ok::<_, String>("a cave") }
    });
    let scout = Subagent::new("scout", "Explores.", "You are a scout.").tool(look);
    let mut agent = builder(provider, &store)
        .subagent(scout)
        .session_id("party")
        .build()
        .await
        .unwrap();
    agent.run("send the scout").await.unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].session_id, "party");
    assert_eq!(seen[0].agent, "scout");
    assert!(seen[0].subagent);
    assert_eq!(seen[0].call_id, "s1");
    assert!(!seen[0].cancel.is_cancelled());
}
