//! The service example (`examples/service.rs`): two instances on two ports over one
//! PostgreSQL database continue the same conversation, one request each, and a
//! conversation being answered is refused by the other. With `--otlp-endpoint`, the
//! agent's spans of a request are in the request's trace, under its span.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use reprise_testkit::otlp::{OtlpReceiver, attribute};
use reprise_testkit::postgres::TestDb;
use reprise_testkit::{Reply, ScriptedServer};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

/// The example's binary, which `cargo test` builds beside this test's.
fn example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let debug = exe.parent().unwrap().parent().unwrap();
    debug.join("examples").join("service")
}

/// Starts an instance on a free port; returns it and its address.
async fn instance(url: &str, server: &ScriptedServer) -> (Child, String) {
    instance_with(url, server, &[]).await
}

/// Starts an instance on a free port with more arguments.
async fn instance_with(url: &str, server: &ScriptedServer, more: &[&str]) -> (Child, String) {
    let mut child = tokio::process::Command::new(example())
        .args([
            "--database-url",
            url,
            "--listen",
            "127.0.0.1:0",
            "--base-url",
        ])
        .arg(server.base_url())
        .args(["--model", "test-model"])
        .args(more)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_TRACES_EXPORTER")
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(120), lines.next_line())
        .await
        .expect("the service did not start")
        .unwrap()
        .unwrap();
    let address = first.strip_prefix("listening on ").unwrap().to_owned();
    (child, address)
}

/// Sends a message and reads the whole reply; the status and the body.
async fn ask(address: &str, session: &str, body: serde_json::Value) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(format!("{address}/sessions/{session}/messages"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = tokio::time::timeout(Duration::from_secs(120), response.text())
        .await
        .expect("the reply did not end")
        .unwrap();
    (status, text)
}

/// The user messages of a request the model server got.
fn users(body: &serde_json::Value) -> Vec<String> {
    reprise_testkit::request_messages(body)
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_continue_one_conversation_streaming_each_reply() {
    let db = TestDb::fresh().await;
    let url = db.url_with_schema();
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::text("The key is under the well."),
        Reply::text("Bring a torch."),
        Reply::text("It is noon.").stall_after(1, Duration::from_secs(600)),
    ]);
    let (_a, first) = instance(&url, &server).await;
    let (_b, second) = instance(&url, &server).await;
    assert_ne!(first, second);

    let (status, reply) = ask(
        &first,
        "quest-1",
        serde_json::json!({"message": "Where is the key?"}),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert!(reply.contains("event: text"), "{reply}");
    assert!(
        reply.contains("event: done\ndata: The key is under the well."),
        "{reply}"
    );

    // The other instance, right after: the session is free and holds the first turn.
    let id = "0192f0c1-8a7e-7cc0-9c2b-3f4e5d6a7b8c";
    let (status, reply) = ask(
        &second,
        "quest-1",
        serde_json::json!({"message": "What should I bring?", "id": id}),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert!(
        reply.contains("event: done\ndata: Bring a torch."),
        "{reply}"
    );
    let bodies = server.request_bodies();
    assert_eq!(
        users(&bodies[1]),
        ["Where is the key?", "What should I bring?"]
    );

    // The same message id again, on the first instance: its answer, no new message.
    let (status, reply) = ask(
        &first,
        "quest-1",
        serde_json::json!({"message": "What should I bring?", "id": id}),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert!(
        reply.contains("event: done\ndata: Bring a torch."),
        "{reply}"
    );
    assert_eq!(server.request_bodies().len(), 2);

    // While one instance is answering, the other refuses the conversation.
    let slow = {
        let first = first.clone();
        tokio::spawn(async move {
            ask(
                &first,
                "quest-1",
                serde_json::json!({"message": "What time is it?"}),
            )
            .await
        })
    };
    let poll = async {
        while server.request_bodies().len() < 3 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(120), poll)
        .await
        .expect("the third turn never reached the model");
    let (status, reply) = ask(&second, "quest-1", serde_json::json!({"message": "Hello?"})).await;
    assert_eq!(status, 409, "{reply}");
    assert!(reply.contains("quest-1"), "{reply}");
    slow.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requests_span_holds_the_agents_spans_in_its_trace() {
    let db = TestDb::fresh().await;
    let url = db.url_with_schema();
    let receiver = OtlpReceiver::start().await.unwrap();
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::tool_call("c1", "clock", "{}").with_usage(12, 3),
        Reply::text("It is noon.").with_usage(20, 4),
    ]);
    let endpoint = receiver.endpoint();
    let (mut child, address) = instance_with(&url, &server, &["--otlp-endpoint", &endpoint]).await;
    let (status, reply) = ask(
        &address,
        "traced-1",
        serde_json::json!({"message": "What time is it?"}),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert!(reply.contains("event: done\ndata: It is noon."), "{reply}");

    // Ctrl-C: the service stops and sends what is queued.
    let pid = rustix::process::Pid::from_raw(child.id().unwrap() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let exit = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("the service did not stop")
        .unwrap();
    assert!(exit.success(), "{exit:?}");

    let spans = receiver.wait_for_spans(5, Duration::from_secs(10)).await;
    let named = |name: &str| spans.iter().filter(|s| s.name == name).collect::<Vec<_>>();
    let requests = named("POST /sessions/{id}/messages");
    assert_eq!(requests.len(), 1, "{spans:#?}");
    let request = requests[0];
    assert!(request.parent_span_id.is_empty(), "the root of its trace");
    assert_eq!(
        attribute(&request.attributes, "gen_ai.conversation.id"),
        "traced-1"
    );
    let agents: Vec<_> = spans
        .iter()
        .filter(|s| s.name.starts_with("invoke_agent "))
        .collect();
    assert_eq!(agents.len(), 1, "{spans:#?}");
    let calls = named("chat test-model");
    let tools = named("execute_tool clock");
    assert_eq!((calls.len(), tools.len()), (2, 1), "{spans:#?}");

    // Each of the agent's spans: the request's trace, and the request among its
    // ancestors.
    let by_id: std::collections::HashMap<&[u8], _> =
        spans.iter().map(|s| (s.span_id.as_slice(), s)).collect();
    for span in agents.iter().chain(&calls).chain(&tools) {
        assert_eq!(span.trace_id, request.trace_id, "{}", span.name);
        let mut chain = Vec::new();
        let mut at = *span;
        while let Some(parent) = by_id.get(at.parent_span_id.as_slice()) {
            chain.push(parent.name.clone());
            at = parent;
        }
        assert_eq!(
            at.span_id, request.span_id,
            "{} reaches {:?}, not the request",
            span.name, chain
        );
    }
    let agent = agents[0];
    assert_eq!(
        agent.parent_span_id, request.span_id,
        "the run is the request's child"
    );
    assert_eq!(
        attribute(&agent.attributes, "gen_ai.conversation.id"),
        "traced-1"
    );
}
