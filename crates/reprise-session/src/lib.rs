//! Durable sessions for LLM agents.
//!
//! An agent's history is written to disk the moment each message exists, read back
//! after anything goes wrong, and forked to try another way. This crate holds the
//! entry format, the [`SessionStore`] trait with its implementations, resume repair,
//! and the run folders that the `reprise` chat keeps.
#![deny(missing_docs)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod blocking_store;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod conversation;
pub mod entry;
pub mod file_store;
mod fork_copy;
pub mod history;
pub mod id;
pub mod jsonl;
mod jsonl_writer;
pub mod memory;
pub mod message;
mod private_fs;
pub mod repair;
pub mod run_error;
pub mod run_folder;
mod run_list_cache;
pub mod run_meta;
pub mod run_store;
mod run_summary;
pub mod session_log;
pub mod store;
mod store_fs;
pub mod transcript;
mod writer_lock;

pub use conversation::{
    Conversation, ConversationMessage, is_command_expansion, mark_command_expansion,
    read_conversation, read_conversation_with_warnings,
};
pub use entry::Entry;
pub use file_store::FileSessionStore;
pub use fork_copy::wait_for_fork_syncs;
pub use history::{History, HistoryEntry, append_history, read_history};
pub use id::{IdError, SessionKey, validate_id};
pub use jsonl::Durability;
pub use memory::MemoryStore;
pub use message::{Content, ContentPart, FunctionCall, Message, Role, ToolCall};
pub use repair::{model_view, model_view_messages, repair_entries, repair_messages};
pub use run_error::RunError;
pub use run_folder::{
    RunFolder, RunList, RunSummary, RunWarning, create_run_folder, create_run_folder_at, find_run,
    list_runs,
};
pub use run_store::{RunStore, create_run_store, fork_run};
pub use session_log::{EscapeStripper, SessionLog, strip_escapes};
pub use store::{
    AppendReport, ForkOrigin, LoadWarning, Loaded, SessionInfo, SessionStore, StoreError,
    WriterLock,
};
pub use transcript::{Transcript, TranscriptEvent, TranscriptRecord};
