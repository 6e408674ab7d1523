//! Reading the ledger: one [`ReplyUsage`] per recorded model call and one
//! [`ToolCallUse`] per tool call, from every run of a catalog.

use std::collections::HashSet;

use jiff::Timestamp;
use reprise_session::{COMPACTION_KIND, Entry, LoadWarning, MODEL_FIELD, Role, StoredUsage};
use uuid::Uuid;

use crate::{CatalogError, RunCatalog, RunRecord};

/// One model call as its entry records it.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplyUsage {
    /// The run's name.
    pub run: String,
    /// The subagent whose transcript holds it; `None` for the main conversation.
    pub subagent: Option<String>,
    /// When the entry was made.
    pub ts: Timestamp,
    /// The entry's model, else the run's (`session.json`), when either is recorded.
    pub model: Option<String>,
    /// Tokens in the request (`prompt_tokens`), cached ones included.
    pub input_tokens: u64,
    /// Tokens generated (`completion_tokens`).
    pub output_tokens: u64,
    /// Tokens of the request the server read from its cache
    /// (`prompt_tokens_details.cached_tokens`), when it said.
    pub cached_tokens: Option<u64>,
}

/// One tool call of a reply.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCallUse {
    /// The run's name.
    pub run: String,
    /// When the reply holding it was made.
    pub ts: Timestamp,
    /// The model of that reply, as for [`ReplyUsage::model`].
    pub model: Option<String>,
    /// The tool's name.
    pub tool: String,
}

/// Every model call and tool call of the runs read, with what could not be read.
#[derive(Clone, Debug, Default)]
pub struct UsageLedger {
    /// The model calls, run by run, oldest run first.
    pub replies: Vec<ReplyUsage>,
    /// The tool calls, in the same order.
    pub tool_calls: Vec<ToolCallUse>,
    /// Lines skipped or repaired while reading, and runs that could not be read
    /// (`file` the run's folder, `line` 0).
    pub warnings: Vec<LoadWarning>,
}

/// The cached tokens a stored `usage` holds (`prompt_tokens_details.cached_tokens`),
/// when it holds them.
pub fn cached_tokens_of(usage: &StoredUsage) -> Option<u64> {
    match usage {
        StoredUsage::Counts(_) => None,
        StoredUsage::Other(value) => value
            .get("prompt_tokens_details")?
            .get("cached_tokens")?
            .as_u64(),
    }
}

/// Every run of `catalog`, oldest first, read into one ledger. A run that cannot be
/// read is a warning, not an error: the others are still counted.
pub async fn read_usage(catalog: &dyn RunCatalog) -> Result<UsageLedger, CatalogError> {
    let list = catalog.list().await?;
    let mut ledger = UsageLedger::default();
    for warning in list.warnings {
        ledger.warnings.push(LoadWarning {
            file: warning.path,
            line: 0,
            message: warning.message,
        });
    }
    let mut seen = HashSet::new();
    let mut runs = list.runs;
    // Oldest first (run names are their start times), so that a fork's copies of
    // its source's entries are the ones left out.
    runs.sort_by(|a, b| a.name().cmp(b.name()));
    for run in runs {
        match catalog.record(&run.folder()).await {
            Ok(record) => ledger_of_record(&record, &mut seen, &mut ledger),
            Err(error) => ledger.warnings.push(LoadWarning {
                file: run.dir.clone(),
                line: 0,
                message: format!("not counted: {}", crate::error::error_chain(&error)),
            }),
        }
    }
    Ok(ledger)
}

/// Adds the model calls and tool calls of `record` to `ledger`, leaving out entries
/// whose uuid is in `seen` (and adding the others to it).
pub fn ledger_of_record(record: &RunRecord, seen: &mut HashSet<Uuid>, ledger: &mut UsageLedger) {
    ledger.warnings.extend(record.warnings.iter().cloned());
    let run_model = record.session[MODEL_FIELD].as_str();
    let transcripts = std::iter::once((None, &record.main)).chain(
        record
            .subagents
            .iter()
            .map(|(name, entries)| (Some(name.as_str()), entries)),
    );
    for (subagent, entries) in transcripts {
        for entry in entries {
            if !seen.insert(entry.uuid) {
                continue;
            }
            add_entry(record, subagent, run_model, entry, ledger);
        }
    }
}

fn add_entry(
    record: &RunRecord,
    subagent: Option<&str>,
    run_model: Option<&str>,
    entry: &Entry,
    ledger: &mut UsageLedger,
) {
    let model = entry
        .extra
        .get(MODEL_FIELD)
        .and_then(|model| model.as_str())
        .or(run_model)
        .map(str::to_owned);
    let reply = entry
        .message
        .as_ref()
        .filter(|message| message.role == Role::Assistant);
    let counted = reply.is_some() || entry.kind.as_deref() == Some(COMPACTION_KIND);
    if counted
        && let Some(usage) = &entry.usage
        && let Some(counts) = usage.counts()
    {
        ledger.replies.push(ReplyUsage {
            run: record.name.clone(),
            subagent: subagent.map(str::to_owned),
            ts: entry.ts,
            model: model.clone(),
            input_tokens: counts.prompt_tokens,
            output_tokens: counts.completion_tokens,
            cached_tokens: cached_tokens_of(usage),
        });
    }
    for call in reply.map(|message| message.calls()).unwrap_or_default() {
        ledger.tool_calls.push(ToolCallUse {
            run: record.name.clone(),
            ts: entry.ts,
            model: model.clone(),
            tool: call.function.name.clone(),
        });
    }
}
