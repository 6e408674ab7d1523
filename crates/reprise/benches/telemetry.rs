//! What OpenTelemetry export costs a turn, and that a collector which is down or
//! hangs costs it nothing more.
//!
//! One turn = `Agent::run` against the scripted model server over HTTP: a reply
//! with a tool call, the tool, then the answer (4 spans: `invoke_agent`, two `chat`,
//! `execute_tool`). The same turns run with telemetry off (no subscriber), with
//! traces exported to a receiver that answers at once, to an endpoint where nothing
//! listens, and to one that accepts connections and never answers. The modes take
//! turns batch by batch in one run, so that the machine's drift falls on all alike;
//! printed: the median turn of each, and its ratio to the turn without telemetry.
//!
//! `cargo bench -p reprise --bench telemetry`
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed bench run

use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reprise::agent::{Agent, ToolContext, tool};
use reprise::provider::{OpenAiConfig, OpenAiProvider};
use reprise::session::MemoryStore;
use reprise::telemetry::{Telemetry, TelemetryConfig};
use reprise_testkit::{Reply, ScriptedServer};
use tracing::Dispatch;
use tracing_subscriber::layer::SubscriberExt;

const ROUNDS: usize = 15;
const TURNS_PER_BATCH: usize = 10;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Clock {}

/// A receiver that takes every export at once.
async fn answering_receiver() -> String {
    let app = axum::Router::new().fallback(|| async { axum::http::StatusCode::OK });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}")
}

/// A receiver that accepts connections and never says a word.
fn hanging_receiver() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    format!("http://{address}")
}

/// An address where nothing listens.
fn dead_endpoint() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{address}")
}

fn exporting_to(endpoint: String) -> (Telemetry, Dispatch) {
    let telemetry = Telemetry::start(&TelemetryConfig {
        endpoint: Some(endpoint),
        metrics: Some(false),
        ..TelemetryConfig::default()
    })
    .unwrap()
    .unwrap();
    let layer = telemetry.layer().unwrap();
    let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer));
    (telemetry, dispatch)
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort_unstable();
    times[times.len() / 2]
}

fn main() {
    // One thread: the agent, its tool tasks and the scripted server all run inside
    // the `block_on` of a batch, under that batch's subscriber.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (server, live) =
        runtime.block_on(async { (ScriptedServer::start().await, answering_receiver().await) });
    let (hanging, dead) = (hanging_receiver(), dead_endpoint());
    let _inside = runtime.enter();
    let mut modes: Vec<(&str, Dispatch, Option<Telemetry>)> = vec![("off", Dispatch::none(), None)];
    for (name, endpoint) in [
        ("receiver answering", live),
        ("endpoint down", dead),
        ("receiver hanging", hanging),
    ] {
        let (telemetry, dispatch) = exporting_to(endpoint);
        modes.push((name, dispatch, Some(telemetry)));
    }
    let store = Arc::new(MemoryStore::new());
    let provider = Arc::new(
        OpenAiProvider::new(OpenAiConfig::new("test-model").base_url(server.base_url())).unwrap(),
    );
    let clock = tool(
        "clock",
        "The time.",
        |_: Clock, _: ToolContext| async move { Ok::<_, String>("noon".to_owned()) },
    );
    let builder = Agent::builder(provider).tool(clock).store(store);
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); modes.len()];
    let mut session = 0;
    // The first round warms connections and caches up; it is not counted.
    for round in 0..=ROUNDS {
        for (index, (_, dispatch, _)) in modes.iter().enumerate() {
            tracing::dispatcher::with_default(dispatch, || {
                runtime.block_on(async {
                    session += 1;
                    let mut agent = builder
                        .clone()
                        .session_id(format!("bench-{session}"))
                        .build()
                        .await
                        .unwrap();
                    for _ in 0..TURNS_PER_BATCH {
                        server.push_all([
                            Reply::tool_call("c1", "clock", "{}").with_usage(100, 10),
                            Reply::text("It is noon.").with_usage(120, 5),
                        ]);
                        let started = Instant::now();
                        agent.run("What time is it?").await.unwrap();
                        if round > 0 {
                            times[index].push(started.elapsed());
                        }
                    }
                    agent.close().await.unwrap();
                });
            });
        }
    }
    let base = median(times[0].clone());
    println!(
        "telemetry: {} turns per mode (tool call + answer, 4 spans), median turn",
        ROUNDS * TURNS_PER_BATCH
    );
    for ((name, _, _), times) in modes.iter().zip(&times) {
        let turn = median(times.clone());
        let ratio = turn.as_secs_f64() / base.as_secs_f64();
        let extra = turn.as_secs_f64() * 1e6 - base.as_secs_f64() * 1e6;
        println!("  {name:<20} {turn:>10.2?}   x{ratio:.3}   {extra:+.0} µs per turn");
    }
    for (_, _, telemetry) in modes {
        if let Some(telemetry) = telemetry {
            telemetry.shutdown();
        }
    }
}
