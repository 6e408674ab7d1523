//! The reprise agent: a model, tools and a session store, with every message written
//! the moment it exists.
//!
//! An [`Agent`] is built over one session of a [`reprise_session::SessionStore`]: a
//! new id starts empty, a known one is read back (tool calls that never got a result
//! are closed first, so the model accepts the history). Each run records the prompt,
//! every assistant message and every tool result durably before the next model or
//! tool call starts; a crash loses at most the message being produced.
//!
//! Tools are made from async functions with [`tool()`]; subagents ([`Subagent`]) are
//! child agents whose conversations live in the same session under
//! `subagents/<name>`.

mod agent;
mod before_changes;
mod compact;
mod deferred;
mod error;
mod events;
mod fn_tool;
mod idempotency;
mod metrics;
mod prompt;
pub mod schema;
mod spans;
mod subagent;
mod thread;
pub mod tokens;
pub mod tool;
mod usage;

pub use agent::{Agent, AgentBuilder, DEFAULT_AGENT_NAME, DEFAULT_MAX_TURNS, DEFAULT_TURN_TIMEOUT};
pub use before_changes::BeforeChanges;
pub use compact::{
    ContextSettings, DEFAULT_COMPACT_THRESHOLD, FALLBACK_CONTEXT_WINDOW, SUMMARY_HEADING,
};
pub use deferred::{DecisionError, PendingCall};
pub use error::AgentError;
pub use events::{AgentEvent, EventSink, StartedCall};
pub use fn_tool::{FnTool, ToolFuture, parse_arguments, tool};
pub use idempotency::idempotency_key;
pub use prompt::Prompt;
pub use reprise_session::USAGE_FIELD;
pub use spans::{Redact, capture_content};
pub use subagent::{DEFAULT_SUBAGENT_MAX_TURNS, Subagent, subagent_interrupted_text};
pub use thread::{
    CANCELLED_BY_USER, CompactionReport, PARENT_CALL_FIELD, STOPPED_BY_TURN_TIMEOUT,
    TOOL_ERROR_FIELD,
};
pub use tool::{
    Approval, OnUnknown, Tool, ToolApprover, ToolContext, ToolEffects, ToolInvocation, ToolOutput,
};
pub use usage::{USAGE_BEFORE_FIELD, usage_of, usage_totals};
