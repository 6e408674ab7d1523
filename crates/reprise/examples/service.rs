//! Agents as an HTTP service: each request continues a conversation by id, with the
//! sessions in PostgreSQL, and streams the reply as server-sent events. Any number of
//! instances on any machines serve the same conversations: each request opens the
//! session (taking its writer lease), runs one turn and closes it, so the next
//! request may go to any instance.
//!
//! ```text
//! DB=postgres://app@db.internal/agents
//! cargo run -p reprise --example service -- --database-url $DB --listen 127.0.0.1:8080
//! cargo run -p reprise --example service -- --database-url $DB --listen 127.0.0.1:8081
//! curl -N localhost:8080/sessions/quest-1/messages -H 'content-type: application/json' \
//!      -d '{"message": "Where is the key?"}'
//! curl -N localhost:8081/sessions/quest-1/messages -H 'content-type: application/json' \
//!      -d '{"message": "What should I bring?", "id": "0192f0c1-8a7e-7cc0-9c2b-3f4e5d6a7b8c"}'
//! ```
//!
//! A reply is a stream of events: `text` (a piece of the answer), `tool` (a call and
//! its result), then `done` (the whole answer) or `error`. A conversation another
//! request is answering gets `409 Conflict`. A request may carry an `id` (a uuid):
//! the message is stored under it once, so a client that retries after a dropped
//! connection gets the answer without the message being sent twice. A client that
//! goes away cancels its turn.
//!
//! With `--otlp-endpoint http://collector:4318`, each request is a span
//! (`POST /sessions/{id}/messages`) with the agent's spans under it (`invoke_agent`,
//! `chat`, `execute_tool`), sent over OTLP; nothing else needs configuring.
#![allow(clippy::unwrap_used, clippy::expect_used)] // an example: a panic is the error report

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use clap::Parser;
use futures::Stream;
use reprise::Uuid;
use reprise::postgres::{PgSessionStore, PgStoreOptions};
use reprise::prelude::*;
use reprise::telemetry::TelemetryConfig;
use tokio::sync::mpsc;
use tracing::Instrument;

#[derive(Parser)]
#[command(about = "An HTTP service that continues conversations stored in PostgreSQL")]
struct Args {
    /// The PostgreSQL database of the sessions.
    #[arg(long, env = "REPRISE_DATABASE_URL")]
    database_url: String,
    /// Where to listen (port 0: any free port, printed on start).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: String,
    /// The OpenAI-compatible API root.
    #[arg(long, default_value = reprise::provider::DEFAULT_BASE_URL)]
    base_url: String,
    /// The model name.
    #[arg(long, default_value = "llama3.1")]
    model: String,
    /// An OpenTelemetry collector (OTLP over HTTP) to send traces and metrics to.
    #[arg(long)]
    otlp_endpoint: Option<String>,
}

/// What every request shares: the agent's definition (provider, prompt, tools, store).
#[derive(Clone)]
struct Service {
    agents: AgentBuilder,
}

/// The body of a request.
#[derive(serde::Deserialize)]
struct Ask {
    /// The person's message.
    message: String,
    /// The id to store the message under; the same id again is not a new message.
    id: Option<Uuid>,
}

#[derive(serde::Deserialize, JsonSchema)]
struct Clock {}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let telemetry = reprise::telemetry::init(&TelemetryConfig {
        endpoint: args.otlp_endpoint.clone(),
        service_name: Some("reprise-service".to_owned()),
        ..TelemetryConfig::default()
    })?;
    let store = PgSessionStore::connect(&args.database_url, PgStoreOptions::default()).await?;
    let mut config = OpenAiConfig::new(args.model.clone()).base_url(args.base_url.clone());
    if let Ok(key) = std::env::var("OPENAI_API_KEY") {
        config = config.api_key(key);
    }
    let clock = tool(
        "clock",
        "The time at the service.",
        |_: Clock, call: ToolContext| async move {
            // The idempotency key would let a service behind the tool drop a retry.
            Ok::<_, String>(format!("noon (call {})", call.call_id))
        },
    );
    let agents = Agent::builder(Arc::new(OpenAiProvider::new(config)?))
        .system("You are a helpful assistant. Be brief.")
        .tool(clock)
        .store(Arc::new(store.clone()));
    let app = Router::new()
        .route("/sessions/{id}/messages", post(ask))
        .with_state(Service { agents });

    let listener = tokio::net::TcpListener::bind(&args.listen).await?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    store.close().await?;
    // What is still queued goes to the collector.
    if let Some(telemetry) = telemetry {
        telemetry.shutdown();
    }
    Ok(())
}

/// Continues conversation `id` with the request's message, streaming the turn.
async fn ask(
    State(service): State<Service>,
    Path(session_id): Path<String>,
    Json(ask): Json<Ask>,
) -> Response {
    // The request's span: the agent's spans of this turn are its children.
    let request = tracing::info_span!(
        "request",
        otel.name = "POST /sessions/{id}/messages",
        otel.kind = "server",
        http.request.method = "POST",
        http.route = "/sessions/{id}/messages",
        gen_ai.conversation.id = %session_id,
    );
    let mut agent = match service.agents.open(session_id).await {
        Ok(agent) => agent,
        Err(error) if error.is_locked() => {
            return (StatusCode::CONFLICT, format!("{error}\n")).into_response();
        }
        Err(AgentError::Store(StoreError::InvalidId(error))) => {
            return (StatusCode::BAD_REQUEST, format!("{error}\n")).into_response();
        }
        Err(error) => {
            return (StatusCode::INTERNAL_SERVER_ERROR, format!("{error}\n")).into_response();
        }
    };
    let mut prompt = Prompt::new(ask.message);
    if let Some(id) = ask.id {
        prompt = prompt.with_id(id);
    }
    // Bounded channels all the way to the socket: a slow client slows its turn down.
    let (sse_tx, sse_rx) = mpsc::channel::<Event>(16);
    let cancel = CancellationToken::new();
    // The response holds this guard: a client that goes away cancels the turn.
    let client_gone = cancel.clone().drop_guard();
    tokio::spawn(
        async move {
            let (events_tx, events_rx) = mpsc::channel(16);
            let (answer, ()) = tokio::join!(
                agent.run_streaming(prompt, events_tx, cancel),
                forward(events_rx, &sse_tx),
            );
            // The session is let go of before the client hears the turn is over, so its
            // next request, to this instance or another, finds it free.
            let closed = agent.close().await;
            let last = match (answer, closed) {
                (Ok(answer), Ok(())) => Event::default().event("done").data(answer),
                (Err(error), _) => Event::default().event("error").data(error.to_string()),
                (Ok(_), Err(error)) => Event::default().event("error").data(error.to_string()),
            };
            let _ = sse_tx.send(last).await;
        }
        .instrument(request),
    );
    let stream = events(sse_rx, client_gone);
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// Turns the agent's events into server-sent events.
async fn forward(mut events: mpsc::Receiver<AgentEvent>, sse: &mpsc::Sender<Event>) {
    while let Some(event) = events.recv().await {
        let shown = match event {
            AgentEvent::TextDelta { text, .. } => Event::default().event("text").data(text),
            AgentEvent::ToolCallFinished {
                name,
                output,
                denied,
                ..
            } => {
                let result = if denied { "refused" } else { &output.content };
                Event::default()
                    .event("tool")
                    .data(format!("{name}: {result}"))
            }
            _ => continue,
        };
        // A client that went away is noticed by the drop guard; the turn ends there.
        let _ = sse.send(shown).await;
    }
}

/// The events of one reply, ending when the turn's task is done; dropping the
/// stream (the client went away) drops `guard`, which cancels the turn.
fn events<G: Send + 'static>(
    receiver: mpsc::Receiver<Event>,
    guard: G,
) -> impl Stream<Item = Result<Event, Infallible>> {
    futures::stream::unfold((receiver, guard), |(mut receiver, guard)| async move {
        let event = receiver.recv().await?;
        Some((Ok(event), (receiver, guard)))
    })
}
