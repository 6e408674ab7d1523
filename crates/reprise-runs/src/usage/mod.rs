//! The usage ledger: what every recorded model call of every run cost, summed by
//! day, week, run, model or tool (`reprise usage`).
//!
//! Every reply that carries the server's counts (`usage` on an assistant entry, or
//! on a compaction entry for its summary calls) is one model call, wherever it is:
//! the main conversation and each subagent's transcript, entries a rewind hid and
//! entries a compaction summarised (they were all paid for). A fork copies its
//! source's entries with their uuids, so an entry is counted once, in the oldest run
//! that holds it.

mod prices;
mod read;
mod report;

pub use prices::{Price, PriceError, PriceTable};
pub use read::{
    ReplyUsage, ToolCallUse, UsageLedger, cached_tokens_of, ledger_of_record, read_usage,
};
pub use report::{Grouping, Totals, UsageFilter, UsageReport, UsageRow, summarise};
