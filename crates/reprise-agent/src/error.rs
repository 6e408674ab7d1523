//! Agent errors.

use reprise_provider::ProviderError;
use reprise_session::{IdError, StoreError};

/// Why a run (or building an agent) failed.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The session store failed; what was recorded before is on disk.
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
    /// The run was cancelled; what was complete is recorded, open tool calls closed.
    #[error("cancelled by the user")]
    Cancelled,
    /// A session id or subagent name that cannot be used.
    #[error(transparent)]
    InvalidId(#[from] IdError),
    /// The agent was configured in a way that cannot work (two tools with one name).
    #[error("invalid agent configuration: {0}")]
    Config(String),
}

impl From<ProviderError> for AgentError {
    fn from(error: ProviderError) -> Self {
        match error {
            ProviderError::Cancelled => AgentError::Cancelled,
            other => AgentError::Provider(other),
        }
    }
}
