//! Turns a crash cut in the middle of their tool calls: start records written
//! before a call with effects starts, and the resume that finishes the turn (calls
//! that never started asked about again, read-only ones run again, started ones as
//! the tool says, a subagent's task continued). A crash is the session as a killed
//! process leaves it: entries written up to some append, and nothing after.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::support::{MockProvider, answer, calls};
use async_trait::async_trait;
use reprise_agent::{
    Agent, AgentEvent, Approval, OnUnknown, Subagent, ToolApprover, ToolInvocation,
    idempotency_key, tool,
};
use reprise_session::{
    AfterCrash, Entry, FileSessionStore, MemoryStore, Message, Role, SessionKey, SessionStore,
    StartedCall, ToolCall, started_calls, tool_start_entry,
};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

#[derive(Deserialize, JsonSchema)]
struct Pay {
    amount: u32,
}

/// What a counting tool saw: one idempotency key per run.
type Runs = Arc<Mutex<Vec<String>>>;

/// What a tool declares about its effects, for [`counting`].
#[derive(Clone, Copy)]
enum Kind {
    Changes,
    Idempotent,
    ReadOnly,
    Configured(OnUnknown),
}

/// A tool named `name` that records the idempotency key of every run.
fn counting(name: &'static str, kind: Kind) -> (Arc<dyn reprise_agent::Tool>, Runs) {
    let runs: Runs = Arc::default();
    let seen = runs.clone();
    let tool = tool(name, "Pays.", move |args: Pay, call| {
        let seen = seen.clone();
        async move {
            seen.lock().unwrap().push(call.idempotency_key);
            Ok::<_, String>(format!("paid {}", args.amount))
        }
    });
    let tool: Arc<dyn reprise_agent::Tool> = match kind {
        Kind::Changes => Arc::new(tool),
        Kind::Idempotent => Arc::new(tool.idempotent()),
        Kind::ReadOnly => Arc::new(tool.read_only()),
        Kind::Configured(on_unknown) => Arc::new(tool.on_unknown(on_unknown)),
    };
    (tool, runs)
}

/// An approver that allows every call, answers `again` when asked whether to run a
/// cut call again, and counts both kinds of question.
#[derive(Default)]
struct Counting {
    again: bool,
    asked: AtomicUsize,
    asked_again: Mutex<Vec<String>>,
}

#[async_trait]
impl ToolApprover for Counting {
    async fn approve(&self, _: &ToolInvocation) -> Approval {
        self.asked.fetch_add(1, Ordering::SeqCst);
        Approval::Allow
    }

    async fn approve_with_reason(&self, call: &ToolInvocation) -> (Approval, String) {
        (self.approve(call).await, "the test".to_owned())
    }

    async fn run_again(&self, call: &ToolInvocation) -> bool {
        self.asked_again
            .lock()
            .unwrap()
            .push(call.arguments.to_string());
        self.again
    }
}

const SESSION: &str = "cut";

fn key() -> SessionKey {
    SessionKey::session(SESSION).unwrap()
}

/// A session cut after the model asked for `calls`: the prompt and the reply, then
/// `after(reply)` (start records, results) as the crash left them.
async fn cut_session(
    store: &dyn SessionStore,
    calls: &[(&str, &str, &str)],
    after: impl FnOnce(&Entry) -> Vec<Entry>,
) -> Entry {
    let reply = Entry::message(Message::assistant_tool_calls(
        None,
        calls
            .iter()
            .map(|(id, name, arguments)| ToolCall::function(*id, *name, *arguments))
            .collect(),
    ));
    let mut entries = vec![Entry::message(Message::user("pay the bill")), reply.clone()];
    entries.extend(after(&reply));
    store.append(&key(), &entries).await.unwrap();
    reply
}

fn started(reply: &Entry, ids: &[(&str, &str)]) -> Entry {
    tool_start_entry(
        &ids.iter()
            .map(|(id, tool)| StartedCall {
                entry: reply.uuid,
                tool_call_id: (*id).to_owned(),
                tool: (*tool).to_owned(),
                allowed_by: "--yes".to_owned(),
                idempotency_key: idempotency_key(SESSION, reply.uuid, id),
                rerun: false,
            })
            .collect::<Vec<_>>(),
    )
}

async fn entries(store: &dyn SessionStore, key: &SessionKey) -> Vec<Entry> {
    store.load(key).await.unwrap().unwrap().entries
}

/// The result entries of the history, by call id: (text, afterCrash mark).
fn results(entries: &[Entry]) -> Vec<(String, String, Option<AfterCrash>)> {
    entries
        .iter()
        .filter_map(|entry| {
            let message = entry.as_message()?;
            (message.role == Role::Tool).then(|| {
                (
                    message.tool_call_id.clone().unwrap_or_default(),
                    message.text(),
                    AfterCrash::of_entry(entry),
                )
            })
        })
        .collect()
}

async fn build(
    store: Arc<dyn SessionStore>,
    provider: Arc<MockProvider>,
    tools: Vec<Arc<dyn reprise_agent::Tool>>,
    approver: Option<Arc<Counting>>,
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

#[tokio::test]
async fn calls_with_effects_are_recorded_as_started_in_one_entry_before_they_run() {
    let store = Arc::new(MemoryStore::new());
    let (pay, paid) = counting("pay", Kind::Changes);
    let (refund, refunded) = counting("refund", Kind::Idempotent);
    let (look, _) = counting("look", Kind::ReadOnly);
    // The record is on disk when the tool runs: the tool reads the store.
    let seen_store = store.clone();
    let records_seen: Arc<Mutex<usize>> = Arc::default();
    let seen = records_seen.clone();
    let check = tool("check", "Checks.", move |_: Pay, _| {
        let (store, seen) = (seen_store.clone(), seen.clone());
        async move {
            let records = entries(store.as_ref(), &key())
                .await
                .iter()
                .filter(|entry| !started_calls(entry).is_empty())
                .count();
            *seen.lock().unwrap() = records;
            Ok::<_, String>("checked")
        }
    });
    let provider = MockProvider::new([
        calls(&[
            ("a", "pay", r#"{"amount":5}"#),
            ("b", "refund", r#"{"amount":2}"#),
            ("c", "look", r#"{"amount":0}"#),
            ("d", "check", r#"{"amount":0}"#),
        ]),
        answer("done"),
    ]);
    let approver = Arc::new(Counting::default());
    let mut agent = build(
        store.clone(),
        provider,
        vec![pay, refund, look, Arc::new(check)],
        Some(approver),
    )
    .await;
    assert_eq!(agent.run("pay").await.unwrap(), "done");
    assert_eq!(*records_seen.lock().unwrap(), 1);
    let all = entries(store.as_ref(), &key()).await;
    let records: Vec<_> = all
        .iter()
        .filter(|e| !started_calls(e).is_empty())
        .collect();
    assert_eq!(records.len(), 1, "parallel calls share one start record");
    let named = started_calls(records[0]);
    let ids: Vec<&str> = named.iter().map(|c| c.tool_call_id.as_str()).collect();
    assert_eq!(ids, ["a", "b", "d"], "a read-only call needs no record");
    let reply = all[1].uuid;
    assert_eq!(named[0].entry, reply);
    assert_eq!(named[0].tool, "pay");
    assert_eq!(named[0].allowed_by, "the test");
    assert_eq!(
        named[0].idempotency_key,
        idempotency_key(SESSION, reply, "a")
    );
    assert!(!named[0].rerun);
    // The record comes before every result, and the tools got the recorded keys.
    let record_at = all.iter().position(|e| e.kind.is_some()).unwrap();
    assert_eq!(record_at, 2);
    assert_eq!(*paid.lock().unwrap(), [named[0].idempotency_key.clone()]);
    assert_eq!(
        *refunded.lock().unwrap(),
        [named[1].idempotency_key.clone()]
    );
    // The record is never sent to the model: the prompt, the calls, four results, the
    // answer.
    assert_eq!(agent.model_view().messages.len(), 7);
    assert!(!agent.has_cut_turn());
}

#[tokio::test]
async fn a_call_that_never_started_is_asked_about_again_and_the_turn_goes_on() {
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    // The crash fell while the gate was asking: no start record, no result.
    cut_session(store.as_ref(), &[("a", "pay", r#"{"amount":5}"#)], |_| {
        Vec::new()
    })
    .await;
    let (pay, paid) = counting("pay", Kind::Changes);
    let provider = MockProvider::new([answer("paid, all done")]);
    let approver = Arc::new(Counting::default());
    let mut agent = build(
        store.clone(),
        provider.clone(),
        vec![pay],
        Some(approver.clone()),
    )
    .await;
    assert!(agent.has_cut_turn());
    // Opening wrote nothing: the open call is left for the resume.
    assert_eq!(entries(store.as_ref(), &key()).await.len(), 2);
    let (events_tx, mut events_rx) = mpsc::unbounded_channel();
    let answered = agent
        .resume_turn(Some(events_tx.into()), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(answered.as_deref(), Some("paid, all done"));
    assert_eq!(
        approver.asked.load(Ordering::SeqCst),
        1,
        "the same question again"
    );
    assert_eq!(paid.lock().unwrap().len(), 1);
    let all = entries(store.as_ref(), &key()).await;
    assert_eq!(
        results(&all),
        [(
            "a".to_owned(),
            "paid 5".to_owned(),
            Some(AfterCrash::Reasked)
        )]
    );
    assert_eq!(
        started_calls(&all[2]).len(),
        1,
        "the start is recorded before the run"
    );
    // The model got the real result, as if the crash had not happened.
    let request = &provider.requests()[0];
    assert_eq!(request["messages"][2]["content"], "paid 5");
    let mut resumed = Vec::new();
    while let Ok(event) = events_rx.try_recv() {
        if let AgentEvent::CallResumed { id, action, .. } = event {
            resumed.push((id, action));
        }
    }
    assert_eq!(resumed, [("a".to_owned(), AfterCrash::Reasked)]);
    assert!(!agent.has_cut_turn());
    assert_eq!(
        agent
            .resume_turn(None, CancellationToken::new())
            .await
            .unwrap(),
        None
    );
}

#[tokio::test]
async fn a_started_call_with_effects_is_never_run_again_without_a_yes() {
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    cut_session(
        store.as_ref(),
        &[("a", "pay", r#"{"amount":5}"#)],
        |reply| vec![started(reply, &[("a", "pay")])],
    )
    .await;
    let (pay, paid) = counting("pay", Kind::Changes);
    let provider = MockProvider::new([answer("it may have been paid")]);
    // No approver: nobody to ask, so the call is closed as interrupted.
    let mut agent = build(store.clone(), provider.clone(), vec![pay], None).await;
    agent
        .resume_turn(None, CancellationToken::new())
        .await
        .unwrap();
    assert!(paid.lock().unwrap().is_empty());
    let all = entries(store.as_ref(), &key()).await;
    let found = results(&all);
    assert_eq!(found.len(), 1);
    assert!(
        found[0].1.contains("may or may not have taken effect"),
        "{}",
        found[0].1
    );
    assert_eq!(found[0].2, Some(AfterCrash::Interrupted));

    // An approver that says no: the same.
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    cut_session(
        store.as_ref(),
        &[("a", "pay", r#"{"amount":5}"#)],
        |reply| vec![started(reply, &[("a", "pay")])],
    )
    .await;
    let (pay, paid) = counting("pay", Kind::Changes);
    let approver = Arc::new(Counting::default());
    let mut agent = build(
        store.clone(),
        MockProvider::new([answer("ok")]),
        vec![pay],
        Some(approver.clone()),
    )
    .await;
    agent
        .resume_turn(None, CancellationToken::new())
        .await
        .unwrap();
    assert!(paid.lock().unwrap().is_empty());
    assert_eq!(*approver.asked_again.lock().unwrap(), [r#"{"amount":5}"#]);
    assert_eq!(approver.asked.load(Ordering::SeqCst), 0);
    assert_eq!(
        results(&entries(store.as_ref(), &key()).await)[0].2,
        Some(AfterCrash::Interrupted)
    );
}

#[tokio::test]
async fn a_started_call_runs_again_with_its_key_when_the_person_says_again() {
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    let reply = cut_session(
        store.as_ref(),
        &[("a", "pay", r#"{"amount":5}"#)],
        |reply| vec![started(reply, &[("a", "pay")])],
    )
    .await;
    let (pay, paid) = counting("pay", Kind::Changes);
    let approver = Arc::new(Counting {
        again: true,
        ..Counting::default()
    });
    let mut agent = build(
        store.clone(),
        MockProvider::new([answer("paid")]),
        vec![pay],
        Some(approver.clone()),
    )
    .await;
    agent
        .resume_turn(None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(
        *paid.lock().unwrap(),
        [idempotency_key(SESSION, reply.uuid, "a")]
    );
    let all = entries(store.as_ref(), &key()).await;
    // A second start record, marked as a rerun, before the result.
    let records: Vec<StartedCall> = all.iter().flat_map(started_calls).collect();
    assert_eq!(records.len(), 2);
    assert!(records[1].rerun);
    assert_eq!(records[1].idempotency_key, records[0].idempotency_key);
    assert_eq!(results(&all)[0].2, Some(AfterCrash::RanAgain));
}

#[tokio::test]
async fn idempotent_and_read_only_calls_run_again_without_the_again_question_and_skip_is_kept() {
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    let reply = cut_session(
        store.as_ref(),
        &[
            ("a", "refund", r#"{"amount":1}"#),
            ("b", "look", r#"{"amount":2}"#),
            ("c", "note", r#"{"amount":3}"#),
            ("d", "ship", r#"{"amount":4}"#),
        ],
        |reply| {
            vec![started(
                reply,
                &[("a", "refund"), ("c", "note"), ("d", "ship")],
            )]
        },
    )
    .await;
    let (refund, refunded) = counting("refund", Kind::Idempotent);
    let (look, looked) = counting("look", Kind::ReadOnly);
    let (note, noted) = counting("note", Kind::Configured(OnUnknown::Skip));
    let (ship, shipped) = counting("ship", Kind::Configured(OnUnknown::Rerun));
    let approver = Arc::new(Counting::default());
    let provider = MockProvider::new([answer("done")]);
    let mut agent = build(
        store.clone(),
        provider,
        vec![refund, look, note, ship],
        Some(approver.clone()),
    )
    .await;
    agent
        .resume_turn(None, CancellationToken::new())
        .await
        .unwrap();
    // Only the read-only call, whose start is never recorded, passes the gate again;
    // nobody is asked whether to run anything twice.
    assert_eq!(approver.asked.load(Ordering::SeqCst), 1);
    assert!(approver.asked_again.lock().unwrap().is_empty());
    assert_eq!(
        *refunded.lock().unwrap(),
        [idempotency_key(SESSION, reply.uuid, "a")]
    );
    assert_eq!(looked.lock().unwrap().len(), 1);
    assert!(noted.lock().unwrap().is_empty());
    assert_eq!(shipped.lock().unwrap().len(), 1);
    let marks: Vec<_> = results(&entries(store.as_ref(), &key()).await)
        .into_iter()
        .map(|(id, _, mark)| (id, mark.unwrap()))
        .collect();
    assert_eq!(
        marks,
        [
            ("a".to_owned(), AfterCrash::RanAgain),
            ("b".to_owned(), AfterCrash::RanAgainReadOnly),
            ("c".to_owned(), AfterCrash::Interrupted),
            ("d".to_owned(), AfterCrash::RanAgain),
        ]
    );
}

#[tokio::test]
async fn only_the_last_turn_is_finished_and_a_result_already_there_is_kept() {
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    // An earlier turn left a call open (a session that went on without repair).
    let old = Entry::message(Message::assistant_tool_calls(
        None,
        vec![ToolCall::function("old", "pay", r#"{"amount":9}"#)],
    ));
    store
        .append(
            &key(),
            &[
                Entry::message(Message::user("first")),
                old.clone(),
                Entry::message(Message::user("second")),
            ],
        )
        .await
        .unwrap();
    cut_session(
        store.as_ref(),
        &[
            ("a", "pay", r#"{"amount":1}"#),
            ("b", "pay", r#"{"amount":2}"#),
        ],
        |reply| {
            vec![
                started(reply, &[("a", "pay"), ("b", "pay")]),
                Entry::message(Message::tool("a", "paid 1")),
            ]
        },
    )
    .await;
    let (pay, paid) = counting("pay", Kind::Changes);
    let mut agent = build(
        store.clone(),
        MockProvider::new([answer("ok")]),
        vec![pay],
        None,
    )
    .await;
    // Opening closed the earlier turn's call, as before.
    let opened = results(&entries(store.as_ref(), &key()).await);
    assert_eq!(opened.len(), 2);
    assert_eq!(opened[1].0, "old");
    assert_eq!(opened[1].2, None);
    agent
        .resume_turn(None, CancellationToken::new())
        .await
        .unwrap();
    assert!(paid.lock().unwrap().is_empty());
    let found = results(&entries(store.as_ref(), &key()).await);
    assert_eq!(found.len(), 3);
    assert_eq!(found[2].0, "b");
    assert_eq!(found[2].2, Some(AfterCrash::Interrupted));
    // The result that existed is what the model gets for `a`.
    let view = &agent.model_view().messages;
    assert!(view.iter().any(|m| m.text() == "paid 1"));
}

#[tokio::test]
async fn a_new_prompt_on_a_cut_session_first_finishes_the_cut_calls() {
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    cut_session(store.as_ref(), &[("a", "pay", r#"{"amount":5}"#)], |_| {
        Vec::new()
    })
    .await;
    let (pay, paid) = counting("pay", Kind::Changes);
    let provider = MockProvider::new([answer("next")]);
    let mut agent = build(store.clone(), provider.clone(), vec![pay], None).await;
    assert_eq!(agent.run("and now?").await.unwrap(), "next");
    assert_eq!(paid.lock().unwrap().len(), 1);
    let roles: Vec<String> = agent
        .messages()
        .iter()
        .map(|m| m.role.as_str().to_owned())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "user", "assistant"]);
}

#[tokio::test]
async fn a_subagent_cut_mid_call_is_continued_inside_its_parents_call() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SessionStore> = Arc::new(FileSessionStore::new(dir.path()));
    let parent_reply = cut_session(
        store.as_ref(),
        &[("p1", "scout", r#"{"task":"count the coins"}"#)],
        |_| Vec::new(),
    )
    .await;
    // The subagent took the task and was running a read-only call when it was cut.
    let sub_key = SessionKey::subagent(SESSION, "scout").unwrap();
    let mut task = Entry::message(Message::user("count the coins"));
    task.ts = parent_reply.ts;
    task.extra.insert(
        reprise_agent::PARENT_CALL_FIELD.to_owned(),
        serde_json::Value::String("p1".to_owned()),
    );
    let sub_reply = Entry::message(Message::assistant_tool_calls(
        None,
        vec![ToolCall::function("s1", "look", r#"{"amount":0}"#)],
    ));
    store.append(&sub_key, &[task, sub_reply]).await.unwrap();
    let (look, looked) = counting("look", Kind::ReadOnly);
    // The subagent answers first, then the parent.
    let provider = MockProvider::new([answer("twelve coins"), answer("The scout found twelve.")]);
    let mut agent = Agent::builder(provider.clone())
        .store(store.clone())
        .session_id(SESSION)
        .subagent(Subagent::new("scout", "Scouts.", "You scout.").tool(look))
        .build()
        .await
        .unwrap();
    assert!(agent.has_cut_turn());
    let answered = agent
        .resume_turn(None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(answered.as_deref(), Some("The scout found twelve."));
    assert_eq!(looked.lock().unwrap().len(), 1);
    let found = results(&entries(store.as_ref(), &key()).await);
    assert_eq!(
        found,
        [(
            "p1".to_owned(),
            "twelve coins".to_owned(),
            Some(AfterCrash::Continued)
        )]
    );
    let sub = results(&entries(store.as_ref(), &sub_key).await);
    assert_eq!(sub[0].2, Some(AfterCrash::RanAgainReadOnly));
    // The subagent's answer, recorded before the crash, is not asked for twice.
    drop(agent);
    let store2: Arc<dyn SessionStore> = Arc::new(FileSessionStore::new(dir.path()));
    let again = cut_session_again(store2.as_ref(), &sub_key).await;
    let provider = MockProvider::new([answer("Twelve, as the scout said.")]);
    let mut agent = Agent::builder(provider.clone())
        .store(store2.clone())
        .session_id(SESSION)
        .subagent(Subagent::new("scout", "Scouts.", "You scout."))
        .build()
        .await
        .unwrap();
    agent
        .resume_turn(None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(
        provider.requests().len(),
        1,
        "only the parent's model was called"
    );
    let found = results(&entries(store2.as_ref(), &key()).await);
    assert_eq!(found.last().unwrap().0, again);
    assert_eq!(found.last().unwrap().1, "answered before the crash");
}

/// Adds to the session a parent turn whose subagent task was answered, cut before
/// the parent recorded the result; returns the parent's call id.
async fn cut_session_again(store: &dyn SessionStore, sub_key: &SessionKey) -> String {
    let reply = Entry::message(Message::assistant_tool_calls(
        None,
        vec![ToolCall::function("p2", "scout", r#"{"task":"again"}"#)],
    ));
    store
        .append(
            &key(),
            &[Entry::message(Message::user("again")), reply.clone()],
        )
        .await
        .unwrap();
    let mut task = Entry::message(Message::user("again"));
    task.extra.insert(
        reprise_agent::PARENT_CALL_FIELD.to_owned(),
        serde_json::Value::String("p2".to_owned()),
    );
    store
        .append(
            sub_key,
            &[
                task,
                Entry::message(Message::assistant("answered before the crash")),
            ],
        )
        .await
        .unwrap();
    "p2".to_owned()
}

#[tokio::test]
async fn a_crash_after_the_results_and_before_the_reply_is_finished_by_calling_the_model() {
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    let reply = cut_session(
        store.as_ref(),
        &[("a", "pay", r#"{"amount":5}"#)],
        |reply| {
            vec![
                started(reply, &[("a", "pay")]),
                Entry::message(Message::tool("a", "paid 5")),
            ]
        },
    )
    .await;
    let (pay, paid) = counting("pay", Kind::Changes);
    let provider = MockProvider::new([answer("paid, all done")]);
    let approver = Arc::new(Counting::default());
    let mut agent = build(
        store.clone(),
        provider.clone(),
        vec![pay],
        Some(approver.clone()),
    )
    .await;
    assert!(agent.has_cut_turn());
    let answered = agent
        .resume_turn(None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(answered.as_deref(), Some("paid, all done"));
    // Nothing ran or was asked again: the model answered the result it had.
    assert!(paid.lock().unwrap().is_empty());
    assert_eq!(approver.asked.load(Ordering::SeqCst), 0);
    let request = &provider.requests()[0];
    let roles: Vec<&str> = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool"]);
    assert_eq!(request["messages"][1]["tool_calls"][0]["id"], "a");
    let all = entries(store.as_ref(), &key()).await;
    assert_eq!(results(&all).len(), 1);
    assert_eq!(
        all.last().unwrap().uuid,
        agent.entries().last().unwrap().uuid
    );
    assert!(all.iter().any(|e| e.uuid == reply.uuid));
    assert!(!agent.has_cut_turn());
}

#[tokio::test]
async fn a_run_that_failed_after_its_results_is_not_taken_for_a_cut_turn() {
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    let (pay, _) = counting("pay", Kind::ReadOnly);
    let provider = MockProvider::new([
        calls(&[("a", "pay", r#"{"amount":5}"#)]),
        crate::support::Step::Fail(reprise_provider::ProviderError::StreamCut {
            reason: "reset".into(),
            source: None,
        }),
    ]);
    let mut agent = build(store.clone(), provider.clone(), vec![pay.clone()], None).await;
    agent.run("pay the bill").await.unwrap_err();
    drop(agent);
    // Another process opens it: the turn ended on its results on purpose.
    let provider = MockProvider::new([answer("hello")]);
    let mut agent = build(store.clone(), provider.clone(), vec![pay], None).await;
    assert!(!agent.has_cut_turn());
    assert_eq!(agent.run("hi").await.unwrap(), "hello");
    let requests = provider.requests();
    let roles: Vec<&str> = requests[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "user"]);
}
