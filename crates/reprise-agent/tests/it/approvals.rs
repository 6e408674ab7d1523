//! Approvals that wait: an approver answers "not now", the turn stops with the
//! calls recorded as waiting, and a decision recorded later (by another agent on
//! the session, as another process would) lets the turn go on.

use std::sync::{Arc, Mutex};

use crate::support::{MockProvider, answer, calls};
use async_trait::async_trait;
use reprise_agent::{
    Agent, AgentError, AgentEvent, Approval, DecisionError, PendingCall, Subagent, ToolApprover,
    ToolInvocation, tool,
};
use reprise_session::{
    ANSWERS_ENTRY, AfterCrash, CallDecision, Entry, FileSessionStore, MemoryStore, Role,
    SessionKey, SessionStore, arguments_hash, awaiting_calls, decided_call, started_calls,
};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const SESSION: &str = "approvals";

#[derive(Deserialize, JsonSchema)]
struct Pay {
    amount: u32,
}

/// A tool named `name` that records the amount of every run.
fn counting(name: &'static str) -> (Arc<dyn reprise_agent::Tool>, Arc<Mutex<Vec<u32>>>) {
    let runs: Arc<Mutex<Vec<u32>>> = Arc::default();
    let seen = runs.clone();
    let tool = tool(name, "Pays.", move |args: Pay, _| {
        let seen = seen.clone();
        async move {
            seen.lock().unwrap().push(args.amount);
            Ok::<_, String>(format!("paid {}", args.amount))
        }
    });
    (Arc::new(tool), runs)
}

/// Defers every call of `pay`, allows the others, and counts the questions.
#[derive(Default)]
struct DeferPay {
    asked: Mutex<Vec<String>>,
}

#[async_trait]
impl ToolApprover for DeferPay {
    async fn approve(&self, call: &ToolInvocation) -> Approval {
        self.asked
            .lock()
            .unwrap()
            .push(call.context.call_id.clone());
        if call.name == "pay" {
            Approval::Defer
        } else {
            Approval::Allow
        }
    }
}

/// Allows every call and counts the questions.
#[derive(Default)]
struct AllowAll {
    asked: Mutex<Vec<String>>,
}

#[async_trait]
impl ToolApprover for AllowAll {
    async fn approve(&self, call: &ToolInvocation) -> Approval {
        self.asked
            .lock()
            .unwrap()
            .push(call.context.call_id.clone());
        Approval::Allow
    }
}

fn key() -> SessionKey {
    SessionKey::session(SESSION).unwrap()
}

async fn entries(store: &dyn SessionStore) -> Vec<Entry> {
    store.load(&key()).await.unwrap().unwrap().entries
}

/// The results of the transcript: (call id, text).
fn results(entries: &[Entry]) -> Vec<(String, String)> {
    entries
        .iter()
        .filter_map(Entry::as_message)
        .filter(|message| message.role == Role::Tool)
        .map(|message| {
            (
                message.tool_call_id.clone().unwrap_or_default(),
                message.text(),
            )
        })
        .collect()
}

async fn agent(
    store: Arc<dyn SessionStore>,
    provider: Arc<MockProvider>,
    tools: Vec<Arc<dyn reprise_agent::Tool>>,
    approver: Option<Arc<dyn ToolApprover>>,
) -> Agent {
    let mut builder = Agent::builder(provider)
        .store(store)
        .session_id(SESSION)
        .tools(tools);
    if let Some(approver) = approver {
        builder = builder.approver(approver);
    }
    builder.build().await.unwrap()
}

/// Runs `prompt` with `pay` deferred: the run ends waiting for the calls it returns.
async fn stop_waiting(agent: &mut Agent, prompt: &str) -> Vec<PendingCall> {
    match agent.run(prompt).await {
        Err(AgentError::AwaitingDecision { calls }) => calls,
        other => panic!("expected the turn to wait, got {other:?}"),
    }
}

#[tokio::test]
async fn a_waiting_call_is_recorded_and_runs_once_allowed_by_another_writer() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SessionStore> = Arc::new(FileSessionStore::new(dir.path()));
    let (pay, paid) = counting("pay");
    let (look, looked) = counting("look");
    let provider = MockProvider::new([calls(&[
        ("a", "pay", r#"{"amount":5}"#),
        ("b", "look", r#"{"amount":0}"#),
    ])]);
    let approver = Arc::new(DeferPay::default());
    let mut first = agent(
        store.clone(),
        provider.clone(),
        vec![pay.clone(), look.clone()],
        Some(approver.clone()),
    )
    .await;
    let (events_tx, mut events_rx) = mpsc::unbounded_channel();
    let waiting = match first
        .run_streaming("pay the bill", events_tx, CancellationToken::new())
        .await
    {
        Err(AgentError::AwaitingDecision { calls }) => calls,
        other => panic!("expected the turn to wait, got {other:?}"),
    };
    let reply = entries(store.as_ref()).await[1].uuid;
    assert_eq!(
        waiting,
        [PendingCall {
            entry: reply,
            call_id: "a".into(),
            tool: "pay".into(),
            arguments: r#"{"amount":5}"#.into(),
            arguments_hash: arguments_hash(r#"{"amount":5}"#),
        }]
    );
    let mut waited = Vec::new();
    while let Ok(event) = events_rx.try_recv() {
        match event {
            AgentEvent::CallAwaitingDecision { id, .. } => waited.push(id),
            AgentEvent::ToolCallFinished { id, .. } => assert_eq!(id, "b"),
            _ => {}
        }
    }
    assert_eq!(waited, ["a"]);
    // The other call ran; the waiting one did not, and the model was not called again.
    assert!(paid.lock().unwrap().is_empty());
    assert_eq!(*looked.lock().unwrap(), [0]);
    assert_eq!(provider.requests().len(), 1);
    let written = entries(store.as_ref()).await;
    let recorded: Vec<_> = written.iter().flat_map(awaiting_calls).collect();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].tool_call_id, "a");
    assert_eq!(results(&written), [("b".into(), "paid 0".into())]);
    assert_eq!(first.pending_calls(), waiting);
    first.close().await.unwrap();

    // Another writer, on another store instance over the same folder, with no
    // approver: it decides and continues.
    let store_again: Arc<dyn SessionStore> = Arc::new(FileSessionStore::new(dir.path()));
    provider.push(answer("paid, all done"));
    let mut second = agent(store_again.clone(), provider.clone(), vec![pay, look], None).await;
    assert!(second.has_cut_turn());
    let pending = second.pending_calls();
    assert_eq!(pending, waiting);
    second
        .decide(&pending[0], CallDecision::Allow, "ops on call")
        .await
        .unwrap();
    assert!(second.pending_calls().is_empty());
    assert!(paid.lock().unwrap().is_empty(), "a decision runs nothing");
    let answered = second
        .resume_turn(None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(answered.as_deref(), Some("paid, all done"));
    assert_eq!(*paid.lock().unwrap(), [5]);
    assert_eq!(
        *looked.lock().unwrap(),
        [0],
        "the other call is not run again"
    );
    assert_eq!(approver.asked.lock().unwrap().len(), 2);

    let written = entries(store_again.as_ref()).await;
    let decided: Vec<_> = written.iter().filter_map(decided_call).collect();
    assert_eq!(decided.len(), 1);
    assert_eq!(decided[0].decided_by, "ops on call");
    let starts: Vec<_> = written.iter().flat_map(started_calls).collect();
    assert_eq!(starts.len(), 2);
    assert_eq!(starts[1].tool_call_id, "a");
    assert_eq!(starts[1].allowed_by, "a recorded decision by ops on call");
    let result = written
        .iter()
        .find(|entry| {
            entry
                .as_message()
                .is_some_and(|m| m.tool_call_id.as_deref() == Some("a"))
        })
        .unwrap();
    assert_eq!(result.extra[ANSWERS_ENTRY], reply.to_string());
    assert_eq!(AfterCrash::of_entry(result), None, "no crash happened");
    // The model got both results beside their calls.
    let request = &provider.requests()[1];
    assert_eq!(request["messages"][2]["tool_call_id"], "a");
    assert_eq!(request["messages"][2]["content"], "paid 5");
    assert_eq!(request["messages"][3]["content"], "paid 0");
    assert!(!second.has_cut_turn());
    // Decided once: a second decision is refused.
    let again = second.decide(&pending[0], CallDecision::Allow, "ops").await;
    assert!(
        matches!(
            again,
            Err(AgentError::Decision(DecisionError::AlreadyDecided { ref decided_by, .. }))
                if decided_by == "ops on call"
        ),
        "{again:?}"
    );
    second.close().await.unwrap();
}

#[tokio::test]
async fn changed_arguments_unknown_calls_and_a_second_decision_are_refused() {
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    let (pay, paid) = counting("pay");
    let provider = MockProvider::new([calls(&[("a", "pay", r#"{"amount":5}"#)])]);
    let mut agent = agent(
        store.clone(),
        provider.clone(),
        vec![pay],
        Some(Arc::new(DeferPay::default())),
    )
    .await;
    let waiting = stop_waiting(&mut agent, "pay the bill").await;
    let before = entries(store.as_ref()).await.len();

    // Other arguments, with their own hash or with the call's.
    let mut changed = waiting[0].clone();
    changed.arguments = r#"{"amount":500}"#.into();
    changed.arguments_hash = arguments_hash(&changed.arguments);
    let mut stale = waiting[0].clone();
    stale.arguments = r#"{"amount":500}"#.into();
    for call in [&changed, &stale] {
        let refused = agent.decide(call, CallDecision::Allow, "ops").await;
        assert!(
            matches!(
                refused,
                Err(AgentError::Decision(DecisionError::ArgumentsChanged { .. }))
            ),
            "{refused:?}"
        );
    }
    let mut unknown = waiting[0].clone();
    unknown.call_id = "z".into();
    let refused = agent.decide(&unknown, CallDecision::Allow, "ops").await;
    assert!(
        matches!(
            refused,
            Err(AgentError::Decision(DecisionError::UnknownCall { .. }))
        ),
        "{refused:?}"
    );
    assert_eq!(
        entries(store.as_ref()).await.len(),
        before,
        "nothing written"
    );

    let deny = CallDecision::Deny {
        reason: "over budget".into(),
    };
    agent.decide(&waiting[0], deny, "ops").await.unwrap();
    let second = agent.decide(&waiting[0], CallDecision::Allow, "ops").await;
    assert!(
        matches!(
            second,
            Err(AgentError::Decision(DecisionError::AlreadyDecided { .. }))
        ),
        "{second:?}"
    );
    assert_eq!(entries(store.as_ref()).await.len(), before + 1);

    // Denied: the model is told why, and the tool never ran.
    provider.push(answer("I did not pay"));
    assert_eq!(
        agent.run("go on").await.unwrap(),
        "I did not pay",
        "a run continues the turn first"
    );
    assert!(paid.lock().unwrap().is_empty());
    let written = entries(store.as_ref()).await;
    assert_eq!(
        results(&written),
        [(
            "a".into(),
            "error: the call to pay was not allowed: over budget".into()
        )]
    );
    let users: Vec<String> = written
        .iter()
        .filter_map(Entry::as_message)
        .filter(|m| m.role == Role::User)
        .map(|m| m.text())
        .collect();
    assert_eq!(users, ["pay the bill", "go on"]);
}

#[tokio::test]
async fn an_undecided_call_keeps_waiting_without_an_approver_and_goes_back_to_one() {
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    let (pay, paid) = counting("pay");
    let provider = MockProvider::new([calls(&[("a", "pay", r#"{"amount":5}"#)])]);
    let mut first = agent(
        store.clone(),
        provider.clone(),
        vec![pay.clone()],
        Some(Arc::new(DeferPay::default())),
    )
    .await;
    let waiting = stop_waiting(&mut first, "pay the bill").await;
    first.close().await.unwrap();

    // Without an approver and without a decision, nothing runs and nothing more is
    // written.
    let before = entries(store.as_ref()).await.len();
    let mut nobody = agent(store.clone(), provider.clone(), vec![pay.clone()], None).await;
    let again = nobody.resume_turn(None, CancellationToken::new()).await;
    assert!(
        matches!(&again, Err(AgentError::AwaitingDecision { calls }) if *calls == waiting),
        "{again:?}"
    );
    assert_eq!(entries(store.as_ref()).await.len(), before);
    assert_eq!(nobody.pending_calls(), waiting);
    nobody.close().await.unwrap();

    // An approver that answers now: the question comes back, as it was.
    provider.push(answer("paid"));
    let approver = Arc::new(AllowAll::default());
    let mut asking = agent(
        store.clone(),
        provider.clone(),
        vec![pay],
        Some(approver.clone()),
    )
    .await;
    let (events_tx, mut events_rx) = mpsc::unbounded_channel();
    let answered = asking
        .resume_turn(Some(events_tx.into()), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(answered.as_deref(), Some("paid"));
    assert_eq!(*approver.asked.lock().unwrap(), ["a"]);
    assert_eq!(*paid.lock().unwrap(), [5]);
    while let Ok(event) = events_rx.try_recv() {
        assert!(
            !matches!(event, AgentEvent::CallResumed { .. }),
            "not a crash: {event:?}"
        );
    }
    assert_eq!(provider.requests().len(), 2);
}

#[tokio::test]
async fn a_subagents_call_cannot_wait_and_is_denied_saying_so() {
    let (pay, paid) = counting("pay");
    let provider = MockProvider::new([
        calls(&[("p1", "clerk", r#"{"task":"pay 5"}"#)]),
        calls(&[("s1", "pay", r#"{"amount":5}"#)]),
        answer("could not pay"),
        answer("the clerk could not pay"),
    ]);
    let clerk = Subagent::new("clerk", "Pays bills.", "You pay bills.").tool(pay);
    let mut agent = Agent::builder(provider.clone())
        .store(Arc::new(MemoryStore::new()))
        .session_id(SESSION)
        .subagent(clerk)
        .approver(Arc::new(DeferPay::default()))
        .build()
        .await
        .unwrap();
    assert_eq!(
        agent.run("pay the bill").await.unwrap(),
        "the clerk could not pay"
    );
    assert!(paid.lock().unwrap().is_empty());
    let messages = agent.subagent_messages("clerk").await.unwrap();
    let result = messages.iter().find(|m| m.role == Role::Tool).unwrap();
    assert_eq!(
        result.text(),
        "error: the call to pay was not allowed: a subagent's call cannot wait for a decision"
    );
}
