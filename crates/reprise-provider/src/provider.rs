//! The `Provider` trait: one model call, streamed.

use async_trait::async_trait;
use reprise_message::Message;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use crate::error::ProviderError;

/// A tool the model may call, as offered in the request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON Schema of its arguments (an object schema).
    pub parameters: Value,
}

/// One chat-completions request.
#[derive(Clone, Debug, Default)]
pub struct ChatRequest {
    /// The conversation, system prompt first.
    pub messages: Vec<Message>,
    /// The tools offered.
    pub tools: Vec<ToolSpec>,
    /// A limit on this reply's tokens, in place of the configured `max_tokens`
    /// (a summary asks for a size of its own); `None`: the configured one.
    pub max_tokens: Option<u32>,
}

/// Token counts, when the server reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in the request.
    pub prompt_tokens: u64,
    /// Tokens generated.
    pub completion_tokens: u64,
    /// Both.
    pub total_tokens: u64,
    /// Tokens of the request read from the server's prompt cache
    /// (`prompt_tokens_details.cached_tokens`), when the server said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
}

/// What a UI can show while a response streams in.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamEvent {
    /// A piece of the assistant's text.
    TextDelta(String),
    /// A piece of the model's reasoning (`reasoning_content`), when the server sends it.
    ReasoningDelta(String),
    /// A tool call began to arrive.
    ToolCallStarted {
        /// Its position among the response's tool calls.
        index: usize,
        /// Its id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// The server reported usage.
    Usage(Usage),
    /// The request failed and is being tried again.
    Retrying {
        /// Which attempt comes next (2 for the first retry).
        attempt: u32,
        /// Why.
        reason: String,
        /// How long until it is sent.
        delay: std::time::Duration,
    },
}

/// A complete response: the assistant message, ready to be recorded.
#[derive(Clone, Debug, PartialEq)]
pub struct Completion {
    /// The assistant message, tool calls in index order.
    pub message: Message,
    /// Why the model stopped (`stop`, `tool_calls`, `length`, …).
    pub finish_reason: Option<String>,
    /// Token usage, when reported.
    pub usage: Option<Usage>,
}

/// A model behind some API. Object-safe.
#[async_trait]
pub trait Provider: Send + Sync {
    /// Sends one request and returns the complete assistant message. Stream events go
    /// to `events` as they arrive. A response cut off mid-way is retried or returned
    /// as an error, never as a finished message. Cancelling `cancel` ends the call
    /// with [`ProviderError::Cancelled`].
    async fn complete(
        &self,
        request: &ChatRequest,
        events: Option<&UnboundedSender<StreamEvent>>,
        cancel: &CancellationToken,
    ) -> Result<Completion, ProviderError>;

    /// The model name, for display.
    fn model(&self) -> &str;

    /// The `max_tokens` sent with each request, when one is: what a reply that
    /// ended with `finish_reason: "length"` ran into.
    fn max_tokens(&self) -> Option<u32> {
        None
    }

    /// The sampling temperature sent with each request, when one is.
    fn temperature(&self) -> Option<f64> {
        None
    }

    /// Who serves the model, as the OpenTelemetry GenAI conventions name providers
    /// (`openai` for the OpenAI API and servers that speak it), when known.
    fn provider_name(&self) -> Option<&str> {
        None
    }
}
