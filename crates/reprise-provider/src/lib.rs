//! Model providers for reprise: the [`Provider`] trait and an OpenAI-compatible
//! chat-completions client that copes with what real servers send.
#![deny(missing_docs)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod error;
pub mod provider;

pub use error::ProviderError;
pub use provider::{ChatRequest, Completion, Provider, StreamEvent, ToolSpec, Usage};
