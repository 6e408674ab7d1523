//! The loop against an in-process provider: tool execution, errors, panics,
//! cancellation, approvals, events, locking and resume repair.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::{
    MockProvider, Step, answer, calls, cancel_once_notified, request_messages, roles,
};
use async_trait::async_trait;
use reprise_agent::{
    Agent, AgentError, AgentEvent, Approval, CANCELLED_BY_USER, Subagent, ToolApprover,
    ToolInvocation, tool,
};
use reprise_provider::ProviderError;
use reprise_session::{
    Entry, MemoryStore, Message, Role, SessionKey, SessionStore, StoreError, ToolCall,
};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

#[derive(Deserialize, JsonSchema)]
struct Buy {
    item: String,
}

#[derive(Deserialize, JsonSchema)]
struct Nothing {}

fn shop() -> impl reprise_agent::Tool {
    tool("buy", "Buy an item.", |args: Buy, _| async move {
        Ok::<_, String>(format!("bought {}", args.item))
    })
}

async fn agent_on(
    provider: Arc<MockProvider>,
    store: &Arc<MemoryStore>,
    id: &str,
) -> reprise_agent::AgentBuilder {
    Agent::builder(provider)
        .store(store.clone() as Arc<dyn SessionStore>)
        .session_id(id)
        .system("You are Astor.")
}

async fn stored_messages(store: &MemoryStore, key: &SessionKey) -> Vec<Message> {
    store
        .load(key)
        .await
        .unwrap()
        .map(|loaded| {
            loaded
                .entries
                .into_iter()
                .filter_map(|e| e.message)
                .collect()
        })
        .unwrap_or_default()
}

/// Fails the test instead of hanging when the code under test deadlocks.
async fn guard<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), future)
        .await
        .expect("the run did not finish (deadlock?)")
}

/// A tool that notifies the returned `Notify` when called and then never finishes.
fn never_finishing_tool(
    name: &'static str,
    description: &'static str,
) -> (impl reprise_agent::Tool, Arc<Notify>) {
    let started = Arc::new(Notify::new());
    let started_in_tool = started.clone();
    let hanging = tool(name, description, move |_: Nothing, _| {
        let started = started_in_tool.clone();
        async move {
            started.notify_one();
            std::future::pending::<()>().await;
            Ok::<_, String>("unreachable")
        }
    });
    (hanging, started)
}

/// Runs `prompt`, cancelling once `started` is notified; returns the run's error.
async fn run_cancelled_once_started(
    agent: &mut Agent,
    prompt: &str,
    started: Arc<Notify>,
) -> AgentError {
    let cancel = cancel_once_notified(started);
    let (events_tx, _events_rx) = mpsc::unbounded_channel();
    guard(agent.run_streaming(prompt, events_tx, cancel))
        .await
        .unwrap_err()
}

#[tokio::test]
async fn parallel_calls_run_concurrently_and_are_recorded_in_call_order() {
    // `first` cannot finish until `second` has run: sequential execution would hang.
    let gate = Arc::new(Notify::new());
    let wait_gate = gate.clone();
    let first = tool("first", "Waits for second.", move |_: Nothing, _| {
        let gate = wait_gate.clone();
        async move {
            gate.notified().await;
            Ok::<_, String>("first done")
        }
    });
    let open_gate = gate.clone();
    let second = tool("second", "Opens the gate.", move |_: Nothing, _| {
        let gate = open_gate.clone();
        async move {
            gate.notify_one();
            Ok::<_, String>("second done")
        }
    });
    let provider = MockProvider::new([
        calls(&[("a", "first", "{}"), ("b", "second", "{}")]),
        answer("both done"),
    ]);
    let store = Arc::new(MemoryStore::new());
    let mut agent = agent_on(provider.clone(), &store, "par")
        .await
        .tool(first)
        .tool(second)
        .build()
        .await
        .unwrap();
    let answer = guard(agent.run("go")).await.unwrap();
    assert_eq!(answer, "both done");
    let history = agent.messages();
    assert_eq!(
        roles(history),
        ["user", "assistant", "tool", "tool", "assistant"]
    );
    assert_eq!(history[2].tool_call_id.as_deref(), Some("a"));
    assert_eq!(history[2].text(), "first done");
    assert_eq!(history[3].tool_call_id.as_deref(), Some("b"));
    assert_eq!(history[3].text(), "second done");
    // What is in the store is exactly what the agent holds.
    assert_eq!(
        stored_messages(&store, &SessionKey::session("par").unwrap()).await,
        history
    );
    // The second request carries the system prompt, the prompt, the calls and results.
    let second_request = request_messages(&provider.requests()[1]);
    assert_eq!(second_request.len(), 5);
    assert_eq!(second_request[0]["role"], "system");
    assert_eq!(second_request[0]["content"], "You are Astor.");
}

#[tokio::test]
async fn bad_arguments_unknown_tools_errors_and_panics_become_error_results() {
    let failing = tool("fail", "Always fails.", |_: Nothing, _| async move {
        Err::<String, _>("the shop is closed")
    });
    let panicking = tool("explode", "Panics.", |_: Nothing, _| async move {
        if true {
            panic!("kaboom");
        }
        Ok::<_, String>("unreachable")
    });
    let provider = MockProvider::new([
        calls(&[
            ("c1", "buy", r#"{"thing":"torch"}"#),
            ("c2", "buy", r#"{"item":"#),
            ("c3", "fly", "{}"),
            ("c4", "fail", "{}"),
            ("c5", "explode", "{}"),
            ("c6", "buy", r#"{"item":"torch"}"#),
        ]),
        answer("I bought a torch."),
    ]);
    let store = Arc::new(MemoryStore::new());
    let mut agent = agent_on(provider.clone(), &store, "errs")
        .await
        .tool(shop())
        .tool(failing)
        .tool(panicking)
        .build()
        .await
        .unwrap();
    let (events_tx, mut events_rx) = mpsc::unbounded_channel();
    let answer = guard(agent.run_streaming("shop", events_tx, CancellationToken::new()))
        .await
        .unwrap();
    assert_eq!(answer, "I bought a torch.");
    let results: Vec<String> = agent.messages()[2..8].iter().map(Message::text).collect();
    assert!(
        results[0].contains("invalid arguments for buy") && results[0].contains("item"),
        "{}",
        results[0]
    );
    // Arguments that are not JSON never reach the tool.
    assert!(
        results[1].contains("not run") && results[1].contains("not a JSON object"),
        "{}",
        results[1]
    );
    assert!(
        results[2].contains("no tool named \"fly\""),
        "{}",
        results[2]
    );
    assert!(
        results[2].contains("buy"),
        "the model is told which tools exist: {}",
        results[2]
    );
    assert!(results[3].contains("the shop is closed"), "{}", results[3]);
    assert!(
        results[4].contains("crashed") && results[4].contains("kaboom"),
        "{}",
        results[4]
    );
    assert_eq!(results[5], "bought torch");

    let mut finished = Vec::new();
    while let Ok(event) = events_rx.try_recv() {
        if let AgentEvent::ToolCallFinished { id, output, .. } = event {
            finished.push((id, output.is_error));
        }
    }
    assert_eq!(
        finished,
        [
            ("c1", true),
            ("c2", true),
            ("c3", true),
            ("c4", true),
            ("c5", true),
            ("c6", false)
        ]
        .map(|(id, err)| (id.to_owned(), err))
    );
}

#[tokio::test]
async fn max_turns_ends_with_a_clear_error_and_a_consistent_history() {
    let provider = MockProvider::new([
        calls(&[("t1", "buy", r#"{"item":"a"}"#)]),
        calls(&[("t2", "buy", r#"{"item":"b"}"#)]),
        answer("never reached"),
    ]);
    let store = Arc::new(MemoryStore::new());
    let mut agent = agent_on(provider.clone(), &store, "turns")
        .await
        .tool(shop())
        .max_turns(2)
        .build()
        .await
        .unwrap();
    let error = agent.run("loop").await.unwrap_err();
    assert!(
        matches!(error, AgentError::MaxTurns { max_turns: 2 }),
        "{error}"
    );
    assert!(error.to_string().contains("2 turns"));
    assert_eq!(
        roles(agent.messages()),
        ["user", "assistant", "tool", "assistant", "tool"]
    );
    // The next run sends a history the server accepts (the mock checks it).
    assert_eq!(agent.run("stop now").await.unwrap(), "never reached");
}

#[tokio::test]
async fn cancelling_mid_stream_records_nothing_of_the_answer() {
    let provider = MockProvider::new([Step::StreamThenHang(vec!["Half an ans".into()])]);
    let store = Arc::new(MemoryStore::new());
    let mut agent = agent_on(provider.clone(), &store, "cut")
        .await
        .build()
        .await
        .unwrap();
    let (events_tx, mut events_rx) = mpsc::unbounded_channel();
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    let watcher = tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Some(event) = events_rx.recv().await {
            if matches!(event, AgentEvent::TextDelta { .. }) {
                canceller.cancel();
            }
            seen.push(event);
        }
        seen
    });
    let error = guard(agent.run_streaming("tell me", events_tx, cancel))
        .await
        .unwrap_err();
    assert!(matches!(error, AgentError::Cancelled), "{error}");
    let seen = watcher.await.unwrap();
    assert!(seen.contains(&AgentEvent::TextDelta {
        agent: "main".into(),
        text: "Half an ans".into()
    }));
    assert_eq!(roles(agent.messages()), ["user"]);
    let key = SessionKey::session("cut").unwrap();
    assert_eq!(roles(&stored_messages(&store, &key).await), ["user"]);

    // The agent goes on: the next request holds both prompts, no half answer.
    provider.push(answer("Whole answer."));
    assert_eq!(agent.run("again").await.unwrap(), "Whole answer.");
    let last = request_messages(provider.requests().last().unwrap());
    let texts: Vec<&str> = last.iter().filter_map(|m| m["content"].as_str()).collect();
    assert_eq!(texts, ["You are Astor.", "tell me", "again"]);
}

#[tokio::test]
async fn cancelling_during_tools_keeps_finished_results_and_closes_the_rest() {
    let (slow, started) = never_finishing_tool("slow", "Never finishes by itself.");
    let provider = MockProvider::new([calls(&[
        ("fast", "buy", r#"{"item":"rope"}"#),
        ("hang", "slow", "{}"),
    ])]);
    let store = Arc::new(MemoryStore::new());
    let mut agent = agent_on(provider.clone(), &store, "stop")
        .await
        .tool(shop())
        .tool(slow)
        .build()
        .await
        .unwrap();
    let error = run_cancelled_once_started(&mut agent, "go", started).await;
    assert!(matches!(error, AgentError::Cancelled));
    let history = agent.messages();
    assert_eq!(roles(history), ["user", "assistant", "tool", "tool"]);
    assert_eq!(history[2].text(), "bought rope");
    assert_eq!(history[3].tool_call_id.as_deref(), Some("hang"));
    assert_eq!(history[3].text(), CANCELLED_BY_USER);
    let key = SessionKey::session("stop").unwrap();
    assert_eq!(&stored_messages(&store, &key).await, history);

    provider.push(answer("Stopped, as asked."));
    assert_eq!(
        agent.run("what happened?").await.unwrap(),
        "Stopped, as asked."
    );
}

struct DenyPurchases {
    asked: Mutex<Vec<(String, String)>>,
    contexts: Mutex<Vec<reprise_agent::ToolContext>>,
}

#[async_trait]
impl ToolApprover for DenyPurchases {
    async fn approve(&self, invocation: &ToolInvocation) -> Approval {
        self.asked
            .lock()
            .unwrap()
            .push((invocation.context.agent.clone(), invocation.name.clone()));
        self.contexts
            .lock()
            .unwrap()
            .push(invocation.context.clone());
        if invocation.name == "buy" {
            Approval::Deny("no spending today".into())
        } else {
            Approval::Allow
        }
    }
}

#[tokio::test]
async fn a_denied_call_gets_an_error_result_with_the_reason() {
    let approver = Arc::new(DenyPurchases {
        asked: Mutex::default(),
        contexts: Mutex::default(),
    });
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen_by_look = seen.clone();
    let look = tool("look", "Look around.", move |_: Nothing, call| {
        seen_by_look.lock().unwrap().push(call);
        async move { Ok::<_, String>("a shop") }
    });
    let provider = MockProvider::new([
        calls(&[("l", "look", "{}"), ("b", "buy", r#"{"item":"torch"}"#)]),
        answer("I looked but did not buy."),
    ]);
    let store = Arc::new(MemoryStore::new());
    let mut agent = agent_on(provider, &store, "deny")
        .await
        .tool(shop())
        .tool(look)
        .approver(approver.clone())
        .name("astor")
        .build()
        .await
        .unwrap();
    let (events_tx, mut events_rx) = mpsc::unbounded_channel();
    agent
        .run_streaming("shop", events_tx, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(agent.messages()[2].text(), "a shop");
    let denied = agent.messages()[3].text();
    assert!(
        denied.contains("not allowed") && denied.contains("no spending today"),
        "{denied}"
    );
    assert_eq!(
        *approver.asked.lock().unwrap(),
        [
            ("astor".to_owned(), "look".to_owned()),
            ("astor".to_owned(), "buy".to_owned())
        ]
    );
    // The events say which call was refused, not only its text.
    let mut finished = Vec::new();
    while let Ok(event) = events_rx.try_recv() {
        if let AgentEvent::ToolCallFinished { id, denied, .. } = event {
            finished.push((id, denied));
        }
    }
    assert_eq!(finished, [("l".to_owned(), false), ("b".to_owned(), true)]);
    // The approver and the tool see the call's context; the key is the one
    // derived from the session, the reply's entry and the call.
    let reply = agent.entries()[1].uuid;
    let contexts = approver.contexts.lock().unwrap().clone();
    assert_eq!(contexts.len(), 2);
    for (context, call_id) in contexts.iter().zip(["l", "b"]) {
        assert_eq!(context.session_id, "deny");
        assert_eq!(context.agent, "astor");
        assert!(!context.subagent);
        assert_eq!(context.call_id, call_id);
        assert_eq!(
            context.idempotency_key,
            reprise_agent::idempotency_key("deny", reply, call_id)
        );
    }
    assert_ne!(contexts[0].idempotency_key, contexts[1].idempotency_key);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].call_id, "l");
    assert_eq!(seen[0].idempotency_key, contexts[0].idempotency_key);
}

#[tokio::test]
async fn events_follow_the_turn_and_every_record_is_already_stored() {
    let provider = MockProvider::new([
        calls(&[("b", "buy", r#"{"item":"torch"}"#)]),
        answer("Done."),
    ]);
    let store = Arc::new(MemoryStore::new());
    let mut agent = agent_on(provider, &store, "events")
        .await
        .tool(shop())
        .build()
        .await
        .unwrap();
    let (events_tx, mut events_rx) = mpsc::unbounded_channel();
    agent
        .run_streaming("buy a torch", events_tx, CancellationToken::new())
        .await
        .unwrap();
    let mut kinds = Vec::new();
    while let Ok(event) = events_rx.try_recv() {
        assert_eq!(event.agent(), "main");
        kinds.push(match &event {
            AgentEvent::ModelCallStarted { turn, .. } => format!("model{turn}"),
            AgentEvent::TextDelta { text, .. } => format!("text:{text}"),
            AgentEvent::ToolCallStarted {
                name, arguments, ..
            } => format!("start:{name}:{arguments}"),
            AgentEvent::ToolCallFinished { output, .. } => format!("done:{}", output.content),
            AgentEvent::MessageRecorded {
                message, key, uuid, ..
            } => {
                let stored = store.load(key).await.unwrap().unwrap();
                assert!(stored.entries.iter().any(|entry| entry.uuid == *uuid));
                format!("recorded:{}", message.role.as_str())
            }
            other => format!("{other:?}"),
        });
    }
    assert_eq!(
        kinds,
        [
            "recorded:user",
            "model1",
            "recorded:assistant",
            "start:buy:{\"item\":\"torch\"}",
            "recorded:tool",
            "done:bought torch",
            "model2",
            "text:Done.",
            "recorded:assistant",
        ]
    );
}

#[tokio::test]
async fn a_second_agent_on_the_same_session_is_refused_at_once() {
    let store = Arc::new(MemoryStore::new());
    let first = agent_on(MockProvider::new([]), &store, "solo")
        .await
        .build()
        .await
        .unwrap();
    let error = agent_on(MockProvider::new([]), &store, "solo")
        .await
        .build()
        .await
        .unwrap_err();
    assert!(
        matches!(&error, AgentError::Store(StoreError::Locked { session, .. }) if session == "solo"),
        "{error}"
    );
    drop(first);
    agent_on(MockProvider::new([]), &store, "solo")
        .await
        .build()
        .await
        .unwrap();
}

#[tokio::test]
async fn provider_errors_are_returned_and_leave_only_complete_messages() {
    let provider = MockProvider::new([Step::Fail(ProviderError::StreamCut {
        reason: "reset".into(),
        source: None,
    })]);
    let store = Arc::new(MemoryStore::new());
    let mut agent = agent_on(provider.clone(), &store, "fail")
        .await
        .build()
        .await
        .unwrap();
    let error = agent.run("hello").await.unwrap_err();
    assert!(
        matches!(error, AgentError::Provider(ProviderError::StreamCut { .. })),
        "{error}"
    );
    assert_eq!(roles(agent.messages()), ["user"]);
}

#[tokio::test]
async fn resuming_closes_interrupted_calls_even_mid_history() {
    let store = Arc::new(MemoryStore::new());
    let key = SessionKey::session("crash").unwrap();
    // A crash between a call and its result, then the person went on anyway.
    let written = [
        Message::user("buy two things"),
        Message::assistant_tool_calls(
            None,
            vec![
                ToolCall::function("x1", "buy", r#"{"item":"torch"}"#),
                ToolCall::function("x2", "buy", r#"{"item":"rope"}"#),
            ],
        ),
        Message::tool("x1", "bought torch"),
        Message::tool("ghost", "a result whose call is gone"),
        Message::user("are you there?"),
    ];
    let entries: Vec<Entry> = written.iter().cloned().map(Entry::message).collect();
    store.append(&key, &entries).await.unwrap();

    let provider = MockProvider::new([answer("I am.")]);
    let mut agent = agent_on(provider.clone(), &store, "crash")
        .await
        .tool(shop())
        .build()
        .await
        .unwrap();
    // The interrupted call was answered durably when the agent was built.
    let stored = stored_messages(&store, &key).await;
    assert_eq!(stored.len(), 6);
    assert_eq!(stored[5].role, Role::Tool);
    assert_eq!(stored[5].tool_call_id.as_deref(), Some("x2"));
    assert!(stored[5].text().contains("interrupted"));
    assert_eq!(agent.messages(), stored.as_slice());

    agent.run("hello?").await.unwrap();
    // The request is accepted by the pairing check inside the mock; the orphan is gone
    // and x2's result sits right after its call.
    let sent = request_messages(&provider.requests()[0]);
    let ids: Vec<&str> = sent
        .iter()
        .filter_map(|m| m["tool_call_id"].as_str())
        .collect();
    assert_eq!(ids, ["x1", "x2"]);
    assert_eq!(sent[5]["content"], "are you there?");
}

#[tokio::test]
async fn a_subagent_continues_its_conversation_across_resumes() {
    let scout = || {
        Subagent::new("scout", "Explores a place.", "You are a scout.").tool(tool(
            "look",
            "Look.",
            |_: Nothing, _| async move { Ok::<_, String>("a dark cave") },
        ))
    };
    let provider = MockProvider::new([
        calls(&[("p1", "scout", r#"{"task":"look at the cave"}"#)]),
        calls(&[("s1", "look", "{}")]),
        answer("It is a dark cave."),
        answer("The scout says: dark cave."),
    ]);
    let store = Arc::new(MemoryStore::new());
    let mut day1 = agent_on(provider.clone(), &store, "subs")
        .await
        .subagent(scout())
        .build()
        .await
        .unwrap();
    assert_eq!(
        day1.run("send the scout").await.unwrap(),
        "The scout says: dark cave."
    );
    let child = day1.subagent_messages("scout").await.unwrap();
    assert_eq!(roles(&child), ["user", "assistant", "tool", "assistant"]);
    let parent_result = &day1.messages()[2];
    assert_eq!(parent_result.text(), "It is a dark cave.");
    drop(day1);

    provider.push(calls(&[("p2", "scout", r#"{"task":"anything new?"}"#)]));
    provider.push(answer("Nothing new."));
    provider.push(answer("Still dark."));
    let mut day2 = agent_on(provider.clone(), &store, "subs")
        .await
        .subagent(scout())
        .build()
        .await
        .unwrap();
    assert_eq!(day2.subagent_messages("scout").await.unwrap(), child);
    day2.run("ask again").await.unwrap();
    let requests = provider.requests();
    // The child's request of day 2 starts with its own day-1 exchange.
    let child_day2 = request_messages(&requests[5]);
    assert_eq!(child_day2[0]["content"], "You are a scout.");
    assert_eq!(child_day2[1]["content"], "look at the cave");
    assert_eq!(child_day2[4]["content"], "It is a dark cave.");
    assert_eq!(child_day2[5]["content"], "anything new?");
    let sub_key = SessionKey::subagent("subs", "scout").unwrap();
    assert_eq!(stored_messages(&store, &sub_key).await.len(), 6);
}

#[tokio::test]
async fn cancelling_while_a_subagent_works_closes_its_call_and_the_parents() {
    let (dig, started) = never_finishing_tool("dig", "Digs forever.");
    let provider = MockProvider::new([
        calls(&[("p1", "digger", r#"{"task":"dig a tunnel"}"#)]),
        calls(&[("d1", "dig", "{}")]),
    ]);
    let store = Arc::new(MemoryStore::new());
    let mut agent = agent_on(provider.clone(), &store, "deep")
        .await
        .subagent(Subagent::new("digger", "Digs.", "You dig.").tool(dig))
        .build()
        .await
        .unwrap();
    let error = run_cancelled_once_started(&mut agent, "dig", started).await;
    assert!(matches!(error, AgentError::Cancelled));
    let child = agent.subagent_messages("digger").await.unwrap();
    assert_eq!(roles(&child), ["user", "assistant", "tool"]);
    assert_eq!(child[2].text(), CANCELLED_BY_USER);
    assert_eq!(roles(agent.messages()), ["user", "assistant", "tool"]);
    assert_eq!(
        agent.messages()[2].text(),
        reprise_agent::subagent_interrupted_text("digger")
    );
    let sub_key = SessionKey::subagent("deep", "digger").unwrap();
    assert_eq!(stored_messages(&store, &sub_key).await, child);
}

#[tokio::test]
async fn a_stored_prompt_never_answered_is_answered_without_sending_it_again() {
    let store = Arc::new(MemoryStore::new());
    let key = SessionKey::session("pending").unwrap();
    // A process stored the prompt and died before the model answered.
    store
        .append(&key, &[Entry::message(Message::user("What is the toll?"))])
        .await
        .unwrap();
    let provider = MockProvider::new([answer("Two silver coins.")]);
    let mut agent = agent_on(provider.clone(), &store, "pending")
        .await
        .build()
        .await
        .unwrap();
    let text = agent.answer_pending().await.unwrap();
    assert_eq!(text, "Two silver coins.");
    assert_eq!(roles(agent.messages()), ["user", "assistant"]);
    let sent = request_messages(&provider.requests()[0]);
    let user_turns = sent.iter().filter(|m| m["role"] == "user").count();
    assert_eq!(user_turns, 1, "{sent:?}");
    assert_eq!(stored_messages(&store, &key).await.len(), 2);
}

#[tokio::test]
async fn a_subagents_task_names_the_call_that_gave_it_and_its_events_follow() {
    let provider = MockProvider::new([
        calls(&[("p1", "scout", r#"{"task":"look at the cave"}"#)]),
        answer("It is a dark cave."),
        answer("Dark."),
    ]);
    let store = Arc::new(MemoryStore::new());
    let mut agent = agent_on(provider.clone(), &store, "tasks")
        .await
        .subagent(Subagent::new("scout", "Explores.", "You are a scout."))
        .build()
        .await
        .unwrap();
    let (events_tx, mut events) = mpsc::unbounded_channel();
    agent
        .run_streaming("send the scout", events_tx, CancellationToken::new())
        .await
        .unwrap();
    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        seen.push(event);
    }
    // The task is taken up after the parent's call started and before the child's
    // first model call; the parent's call finishes after the child's answer.
    let at = |wanted: &dyn Fn(&AgentEvent) -> bool| seen.iter().position(wanted).unwrap();
    let task = at(
        &|e| matches!(e, AgentEvent::SubagentTask { agent, call_id } if agent == "scout" && call_id == "p1"),
    );
    let started = at(&|e| matches!(e, AgentEvent::ToolCallStarted { id, .. } if id == "p1"));
    let child_call =
        at(&|e| matches!(e, AgentEvent::ModelCallStarted { agent, .. } if agent == "scout"));
    let finished = at(&|e| matches!(e, AgentEvent::ToolCallFinished { id, .. } if id == "p1"));
    assert!(started < task && task < child_call && child_call < finished);
    let key = SessionKey::subagent("tasks", "scout").unwrap();
    let entries = store.load(&key).await.unwrap().unwrap().entries;
    assert_eq!(entries[0].extra["parentCall"], "p1");
    // The field is the entry's, not the message's: never sent to the model.
    let sent = request_messages(&provider.requests()[1]);
    assert_eq!(sent[1]["content"], "look at the cave");
    assert!(sent[1].get("parentCall").is_none(), "{sent:?}");
}

/// Denies `buy`; when asked about any other call, notes what the session holds.
struct DenyAndLook {
    store: Arc<MemoryStore>,
    seen_when_asked: Mutex<Vec<Vec<String>>>,
}

#[async_trait]
impl ToolApprover for DenyAndLook {
    async fn approve(&self, invocation: &ToolInvocation) -> Approval {
        let key = SessionKey::session("eager").unwrap();
        let roles = roles(&stored_messages(&self.store, &key).await);
        self.seen_when_asked.lock().unwrap().push(roles);
        if invocation.name == "buy" {
            Approval::Deny("no spending today".into())
        } else {
            Approval::Allow
        }
    }
}

#[tokio::test]
async fn a_denied_call_is_answered_and_marked_before_the_next_call_is_asked_about() {
    let store = Arc::new(MemoryStore::new());
    let approver = Arc::new(DenyAndLook {
        store: store.clone(),
        seen_when_asked: Mutex::default(),
    });
    let look = tool("look", "Look around.", |_: Nothing, _| async move {
        Ok::<_, String>("a shop")
    });
    let provider = MockProvider::new([
        calls(&[("b", "buy", r#"{"item":"torch"}"#), ("l", "look", "{}")]),
        answer("I looked."),
    ]);
    let mut agent = agent_on(provider, &store, "eager")
        .await
        .tool(shop())
        .tool(look)
        .approver(approver.clone())
        .build()
        .await
        .unwrap();
    agent.run("shop").await.unwrap();
    // When `look` was asked about, the denial of `buy` was already recorded.
    assert_eq!(
        approver.seen_when_asked.lock().unwrap()[1],
        ["user", "assistant", "tool"]
    );
    // The denied result carries the error mark; the good one does not.
    let key = SessionKey::session("eager").unwrap();
    let entries = store.load(&key).await.unwrap().unwrap().entries;
    let marks: Vec<Option<&serde_json::Value>> = entries
        .iter()
        .filter(|entry| entry.message.as_ref().is_some_and(|m| m.role == Role::Tool))
        .map(|entry| entry.extra.get(reprise_agent::TOOL_ERROR_FIELD))
        .collect();
    assert_eq!(marks, [Some(&serde_json::Value::Bool(true)), None]);
}
