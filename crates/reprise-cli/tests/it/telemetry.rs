//! OpenTelemetry export of the chat, read back from a real receiver (Arize Phoenix):
//! the chat runs against the scripted server with a subagent that calls a tool, then
//! the spans' names, attributes and parents are read from Phoenix's REST API. The
//! metrics, which Phoenix does not keep, are read from a receiver in the test.

use std::collections::HashMap;
use std::time::Duration;

use reprise_testkit::otlp::proto::tonic::common::v1::KeyValue;
use reprise_testkit::otlp::proto::tonic::metrics::v1::metric::Data;
use reprise_testkit::otlp::proto::tonic::metrics::v1::number_data_point;
use reprise_testkit::otlp::{OtlpReceiver, attribute};
use reprise_testkit::phoenix::Phoenix;
use reprise_testkit::{Reply, ScriptedServer, assert_contains};
use serde_json::Value;

use crate::subagents::{SCOUT, write_config};
use crate::support::{Sandbox, run_command};

/// A plain chat against `server` that allows every call and names attributes by
/// the conventions' latest (experimental) names.
fn latest_conventions_chat(sandbox: &Sandbox, server: &ScriptedServer) -> tokio::process::Command {
    let mut command = sandbox.command(&[
        "--plain",
        "--base-url",
        &server.base_url(),
        "--model",
        "test-model",
        "--yes",
    ]);
    command.env(
        "OTEL_SEMCONV_STABILITY_OPT_IN",
        "gen_ai_latest_experimental",
    );
    command
}

/// A span as Phoenix gives it back.
struct Span {
    name: String,
    id: String,
    parent: Option<String>,
    attributes: Value,
    status: String,
}

impl Span {
    fn of(value: &Value) -> Span {
        Span {
            name: value["name"].as_str().unwrap_or_default().to_owned(),
            id: value["context"]["span_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            parent: value["parent_id"].as_str().map(str::to_owned),
            attributes: value["attributes"].clone(),
            status: value["status_code"].as_str().unwrap_or_default().to_owned(),
        }
    }
}

#[tokio::test]
async fn a_turn_with_a_subagent_and_a_tool_call_reaches_phoenix_as_genai_spans() {
    let phoenix = tokio::task::spawn_blocking(Phoenix::start)
        .await
        .unwrap()
        .unwrap();
    let sandbox = Sandbox::new();
    let config = format!(
        "{SCOUT}\n[telemetry]\nendpoint = \"{}\"\nmetrics = false\ncapture_content = true\n",
        phoenix.otlp_http()
    );
    write_config(&sandbox, &config);
    std::fs::write(sandbox.path().join("notes.txt"), "buy milk\n").unwrap();
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::tool_call("p1", "scout", r#"{"task":"list the folder"}"#).with_usage(40, 8),
        Reply::tool_call("s1", "list_dir", r#"{"path":"."}"#).with_usage(20, 5),
        Reply::text("The folder holds notes.txt.").with_usage(30, 6),
        Reply::text("The scout found notes.txt.").with_usage(60, 7),
    ]);
    let command = latest_conventions_chat(&sandbox, &server);
    let out = run_command(command, "what is here?\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "The scout found notes.txt.");

    // Flushed at exit; Phoenix stores in the background.
    let found = tokio::task::spawn_blocking(move || {
        let spans = phoenix.wait_for_spans("default", 10, Duration::from_secs(30));
        (spans, phoenix)
    })
    .await
    .unwrap();
    let (raw, phoenix) = found;
    let spans: Vec<Span> = raw.iter().map(Span::of).collect();
    let mut names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "approval list_dir",
            "approval scout",
            "chat test-model",
            "chat test-model",
            "chat test-model",
            "chat test-model",
            "execute_tool list_dir",
            "execute_tool scout",
            "invoke_agent main",
            "invoke_agent scout",
        ],
        "{raw:#?}\n{}",
        phoenix.log()
    );
    let by_id: HashMap<&str, &Span> = spans.iter().map(|s| (s.id.as_str(), s)).collect();
    let parent_name = |span: &Span| -> Option<String> {
        let parent = span.parent.as_deref()?;
        by_id.get(parent).map(|p| p.name.clone())
    };
    let named = |name: &str| spans.iter().find(|s| s.name == name).unwrap();

    // The tree: main's run holds its calls; the scout's run is the child of the
    // call that gave it its task, and holds its own model calls and tool call.
    let main = named("invoke_agent main");
    assert_eq!(parent_name(main), None, "the root of the trace");
    assert_eq!(
        parent_name(named("execute_tool scout")).as_deref(),
        Some("invoke_agent main")
    );
    assert_eq!(
        parent_name(named("invoke_agent scout")).as_deref(),
        Some("execute_tool scout")
    );
    assert_eq!(
        parent_name(named("execute_tool list_dir")).as_deref(),
        Some("invoke_agent scout")
    );
    // The approver's answer came before each call, in the run of the agent asking.
    let approval = named("approval list_dir");
    assert_eq!(parent_name(approval).as_deref(), Some("invoke_agent scout"));
    assert_eq!(flat(approval, "reprise.approval.decision"), "allow");
    let chat_parents: Vec<String> = spans
        .iter()
        .filter(|s| s.name == "chat test-model")
        .map(|s| parent_name(s).unwrap())
        .collect();
    assert_eq!(
        chat_parents
            .iter()
            .filter(|p| *p == "invoke_agent main")
            .count(),
        2
    );
    assert_eq!(
        chat_parents
            .iter()
            .filter(|p| *p == "invoke_agent scout")
            .count(),
        2
    );

    // One conversation id on every span: the session's.
    let conversation = flat(main, "gen_ai.conversation.id");
    assert!(!conversation.is_empty(), "{raw:#?}");
    for span in &spans {
        assert_eq!(
            flat(span, "gen_ai.conversation.id"),
            conversation,
            "{}",
            span.name
        );
    }
    let run = sandbox.conversations().remove(0);
    let session_json = std::fs::read_to_string(run.join("session.json")).unwrap();
    assert!(
        session_json.contains(&conversation) || run.to_string_lossy().contains(&conversation),
        "{conversation} is not the session's id: {session_json}"
    );

    // The model calls: provider, models, response id, finish reasons, tokens.
    let first_chat = spans
        .iter()
        .filter(|s| s.name == "chat test-model")
        .find(|s| flat(s, "gen_ai.usage.input_tokens") == "40")
        .unwrap();
    assert_eq!(flat(first_chat, "gen_ai.provider.name"), "openai");
    assert_eq!(flat(first_chat, "gen_ai.request.model"), "test-model");
    assert_eq!(flat(first_chat, "gen_ai.response.model"), "test-model");
    assert_eq!(flat(first_chat, "gen_ai.response.id"), "chatcmpl-scripted");
    assert_eq!(flat(first_chat, "gen_ai.usage.output_tokens"), "8");
    assert_eq!(
        flat(first_chat, "gen_ai.response.finish_reasons"),
        "[\"tool_calls\"]"
    );
    assert_eq!(flat(first_chat, "gen_ai.operation.name"), "chat");

    // The tool calls: name, id, type, idempotency key, and (asked for) arguments.
    let list = named("execute_tool list_dir");
    assert_eq!(flat(list, "gen_ai.tool.name"), "list_dir");
    assert_eq!(flat(list, "gen_ai.tool.call.id"), "s1");
    assert_eq!(flat(list, "gen_ai.tool.type"), "function");
    assert!(!flat(list, "reprise.tool.idempotency_key").is_empty());
    assert_contains!(flat(list, "gen_ai.tool.call.result"), "notes.txt");
    let scout = named("execute_tool scout");
    assert_eq!(flat(scout, "gen_ai.tool.type"), "agent");
    assert_eq!(
        flat(scout, "gen_ai.tool.call.arguments"),
        r#"{"task":"list the folder"}"#
    );
    assert_eq!(
        flat(named("invoke_agent scout"), "gen_ai.agent.name"),
        "scout"
    );
    for span in &spans {
        assert_ne!(span.status, "ERROR", "{}", span.name);
    }

    // Each model request carried the trace context of its `chat` span.
    for request in server.requests() {
        let traceparent = request.header("traceparent").unwrap_or_default();
        let parts: Vec<&str> = traceparent.split('-').collect();
        assert_eq!(parts.len(), 4, "{traceparent:?}");
        let span = by_id.get(parts[2]).expect("a span that was exported");
        assert_eq!(span.name, "chat test-model");
    }
}

/// An attribute as text, wherever Phoenix nests it (`gen_ai.usage.input_tokens`
/// may come back as `{"gen_ai": {"usage": {...}}}` or flat).
fn flat(span: &Span, name: &str) -> String {
    let mut value = &span.attributes;
    let direct = &span.attributes[name];
    if !direct.is_null() {
        return text(direct);
    }
    for part in name.split('.') {
        value = &value[part];
    }
    text(value)
}

fn text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[tokio::test]
async fn a_collector_that_is_down_fails_nothing_and_is_said_once() {
    let sandbox = Sandbox::new();
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", dead.local_addr().unwrap());
    drop(dead);
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::tool_call("c1", "list_dir", r#"{"path":"."}"#),
        Reply::text("Nothing much here."),
        Reply::text("Still nothing."),
    ]);
    let mut command = sandbox.command(&[
        "--plain",
        "--base-url",
        &server.base_url(),
        "--model",
        "test-model",
        "--yes",
    ]);
    command
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .env("OTEL_BSP_SCHEDULE_DELAY", "10");
    let out = run_command(command, "what is here?\nand now?\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "Nothing much here.");
    assert_contains!(out.stdout, "Still nothing.");
    assert_eq!(
        out.stderr.matches("telemetry:").count(),
        1,
        "one warning for all the failed exports: {}",
        out.stderr
    );
    assert_contains!(out.stderr, "could not be sent to the collector");
}

#[tokio::test]
async fn the_otel_variables_alone_send_spans_over_grpc() {
    let phoenix = tokio::task::spawn_blocking(Phoenix::start)
        .await
        .unwrap()
        .unwrap();
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    server.push(Reply::text("Hello.").with_usage(12, 2));
    let mut command = sandbox.command(&[
        "--plain",
        "--base-url",
        &server.base_url(),
        "--model",
        "test-model",
    ]);
    command
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix.otlp_grpc())
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .env("OTEL_METRICS_EXPORTER", "none")
        .env("OTEL_SERVICE_NAME", "reprise-grpc-test");
    let out = run_command(command, "hi\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let (raw, phoenix) = tokio::task::spawn_blocking(move || {
        let spans = phoenix.wait_for_spans("default", 2, Duration::from_secs(30));
        (spans, phoenix)
    })
    .await
    .unwrap();
    let mut names: Vec<String> = raw.iter().map(|span| Span::of(span).name).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["chat test-model", "invoke_agent main"],
        "{}",
        phoenix.log()
    );
    let chat = raw
        .iter()
        .map(Span::of)
        .find(|s| s.name == "chat test-model");
    let chat = chat.unwrap();
    // Without the opt-in, the provider is named as the conventions up to 1.36 had it.
    assert_eq!(flat(&chat, "gen_ai.system"), "openai");
    assert_eq!(flat(&chat, "gen_ai.provider.name"), "");
    assert_eq!(flat(&chat, "gen_ai.usage.input_tokens"), "12");
}

#[tokio::test]
async fn a_turn_with_a_tool_call_exports_token_duration_tool_and_session_metrics() {
    let receiver = OtlpReceiver::start().await.unwrap();
    let sandbox = Sandbox::new();
    let config = format!(
        "[telemetry]\nendpoint = \"{}\"\ntraces = false\n",
        receiver.endpoint()
    );
    write_config(&sandbox, &config);
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::tool_call("c1", "list_dir", r#"{"path":"."}"#).with_usage(40, 8),
        Reply::text("The folder is empty.").with_usage(30, 6),
    ]);
    let command = latest_conventions_chat(&sandbox, &server);
    let out = run_command(command, "what is here?\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "The folder is empty.");

    // Cumulative metrics, sent at exit: the last export of each holds the totals.
    let metrics = receiver.metrics();
    let last = |name: &str| {
        metrics
            .iter()
            .rev()
            .find(|m| m.name == name)
            .and_then(|m| m.data.clone())
            .unwrap_or_else(|| panic!("no {name} among {metrics:#?}"))
    };
    let run = sandbox.conversations().remove(0);
    let session_json = std::fs::read_to_string(run.join("session.json")).unwrap();
    let session: Value = serde_json::from_str(&session_json).unwrap();
    let session_id = session["sessionId"].as_str().unwrap_or_default().to_owned();
    assert!(!session_id.is_empty(), "{session_json}");

    // Tokens: one point per token type, summing both replies' usage.
    let Data::Histogram(tokens) = last("gen_ai.client.token.usage") else {
        panic!("gen_ai.client.token.usage is not a histogram")
    };
    let mut by_type: Vec<(String, u64, f64)> = tokens
        .data_points
        .iter()
        .map(|point| {
            assert_eq!(
                attribute(&point.attributes, "gen_ai.operation.name"),
                "chat"
            );
            assert_eq!(
                attribute(&point.attributes, "gen_ai.request.model"),
                "test-model"
            );
            assert_eq!(
                attribute(&point.attributes, "gen_ai.conversation.id"),
                session_id
            );
            (
                attribute(&point.attributes, "gen_ai.token.type"),
                point.count,
                point.sum.unwrap_or_default(),
            )
        })
        .collect();
    by_type.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        by_type,
        [
            ("input".to_owned(), 2, 70.0),
            ("output".to_owned(), 2, 14.0)
        ]
    );

    // Duration: both model calls, no error.
    let Data::Histogram(duration) = last("gen_ai.client.operation.duration") else {
        panic!("gen_ai.client.operation.duration is not a histogram")
    };
    assert_eq!(duration.data_points.len(), 1, "{duration:#?}");
    let point = &duration.data_points[0];
    assert_eq!(point.count, 2);
    assert!(point.sum.unwrap_or_default() > 0.0, "{point:#?}");
    assert_eq!(
        attribute(&point.attributes, "gen_ai.operation.name"),
        "chat"
    );
    assert_eq!(
        attribute(&point.attributes, "gen_ai.request.model"),
        "test-model"
    );
    assert_eq!(
        attribute(&point.attributes, "gen_ai.provider.name"),
        "openai"
    );
    assert_eq!(
        attribute(&point.attributes, "gen_ai.conversation.id"),
        session_id
    );
    assert_eq!(attribute(&point.attributes, "error.type"), "");

    // One tool call and one session, each with the session id.
    let counted = |name: &str| -> Vec<(i64, Vec<KeyValue>)> {
        let Data::Sum(sum) = last(name) else {
            panic!("{name} is not a sum")
        };
        sum.data_points
            .iter()
            .map(|point| {
                let value = match point.value {
                    Some(number_data_point::Value::AsInt(value)) => value,
                    other => panic!("{name}: {other:?}"),
                };
                (value, point.attributes.clone())
            })
            .collect()
    };
    let tool_calls = counted("reprise.tool.calls");
    assert_eq!(tool_calls.len(), 1, "{tool_calls:#?}");
    let (calls, attributes) = &tool_calls[0];
    assert_eq!(*calls, 1);
    assert_eq!(attribute(attributes, "gen_ai.tool.name"), "list_dir");
    assert_eq!(attribute(attributes, "gen_ai.conversation.id"), session_id);
    assert_eq!(attribute(attributes, "error.type"), "");
    let sessions = counted("reprise.sessions");
    assert_eq!(sessions.len(), 1, "{sessions:#?}");
    let (opened, attributes) = &sessions[0];
    assert_eq!(*opened, 1);
    assert_eq!(attribute(attributes, "gen_ai.agent.name"), "main");
    assert_eq!(attribute(attributes, "gen_ai.conversation.id"), session_id);
    assert!(receiver.spans().is_empty(), "traces were turned off");
}

/// A checkpoint before a call that changes files, a rewind, a compaction and the
/// resume of a turn left open are each a span of their own, with the session's id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_rewinds_compactions_and_resumed_turns_are_spans() {
    let receiver = OtlpReceiver::start().await.unwrap();
    let sandbox = Sandbox::new();
    write_config(
        &sandbox,
        &format!("[telemetry]\nendpoint = \"{}\"\n", receiver.endpoint()),
    );
    let server = ScriptedServer::start().await;
    let base = server.base_url();
    server.push_all([
        Reply::tool_call(
            "call_1",
            "write_file",
            r#"{"path":"a.txt","content":"one\n"}"#,
        ),
        Reply::text("written"),
        Reply::tool_call("call_2", "run_command", r#"{"command":"cat a.txt"}"#),
        Reply::text("ran it"),
        Reply::text("They wrote a file."),
    ]);
    let out = sandbox.chat(&base, &["--yes"], "write\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let out = sandbox.chat(&base, &["--yes", "--continue"], "run\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    // Back to before message 2, the conversation only; then what is left compacted.
    let out = sandbox
        .chat(
            &base,
            &["--yes", "--continue"],
            "/rewind\n2\n2\ny\n/compact\n",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stderr, "(compacted ");

    // A fork whose copy ends on the command's call finishes that turn when resumed.
    let run = sandbox.conversations().remove(0);
    let session: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("session.json")).unwrap()).unwrap();
    let session_id = session["sessionId"].as_str().unwrap().to_owned();
    let uuid = crate::support::uuid_of_call(&run, "call_2");
    let out = sandbox.run(&["fork", "last", "--at", &uuid], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let fork = crate::support::resume_id(&out.stdout);
    server.push(Reply::text("after the fork"));
    let out = sandbox.chat(&base, &["--yes", "--resume", &fork], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "after the fork");

    let spans = receiver.spans();
    let named = |name: &str| {
        spans
            .iter()
            .filter(|span| span.name == name)
            .collect::<Vec<_>>()
    };
    let names: Vec<&str> = spans.iter().map(|span| span.name.as_str()).collect();
    // The fork is a session of its own: its resumed turn carries the fork's id.
    let resumed = named("resume_turn");
    assert_eq!(resumed.len(), 1, "{names:?}");
    let fork_id = attribute(&resumed[0].attributes, "gen_ai.conversation.id");
    assert!(
        !fork_id.is_empty() && fork_id != session_id,
        "{:#?}",
        resumed[0]
    );
    assert_eq!(
        attribute(&resumed[0].attributes, "gen_ai.agent.name"),
        "main"
    );
    // One checkpoint for each message whose calls may change files: two in the
    // session, one in the fork when its open call runs.
    let checkpoints = named("checkpoint");
    let of_session = |id: &str| {
        checkpoints
            .iter()
            .filter(|span| attribute(&span.attributes, "gen_ai.conversation.id") == id)
            .count()
    };
    assert_eq!(checkpoints.len(), 3, "{names:?}");
    assert_eq!(of_session(&session_id), 2, "{checkpoints:#?}");
    assert_eq!(of_session(&fork_id), 1, "{checkpoints:#?}");
    for checkpoint in &checkpoints {
        assert!(
            !attribute(&checkpoint.attributes, "reprise.checkpoint.id").is_empty(),
            "{checkpoint:#?}"
        );
    }
    let rewinds = named("rewind");
    assert_eq!(rewinds.len(), 1, "{names:?}");
    assert_eq!(
        attribute(&rewinds[0].attributes, "gen_ai.conversation.id"),
        session_id
    );
    let compactions = named("compaction");
    assert_eq!(compactions.len(), 1, "{names:?}");
    assert_eq!(
        attribute(&compactions[0].attributes, "gen_ai.conversation.id"),
        session_id
    );
    assert!(
        !attribute(&compactions[0].attributes, "reprise.compaction.cause").is_empty(),
        "{:#?}",
        compactions[0]
    );
}
