//! What an agent reports while it works, for a UI to show and a transcript to keep.

use std::time::Duration;

use reprise_provider::{StreamEvent, Usage};
use reprise_session::{Arguments, Message, SessionKey};
use tokio::sync::mpsc::{Sender, UnboundedSender};
use uuid::Uuid;

use crate::tool::ToolOutput;

/// One thing that happened during a turn. Every event names the agent it comes
/// from: the main agent's name, or a subagent's name for what its child agent does.
///
/// New kinds of events may be added: match with a `_` arm.
///
/// ```
/// use reprise_agent::AgentEvent;
///
/// fn show(event: &AgentEvent) {
///     match event {
///         AgentEvent::TextDelta { text, .. } => print!("{text}"),
///         AgentEvent::ToolCallStarted { name, .. } => println!("[{name}…]"),
///         AgentEvent::ToolCallFinished { name, denied: true, .. } => println!("[{name} refused]"),
///         AgentEvent::ToolCallFinished { output, .. } => println!("→ {}", output.content),
///         _ => {}
///     }
/// }
/// # show(&AgentEvent::TextDelta { agent: "main".into(), text: "hi".into() });
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum AgentEvent {
    /// A model call begins (the spinner starts).
    ModelCallStarted {
        /// The agent calling the model.
        agent: String,
        /// The 1-based turn of this run.
        turn: usize,
    },
    /// A piece of the assistant's text, as it streams in.
    TextDelta {
        /// The agent whose model is answering.
        agent: String,
        /// The new text.
        text: String,
    },
    /// A piece of the model's reasoning, when the server sends it.
    ReasoningDelta {
        /// The agent whose model is answering.
        agent: String,
        /// The new reasoning text.
        text: String,
    },
    /// A tool call began to stream in; its arguments are not complete yet.
    ToolCallStreaming {
        /// The agent whose model is answering.
        agent: String,
        /// Its position among the response's tool calls.
        index: usize,
        /// Its id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// The loop takes up a tool call: the approver (if any) is asked next, then the
    /// tool runs. Every call gets exactly one `ToolCallStarted` and, later, one
    /// `ToolCallFinished` (denied, unknown, failed and cancelled calls too) or one
    /// `CallAwaitingDecision`.
    ToolCallStarted {
        /// The agent running the tool.
        agent: String,
        /// The call id.
        id: String,
        /// The tool's name.
        name: String,
        /// The arguments as the model sent them.
        arguments: Arguments,
    },
    /// A call of a turn that a crash cut, taken up again when the session is
    /// resumed: what the resume does with it (sent before it does it, after the
    /// call's `ToolCallStarted`).
    CallResumed {
        /// The agent that made the call.
        agent: String,
        /// The call id.
        id: String,
        /// The tool's name.
        name: String,
        /// What is done with it.
        action: reprise_session::AfterCrash,
    },
    /// The approver answered "not now": the call waits for a decision and has no
    /// result; the run ends with [`AgentError::AwaitingDecision`](crate::AgentError::AwaitingDecision).
    CallAwaitingDecision {
        /// The agent that made the call.
        agent: String,
        /// The call id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// A tool call has a result (also for denied, failed, panicked and cancelled calls).
    ToolCallFinished {
        /// The agent that ran the tool.
        agent: String,
        /// The call id.
        id: String,
        /// The tool's name.
        name: String,
        /// What the model is told.
        output: ToolOutput,
        /// Whether the approver refused the call (it did not run).
        denied: bool,
    },
    /// A subagent takes up a task: its events from here until the parent call's
    /// `ToolCallFinished` belong to that call.
    SubagentTask {
        /// The subagent.
        agent: String,
        /// The parent's tool call that gave the task.
        call_id: String,
    },
    /// The server reported token usage.
    Usage {
        /// The agent whose model call it was.
        agent: String,
        /// The counts.
        usage: Usage,
    },
    /// A model call failed and is being tried again.
    Retrying {
        /// The agent whose model call it was.
        agent: String,
        /// Which attempt comes next (2 for the first retry).
        attempt: u32,
        /// Why.
        reason: String,
        /// How long until it is sent.
        delay: Duration,
    },
    /// The model's reply reached `max_tokens` and was cut off there (it is recorded
    /// as it came). A call it was cut in the middle of is not run.
    ReplyCutOff {
        /// The agent whose model answered.
        agent: String,
        /// The limit sent, when the provider knows it.
        max_tokens: Option<u32>,
    },
    /// The older part of the history is being summarised (model calls of their own,
    /// before the next request or after the server said it did not fit).
    Compacting {
        /// The agent whose history it is.
        agent: String,
    },
    /// A compaction's summary reached the limit its request was sent with and was
    /// cut off there; it is kept as it came (after [`AgentEvent::Compacted`]).
    SummaryCutOff {
        /// The agent whose history it is.
        agent: String,
        /// The limit the summary request was sent with.
        max_tokens: u32,
    },
    /// A compaction entry was written: from now on the model is sent its summary in
    /// place of the messages it covers (which stay in the session).
    Compacted {
        /// The agent whose history it is.
        agent: String,
        /// The transcript it was written to.
        key: SessionKey,
        /// The compaction entry's uuid.
        uuid: Uuid,
        /// How many messages the summary took in.
        messages: usize,
        /// The estimated request size before, in tokens.
        tokens_before: u64,
        /// The estimated request size after, in tokens.
        tokens_after: u64,
    },
    /// A message was written to the session (durably: it survives a crash from here on).
    MessageRecorded {
        /// The agent whose history it joined.
        agent: String,
        /// The transcript it was written to (the session, or a subagent's subkey).
        key: SessionKey,
        /// The entry's uuid.
        uuid: Uuid,
        /// The message.
        message: Message,
    },
}

/// The call an [`AgentEvent::ToolCallStarted`] starts, borrowed from the event.
#[derive(Clone, Copy, Debug)]
pub struct StartedCall<'a> {
    /// The agent running the tool.
    pub agent: &'a str,
    /// The call id.
    pub id: &'a str,
    /// The tool's name.
    pub name: &'a str,
    /// The arguments as the model sent them.
    pub arguments: &'a Arguments,
}

impl AgentEvent {
    /// The call this event starts, when it is an [`AgentEvent::ToolCallStarted`]:
    /// every reader of the event takes the call from here.
    pub fn started_call(&self) -> Option<StartedCall<'_>> {
        match self {
            AgentEvent::ToolCallStarted {
                agent,
                id,
                name,
                arguments,
            } => Some(StartedCall {
                agent,
                id,
                name,
                arguments,
            }),
            _ => None,
        }
    }

    /// The agent the event comes from.
    pub fn agent(&self) -> &str {
        match self {
            AgentEvent::ModelCallStarted { agent, .. }
            | AgentEvent::TextDelta { agent, .. }
            | AgentEvent::ReasoningDelta { agent, .. }
            | AgentEvent::ToolCallStreaming { agent, .. }
            | AgentEvent::ToolCallStarted { agent, .. }
            | AgentEvent::ToolCallFinished { agent, .. }
            | AgentEvent::CallResumed { agent, .. }
            | AgentEvent::CallAwaitingDecision { agent, .. }
            | AgentEvent::SubagentTask { agent, .. }
            | AgentEvent::Usage { agent, .. }
            | AgentEvent::Retrying { agent, .. }
            | AgentEvent::ReplyCutOff { agent, .. }
            | AgentEvent::Compacting { agent }
            | AgentEvent::SummaryCutOff { agent, .. }
            | AgentEvent::Compacted { agent, .. }
            | AgentEvent::MessageRecorded { agent, .. } => agent,
        }
    }

    /// The agent event for a provider's stream event.
    pub fn from_stream(agent: &str, event: StreamEvent) -> Self {
        let agent = agent.to_owned();
        match event {
            StreamEvent::TextDelta(text) => AgentEvent::TextDelta { agent, text },
            StreamEvent::ReasoningDelta(text) => AgentEvent::ReasoningDelta { agent, text },
            StreamEvent::ToolCallStarted { index, id, name } => AgentEvent::ToolCallStreaming {
                agent,
                index,
                id,
                name,
            },
            StreamEvent::Usage(usage) => AgentEvent::Usage { agent, usage },
            StreamEvent::Retrying {
                attempt,
                reason,
                delay,
            } => AgentEvent::Retrying {
                agent,
                attempt,
                reason,
                delay,
            },
        }
    }
}

/// Where a run sends its [`AgentEvent`]s: an unbounded channel, or a bounded one
/// (`tokio::sync::mpsc::channel(n)`) for a slow reader, such as a client at the
/// other end of a network stream. With a bounded channel the run waits while the
/// channel is full, so it goes no faster than the reader; a reader that goes away
/// (drops its receiver) never stops the run.
#[derive(Clone, Debug)]
pub struct EventSink(Sink);

#[derive(Clone, Debug)]
enum Sink {
    Unbounded(UnboundedSender<AgentEvent>),
    Bounded(Sender<AgentEvent>),
}

impl EventSink {
    /// Sends one event, waiting for room in a bounded channel.
    pub(crate) async fn send(&self, event: AgentEvent) {
        // A reader that went away must not stop the agent from finishing its turn.
        match &self.0 {
            Sink::Unbounded(events) => {
                let _ = events.send(event);
            }
            Sink::Bounded(events) => {
                let _ = events.send(event).await;
            }
        }
    }
}

impl From<UnboundedSender<AgentEvent>> for EventSink {
    fn from(events: UnboundedSender<AgentEvent>) -> Self {
        EventSink(Sink::Unbounded(events))
    }
}

impl From<Sender<AgentEvent>> for EventSink {
    fn from(events: Sender<AgentEvent>) -> Self {
        EventSink(Sink::Bounded(events))
    }
}
