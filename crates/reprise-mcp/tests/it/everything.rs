//! Against the reference MCP server (`@modelcontextprotocol/server-everything` from
//! npm, installed by scripts/install-test-deps.sh): tools listed with their schemas,
//! calls with arguments, text, structured and error results, env and cwd, HTTP.

use reprise_testkit::assert_contains;
use std::sync::Arc;
use std::time::Duration;

use crate::support::*;
use reprise_agent::Tool;
use reprise_mcp::{HubOptions, McpHub, NoticeKind, list_servers};
use serde_json::Value;

fn find(tools: &[Arc<dyn Tool>], name: &str) -> Arc<dyn Tool> {
    tools
        .iter()
        .find(|t| t.spec().name == name)
        .unwrap_or_else(|| {
            let names: Vec<String> = tools.iter().map(|t| t.spec().name).collect();
            panic!("no tool {name} among {names:?}")
        })
        .clone()
}

#[tokio::test]
async fn lists_tools_with_prefixed_names_and_schemas_passed_through() {
    let (hub, mut notices) = start_hub_with_notices(&everything_table("ev")).await;
    let tools = hub.tools();
    let echo = find(&tools, "ev__echo").spec();
    assert_eq!(echo.description, "Echoes back the input string");
    assert_eq!(echo.parameters["type"], "object");
    assert_eq!(echo.parameters["properties"]["message"]["type"], "string");
    assert_eq!(echo.parameters["required"], serde_json::json!(["message"]));
    // The annotations say what a call does besides answering.
    assert_eq!(
        find(&tools, "ev__echo").effects(),
        reprise_agent::ToolEffects::ReadOnly
    );
    assert_eq!(
        find(&tools, "ev__gzip-file-as-resource").effects(),
        reprise_agent::ToolEffects::Idempotent
    );
    assert_eq!(
        find(&tools, "ev__toggle-simulated-logging").effects(),
        reprise_agent::ToolEffects::Changes
    );
    let sum = find(&tools, "ev__get-sum").spec();
    assert_eq!(sum.parameters["properties"]["a"]["type"], "number");
    assert!(tools.iter().all(|t| t.spec().name.starts_with("ev__")));
    assert_eq!(
        hub.mcp_tools()
            .iter()
            .find(|t| t.remote_name() == "get-sum")
            .unwrap()
            .server(),
        "ev"
    );

    let status = &hub.statuses()[0];
    assert_eq!(status.name, "ev");
    assert_eq!(status.result.as_ref().unwrap().len(), tools.len());
    let started = notices.recv().await.unwrap();
    assert_eq!(
        (started.server.as_str(), started.kind),
        ("ev", NoticeKind::Started)
    );
    hub.shutdown().await;
}

#[tokio::test]
async fn calls_return_text_structured_and_error_results() {
    let hub = start_hub(&everything_table("ev")).await;
    let tools = hub.tools();

    let echo = find(&tools, "ev__echo");
    let out = echo
        .call(invocation("c1", "ev__echo", r#"{"message":"hola"}"#))
        .await;
    assert!(!out.is_error, "{out:?}");
    assert_eq!(out.content, "Echo: hola");

    let sum = find(&tools, "ev__get-sum");
    let out = sum
        .call(invocation("c2", "ev__get-sum", r#"{"a": 2, "b": 40.5}"#))
        .await;
    assert_eq!(out.content, "The sum of 2 and 40.5 is 42.5.");

    // structuredContent comes back as JSON text (the server mirrors it in a text block,
    // which is not repeated).
    let weather = find(&tools, "ev__get-structured-content");
    let out = weather
        .call(invocation(
            "c3",
            "ev__get-structured-content",
            r#"{"location":"Chicago"}"#,
        ))
        .await;
    assert!(!out.is_error, "{out:?}");
    let value: Value = serde_json::from_str(&out.content).unwrap();
    assert_eq!(value["conditions"], "Light rain / drizzle");
    assert_eq!(value["temperature"], 36);

    // A tool error (isError: true): invalid arguments, reported by the server itself.
    let out = echo
        .call(invocation("c4", "ev__echo", r#"{"message": 5}"#))
        .await;
    assert!(out.is_error);
    assert!(
        out.content.contains("Input validation error"),
        "{}",
        out.content
    );

    // Arguments that are not a JSON object never reach the server.
    let out = echo.call(invocation("c5", "ev__echo", "[1, 2]")).await;
    assert!(
        out.is_error && out.content.contains("JSON object"),
        "{out:?}"
    );
    let out = echo.call(invocation("c6", "ev__echo", "{not json")).await;
    assert!(
        out.is_error && out.content.contains("not valid JSON"),
        "{out:?}"
    );

    // Non-text content is described, not dropped.
    let image = find(&tools, "ev__get-tiny-image");
    let out = image
        .call(invocation("c7", "ev__get-tiny-image", "{}"))
        .await;
    assert!(!out.is_error, "{out:?}");
    assert_contains!(out.content, "[image: image/png");

    // The server still answers after all that.
    let out = echo
        .call(invocation("c8", "ev__echo", r#"{"message":"still here"}"#))
        .await;
    assert_eq!(out.content, "Echo: still here");
    hub.shutdown().await;
}

#[tokio::test]
async fn concurrent_calls_share_one_server() {
    let hub = start_hub(&everything_table("ev")).await;
    let sum = find(&hub.tools(), "ev__get-sum");
    let calls = (0..20).map(|i| {
        let sum = sum.clone();
        async move {
            sum.call(invocation(
                &format!("c{i}"),
                "ev__get-sum",
                &format!(r#"{{"a": {i}, "b": 1}}"#),
            ))
            .await
        }
    });
    let outs = futures::future::join_all(calls).await;
    for (i, out) in outs.iter().enumerate() {
        assert_eq!(out.content, format!("The sum of {i} and 1 is {}.", i + 1));
    }
    hub.shutdown().await;
}

#[tokio::test]
async fn env_comes_from_config_and_environment_and_nothing_else_leaks() {
    let table = format!(
        "{}env = {{ API_TOKEN = \"${{TEST_SECRET}}\", MODE = \"fast\", PRICE = \"$$5\" }}\n",
        everything_table("ev")
    );
    let hub = McpHub::start(
        &config(&table),
        &ctx_with(&[
            ("TEST_SECRET", "s3cr3t-value"),
            ("OPENAI_API_KEY", "sk-must-not-leak"),
        ]),
        HubOptions::default(),
    )
    .await
    .unwrap();
    let get_env = find(&hub.tools(), "ev__get-env");
    let out = get_env.call(invocation("c1", "ev__get-env", "")).await;
    let env: Value = serde_json::from_str(&out.content).unwrap();
    assert_eq!(env["API_TOKEN"], "s3cr3t-value");
    assert_eq!(env["MODE"], "fast");
    assert_eq!(env["PRICE"], "$5");
    assert_eq!(env["PATH"].as_str(), std::env::var("PATH").ok().as_deref());
    assert!(
        env.get("OPENAI_API_KEY").is_none(),
        "the chat's environment leaked"
    );
    assert!(
        env.get("CARGO_MANIFEST_DIR").is_none(),
        "the chat's environment leaked"
    );
    hub.shutdown().await;
}

#[tokio::test]
async fn a_missing_variable_fails_that_server_only() {
    let text = format!(
        "{}{}env = {{ API_TOKEN = \"${{NOT_SET_ANYWHERE_42}}\" }}\n",
        everything_table("good"),
        everything_table("bad")
    );
    let (hub, mut notices) = start_hub_with_notices(&text).await;
    let statuses = hub.statuses();
    let bad = statuses.iter().find(|s| s.name == "bad").unwrap();
    let reason = bad.result.as_ref().unwrap_err();
    assert!(
        reason.contains("${NOT_SET_ANYWHERE_42}") && reason.contains("env.API_TOKEN"),
        "{reason}"
    );
    assert!(
        statuses
            .iter()
            .find(|s| s.name == "good")
            .unwrap()
            .result
            .is_ok()
    );
    assert!(
        hub.tools()
            .iter()
            .all(|t| t.spec().name.starts_with("good__"))
    );
    let mut kinds = Vec::new();
    while let Ok(n) = notices.try_recv() {
        kinds.push((n.server, n.kind));
    }
    assert!(
        kinds.contains(&("bad".to_string(), NoticeKind::StartFailed)),
        "{kinds:?}"
    );
    hub.shutdown().await;
}

#[tokio::test]
async fn cwd_is_applied_and_shutdown_ends_the_process() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[servers.ev]\ncommand = \"sh\"\nargs = [\"-c\", \"echo $$ > pid; pwd > cwd; exec node \\\"$0\\\" stdio\", {}]\ncwd = {}\n",
        quoted(&mcp_everything_server()),
        quoted(dir.path())
    );
    let hub = start_hub(&text).await;
    assert!(hub.statuses()[0].result.is_ok(), "{:?}", hub.statuses());
    let cwd = std::fs::read_to_string(dir.path().join("cwd")).unwrap();
    assert_eq!(
        std::path::Path::new(cwd.trim()).canonicalize().unwrap(),
        dir.path().canonicalize().unwrap()
    );
    let pid: u32 = std::fs::read_to_string(dir.path().join("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(process_alive(pid));
    let echo = find(&hub.tools(), "ev__echo");
    hub.shutdown().await;
    assert!(
        !process_alive(pid),
        "shutdown returned with the server still running"
    );
    let out = echo
        .call(invocation("c1", "ev__echo", r#"{"message":"x"}"#))
        .await;
    assert!(out.is_error && out.content.contains("shut down"), "{out:?}");
    hub.shutdown().await; // idempotent
}

#[tokio::test]
async fn dropping_the_hub_kills_the_process() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[servers.ev]\ncommand = \"sh\"\nargs = [\"-c\", \"echo $$ > pid; exec node \\\"$0\\\" stdio\", {}]\ncwd = {}\n",
        quoted(&mcp_everything_server()),
        quoted(dir.path())
    );
    let hub = start_hub(&text).await;
    let pid: u32 = std::fs::read_to_string(dir.path().join("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(process_alive(pid));
    drop(hub);
    assert!(wait_gone(pid).await, "the server outlived its hub");
}

#[tokio::test]
async fn list_servers_reports_each_server_and_its_tools() {
    let text = format!(
        "{}[servers.broken]\ncommand = \"/nonexistent/mcp-server\"\n[servers.off]\ncommand = \"x\"\nenabled = false\n",
        everything_table("ev")
    );
    let report = list_servers(&config(&text), &ctx_with(&[])).await.unwrap();
    let names: Vec<&str> = report.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["broken", "ev", "off"]);
    let broken = report.servers[0].result.as_ref().unwrap_err();
    assert_contains!(broken, "/nonexistent/mcp-server");
    let tools = report.servers[1].result.as_ref().unwrap();
    let echo = tools.iter().find(|t| t.remote_name == "echo").unwrap();
    assert_eq!(echo.name, "ev__echo");
    assert_eq!(echo.description, "Echoes back the input string");
    assert!(
        report.servers[2]
            .result
            .as_ref()
            .unwrap_err()
            .contains("disabled")
    );
    let text = report.to_text();
    assert!(
        text.contains("ev__echo  Echoes back the input string"),
        "{text}"
    );
    assert!(
        text.contains("broken  (/nonexistent/mcp-server)\n  does not start:"),
        "{text}"
    );
}

/// A free loopback port (taken, then released for the server).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn streamable_http_server_with_header_from_the_environment() {
    let port = free_port();
    let mut server = tokio::process::Command::new("node")
        .arg(mcp_everything_server())
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut listening = false;
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            listening = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(listening, "the HTTP server did not listen on {port}");
    let text = format!(
        "[servers.web]\nurl = \"http://127.0.0.1:{port}/mcp\"\nheaders = {{ Authorization = \"Bearer ${{WEB_TOKEN}}\" }}\n"
    );
    let hub = McpHub::start(
        &config(&text),
        &ctx_with(&[("WEB_TOKEN", "t0k")]),
        HubOptions::default(),
    )
    .await
    .unwrap();
    assert!(hub.statuses()[0].result.is_ok(), "{:?}", hub.statuses());
    let echo = find(&hub.tools(), "web__echo");
    let out = echo
        .call(invocation("c1", "web__echo", r#"{"message":"over http"}"#))
        .await;
    assert_eq!(out.content, "Echo: over http");
    hub.shutdown().await;
    server.kill().await.unwrap();
}

#[tokio::test]
async fn http_headers_reach_the_wire_and_a_failing_endpoint_is_reported() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // A loopback endpoint that records the first request's head and answers 500.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let captured = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = socket.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        socket
            .write_all(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 4\r\nconnection: close\r\n\r\noops")
            .await
            .unwrap();
        String::from_utf8_lossy(&head).to_lowercase()
    });
    let text = format!(
        "startup_timeout_secs = 10\n[servers.web]\nurl = \"http://127.0.0.1:{port}/mcp\"\nheaders = {{ Authorization = \"Bearer ${{WEB_TOKEN}}\", X-Team = \"blue\" }}\n"
    );
    let hub = McpHub::start(
        &config(&text),
        &ctx_with(&[("WEB_TOKEN", "t0k-from-env")]),
        HubOptions::default(),
    )
    .await
    .unwrap();
    let head = captured.await.unwrap();
    assert!(head.starts_with("post /mcp "), "{head}");
    assert!(
        head.contains("authorization: bearer t0k-from-env\r\n"),
        "{head}"
    );
    assert_contains!(head, "x-team: blue\r\n");
    let reason = hub.statuses()[0].result.clone().unwrap_err();
    assert!(
        reason.contains(&format!("http://127.0.0.1:{port}/mcp")),
        "{reason}"
    );
    assert!(
        !reason.contains("t0k-from-env"),
        "a secret leaked into a message: {reason}"
    );
    assert!(hub.tools().is_empty());
}

#[tokio::test]
async fn the_list_report_serializes_for_json_output() {
    let text = format!(
        "{}[servers.broken]\ncommand = \"/nonexistent/mcp-server\"\n",
        everything_table("ev")
    );
    let report = list_servers(&config(&text), &ctx_with(&[])).await.unwrap();
    let json = serde_json::to_value(&report).unwrap();
    let servers = json["servers"].as_array().unwrap();
    assert_eq!(servers[0]["name"], "broken");
    assert_eq!(servers[0]["started"], false);
    assert!(
        servers[0]["error"]
            .as_str()
            .unwrap()
            .contains("could not start")
    );
    assert_eq!(servers[1]["started"], true);
    assert!(servers[1]["elapsed_ms"].as_f64().unwrap() > 0.0);
    let tools = servers[1]["tools"].as_array().unwrap();
    assert!(
        tools
            .iter()
            .any(|t| t["name"] == "ev__echo" && t["remote_name"] == "echo")
    );
}
