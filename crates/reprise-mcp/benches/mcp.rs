//! Prints two figures, measured in the same run against the reference MCP server
//! (installed by scripts/install-test-deps.sh):
//!
//! 1. Starting three stdio servers at once vs one alone: the hub starts them
//!    concurrently, so three should cost about the slowest one's own start.
//! 2. A tool call through our layer (`McpTool::call`: argument parsing, restart
//!    bookkeeping, timeout, result rendering) vs the same call made directly on
//!    rmcp's peer, on two servers of the same kind, interleaved.
//!
//! Run: `cargo bench -p reprise-mcp --bench mcp`
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed test or bench run

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use reprise_agent::{ToolContext, ToolInvocation};
use reprise_mcp::{HubOptions, McpConfig, McpHub, ResolveContext};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientConfig, ProtocolVersion};
use tokio_util::sync::CancellationToken;

const START_ROUNDS: usize = 5;
const CALLS: usize = 400;

fn server_path() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
        "../../.test-deps/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    );
    assert!(
        path.is_file(),
        "the reference MCP server is missing at {}: run scripts/install-test-deps.sh",
        path.display()
    );
    path
}

fn config(servers: usize) -> McpConfig {
    let path = server_path();
    let mut text = String::new();
    for i in 0..servers {
        text.push_str(&format!(
            "[servers.s{i}]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n",
            path.display().to_string()
        ));
    }
    toml::from_str(&text).unwrap()
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

#[tokio::main]
async fn main() {
    let ctx = ResolveContext::from_process();

    // 1. Concurrent start.
    let mut alone = Vec::new();
    let mut three = Vec::new();
    let mut slowest_own = Vec::new();
    let mut one_after_another = Vec::new();
    for _ in 0..START_ROUNDS {
        let begun = Instant::now();
        for _ in 0..3 {
            let hub = McpHub::start(&config(1), &ctx, HubOptions::default())
                .await
                .unwrap();
            assert!(hub.statuses()[0].result.is_ok());
            hub.shutdown().await;
        }
        one_after_another.push(begun.elapsed());

        let begun = Instant::now();
        let hub = McpHub::start(&config(1), &ctx, HubOptions::default())
            .await
            .unwrap();
        alone.push(begun.elapsed());
        assert!(hub.statuses()[0].result.is_ok());
        hub.shutdown().await;

        let begun = Instant::now();
        let hub = McpHub::start(&config(3), &ctx, HubOptions::default())
            .await
            .unwrap();
        three.push(begun.elapsed());
        assert!(hub.statuses().iter().all(|s| s.result.is_ok()));
        slowest_own.push(hub.statuses().iter().map(|s| s.elapsed).max().unwrap());
        hub.shutdown().await;
    }
    let (alone, three, slowest_own) = (median(alone), median(three), median(slowest_own));
    let one_after_another = median(one_after_another);
    println!("start, median of {START_ROUNDS} rounds (2-core machine):");
    println!("  one server alone:                 {}", ms(alone));
    println!("  three servers at once (hub):      {}", ms(three));
    println!("  slowest server's own start in it: {}", ms(slowest_own));
    println!(
        "  three one after another (with their shutdowns): {}",
        ms(one_after_another)
    );
    println!(
        "  three / one = {:.2}   hub / slowest own = {:.3}",
        three.as_secs_f64() / alone.as_secs_f64(),
        three.as_secs_f64() / slowest_own.as_secs_f64()
    );

    // 2. Call overhead.
    let hub = McpHub::start(&config(1), &ctx, HubOptions::default())
        .await
        .unwrap();
    let tool = hub
        .tools()
        .into_iter()
        .find(|t| t.spec().name == "s0__echo")
        .unwrap();
    let mut client_config = ClientConfig::default();
    client_config.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
    let mut child = tokio::process::Command::new("node")
        .arg(server_path())
        .arg("stdio")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let io = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let direct = client_config.serve(io).await.unwrap();
    let arguments: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(r#"{"message":"bench"}"#).unwrap();

    let mut ours = Vec::with_capacity(CALLS);
    let mut raw = Vec::with_capacity(CALLS);
    // Warm up both paths, then interleave so drift hits both alike.
    for round in 0..CALLS + 20 {
        let begun = Instant::now();
        let out = tool
            .call(ToolInvocation {
                name: "s0__echo".into(),
                arguments: r#"{"message":"bench"}"#.into(),
                context: ToolContext {
                    session_id: "bench".into(),
                    agent: "main".into(),
                    subagent: false,
                    call_id: "c".into(),
                    idempotency_key: "c".into(),
                    cancel: CancellationToken::new(),
                },
            })
            .await;
        let ours_took = begun.elapsed();
        assert_eq!(out.content, "Echo: bench");

        let begun = Instant::now();
        let result = direct
            .peer()
            .call_tool(CallToolRequestParams::new("echo").with_arguments(arguments.clone()))
            .await
            .unwrap();
        let raw_took = begun.elapsed();
        assert!(!result.content.is_empty());
        if round >= 20 {
            ours.push(ours_took);
            raw.push(raw_took);
        }
    }
    let mean = |v: &[Duration]| v.iter().sum::<Duration>() / v.len() as u32;
    let (ours_med, raw_med) = (median(ours.clone()), median(raw.clone()));
    println!("tool call `echo`, {CALLS} calls each, interleaved:");
    println!(
        "  direct rmcp peer.call_tool: median {}  mean {}",
        us(raw_med),
        us(mean(&raw))
    );
    println!(
        "  through McpTool::call:      median {}  mean {}",
        us(ours_med),
        us(mean(&ours))
    );
    println!(
        "  overhead of our layer: median {:+.0} µs  mean {:+.0} µs  (target < 2000 µs)",
        (ours_med.as_secs_f64() - raw_med.as_secs_f64()) * 1e6,
        (mean(&ours).as_secs_f64() - mean(&raw).as_secs_f64()) * 1e6
    );

    let _ = direct.cancel().await;
    hub.shutdown().await;
}
