//! The `Tool` trait: something the model can call.

use async_trait::async_trait;
use reprise_provider::ToolSpec;
use tokio_util::sync::CancellationToken;

/// One call of a tool, as the model made it.
#[derive(Clone, Debug)]
pub struct ToolInvocation {
    /// The call id the result answers.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as the model sent them (JSON text, possibly invalid).
    pub arguments: String,
    /// Cancelled when the turn is cancelled.
    pub cancel: CancellationToken,
}

/// What a tool returns to the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolOutput {
    /// The text the model sees.
    pub content: String,
    /// Whether the call failed (bad arguments, a tool error, a denial, a panic).
    pub is_error: bool,
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            is_error: false,
        }
    }

    /// A failed result; the model is told what went wrong.
    pub fn error(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            is_error: true,
        }
    }
}

/// A tool the agent offers the model. Object-safe.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The name, description and argument schema offered to the model.
    fn spec(&self) -> ToolSpec;

    /// Runs one call. Failures are returned as [`ToolOutput::error`], never raised.
    async fn call(&self, invocation: ToolInvocation) -> ToolOutput;
}

/// What the step gate decided about one tool call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Approval {
    /// Run it.
    Allow,
    /// Do not run it; the model gets an error result carrying this reason.
    Deny(String),
}

/// Decides, before each tool call runs, whether it may run. Object-safe.
///
/// The agent asks it for every call (its own and its subagents'); an implementation
/// may ask the person and wait for the answer.
#[async_trait]
pub trait ToolApprover: Send + Sync {
    /// Decides about one call made by `agent` (the main agent's name, or a subagent's).
    async fn approve(&self, agent: &str, invocation: &ToolInvocation) -> Approval;
}
