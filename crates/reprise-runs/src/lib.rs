//! The runs of the `reprise` chat: the run folders it keeps, one per start of the
//! chat, and the catalog through which the chat lists, finds, opens and removes runs
//! wherever they are kept.
//!
//! A runs directory holds one folder per run:
//!
//! ```text
//! .run/
//! ├── history.jsonl                      prompt history, shared by every run
//! ├── .list-cache                        what the last listing read of each run
//! └── 2026-09-29T10-15-00-000Z/          one run, named after its UTC start time
//!     ├── conversation.jsonl             the session's entries (see RunStore)
//!     ├── subagents/<name>.jsonl         each subagent's entries
//!     ├── session.json  .summary.json    what the run holds; what listings show
//!     ├── labels.json                    the title and tags the person gave it
//!     ├── workdir.json  checkpoints/     its working folder and that folder's checkpoints
//!     ├── session.log                    what the terminal showed, as plain text
//!     └── transcript.jsonl               tool calls and results
//! ```
//!
//! Only `conversation.jsonl` and `subagents/` hold the conversation as it was: they
//! are the model's history, which a resumed conversation sends back exactly. Every
//! other file is redacted before it is written (`session.log`, `transcript.jsonl`,
//! `history.jsonl`, the first message in `session.json`, `.summary.json` and the list
//! cache).
//!
//! [`RunStore`] is the [`SessionStore`](reprise_session::SessionStore) of one run folder;
//! [`list_runs`] and [`find_run`] find runs; [`fork_run`] copies one into a new folder.
//!
//! [`held::through_held`] names a run's files through a handle on its runs folder,
//! so that a command changing the folders above it cannot cut the chat off its run.
//!
//! [`RunCatalog`] is every operation the chat does on runs, whether they are folders
//! ([`FolderCatalog`]) or sessions in a database (`reprise-postgres`).
//!
//! [`read_usage`] and [`summarise`] are the usage ledger: the tokens, calls and cost
//! every run recorded.

mod catalog;
mod command_expansion;
#[cfg(feature = "conformance")]
pub mod conformance;
mod conversation;
mod conversation_stream;
mod error;
mod fingerprint;
mod folder;
mod folder_catalog;
mod fs;
pub mod held;
mod history;
mod labels;
mod leftovers;
mod list_cache;
mod list_cache_codec;
mod listing_redaction;
mod long_record;
mod meta;
mod person_message;
mod record;
mod record_reader;
mod recover;
mod rewind_scan;
mod run;
mod search;
mod search_folded;
mod search_text;
mod session_log;
mod store;
mod summary;
mod transcript;
mod unused;
mod usage;
mod value_redaction;
mod workdir;

pub use catalog::{
    CatalogError, CatalogFork, RunCatalog, RunFork, RunSearch, RunSizes, TagChange, newest,
};
pub use command_expansion::{COMMAND_EXPANSION_MARK, is_command_expansion, mark_command_expansion};
pub use conversation::{
    CompactionMarkers, Conversation, ConversationMessage, ConversationPicker, conversation_of,
    read_conversation, read_conversation_with_warnings, read_run_entries, stream_conversation,
    stream_run_entries, subagent_names,
};
pub use conversation_stream::{Batched, ConversationStream, EntryStream, Weighed};
pub use error::{RunError, error_chain};
pub use folder::{
    CONTEXT_WINDOW_JSON, HISTORY_LINK_WARNING, LAST_RUN, RunList, SESSION_LOG, create_run_folder,
    create_run_folder_at, find_run, find_run_or_title, fold_title, list_runs, new_run_folder,
    run_folder_name, summarize_run,
};
pub use folder_catalog::{FolderCatalog, folder_bytes};
pub use history::{
    HISTORY_JSONL, History, HistoryEntry, append_history, append_history_with, read_history,
};
pub use labels::{
    LABELS_JSON, Labels, MAX_TAG_CHARS, MAX_TITLE_CHARS, change_tags, clean_tag, clean_title,
    read_labels, set_title, write_labels,
};
pub use list_cache::LIST_CACHE;
pub use listing_redaction::{LAST_MESSAGE_CHARS, last_message_text};
pub use meta::{SESSION_JSON, SessionJson};
pub use person_message::{PersonMessage, shows_as_message, typed_text};
pub use record::{RunRecord, copy_run_entries, read_run_record, read_session_record};
pub use record_reader::RecordReader;
pub use rewind_scan::may_hold_rewinds;
pub use run::{PrunePlan, RunFolder, RunSummary, RunWarning};
pub use search::{
    MATCH_CHARS, PerRun, SearchHit, SearchMatcher, SearchQuery, SearchRole, has_upper_case,
    search_runs,
};
pub use search_text::{Algorithm, MAX_REGEX_BYTES};
pub use session_log::{EscapeStripper, MAX_PENDING, SessionLog, strip_escapes};
pub use store::{
    CONVERSATION_JSONL, ForkedRun, RUN_LOCK, RunStore, SUBAGENTS_DIR, create_run_store, fork_run,
};
pub use summary::RUN_SUMMARY;
pub use transcript::{TRANSCRIPT_JSONL, Transcript, TranscriptEvent, TranscriptRecord};
pub use unused::{UNUSED_GRACE, remove_unused_run_folder, unused_run_folders};
pub use usage::{
    Grouping, Price, PriceError, PriceTable, ReplyUsage, ToolCallUse, Totals, UsageFilter,
    UsageLedger, UsageReport, UsageRow, cached_tokens_of, ledger_of_record, read_usage, summarise,
};
pub use value_redaction::redact_value;
pub use workdir::{WORKDIR_JSON, read_workdir, write_workdir};
