//! Durable sessions for LLM agents.
//!
//! An agent's history is written to disk the moment each message exists, read back
//! after anything goes wrong, and forked to try another way. This crate holds the
//! entry format, the [`SessionStore`] trait with its implementations, resume repair,
//! and the run folders that the `reprise` chat keeps.
#![deny(missing_docs)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod entry;
pub mod id;
pub mod message;
pub mod run_meta;
pub mod store;

pub use entry::Entry;
pub use id::{IdError, SessionKey, validate_id};
pub use message::{Content, ContentPart, FunctionCall, Message, Role, ToolCall};
pub use store::{
    AppendReport, ForkOrigin, LoadWarning, Loaded, SessionInfo, SessionStore, StoreError,
    WriterLock,
};
