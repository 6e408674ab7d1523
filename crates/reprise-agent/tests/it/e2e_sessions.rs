//! End to end over real HTTP and SSE: a conversation with parallel tool calls, a new
//! agent resuming it, a fork; resume after a crash between a call and its result;
//! a second writer refused.

use std::sync::Arc;

use crate::support::http::{buy, file_roles, messages_of, provider_for, talk_to};
use reprise_agent::{Agent, AgentError};
use reprise_session::{
    Entry, FileSessionStore, Message, SessionKey, SessionStore, StoreError, ToolCall,
};
use reprise_testkit::{Reply, ScriptedCall, ScriptedServer};
use serde_json::json;

const SYSTEM: &str = "You are Astor, on a quest.";

async fn quest(
    server: &ScriptedServer,
    store: &Arc<FileSessionStore>,
    id: &str,
) -> Result<Agent, AgentError> {
    Agent::builder(provider_for(server, 1))
        .system(SYSTEM)
        .tools([talk_to(), buy()])
        .store(store.clone())
        .session_id(id)
        .build()
        .await
}

#[tokio::test]
async fn a_conversation_is_resumed_whole_and_forked_without_touching_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileSessionStore::new(dir.path()));
    let server = ScriptedServer::start_with([
        Reply::tool_calls([
            ScriptedCall::new("call_1", "talk_to", r#"{"npc":"elder"}"#),
            ScriptedCall::new("call_2", "buy", r#"{"item":"torch"}"#),
            ScriptedCall::new("call_3", "talk_to", r#"{"npc":"guard"}"#),
        ])
        .with_text("Let me ask around."),
        Reply::text("You need the Silver Key; I bought a torch."),
        Reply::text("The mayor's daughter has the key."),
    ])
    .await;

    // Day 1: two runs, the first with three parallel calls.
    let mut day1 = quest(&server, &store, "quest-1").await.unwrap();
    let first = day1
        .run("I need to get into the Cave of Echoes. Find out what it takes.")
        .await
        .unwrap();
    assert_eq!(first, "You need the Silver Key; I bought a torch.");
    day1.run("Who has the key?").await.unwrap();
    let day1_messages = day1.messages().to_vec();
    let roles: Vec<&str> = day1_messages.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "tool",
            "tool",
            "tool",
            "assistant",
            "user",
            "assistant"
        ]
    );
    let results: Vec<(Option<&str>, String)> = day1_messages[2..5]
        .iter()
        .map(|m| (m.tool_call_id.as_deref(), m.text()))
        .collect();
    assert_eq!(
        results,
        [
            (
                Some("call_1"),
                "The cave opens to the Silver Key.".to_owned()
            ),
            (Some("call_2"), "torch: 5 gold, 15 left".to_owned()),
            (Some("call_3"), "No torch, no entry.".to_owned()),
        ]
    );
    let file = dir.path().join("quest-1.jsonl");
    assert_eq!(file_roles(&file), roles);
    // The second model call saw the three results right after the calls.
    let bodies = server.request_bodies();
    assert_eq!(bodies[0]["model"], "test-model");
    let tools = bodies[0]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 2);
    // The schemas went out inlined, without meta fields.
    let talk_schema = &tools[0]["function"]["parameters"];
    assert_eq!(
        *talk_schema,
        json!({
            "type": "object",
            "properties": {"npc": {"type": "string", "description": "Who to talk to."}},
            "required": ["npc"],
        })
    );
    let second = messages_of(&bodies[1]);
    assert_eq!(second.len(), 6);
    assert_eq!(second[4]["tool_call_id"], "call_2");
    drop(day1);

    // Day 2: a new agent on the same id sends the whole history back.
    let mut day2 = quest(&server, &store, "quest-1").await.unwrap();
    assert_eq!(day2.messages(), day1_messages.as_slice());
    assert!(day2.load_warnings().is_empty());
    server.push(Reply::text("Try the key in the east door."));
    day2.run("I got the Silver Key. What now?").await.unwrap();
    let day2_request = messages_of(server.request_bodies().last().unwrap());
    assert_eq!(day2_request.len(), 1 + day1_messages.len() + 1);
    assert_eq!(
        day2_request[0],
        json!({"role": "system", "content": SYSTEM})
    );
    for (sent, recorded) in day2_request[1..].iter().zip(&day1_messages) {
        assert_eq!(sent["role"], recorded.role.as_str());
        assert_eq!(sent["content"].as_str().unwrap_or(""), recorded.text());
        assert_eq!(
            sent["tool_call_id"].as_str(),
            recorded.tool_call_id.as_deref()
        );
    }
    // The day-1 request that carried the same prefix sent it byte for byte the same.
    let day1_last = messages_of(&server.request_bodies()[2]);
    assert_eq!(day2_request[..day1_last.len()], day1_last[..]);
    assert_eq!(
        day2_request.last().unwrap()["content"],
        "I got the Silver Key. What now?"
    );

    // The fork: same history, its own file; the source does not change.
    let source_before = std::fs::read(&file).unwrap();
    let mut west = day2.fork("quest-2").await.unwrap();
    assert_eq!(west.messages(), day2.messages());
    assert_eq!(west.session_id(), "quest-2");
    server.push(Reply::text("There is a flooded tunnel to the west."));
    west.run("Suppose the key does not fit. Another way in?")
        .await
        .unwrap();
    assert_eq!(std::fs::read(&file).unwrap(), source_before);
    assert_eq!(west.messages().len(), day2.messages().len() + 2);
    let fork_request = messages_of(server.request_bodies().last().unwrap());
    assert_eq!(fork_request.len(), 1 + day2.messages().len() + 1);
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("quest-2.meta.json")).unwrap())
            .unwrap();
    assert_eq!(meta["forked_from"]["session"], "quest-1");
    // A fork onto an existing id is refused and leaves it alone.
    let again = day2.fork("quest-2").await.unwrap_err();
    assert!(
        matches!(again, AgentError::Store(StoreError::AlreadyExists { .. })),
        "{again}"
    );

    server.assert_tool_call_pairing();
}

#[tokio::test]
async fn resuming_after_a_crash_between_call_and_result_sends_valid_requests() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileSessionStore::new(dir.path()));
    let key = SessionKey::session("crashed").unwrap();
    {
        // What a process killed while its tools ran leaves behind: two calls, one
        // result. Written under the writer lock, as an agent would.
        let _lock = store.lock("crashed").await.unwrap();
        let history = [
            Message::user("Buy a torch and a rope."),
            Message::assistant_tool_calls(
                None,
                vec![
                    ToolCall::function("call_a", "buy", r#"{"item":"torch"}"#),
                    ToolCall::function("call_b", "buy", r#"{"item":"rope"}"#),
                ],
            ),
            Message::tool("call_a", "torch: 5 gold, 15 left"),
        ];
        let mut entries: Vec<Entry> = history.into_iter().map(Entry::message).collect();
        // Both had started: their start record is before the first result.
        let reply = entries[1].uuid;
        let started = |id: &str| reprise_session::StartedCall {
            entry: reply,
            tool_call_id: id.to_owned(),
            tool: "buy".to_owned(),
            allowed_by: "no approver: every call runs".to_owned(),
            idempotency_key: reprise_agent::idempotency_key("crashed", reply, id),
            rerun: false,
        };
        entries.insert(
            2,
            reprise_session::tool_start_entry(&[started("call_a"), started("call_b")]),
        );
        store.append(&key, &entries).await.unwrap();
    }
    // And a torn last line: the write that was in progress.
    let file = dir.path().join("crashed.jsonl");
    let mut bytes = std::fs::read(&file).unwrap();
    bytes.extend_from_slice(br#"{"uuid":"0193","message":{"role":"tool","#);
    std::fs::write(&file, bytes).unwrap();

    let server = ScriptedServer::start_with([
        Reply::tool_call("call_c", "buy", r#"{"item":"rope"}"#),
        Reply::text("Done: torch and rope."),
    ])
    .await;
    let mut agent = quest(&server, &store, "crashed").await.unwrap();
    assert_eq!(
        agent.load_warnings().len(),
        1,
        "{:?}",
        agent.load_warnings()
    );
    // The cut turn is left open until a run finishes it.
    assert_eq!(agent.messages().len(), 3);
    assert!(agent.has_cut_turn());

    agent.run("Did it work?").await.unwrap();
    // `buy` may have bought the rope: nobody said to run it again.
    let history = agent.messages();
    assert_eq!(history[3].tool_call_id.as_deref(), Some("call_b"));
    assert!(
        history[3].text().contains("interrupted"),
        "{}",
        history[3].text()
    );
    server.assert_tool_call_pairing();
    assert_eq!(server.request_count(), 2);
    let first = messages_of(&server.request_bodies()[0]);
    let ids: Vec<&str> = first
        .iter()
        .filter_map(|m| m["tool_call_id"].as_str())
        .collect();
    assert_eq!(ids, ["call_a", "call_b"]);
    // The file holds only complete lines, the repair among them.
    let roles = file_roles(&file);
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "tool",
            "tool",
            "user",
            "assistant",
            "tool",
            "assistant"
        ]
    );
}

#[tokio::test]
async fn a_second_agent_on_the_same_session_fails_at_once_with_locked() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileSessionStore::new(dir.path()));
    let server = ScriptedServer::start().await;
    let _first = quest(&server, &store, "solo").await.unwrap();
    let same_store = quest(&server, &store, "solo").await.unwrap_err();
    assert!(
        matches!(&same_store, AgentError::Store(StoreError::Locked { session, .. }) if session == "solo"),
        "{same_store}"
    );
    // Another store object on the same directory meets the OS lock.
    let other = Arc::new(FileSessionStore::new(dir.path()));
    let other_store = quest(&server, &other, "solo").await.unwrap_err();
    assert!(
        matches!(other_store, AgentError::Store(StoreError::Locked { .. })),
        "{other_store}"
    );
    assert!(other_store.to_string().contains("solo"));
    assert_eq!(server.request_count(), 0);
}
