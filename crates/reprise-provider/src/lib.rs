//! Model providers for reprise: the [`Provider`] trait and an OpenAI-compatible
//! chat-completions client that copes with what real servers send.
//!
//! ```no_run
//! use reprise_provider::{ChatRequest, OpenAiConfig, OpenAiProvider, Provider};
//! use reprise_message::Message;
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn demo() -> Result<(), reprise_provider::ProviderError> {
//! let mut config = OpenAiConfig::new("qwen2.5-coder:7b"); // Ollama by default
//! if let Ok(key) = std::env::var("OPENAI_API_KEY") {
//!     config = config.api_key(key);
//! }
//! let provider = OpenAiProvider::new(config)?;
//! let request = ChatRequest { messages: vec![Message::user("hi")], tools: vec![], max_tokens: None };
//! let completion = provider.complete(&request, None, &CancellationToken::new()).await?;
//! println!("{}", completion.message.text());
//! # Ok(()) }
//! ```

pub mod accumulate;
mod body;
pub mod byte_count;
pub mod config;
pub mod context_window;
pub mod error;
pub mod error_page;
pub mod generation;
pub mod openai;
pub mod provider;
pub mod retry;
pub mod sse;
mod trace_context;
pub mod wire;

pub use accumulate::Accumulator;
pub use config::{DEFAULT_BASE_URL, DEFAULT_IDLE_TIMEOUT, DEFAULT_REQUEST_TIMEOUT, OpenAiConfig};
pub use context_window::{DiscoveredWindow, discover_context_window};
pub use error::{Cause, ProviderError, TimeoutPhase, error_chain, is_context_exceeded_answer};
pub use generation::{DEFAULT_MAX_TOKENS, Generation};
pub use openai::{OpenAiProvider, parse_completion};
pub use provider::{ChatRequest, Completion, Provider, StreamEvent, ToolSpec, Usage};
pub use sse::decode_sse;
pub use wire::RESERVED_BODY_FIELDS;
