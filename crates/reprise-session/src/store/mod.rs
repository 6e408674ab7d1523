//! The store core: the [`SessionStore`] trait and its stores, reading and writing
//! entry lines as JSONL, forks, writer locks and resume repair. Its public names, and
//! the entry and message types of `reprise-message`, are re-exported at the crate
//! root.

pub(crate) mod approval;
pub(crate) mod blocking_store;
pub(crate) mod call_list;
pub(crate) mod compaction;
pub(crate) mod decode;
pub(crate) mod file_store;
pub(crate) mod fork_copy;
pub(crate) mod fork_sync;
pub(crate) mod id;
pub(crate) mod jsonl;
pub(crate) mod jsonl_writer;
pub(crate) mod memory;
pub(crate) mod repair;
pub(crate) mod rewind;
pub(crate) mod session_store;
pub(crate) mod stopped_writes;
pub(crate) mod tool_start;
pub(crate) mod transcripts;
pub(crate) mod turn_stop;
pub(crate) mod uuid_set;
pub(crate) mod view_start;
pub(crate) mod writer_lock;

pub use approval::{
    APPROVAL_DECISION_KIND, APPROVAL_PENDING_KIND, AwaitingCall, CallDecision, DecidedCall,
    approval_decision_entry, approval_pending_entry, arguments_hash, awaiting_calls, decided_call,
};
pub use compaction::{
    COMPACTION_KIND, Compaction, compacted_tail, compaction_marker, short_tokens,
};
#[doc(hidden)]
pub use decode::{EntryLineDecoder, FastEntryDecoder, decode_with_serde_only};
pub use file_store::{FileSessionStore, SessionMeta};
pub use id::{IdError, MAX_ID_LEN, SessionKey, validate_id};
pub use jsonl::{Durability, load_file};
pub use jsonl_writer::JsonlWriter;
pub use memory::MemoryStore;
pub use repair::{
    ANSWERS_ENTRY, DanglingCall, INTERRUPTED, RepairReport, arguments_are_an_object, cut_turn,
    inspect, inspect_messages, interrupted_result, model_view, model_view_messages, repair_entries,
    repair_entries_except, repair_messages, request_message, results_unanswered, visit_model_view,
};
pub use reprise_message::{
    Arguments, Content, ContentPart, Entry, Fields, FunctionCall, MODEL_FIELD, Message, Role,
    StoredUsage, TokenCounts, ToolCall, USAGE_FIELD, now_millis,
};
pub use rewind::{REWIND_KIND, Rewind, last_rewind, rewound, visible_entries};
pub use session_store::{
    AppendReport, ForkOrigin, LoadWarning, Loaded, LoadedView, ReleasableLock, SessionFork,
    SessionInfo, SessionStore, StoreError, WriterLock,
};
pub use tool_start::{
    AFTER_CRASH, AfterCrash, CHECKPOINT_FIELD, StartedCall, TOOL_START_KIND, checkpoint_of,
    started_calls, tool_start_entry, was_started,
};
pub use turn_stop::{TURN_STOPPED_KIND, turn_stopped_entry};
pub use view_start::VIEW_SEARCH_LIMIT;
