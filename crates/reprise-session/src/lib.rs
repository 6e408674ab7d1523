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
//! - in [`fs`] and [`parts`], what a file store is built from, for stores kept in
//!   other crates (the run folders of `reprise-runs` are one).
//!
//! The on-disk format (entry lines, both layouts, and what is guaranteed after a
//! crash) is described in `docs/format.md` of the repository.

#[cfg(feature = "conformance")]
pub mod conformance;
pub mod fs;
mod store;

/// The parts of the file stores that another file-backed store builds on: the
/// blocking face behind the async [`SessionStore`], reading JSONL without following
/// links, the one-writer lock, forks' copies and background syncs, and the writers of
/// a session's transcripts with the one path an append takes through them.
///
/// They are public so that a store kept in another crate (the run folder of
/// `reprise-runs`) reads, locks and forks exactly as [`FileSessionStore`] does.
pub mod parts {
    pub use crate::store::blocking_store::{BlockingStore, OverBlockingStore};
    pub use crate::store::file_store::jsonl_stems;
    pub use crate::store::fork_copy::copy_lines;
    pub use crate::store::fork_sync::{ForkSyncs, without_stalling};
    pub use crate::store::jsonl::{
        load_file_beneath, push_expected, read_file_beneath, read_view_beneath,
    };
    pub use crate::store::transcripts::{Appended, TranscriptFiles, Transcripts};
    pub use crate::store::writer_lock::{HeldLock, LockRegistry, acquire};
}

pub use fs::IoError;
/// The fast entry decoder alone: the fuzz targets check it against serde's.
#[doc(hidden)]
pub use store::FastEntryDecoder;
pub use store::VIEW_SEARCH_LIMIT;
/// Switches the loader to serde's decoder alone: the storage benchmark compares the two.
#[doc(hidden)]
pub use store::decode_with_serde_only;
pub use store::{
    AFTER_CRASH, ANSWERS_ENTRY, APPROVAL_DECISION_KIND, APPROVAL_PENDING_KIND, AfterCrash,
    AppendReport, Arguments, AwaitingCall, COMPACTION_KIND, CallDecision, Compaction, Content,
    ContentPart, DanglingCall, DecidedCall, Durability, Entry, EntryLineDecoder, Fields,
    FileSessionStore, ForkOrigin, FunctionCall, INTERRUPTED, IdError, JsonlWriter, LoadWarning,
    Loaded, LoadedView, MAX_ID_LEN, MODEL_FIELD, MemoryStore, Message, ReleasableLock,
    RepairReport, Role, SessionFork, SessionInfo, SessionKey, SessionMeta, SessionStore,
    StartedCall, StoreError, StoredUsage, TOOL_START_KIND, TURN_STOPPED_KIND, TokenCounts,
    ToolCall, USAGE_FIELD, WriterLock, approval_decision_entry, approval_pending_entry,
    arguments_are_an_object, arguments_hash, awaiting_calls, compacted_tail, compaction_marker,
    cut_turn, decided_call, inspect, inspect_messages, interrupted_result, load_file, model_view,
    model_view_messages, now_millis, repair_entries, repair_entries_except, repair_messages,
    request_message, results_unanswered, short_tokens, started_calls, tool_start_entry,
    turn_stopped_entry, validate_id, visit_model_view, was_started,
};
pub use store::{
    CHECKPOINT_FIELD, REWIND_KIND, Rewind, checkpoint_of, last_rewind, rewound, visible_entries,
};
