//! MCP servers as reprise tools, and the step gate that decides which tool calls run.
//!
//! - [`McpConfig`]: the `[mcp]` config section (servers over stdio or streamable
//!   HTTP; secrets from the environment with `${NAME}`).
//! - [`McpHub`]: the servers of one run, started concurrently; their tools
//!   ([`McpTool`], named `<server>__<tool>`) go to the agent; failures become error
//!   results and [`McpNotice`]s, and a failed server is restarted on the next call
//!   (a bounded number of times); [`McpHub::shutdown`] stops them all.
//! - [`StepGate`]: a [`reprise_agent::ToolApprover`] that allows, denies or asks,
//!   from a [`GatePolicy`] of tool-name patterns and a [`GateAsker`].
//! - [`list_servers`]: what `reprise mcp list` shows.

pub mod config;
pub mod connection;
pub mod error;
pub mod gate;
pub mod hub;
pub mod list;
pub mod naming;
pub mod notice;
pub mod render;
pub mod resolve;
mod rmcp_client;
mod template;

pub use config::{McpConfig, ServerConfig};
pub use connection::IDEMPOTENCY_KEY_META;
pub use error::{ConfigError, ConnectionError, StartError};
pub use gate::{
    Decision, GateAnswer, GateAsker, GateConfig, GateDecision, GateMode, GatePolicy, GateRequest,
    LineAsker, StepGate,
};
pub use hub::{HubOptions, McpHub, McpTool, ServerStatus, ToolInfo};
pub use list::{McpListReport, list_servers};
pub use notice::{McpNotice, NoticeKind};
pub use resolve::{ResolveContext, ServerSpec, TransportSpec};
