//! What an import converted, kept aside and left out: nothing is dropped without a
//! count.

use std::collections::BTreeMap;
use std::fmt;

/// Counts of what one conversion did, by kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Messages written (user, assistant, tool), main conversation and subagents.
    pub messages: u64,
    /// Tool calls written, each answered by exactly one result.
    pub tool_calls: u64,
    /// Calls that had no result in the source and were answered "interrupted".
    pub interrupted: u64,
    /// Images kept as image parts of messages.
    pub images: u64,
    /// Source lines kept as notes: entries shown in the run but never sent to a model
    /// (system lines, attachments, developer instructions), by what they were.
    pub notes: BTreeMap<String, u64>,
    /// What was not converted, by what it was (UI state, encrypted reasoning, lines
    /// off the live branch…).
    pub skipped: BTreeMap<String, u64>,
    /// Sentences a person should read (a rewind, a compaction…).
    pub remarks: Vec<String>,
}

impl Report {
    /// Counts one more `what` kept as a note.
    pub fn note(&mut self, what: impl Into<String>) {
        *self.notes.entry(what.into()).or_default() += 1;
    }

    /// Counts `n` more `what` left out.
    pub fn skip(&mut self, what: impl Into<String>, n: u64) {
        if n > 0 {
            *self.skipped.entry(what.into()).or_default() += n;
        }
    }

    /// All that was left out.
    pub fn skipped_total(&self) -> u64 {
        self.skipped.values().sum()
    }

    /// All that was kept as notes.
    pub fn notes_total(&self) -> u64 {
        self.notes.values().sum()
    }

    /// Adds another report's counts to this one.
    pub fn absorb(&mut self, other: Report) {
        self.messages += other.messages;
        self.tool_calls += other.tool_calls;
        self.interrupted += other.interrupted;
        self.images += other.images;
        for (what, n) in other.notes {
            *self.notes.entry(what).or_default() += n;
        }
        for (what, n) in other.skipped {
            *self.skipped.entry(what).or_default() += n;
        }
        self.remarks.extend(other.remarks);
    }
}

fn counts(f: &mut fmt::Formatter<'_>, map: &BTreeMap<String, u64>) -> fmt::Result {
    for (i, (what, n)) in map.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{n} {what}")?;
    }
    Ok(())
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} messages, {} tool calls ({} answered \"interrupted\")",
            self.messages, self.tool_calls, self.interrupted
        )?;
        if self.images > 0 {
            write!(f, ", {} images", self.images)?;
        }
        if !self.notes.is_empty() {
            f.write_str("; kept as notes: ")?;
            counts(f, &self.notes)?;
        }
        if !self.skipped.is_empty() {
            f.write_str("; not converted: ")?;
            counts(f, &self.skipped)?;
        }
        Ok(())
    }
}
