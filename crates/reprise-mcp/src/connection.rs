//! Our view of one live MCP connection. rmcp's API moves fast; only
//! the `rmcp_client` module knows it, everything else talks to this trait.

use async_trait::async_trait;
use futures::future::BoxFuture;
use serde_json::{Map, Value};

use crate::error::ConnectionError;

/// A tool as a server lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct RemoteTool {
    /// Its name on the server.
    pub name: String,
    /// Its description (or title), empty when it has none.
    pub description: String,
    /// Its input JSON Schema, as the server sent it.
    pub input_schema: Value,
    /// What a call does besides answering, from the tool's annotations
    /// (`readOnlyHint`, `idempotentHint`).
    pub effects: reprise_agent::ToolEffects,
}

/// One block of a tool result.
#[derive(Clone, Debug, PartialEq)]
pub enum ResultPart {
    /// Text content.
    Text(String),
    /// Content the model cannot read as text (an image, audio, a blob), described.
    Described(String),
}

/// A tool call's result.
#[derive(Clone, Debug, PartialEq)]
pub struct CallResult {
    /// The content blocks, in order.
    pub parts: Vec<ResultPart>,
    /// `structuredContent`, when the server sent it.
    pub structured: Option<Value>,
    /// `isError: true`.
    pub is_error: bool,
}

/// The `_meta` key of a `tools/call` request holding the call's idempotency key: the
/// same on every attempt of one call (a call run again after a crash), different
/// for every other call, so that a server can do a call once.
pub const IDEMPOTENCY_KEY_META: &str = "reprise/idempotencyKey";

/// A live connection to one MCP server.
#[async_trait]
pub trait McpConnection: Send + Sync {
    /// All the server's tools (every page).
    async fn list_tools(&self) -> Result<Vec<RemoteTool>, ConnectionError>;

    /// Calls one tool, with the call's idempotency key in the request's `_meta`
    /// (under [`IDEMPOTENCY_KEY_META`]). Dropping the future abandons the request
    /// (the server is told).
    async fn call_tool(
        &self,
        name: &str,
        arguments: Option<Map<String, Value>>,
        idempotency_key: &str,
    ) -> Result<CallResult, ConnectionError>;

    /// `None` while the connection is usable; otherwise why it is not (the process
    /// exited with …, the transport closed), with the server's last stderr lines.
    fn failure(&self) -> Option<String>;

    /// Resolves when the connection breaks (the process exits, the transport closes).
    /// The future does not keep the connection alive.
    fn closed(&self) -> BoxFuture<'static, ()>;

    /// Closes the connection cleanly: the session is ended, a child process gets EOF,
    /// then SIGTERM, then SIGKILL, and is waited for. Idempotent.
    async fn shutdown(&self);

    /// Kills a child process at once, without waiting (for `Drop`).
    fn kill(&self);
}
