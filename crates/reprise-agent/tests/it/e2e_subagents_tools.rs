//! Subagents in a run folder, tool failures and cancellation, over real HTTP.

use reprise_testkit::assert_contains;
use std::sync::Arc;
use std::time::Duration;

use crate::support::cancel_once_notified;
use crate::support::http::{buy, file_roles, messages_of, provider_for, talk_to};
use reprise_agent::{Agent, AgentError, AgentEvent, CANCELLED_BY_USER, Subagent, tool};
use reprise_runs::create_run_store;
use reprise_session::SessionStore;
use reprise_testkit::{Reply, ScriptedCall, ScriptedServer};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

const SCOUT_SYSTEM: &str = "You are a scout. Report briefly.";

fn scout() -> Subagent {
    Subagent::new("scout", "Sends a scout to look at a place.", SCOUT_SYSTEM).tools([talk_to()])
}

async fn parent(server: &ScriptedServer, store: Arc<dyn SessionStore>, id: &str) -> Agent {
    Agent::builder(provider_for(server, 1))
        .system("You lead the quest.")
        .tools([buy()])
        .subagent(scout())
        .store(store)
        .session_id(id)
        .build()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_subagent_called_again_after_a_resume_continues_its_conversation() {
    let run = tempfile::tempdir().unwrap();
    let server = ScriptedServer::start_with([
        // Parent asks the scout; the scout talks to the guard, then reports.
        Reply::tool_call("p1", "scout", r#"{"task":"Ask the guard about the cave."}"#),
        Reply::tool_call("s1", "talk_to", r#"{"npc":"guard"}"#),
        Reply::text("The guard wants a torch."),
        Reply::text("We need a torch."),
    ])
    .await;
    let store: Arc<dyn SessionStore> = Arc::new(create_run_store(run.path()));
    let mut day1 = parent(&server, store.clone(), "quest").await;
    let (events_tx, mut events_rx) = mpsc::unbounded_channel();
    day1.run_streaming("Scout the cave.", events_tx, CancellationToken::new())
        .await
        .unwrap();
    // The scout's own events are tagged with its name.
    let mut scout_calls = Vec::new();
    while let Ok(event) = events_rx.try_recv() {
        if let AgentEvent::ToolCallStarted { agent, name, .. } = event {
            scout_calls.push((agent, name));
        }
    }
    assert_eq!(
        scout_calls,
        [
            ("main".to_owned(), "scout".to_owned()),
            ("scout".to_owned(), "talk_to".to_owned())
        ]
    );
    assert_eq!(day1.messages()[2].text(), "The guard wants a torch.");
    drop(day1);
    drop(store);

    // session.json registers the subagent's transcript.
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.path().join("session.json")).unwrap()).unwrap();
    assert_eq!(meta["sessionId"], "quest");
    assert_eq!(meta["subagents"]["scout"], "subagents/scout.jsonl");
    let scout_file = run.path().join("subagents/scout.jsonl");
    assert_eq!(
        file_roles(&scout_file),
        ["user", "assistant", "tool", "assistant"]
    );

    // Resumed in a new process (a new store and agent): the scout remembers.
    server.push_all([
        Reply::tool_call(
            "p2",
            "scout",
            r#"{"task":"Did the guard say anything else?"}"#,
        ),
        Reply::text("Only the torch, as I said before."),
        Reply::text("Just the torch."),
    ]);
    let store: Arc<dyn SessionStore> = Arc::new(create_run_store(run.path()));
    let mut day2 = parent(&server, store, "quest").await;
    day2.run("Ask the scout again.").await.unwrap();
    let bodies = server.request_bodies();
    let scout_requests: Vec<Vec<serde_json::Value>> = bodies
        .iter()
        .map(messages_of)
        .filter(|messages| messages[0]["content"] == SCOUT_SYSTEM)
        .collect();
    assert_eq!(scout_requests.len(), 3);
    let second_call = &scout_requests[2];
    let texts: Vec<&str> = second_call
        .iter()
        .map(|m| m["content"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        texts,
        [
            SCOUT_SYSTEM,
            "Ask the guard about the cave.",
            "",
            "No torch, no entry.",
            "The guard wants a torch.",
            "Did the guard say anything else?",
        ]
    );
    // The scout's tools were offered to it, not the parent's.
    let scout_tools: Vec<&str> = bodies[1]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(scout_tools, ["talk_to"]);
    assert_eq!(
        file_roles(&scout_file),
        [
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant"
        ]
    );
    server.assert_tool_call_pairing();
}

#[derive(Deserialize, JsonSchema)]
struct Nothing {}

#[tokio::test]
async fn bad_arguments_and_a_panicking_tool_give_error_results_and_the_loop_goes_on() {
    let run = tempfile::tempdir().unwrap();
    let explode = tool("explode", "Panics.", |_: Nothing, _| async move {
        if true {
            panic!("the tool fell over");
        }
        Ok::<_, String>("never")
    });
    let server = ScriptedServer::start_with([
        Reply::tool_calls([
            ScriptedCall::new("c1", "buy", r#"{"what":"torch"}"#),
            ScriptedCall::new("c2", "explode", "{}"),
            ScriptedCall::new("c3", "buy", r#"{"item":"torch"}"#),
        ]),
        Reply::text("Bought a torch despite everything."),
    ])
    .await;
    let mut agent = Agent::builder(provider_for(&server, 1))
        .tools([buy()])
        .tool(explode)
        .store(Arc::new(create_run_store(run.path())))
        .session_id("errors")
        .build()
        .await
        .unwrap();
    assert_eq!(
        agent.run("Buy a torch.").await.unwrap(),
        "Bought a torch despite everything."
    );
    let results = messages_of(&server.request_bodies()[1]);
    let bad = results[2]["content"].as_str().unwrap();
    assert!(
        bad.contains("invalid arguments for buy") && bad.contains("item"),
        "{bad}"
    );
    let crashed = results[3]["content"].as_str().unwrap();
    assert_contains!(crashed, "the tool fell over");
    assert_eq!(results[4]["content"], "torch: 5 gold, 15 left");
    server.assert_tool_call_pairing();
}

#[tokio::test]
async fn cancelling_keeps_complete_messages_and_closes_the_call_in_flight() {
    let run = tempfile::tempdir().unwrap();
    let started = Arc::new(Notify::new());
    let in_tool = started.clone();
    let dig = tool("dig", "Digs forever.", move |_: Nothing, _| {
        let started = in_tool.clone();
        async move {
            started.notify_one();
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok::<_, String>("never")
        }
    });
    let server = ScriptedServer::start_with([Reply::tool_calls([
        ScriptedCall::new("c1", "buy", r#"{"item":"shovel"}"#),
        ScriptedCall::new("c2", "dig", "{}"),
    ])])
    .await;
    let mut agent = Agent::builder(provider_for(&server, 1))
        .tools([buy()])
        .tool(dig)
        .store(Arc::new(create_run_store(run.path())))
        .session_id("cancel")
        .build()
        .await
        .unwrap();
    let cancel = cancel_once_notified(started);
    let (events_tx, _events) = mpsc::unbounded_channel();
    let error = agent
        .run_streaming("Dig in.", events_tx, cancel)
        .await
        .unwrap_err();
    assert!(matches!(error, AgentError::Cancelled));
    let file = run.path().join("conversation.jsonl");
    assert_eq!(file_roles(&file), ["user", "assistant", "tool", "tool"]);
    assert_eq!(agent.messages()[2].text(), "shovel: 5 gold, 15 left");
    assert_eq!(agent.messages()[3].text(), CANCELLED_BY_USER);

    // Cancelled mid-stream: the half answer is not recorded.
    server
        .push(Reply::text("A long answer that never ends").stall_after(2, Duration::from_secs(30)));
    let cancel = CancellationToken::new();
    let (events_tx, mut events_rx) = mpsc::unbounded_channel();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        while let Some(event) = events_rx.recv().await {
            if matches!(event, AgentEvent::TextDelta { .. }) {
                canceller.cancel();
            }
        }
    });
    let error = agent
        .run_streaming("Talk to me.", events_tx, cancel)
        .await
        .unwrap_err();
    assert!(matches!(error, AgentError::Cancelled));
    assert_eq!(
        file_roles(&file),
        ["user", "assistant", "tool", "tool", "user"]
    );

    server.push(Reply::text("Here I am."));
    assert_eq!(agent.run("Still there?").await.unwrap(), "Here I am.");
    server.assert_tool_call_pairing();
}

#[tokio::test]
async fn a_conversation_forks_into_a_new_run_folder_with_its_subagents() {
    let runs = tempfile::tempdir().unwrap();
    let (run_a, run_b, run_c) = (
        runs.path().join("a"),
        runs.path().join("b"),
        runs.path().join("c"),
    );
    let server = ScriptedServer::start_with([
        Reply::tool_call("p1", "scout", r#"{"task":"Look at the east door."}"#),
        Reply::text("The east door is locked."),
        Reply::text("Locked, says the scout."),
    ])
    .await;
    let store_a: Arc<dyn SessionStore> = Arc::new(create_run_store(&run_a));
    let mut source = parent(&server, store_a, "quest-a").await;
    source.run("Check the door.").await.unwrap();
    let conversation_a = std::fs::read(run_a.join("conversation.jsonl")).unwrap();
    let scout_a = std::fs::read(run_a.join("subagents/scout.jsonl")).unwrap();

    // A run store holds one session: forking inside it is refused with a pointer to fork_run.
    let refused = source.fork("quest-x").await.unwrap_err();
    assert!(refused.to_string().contains("fork_run"), "{refused}");

    // Into a new run folder, by copying through the store API.
    let mut copy = source
        .fork_into(Arc::new(create_run_store(&run_b)), "quest-b")
        .await
        .unwrap();
    assert_eq!(copy.messages(), source.messages());
    assert_eq!(
        copy.subagent_messages("scout").await,
        source.subagent_messages("scout").await
    );
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run_b.join("session.json")).unwrap()).unwrap();
    assert_eq!(meta["sessionId"], "quest-b");
    assert_eq!(meta["subagents"]["scout"], "subagents/scout.jsonl");

    // Into a new run folder with the session core's fork_run, then the same agent on it.
    let forked = reprise_runs::fork_run(&run_a, &run_c, None).unwrap();
    let mut branch = source
        .with_session(Arc::new(forked.store), &forked.session_id)
        .await
        .unwrap();
    assert_eq!(branch.messages(), source.messages());
    assert_eq!(
        branch.subagent_messages("scout").await,
        source.subagent_messages("scout").await
    );

    // Both branches go on; the source run folder does not change.
    server.push_all([Reply::text("Try the west."), Reply::text("Try the roof.")]);
    copy.run("Another way?").await.unwrap();
    branch.run("Another way?").await.unwrap();
    assert_eq!(
        std::fs::read(run_a.join("conversation.jsonl")).unwrap(),
        conversation_a
    );
    assert_eq!(
        std::fs::read(run_a.join("subagents/scout.jsonl")).unwrap(),
        scout_a
    );
    assert_eq!(copy.messages().len(), source.messages().len() + 2);
    server.assert_tool_call_pairing();
}

#[tokio::test]
async fn token_counts_are_stored_on_the_entries_and_summed_after_a_restart() {
    let run = tempfile::tempdir().unwrap();
    let server = ScriptedServer::start_with([
        Reply::tool_call("p1", "scout", r#"{"task":"Ask the guard about the cave."}"#)
            .with_usage(100, 10),
        Reply::text("The guard wants a torch.").with_usage(40, 6),
        Reply::text("We need a torch.").with_usage(130, 5),
        // A reply without counts adds nothing.
        Reply::text("Still a torch."),
    ])
    .await;
    let store: Arc<dyn SessionStore> = Arc::new(create_run_store(run.path()));
    let mut day1 = parent(&server, store.clone(), "quest").await;
    assert_eq!(day1.usage_totals().await, None);
    day1.run("Scout the cave.").await.unwrap();
    day1.run("And now?").await.unwrap();
    drop(day1);
    drop(store);

    // On disk: each assistant entry carries its own call's counts.
    let counted = |path: &std::path::Path| -> Vec<(String, Option<u64>)> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
            .filter(|entry| entry["message"]["role"] == "assistant")
            .map(|entry| {
                (
                    entry["message"]["content"]
                        .as_str()
                        .unwrap_or("")
                        .to_owned(),
                    entry["usage"]["prompt_tokens"].as_u64(),
                )
            })
            .collect()
    };
    assert_eq!(
        counted(&run.path().join("conversation.jsonl")),
        [
            (String::new(), Some(100)),
            ("We need a torch.".to_owned(), Some(130)),
            ("Still a torch.".to_owned(), None)
        ]
    );
    assert_eq!(
        counted(&run.path().join("subagents/scout.jsonl")),
        [("The guard wants a torch.".to_owned(), Some(40))]
    );

    // A new process: the totals come back from the entries, the scout's included.
    let store: Arc<dyn SessionStore> = Arc::new(create_run_store(run.path()));
    let day2 = parent(&server, store, "quest").await;
    let totals = day2.usage_totals().await.unwrap();
    assert_eq!(
        (
            totals.prompt_tokens,
            totals.completion_tokens,
            totals.total_tokens
        ),
        (270, 21, 291)
    );
    // Never sent: the requests hold no `usage` anywhere.
    for request in server.request_bodies() {
        assert!(!request.to_string().contains("\"usage\""), "{request}");
    }
}
