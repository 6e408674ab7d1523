//! The entry and message types of reprise sessions.
//!
//! An [`Entry`] is one line of a session file; a message entry holds a [`Message`],
//! an OpenAI chat-completions message that keeps every field it does not know. The
//! types are what a session store writes and what a model provider sends and
//! receives, so they live here, apart from both: a provider needs them without the
//! store.
//!
//! The entry line format is described in `docs/format.md` of the repository.

mod arguments;
mod entry;
mod fields;
mod message;
mod usage;

pub use arguments::Arguments;
pub use entry::{Entry, MODEL_FIELD, USAGE_FIELD, now_millis};
pub use fields::Fields;
pub use message::{Content, ContentPart, FunctionCall, Message, Role, ToolCall};
pub use usage::{StoredUsage, TokenCounts};
