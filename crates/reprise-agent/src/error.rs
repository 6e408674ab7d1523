//! Agent errors.

use reprise_provider::ProviderError;
use reprise_session::{IdError, StoreError};

use crate::deferred::{DecisionError, PendingCall};

/// Why a run (or building an agent) failed.
///
/// New kinds of failure may be added: match with a `_` arm. A session another
/// writer holds is [`AgentError::is_locked`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The session store failed (or refused an id); what was recorded before is on
    /// disk.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The model call failed (after the provider's retries); nothing of it was recorded.
    #[error("model call failed: {0}")]
    Provider(#[source] ProviderError),
    /// The model kept calling tools for the whole turn budget.
    #[error("no final answer after {max_turns} turns (max_turns = {max_turns})")]
    MaxTurns {
        /// The budget that ran out.
        max_turns: usize,
    },
    /// The model's reply reached `max_tokens` in the middle of its tool calls and
    /// none of them could run: the reply is recorded, and each call answered with
    /// an error result.
    #[error(
        "the reply was cut off at max_tokens{}; ask again or raise max_tokens",
        max_tokens.map(|n| format!(" ({n})")).unwrap_or_default()
    )]
    ReplyCutOff {
        /// The limit sent, when the provider knows it.
        max_tokens: Option<u32>,
    },
    /// The run went on longer than its wall-clock budget and was stopped like a
    /// cancel: what was complete is recorded, open tool calls closed.
    #[error("the turn was stopped after {} (turn_timeout)", humanize(*after))]
    TurnTimeout {
        /// The budget that ran out.
        after: std::time::Duration,
    },
    /// The model answered a summary request with no text: nothing was compacted.
    #[error("the model returned an empty summary; nothing was compacted")]
    EmptySummary,
    /// The run was cancelled; what was complete is recorded, open tool calls closed.
    #[error("cancelled by the user")]
    Cancelled,
    /// The prompt given with this id is in the session unanswered, and later
    /// prompts came after it: it is neither stored nor answered again.
    #[error("the prompt {id} was never answered and other prompts followed it")]
    PromptSuperseded {
        /// The prompt's id.
        id: uuid::Uuid,
    },
    /// The approver answered "not now" ([`Approval::Defer`](crate::Approval::Defer))
    /// for these calls: they are recorded as waiting, the turn stopped without
    /// running them, and nothing is held. Record a decision for each
    /// ([`Agent::decide`](crate::Agent::decide)), in this process or another, then
    /// continue the turn ([`Agent::resume_turn`](crate::Agent::resume_turn)).
    #[error("the turn waits for a decision about {}", waiting(calls))]
    AwaitingDecision {
        /// The calls that wait, in call order.
        calls: Vec<PendingCall>,
    },
    /// A decision about a waiting call was refused; nothing was written.
    #[error(transparent)]
    Decision(#[from] DecisionError),
    /// The agent was configured in a way that cannot work (two tools with one name).
    #[error("invalid agent configuration: {0}")]
    Config(String),
}

/// `pay (call_1), refund (call_2)`: the waiting calls, for the error's message.
fn waiting(calls: &[PendingCall]) -> String {
    let named: Vec<String> = calls
        .iter()
        .map(|call| format!("{} ({})", call.tool, call.call_id))
        .collect();
    named.join(", ")
}

/// `90s`, `10m`, `1m30s`: a duration as a person writes it.
fn humanize(duration: std::time::Duration) -> String {
    let seconds = duration.as_secs();
    if seconds == 0 {
        return format!("{}ms", duration.as_millis());
    }
    let (minutes, rest) = (seconds / 60, seconds % 60);
    match (minutes, rest) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m}m"),
        (m, s) => format!("{m}m{s}s"),
    }
}

impl AgentError {
    /// Whether the session is held by another writer (in this process or another):
    /// the same request may succeed once that writer lets go.
    pub fn is_locked(&self) -> bool {
        matches!(self, AgentError::Store(StoreError::Locked { .. }))
    }
}

impl From<IdError> for AgentError {
    fn from(error: IdError) -> Self {
        AgentError::Store(StoreError::InvalidId(error))
    }
}

impl From<ProviderError> for AgentError {
    fn from(error: ProviderError) -> Self {
        match error {
            ProviderError::Cancelled => AgentError::Cancelled,
            other => AgentError::Provider(other),
        }
    }
}
