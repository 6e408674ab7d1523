//! The hook told before calls that may change things start: called once per reply
//! with such calls, its id recorded in their start record; and rewind entries, whose
//! messages leave the model's view when the session is opened again.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::support::{MockProvider, answer, calls, request_messages};
use futures::future::BoxFuture;
use reprise_agent::{Agent, BeforeChanges, Subagent, tool};
use reprise_session::{
    Entry, MemoryStore, Message, Rewind, SessionKey, SessionStore, TOOL_START_KIND, checkpoint_of,
    started_calls,
};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
struct Nothing {}

#[derive(Default)]
struct Counter(AtomicUsize);

impl BeforeChanges for Counter {
    fn before_changes(&self) -> BoxFuture<'_, Option<String>> {
        let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        Box::pin(async move { Some(format!("cp{n}")) })
    }
}

fn tools() -> Vec<Arc<dyn reprise_agent::Tool>> {
    let write = tool("write", "Writes.", |_: Nothing, _| async {
        Ok::<_, String>("written")
    });
    let look = tool("look", "Looks.", |_: Nothing, _| async {
        Ok::<_, String>("seen")
    })
    .read_only();
    vec![Arc::new(write), Arc::new(look)]
}

async fn entries(store: &MemoryStore) -> Vec<Entry> {
    store
        .load(&SessionKey::session("s").unwrap())
        .await
        .unwrap()
        .unwrap()
        .entries
}

#[tokio::test]
async fn the_hook_runs_once_before_calls_with_effects_and_its_id_is_in_their_start_record() {
    let store = Arc::new(MemoryStore::new());
    let hook = Arc::new(Counter::default());
    let provider = MockProvider::new([
        calls(&[("a", "look", "{}")]),
        calls(&[
            ("b", "write", "{}"),
            ("c", "write", "{}"),
            ("d", "look", "{}"),
        ]),
        answer("done"),
        calls(&[("e", "scout", r#"{"task":"go"}"#)]),
        answer("looked"),
        answer("scouted"),
    ]);
    let scout = Subagent::new("scout", "Scouts.", "You scout.").tools(tools());
    let mut agent = Agent::builder(provider)
        .store(store.clone())
        .session_id("s")
        .tools(tools())
        .subagent(scout)
        .before_changes(hook.clone())
        .build()
        .await
        .unwrap();
    assert_eq!(agent.run("go").await.unwrap(), "done");
    // Read-only calls alone: no call of the hook.
    assert_eq!(hook.0.load(Ordering::SeqCst), 1);
    let all = entries(&store).await;
    let records: Vec<&Entry> = all
        .iter()
        .filter(|e| e.kind.as_deref() == Some(TOOL_START_KIND))
        .collect();
    assert_eq!(records.len(), 1);
    assert_eq!(checkpoint_of(records[0]), Some("cp1"));
    assert_eq!(started_calls(records[0]).len(), 2);

    // A subagent offered a tool with effects: the parent's call is preceded by the
    // hook, recorded in a start record that names no call.
    assert_eq!(agent.run("scout").await.unwrap(), "scouted");
    assert_eq!(hook.0.load(Ordering::SeqCst), 2);
    let all = entries(&store).await;
    let last = all
        .iter()
        .rfind(|e| e.kind.as_deref() == Some(TOOL_START_KIND))
        .unwrap();
    assert_eq!(checkpoint_of(last), Some("cp2"));
    assert!(started_calls(last).is_empty());
}

#[tokio::test]
async fn rewound_messages_leave_the_model_view_and_an_undo_brings_them_back() {
    let store = Arc::new(MemoryStore::new());
    let key = SessionKey::session("s").unwrap();
    let first = Entry::message(Message::user("one"));
    let second = Entry::message(Message::user("two"));
    let rewind = Rewind {
        to: Some(second.uuid),
        ..Rewind::default()
    }
    .to_entry();
    store
        .append(
            &key,
            &[
                first,
                Entry::message(Message::assistant("1")),
                second,
                Entry::message(Message::assistant("2")),
                rewind.clone(),
            ],
        )
        .await
        .unwrap();
    let provider = MockProvider::new([answer("a"), answer("b")]);
    let texts = |provider: &MockProvider, at: usize| -> Vec<String> {
        request_messages(&provider.requests()[at])
            .iter()
            .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let builder = Agent::builder(provider.clone()).store(store.clone());
    let mut agent = builder.open("s").await.unwrap();
    agent.run("three").await.unwrap();
    assert_eq!(texts(&provider, 0), ["one", "1", "three"]);
    agent.close().await.unwrap();

    store
        .append(
            &key,
            &[Rewind {
                undoes: Some(rewind.uuid),
                ..Rewind::default()
            }
            .to_entry()],
        )
        .await
        .unwrap();
    let mut agent = builder.open("s").await.unwrap();
    agent.run("four").await.unwrap();
    assert_eq!(
        texts(&provider, 1),
        ["one", "1", "two", "2", "three", "a", "four"]
    );
}

#[tokio::test]
async fn a_rewind_appended_beside_an_open_agent_reaches_its_view_on_reload() {
    let store = Arc::new(MemoryStore::new());
    let key = SessionKey::session("s").unwrap();
    let provider = MockProvider::new([answer("1"), answer("2"), answer("3")]);
    let mut agent = Agent::builder(provider.clone())
        .store(store.clone())
        .open("s")
        .await
        .unwrap();
    agent.run("one").await.unwrap();
    agent.run("two").await.unwrap();
    let second = agent.entries()[2].uuid;
    // Appended through the agent's own store, under the lock it holds.
    let rewind = Rewind {
        to: Some(second),
        ..Rewind::default()
    }
    .to_entry();
    agent
        .store()
        .append(&key, std::slice::from_ref(&rewind))
        .await
        .unwrap();
    assert_eq!(agent.messages().len(), 4, "not read back before the reload");
    agent.reload().await.unwrap();
    assert_eq!(agent.messages().len(), 2);
    assert!(
        matches!(
            store.lock("s").await,
            Err(reprise_session::StoreError::Locked { .. })
        ),
        "the reload keeps the writer lock"
    );
    agent.run("three").await.unwrap();
    let sent: Vec<String> = request_messages(&provider.requests()[2])
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(sent, ["one", "1", "three"]);
}
