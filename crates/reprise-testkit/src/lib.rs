//! Test support for reprise: a scripted OpenAI-compatible chat-completions server.
//!
//! [`ScriptedServer`] listens on `127.0.0.1` and answers each
//! `POST /v1/chat/completions` with the next [`Reply`] of its queue: a streamed (SSE)
//! or non-streamed completion built from text and tool calls, the verbatim bytes of a
//! captured stream, an error status, or a fault (a cut connection, a stall, a delay,
//! a malformed chunk). It records every request so a test can assert on what a
//! client sent, and [`check_tool_call_pairing`] checks the rule servers enforce on
//! tool calls and tool results.
//!
//! Beside the server: [`testdata`] and the other finders of [`paths`] locate fixtures
//! from any crate, [`assert_contains!`] shows the text it searched, and the `pty`
//! feature adds `pty::Pty`, a program driven in a pseudo-terminal. [`secret_corpus`]
//! reads the shared secret corpus and says what a redaction masked.
//! [`coding_agent_entry`] makes the session entries benchmarks fill sessions with, and
//! [`chat_corpus`] sessions that the chat itself wrote.
//! [`ends_within_a_minute`] turns a hang into a failure; [`process_group::group_dies`]
//! waits for a killed process group to be gone.
//! [`unprivileged::command`] runs a program as `nobody` when the suite runs as root,
//! which ignores file modes.
//! [`failing_sync::FailingSync`] makes a real binary's syncs fail as a failing disk's do.
//! [`llama::LlamaServer`] runs a real model server instead: llama.cpp's own HTTP server
//! with Gemma 3 270M, installed by `scripts/install-test-deps.sh`, and
//! [`phoenix::Phoenix`] a real OpenTelemetry receiver (Arize Phoenix); the `otlp`
//! feature adds `otlp::OtlpReceiver`, one in the test's process that keeps metrics too. The `postgres`
//! feature adds `postgres::TestDb`, a schema of its own on a real PostgreSQL server.
//!
//! ```
//! use std::time::Duration;
//! use reprise_testkit::{Reply, ScriptedServer};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let server = ScriptedServer::start_with([
//!     Reply::status(500, "boom"),
//!     Reply::text("Hello there").cut_after(2),          // dies mid-stream
//!     Reply::text("Hello there").stall_after(1, Duration::from_secs(5)),
//!     Reply::raw_sse(&b"data: {\"choices\":[]}\n\n"[..]), // replay a capture
//!     Reply::text("Hello there").with_usage(10, 2),
//! ])
//! .await;
//! assert!(server.base_url().starts_with("http://127.0.0.1:"));
//! assert_eq!(server.remaining(), 5);
//! # }
//! ```

mod assert;
pub mod chat_corpus;
mod deadline;
mod entries;
pub mod failing_sync;
mod frames;
mod invariant;
pub mod llama;
#[cfg(feature = "otlp")]
pub mod otlp;
pub mod paths;
pub mod peak;
pub mod phoenix;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod process_group;
#[cfg(feature = "pty")]
pub mod pty;
mod reply;
mod request;
pub mod secret_corpus;
mod server;
pub mod unprivileged;

pub use deadline::{A_MINUTE, ends_within_a_minute};
pub use entries::{coding_agent_entry, short_turn_entry};
pub use invariant::check_tool_call_pairing;
pub use paths::{
    mcp_counting_server, mcp_crashy_proxy, mcp_everything_server, testdata, workspace_root,
};
pub use reply::{Reply, ScriptedCall};
pub use request::{request_messages, tool_calls_of};
pub use server::{RecordedRequest, ScriptedServer, unreachable_base_url};
