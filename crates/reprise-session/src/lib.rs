//! Durable sessions for LLM agents.
//!
//! An agent's history is written to disk the moment each message exists, read back
//! after anything goes wrong, and forked to try another way. This crate holds:
//!
//! - at its root, the store core: the [`SessionStore`] trait with its stores
//!   ([`FileSessionStore`], [`MemoryStore`]), the JSONL reader and writer, and resume
//!   repair ([`repair_entries`], [`model_view`]), with the [`Entry`] line format and
//!   its [`Message`]s (defined in `reprise-message`, which model providers use
//!   without the store);
//! - in [`runs`], the run folders that the `reprise` chat keeps: one folder per start
//!   of the chat, with its [`RunStore`](runs::RunStore), prompt history, session log
//!   and tool transcript.
//!
//! The on-disk format (entry lines, both layouts, the files of a run folder, and what
//! is guaranteed after a crash) is described in `docs/format.md` of the repository.

#[cfg(feature = "conformance")]
pub mod conformance;
mod fs;
pub mod runs;
mod store;

pub use fs::IoError;
/// The fast entry decoder alone: the fuzz targets check it against serde's.
#[doc(hidden)]
pub use store::FastEntryDecoder;
/// Switches the loader to serde's decoder alone: the storage benchmark compares the two.
#[doc(hidden)]
pub use store::decode_with_serde_only;
pub use store::{
    ANSWERS_ENTRY, AppendReport, COMPACTION_KIND, Compaction, Content, ContentPart, DanglingCall,
    Durability, Entry, EntryLineDecoder, FileSessionStore, ForkOrigin, FunctionCall, INTERRUPTED,
    IdError, JsonlWriter, LoadWarning, Loaded, MAX_ID_LEN, MemoryStore, Message, RepairReport,
    Role, SessionInfo, SessionKey, SessionMeta, SessionStore, StoreError, ToolCall, USAGE_FIELD,
    WriterLock, arguments_are_an_object, compacted_tail, compaction_marker, inspect,
    inspect_messages, interrupted_result, load_file, model_view, model_view_messages, now_millis,
    repair_entries, repair_messages, request_message, short_tokens, validate_id, visit_model_view,
};
