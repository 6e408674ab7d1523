//! reprise: durable sessions for LLM agents.
//!
//! Every message of an agent's conversation is on disk the moment it exists, so a
//! conversation survives a crash, a deploy or a closed terminal; it can be resumed
//! tomorrow by a new agent on the same session id, or forked to try another way.
//!
//! This crate is the one to depend on, with `tokio` and `serde`: it re-exports what
//! its examples need ([`CancellationToken`], [`async_trait`](macro@async_trait), the [`JsonSchema`]
//! derive of schemars 1, [`Uuid`]). A tour of its modules, in the order a message
//! travels:
//!
//! - [`agent`]: the [`Agent`](agent::Agent) loop. Build one with
//!   [`Agent::builder`](agent::Agent::builder), give it tools made with
//!   [`tool()`](agent::tool()) and [`Subagent`](agent::Subagent)s, and watch its
//!   [`AgentEvent`](agent::AgentEvent)s.
//! - [`provider`]: where the model's answers come from: the
//!   [`Provider`](provider::Provider) trait and the OpenAI-compatible
//!   [`OpenAiProvider`](provider::OpenAiProvider).
//! - [`session`]: where every message goes: the [`Entry`](session::Entry) line format,
//!   the [`SessionStore`](session::SessionStore) trait and its stores
//!   ([`FileSessionStore`](session::FileSessionStore),
//!   [`MemoryStore`](session::MemoryStore)) and resume repair.
//! - [`runs`]: the run folders of the `reprise` chat, and the catalog of its runs.
//! - `postgres` (with the `postgres` feature): [`PgSessionStore`] and its options,
//!   sessions and runs in PostgreSQL, for many workers on many machines, one fenced
//!   writer per session.
//! - `chat` (with the `chat` feature): the terminal chat's logic below its screens
//!   (the session of a run, slash commands, forks, rewinds, resume, settings), for a
//!   program that draws its own chat.
//! - [`mcp`]: MCP servers as tools, and the gate that decides which tool calls run.
//! - [`tools`]: the chat's built-in tools (read, list, write and edit files under a
//!   working folder; run shell commands in a Landlock sandbox) for any agent.
//! - [`redact`]: the [`Redactor`](redact::Redactor) that every transcript value passes
//!   through.
//!
//! The [`prelude`] brings the everyday names into scope. `docs/library.md` of the
//! repository is the guided tour; the on-disk format is described in
//! `docs/format.md`.
//!
//! ```no_run
//! use std::sync::Arc;
//! use reprise::prelude::*;
//!
//! #[derive(serde::Deserialize, JsonSchema)]
//! struct TalkTo {
//!     /// Who to talk to.
//!     npc: String,
//! }
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let talk_to = tool("talk_to", "Talk to someone in town.", |args: TalkTo, _| async move {
//!     Ok::<_, String>(format!("{} says: bring a torch.", args.npc))
//! });
//! let provider = Arc::new(OpenAiProvider::new(OpenAiConfig::new("llama3.1"))?);
//! let store = Arc::new(FileSessionStore::new("./sessions"));
//!
//! // Day 1: a new id starts an empty session; every message is saved as it is added.
//! let mut day1 = Agent::builder(provider.clone())
//!     .tool(talk_to)
//!     .store(store.clone())
//!     .session_id("quest-1")
//!     .build()
//!     .await?;
//! day1.run("What does it take to enter the Cave of Echoes?").await?;
//! day1.close().await?; // releases the session's writer lock
//!
//! // Day 2: a new agent on the same id reads the session back before answering.
//! let mut day2 = Agent::builder(provider).store(store.clone()).session_id("quest-1").build().await?;
//! day2.run("I have the key. What now?").await?;
//!
//! // A fork: a copy of the history in a new session; quest-1 stays as it was.
//! let mut west = day2.fork("quest-2").await?;
//! west.run("Is there another way in?").await?;
//! west.close().await?;
//! day2.close().await?;
//! store.close().await?; // waits for the fork's data to be on disk
//! # Ok(()) }
//! ```
//!
#![cfg_attr(
    feature = "postgres",
    doc = "[`PgSessionStore`]: postgres::PgSessionStore"
)]
#![cfg_attr(
    not(feature = "postgres"),
    doc = "[`PgSessionStore`]: https://docs.rs/reprise-postgres"
)]

/// The agent loop, tools and subagents (`reprise-agent`).
#[doc(inline)]
pub use reprise_agent as agent;

/// MCP servers as tools, and the step gate (`reprise-mcp`).
#[doc(inline)]
pub use reprise_mcp as mcp;

/// Model providers: the `Provider` trait and the OpenAI-compatible client
/// (`reprise-provider`).
#[doc(inline)]
pub use reprise_provider as provider;

/// Built-in tools: files under a working folder and shell commands in a Landlock
/// sandbox (`reprise-tools`).
#[doc(inline)]
pub use reprise_tools as tools;

/// OpenTelemetry traces and metrics of agents, over OTLP (`reprise-telemetry`).
pub mod telemetry;

/// Secret redaction for transcripts and logs (`reprise-redact`).
#[doc(inline)]
pub use reprise_redact as redact;

/// Sessions: entries, stores and resume repair (`reprise-session`).
#[doc(inline)]
pub use reprise_session as session;

/// The chat's runs: run folders and the catalog of runs (`reprise-runs`).
#[doc(inline)]
pub use reprise_runs as runs;

/// Sessions and runs in PostgreSQL (`reprise-postgres`, with the `postgres` feature).
#[cfg(feature = "postgres")]
#[doc(inline)]
pub use reprise_postgres as postgres;

/// The `reprise` chat's logic below its screens, for a program that draws its own
/// interface: the session driver, slash commands, forks, rewinds, resume and
/// settings (`reprise-chat`, with the `chat` feature).
#[cfg(feature = "chat")]
#[doc(inline)]
pub use reprise_chat as chat;

/// The attribute that makes an `async fn` in a trait implementation object-safe:
/// put `#[reprise::async_trait]` on an `impl Tool` or `impl ToolApprover`.
pub use async_trait::async_trait;

/// Cancels a run: the token [`Agent::run_streaming`](agent::Agent::run_streaming)
/// takes (tokio-util's).
pub use tokio_util::sync::CancellationToken;

/// The JSON Schema of a tool's arguments, and its derive (schemars 1). The derive's
/// code names the crate `schemars`: the [`prelude`] brings that name into scope
/// (or write `use reprise::schemars;`), so a program needs no schemars dependency
/// of its own.
pub use schemars::JsonSchema;

/// The JSON Schema crate (schemars 1) that [`JsonSchema`] comes from.
pub use schemars;

/// The uuid of entries and prompts.
pub use uuid::Uuid;

/// The names most programs use: `use reprise::prelude::*;`.
pub mod prelude {
    pub use crate::{CancellationToken, JsonSchema, async_trait, schemars};
    pub use reprise_agent::{
        Agent, AgentBuilder, AgentError, AgentEvent, Approval, OnUnknown, Prompt, Subagent, Tool,
        ToolApprover, ToolContext, ToolEffects, ToolInvocation, ToolOutput, tool,
    };
    pub use reprise_provider::{OpenAiConfig, OpenAiProvider, Provider};
    pub use reprise_runs::create_run_store;
    pub use reprise_session::{FileSessionStore, MemoryStore, Message, SessionStore, StoreError};
}

/// The README and the guides of `docs/`, compiled as doctests so that their code
/// always builds.
#[cfg(doctest)]
mod guides {
    #[doc = include_str!("../../../README.md")]
    struct Readme;

    #[doc = include_str!("../../../docs/library.md")]
    struct Library;

    #[cfg(feature = "postgres")]
    #[doc = include_str!("../../../docs/postgres.md")]
    struct Postgres;
}
