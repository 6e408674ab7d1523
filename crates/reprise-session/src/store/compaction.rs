//! Compaction entries: a summary that stands in for the older part of a history.
//!
//! A compaction is one entry, `{"uuid","ts","kind":"compaction","summary",
//! "through","tokens_before","tokens_after"}`, appended after the messages it
//! summarises and those kept verbatim. `through` names the last entry the summary
//! replaces. Nothing before it is rewritten or copied: the model is sent the
//! summary and the entries after `through`, and everything else stays in the file
//! for people, forks and exports.
//!
//! [`compacted_tail`] finds the latest compaction by reading the entries from the
//! end, so building the model view of a long history costs what its tail costs.

use std::collections::HashMap;

use reprise_message::Entry;
use serde_json::{Map, Value};
use uuid::Uuid;

/// The `kind` of a compaction entry.
pub const COMPACTION_KIND: &str = "compaction";

/// What a compaction entry holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compaction {
    /// The summary of everything up to and including `through` (earlier summaries
    /// included).
    pub summary: String,
    /// The uuid of the last entry the summary replaces.
    pub through: Uuid,
    /// The estimated size of the request before the compaction, in tokens.
    pub tokens_before: u64,
    /// The estimated size of the request after it, in tokens.
    pub tokens_after: u64,
}

impl Compaction {
    /// The entry to append (a fresh uuid and the current time).
    pub fn to_entry(&self) -> Entry {
        let mut fields = Map::new();
        fields.insert("summary".to_owned(), Value::String(self.summary.clone()));
        fields.insert(
            "through".to_owned(),
            Value::String(self.through.to_string()),
        );
        fields.insert("tokens_before".to_owned(), Value::from(self.tokens_before));
        fields.insert("tokens_after".to_owned(), Value::from(self.tokens_after));
        Entry::other(COMPACTION_KIND, fields)
    }

    /// The compaction an entry holds: `None` for other kinds, and for a compaction
    /// entry without a summary or a readable `through` (such an entry is ignored).
    pub fn from_entry(entry: &Entry) -> Option<Compaction> {
        if entry.kind.as_deref() != Some(COMPACTION_KIND) {
            return None;
        }
        let summary = entry.extra.get("summary")?.as_str()?.to_owned();
        let through = entry.extra.get("through")?.as_str()?.parse().ok()?;
        let count = |name: &str| entry.extra.get(name).and_then(Value::as_u64).unwrap_or(0);
        Some(Compaction {
            summary,
            through,
            tokens_before: count("tokens_before"),
            tokens_after: count("tokens_after"),
        })
    }
}

/// The latest compaction that applies to `entries`, and where the entries it keeps
/// start: the position right after its `through` entry. `None` when there is no
/// compaction, or none whose `through` entry comes before it.
///
/// Reads from the end and stops at the compaction found, so the cost is that of the
/// tail after the latest compaction's `through`, not of the whole history. When the
/// latest compaction names no earlier entry (a damaged file), the entries before it
/// are indexed by uuid once, so that however many such compactions there are, each
/// earlier one costs a lookup, not another scan to the start.
pub fn compacted_tail(entries: &[Entry]) -> Option<(Compaction, usize)> {
    let is_compaction = |entry: &Entry| entry.kind.as_deref() == Some(COMPACTION_KIND);
    let latest = entries.iter().rposition(is_compaction)?;
    if let Some(compaction) = Compaction::from_entry(&entries[latest])
        && let Some(through) = entries[..latest]
            .iter()
            .rposition(|entry| entry.uuid == compaction.through)
    {
        return Some((compaction, through + 1));
    }
    // A compaction that names no earlier entry cannot say what it replaced: the one
    // before it (or the whole history) is used instead. A loaded history holds each
    // uuid once (a repeated one is skipped on reading).
    let positions: HashMap<Uuid, usize, foldhash::fast::RandomState> = entries[..latest]
        .iter()
        .enumerate()
        .map(|(at, entry)| (entry.uuid, at))
        .collect();
    entries[..latest]
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, entry)| is_compaction(entry))
        .find_map(|(at, entry)| {
            let compaction = Compaction::from_entry(entry)?;
            let through = *positions.get(&compaction.through)?;
            (through < at).then_some((compaction, through + 1))
        })
}

/// `7.1k`, `0.9k`, `42`: a token count as the chat shows it.
pub fn short_tokens(tokens: u64) -> String {
    if tokens < 100 {
        tokens.to_string()
    } else {
        // One decimal, rounded half up, without floating point.
        let tenths = (tokens + 50) / 100;
        format!("{}.{}k", tenths / 10, tenths % 10)
    }
}

/// The line shown where a compaction happened:
/// `(compacted 182 messages: 7.1k → 0.9k tokens)`.
pub fn compaction_marker(messages: usize, tokens_before: u64, tokens_after: u64) -> String {
    let noun = if messages == 1 { "message" } else { "messages" };
    format!(
        "(compacted {messages} {noun}: {} → {} tokens)",
        short_tokens(tokens_before),
        short_tokens(tokens_after)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use reprise_message::Message;
    use reprise_testkit::ends_within_a_minute;

    fn compaction_of(through: Uuid) -> Compaction {
        Compaction {
            summary: "they talked".into(),
            through,
            tokens_before: 7_100,
            tokens_after: 912,
        }
    }

    #[test]
    fn an_entry_round_trips_with_the_fields_of_the_format() {
        let through = Uuid::now_v7();
        let entry = compaction_of(through).to_entry();
        let line = serde_json::to_value(&entry).unwrap();
        assert_eq!(line["kind"], "compaction");
        assert_eq!(line["summary"], "they talked");
        assert_eq!(line["through"], through.to_string());
        assert_eq!(line["tokens_before"], 7_100);
        assert_eq!(line["tokens_after"], 912);
        assert!(line.get("message").is_none());
        assert_eq!(Compaction::from_entry(&entry), Some(compaction_of(through)));
        assert!(entry.as_message().is_none());
    }

    #[test]
    fn the_latest_compaction_with_a_known_through_applies() {
        let mut entries: Vec<Entry> = (0..6)
            .map(|i| Entry::message(Message::user(format!("m{i}"))))
            .collect();
        assert_eq!(compacted_tail(&entries), None);
        let first = compaction_of(entries[1].uuid).to_entry();
        entries.push(first);
        assert_eq!(compacted_tail(&entries).unwrap().1, 2);
        let second = compaction_of(entries[4].uuid).to_entry();
        entries.push(second);
        entries.push(Entry::message(Message::user("after")));
        assert_eq!(compacted_tail(&entries).unwrap().1, 5);
        // One that names an entry it does not follow is passed over.
        entries.push(compaction_of(Uuid::now_v7()).to_entry());
        assert_eq!(compacted_tail(&entries).unwrap().1, 5);
    }

    /// A damaged history: `messages` messages, then `compactions` compactions that
    /// each name an entry the history does not hold.
    fn damaged_history(messages: usize, compactions: usize) -> Vec<Entry> {
        let mut entries: Vec<Entry> = (0..messages)
            .map(|_| Entry::message(Message::user("m")))
            .collect();
        entries.extend((0..compactions).map(|_| compaction_of(Uuid::now_v7()).to_entry()));
        entries
    }

    /// One pass over this history takes a fraction of a second; a scan to its start
    /// per compaction, billions of comparisons.
    #[test]
    fn many_compactions_naming_no_entry_cost_one_pass() {
        let entries = damaged_history(200_000, 100_000);
        let (none, mut entries) = ends_within_a_minute(move || (compacted_tail(&entries), entries));
        assert_eq!(none, None);
        entries.insert(100_000, compaction_of(entries[10].uuid).to_entry());
        let found = ends_within_a_minute(move || compacted_tail(&entries).map(|(_, start)| start));
        assert_eq!(found, Some(11));
    }

    #[test]
    fn token_counts_read_like_the_chat_line() {
        assert_eq!(short_tokens(42), "42");
        assert_eq!(short_tokens(912), "0.9k");
        assert_eq!(short_tokens(7_149), "7.1k");
        assert_eq!(short_tokens(7_150), "7.2k");
        assert_eq!(
            compaction_marker(182, 7_100, 900),
            "(compacted 182 messages: 7.1k → 0.9k tokens)"
        );
        assert_eq!(
            compaction_marker(1, 1_000, 10),
            "(compacted 1 message: 1.0k → 10 tokens)"
        );
    }
}
