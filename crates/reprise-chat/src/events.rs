//! What the chat tells a screen while it works: the agent's events, the MCP
//! servers' notices, and the step gate's questions with the person's answers.

use reprise_agent::AgentEvent;
use tokio::sync::oneshot;

/// What a screen is told.
#[derive(Debug)]
pub enum UiEvent {
    /// Something the agent did.
    Agent(AgentEvent),
    /// The step gate asks whether a tool call may run.
    Ask(Ask),
    /// Something happened to an MCP server (started, failed, restarted).
    Mcp(reprise_mcp::McpNotice),
    /// A file the chat keeps beside the conversation (the prompt history, the
    /// run's transcript) could not be written or synced: the chat goes on, and the
    /// person is told what may be missing.
    Warning(String),
}

impl UiEvent {
    /// The line a screen shows for an event that is neither the agent's nor a
    /// question, and may come at any time (between turns too).
    pub fn notice_text(&self) -> Option<String> {
        match self {
            UiEvent::Mcp(notice) => Some(notice.to_string()),
            UiEvent::Warning(text) => Some(format!("! {text}")),
            UiEvent::Agent(_) | UiEvent::Ask(_) => None,
        }
    }
}

/// The person's answer to "may this tool call run?".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Run it.
    Yes,
    /// Do not run it.
    No,
    /// Run it, and every later call of this tool in this run.
    Always,
}

/// A question for the person; the screen answers through `reply`.
#[derive(Debug)]
pub struct Ask {
    /// The agent asking (`main` or a subagent).
    pub agent: String,
    /// The tool.
    pub tool: String,
    /// Its arguments (redacted); of long arguments only the start that a preview
    /// reads (see [`arguments_head`](crate::text::arguments_head)).
    pub arguments: String,
    /// The arguments' whole size in bytes, when `arguments` holds only their start.
    pub arguments_len: Option<usize>,
    /// Set when the call started before a crash and may have taken effect: the
    /// question is whether to run it again ([`Answer::Yes`]) or to tell the model it
    /// was interrupted ([`Answer::No`]).
    pub again: bool,
    /// Where the answer goes.
    pub reply: oneshot::Sender<Answer>,
}
