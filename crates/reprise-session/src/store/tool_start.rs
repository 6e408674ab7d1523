//! Start records: a durable note, written before a tool that may have effects is
//! started, that the call was started, by whose leave, and under which idempotency
//! key.
//!
//! A start record is one entry, `{"uuid","ts","kind":"toolStart","calls":[…]}`,
//! naming every call started together (parallel calls share one append, so one
//! sync). After a crash it tells a call that never started (no record: it can be
//! asked about and run as if nothing happened) from one whose outcome is unknown
//! (a record and no result: running it again may do twice what it does).
//!
//! A result written for a call of a turn that a crash cut carries `"afterCrash"`,
//! saying what the resume did with the call ([`AfterCrash`]), and `"answersEntry"`.

use reprise_message::Entry;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::call_list::{call_list_entry, listed_calls};

/// The `kind` of a start record.
pub const TOOL_START_KIND: &str = "toolStart";

/// The field of a start record naming the checkpoint of the working folder taken
/// just before its calls started (absent when none was taken).
pub const CHECKPOINT_FIELD: &str = "checkpoint";

/// The entry field, on a tool result, saying what the resume of a cut turn did with
/// the call.
pub const AFTER_CRASH: &str = "afterCrash";

/// One call named by a start record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartedCall {
    /// The assistant entry holding the call.
    pub entry: Uuid,
    /// The call's `tool_call_id`.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool: String,
    /// Who allowed it: a config pattern, `--yes`, the person, "always", or the
    /// resume that ran it again.
    pub allowed_by: String,
    /// The key the tool was given (the same on every attempt of the call).
    pub idempotency_key: String,
    /// Set when this is a second start of the call, after a crash cut the first.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rerun: bool,
}

/// The entry recording that `calls` are being started.
pub fn tool_start_entry(calls: &[StartedCall]) -> Entry {
    call_list_entry(TOOL_START_KIND, calls)
}

/// The calls a start record names; empty for other entries. A call that cannot be
/// read (a damaged or foreign record) is left out: it then counts as never started
/// only if no other record names it.
pub fn started_calls(entry: &Entry) -> Vec<StartedCall> {
    listed_calls(entry, TOOL_START_KIND)
}

/// The checkpoint a start record names: the working folder as it was just before
/// its calls started. `None` for other entries and records without one.
pub fn checkpoint_of(entry: &Entry) -> Option<&str> {
    if entry.kind.as_deref() != Some(TOOL_START_KIND) {
        return None;
    }
    entry.extra.get(CHECKPOINT_FIELD)?.as_str()
}

/// Whether any entry of `entries` records the start of call `call_id` of the
/// assistant entry `reply`.
pub fn was_started(entries: &[Entry], reply: Uuid, call_id: &str) -> bool {
    entries.iter().any(|entry| {
        started_calls(entry)
            .iter()
            .any(|call| call.entry == reply && call.tool_call_id == call_id)
    })
}

/// What the resume of a turn cut by a crash did with one of its open calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AfterCrash {
    /// It had never started: it went through the gate again and, if allowed, ran.
    Reasked,
    /// It only reads: it ran again without asking.
    RanAgainReadOnly,
    /// It had started and its outcome was unknown; it ran again, with the same
    /// idempotency key (marked idempotent, configured so, or the person said so).
    RanAgain,
    /// It had started and its outcome was unknown; the model is told it was
    /// interrupted and may or may not have taken effect.
    Interrupted,
    /// A subagent's task: the subagent went on from where it was cut, and its answer
    /// is the result.
    Continued,
}

impl AfterCrash {
    /// The field's value: `reasked`, `ran-again-read-only`, `ran-again`,
    /// `interrupted`, `continued`.
    pub fn as_str(self) -> &'static str {
        match self {
            AfterCrash::Reasked => "reasked",
            AfterCrash::RanAgainReadOnly => "ran-again-read-only",
            AfterCrash::RanAgain => "ran-again",
            AfterCrash::Interrupted => "interrupted",
            AfterCrash::Continued => "continued",
        }
    }

    /// What the chat and `reprise show` say about it.
    pub fn describe(self) -> &'static str {
        match self {
            AfterCrash::Reasked => "re-asked",
            AfterCrash::RanAgainReadOnly => "ran again (read-only)",
            AfterCrash::RanAgain => "ran again",
            AfterCrash::Interrupted => "interrupted (may have run)",
            AfterCrash::Continued => "continued",
        }
    }

    /// The mark an entry carries, if any.
    pub fn of_entry(entry: &Entry) -> Option<AfterCrash> {
        serde_json::from_value(entry.extra.get(AFTER_CRASH)?.clone()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, Value};

    fn call(entry: Uuid, id: &str) -> StartedCall {
        StartedCall {
            entry,
            tool_call_id: id.to_owned(),
            tool: "pay".to_owned(),
            allowed_by: "--yes".to_owned(),
            idempotency_key: "k".to_owned(),
            rerun: false,
        }
    }

    #[test]
    fn a_start_record_reads_back_through_a_line() {
        let reply = Uuid::now_v7();
        let entry = tool_start_entry(&[call(reply, "call_1"), call(reply, "call_2")]);
        let line = serde_json::to_string(&entry).unwrap();
        assert!(line.contains(r#""kind":"toolStart""#), "{line}");
        assert!(line.contains(r#""toolCallId":"call_1""#), "{line}");
        assert!(!line.contains("rerun"), "{line}");
        let back: Entry = serde_json::from_str(&line).unwrap();
        assert!(back.as_message().is_none());
        assert_eq!(started_calls(&back).len(), 2);
        assert!(was_started(std::slice::from_ref(&back), reply, "call_2"));
        assert!(!was_started(std::slice::from_ref(&back), reply, "call_3"));
        assert!(!was_started(&[back], Uuid::now_v7(), "call_1"));
    }

    #[test]
    fn a_damaged_record_names_no_call() {
        let mut entry = tool_start_entry(&[call(Uuid::now_v7(), "call_1")]);
        entry
            .extra
            .insert("calls".to_owned(), serde_json::json!([{"entry": 3}]));
        assert!(started_calls(&entry).is_empty());
    }

    #[test]
    fn the_mark_reads_back() {
        let mut entry = Entry::other("x", Map::new());
        assert_eq!(AfterCrash::of_entry(&entry), None);
        entry.extra.insert(
            AFTER_CRASH.to_owned(),
            Value::String(AfterCrash::RanAgainReadOnly.as_str().to_owned()),
        );
        assert_eq!(
            AfterCrash::of_entry(&entry),
            Some(AfterCrash::RanAgainReadOnly)
        );
    }
}
