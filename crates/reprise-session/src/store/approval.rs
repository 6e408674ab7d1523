//! Approval records: calls that wait for a decision made later, possibly by another
//! process, and the decisions made about them.
//!
//! When an approver answers "not now", the agent appends one entry,
//! `{"uuid","ts","kind":"approvalPending","calls":[…]}`, naming every call of the
//! reply that waits, and stops the turn with those calls open. A decision is one
//! entry, `{"uuid","ts","kind":"approvalDecision",…}`, bound to the call's arguments
//! by their hash ([`arguments_hash`]): a decision made for other arguments does not
//! count for the call.

use reprise_message::Entry;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::call_list::{call_list_entry, listed_calls};

/// The `kind` of the entry naming calls that wait for a decision.
pub const APPROVAL_PENDING_KIND: &str = "approvalPending";

/// The `kind` of the entry recording a decision about one waiting call.
pub const APPROVAL_DECISION_KIND: &str = "approvalDecision";

/// One call named by an [`APPROVAL_PENDING_KIND`] entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwaitingCall {
    /// The assistant entry holding the call.
    pub entry: Uuid,
    /// The call's `tool_call_id`.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool: String,
    /// [`arguments_hash`] of the call's arguments.
    pub arguments_hash: String,
}

/// What was decided about a call that waited.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "camelCase")]
pub enum CallDecision {
    /// Run it.
    Allow,
    /// Do not run it; the model gets an error result carrying the reason.
    Deny {
        /// Why, for the model.
        reason: String,
    },
}

/// A decision about one call, as an [`APPROVAL_DECISION_KIND`] entry holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DecidedCall {
    /// The assistant entry holding the call.
    pub entry: Uuid,
    /// The call's `tool_call_id`.
    pub tool_call_id: String,
    /// [`arguments_hash`] of the arguments the decision was made for.
    pub arguments_hash: String,
    /// Who decided, in words (written to the call's start record).
    pub decided_by: String,
    /// Allow, or deny with a reason.
    #[serde(flatten)]
    pub decision: CallDecision,
}

/// The hash a decision is bound to: `sha256:` and the SHA-256 of the arguments'
/// text, in lowercase hex.
///
/// ```
/// use reprise_session::arguments_hash;
///
/// assert_eq!(arguments_hash("{}"), arguments_hash("{}"));
/// assert_ne!(arguments_hash(r#"{"amount":5}"#), arguments_hash(r#"{"amount":500}"#));
/// assert!(arguments_hash("{}").starts_with("sha256:"));
/// ```
pub fn arguments_hash(arguments: &str) -> String {
    let digest = Sha256::digest(arguments.as_bytes());
    let mut text = String::with_capacity(7 + 64);
    text.push_str("sha256:");
    for byte in digest {
        text.push(hex_digit(byte >> 4));
        text.push(hex_digit(byte & 0x0f));
    }
    text
}

fn hex_digit(nibble: u8) -> char {
    char::from_digit(u32::from(nibble), 16).unwrap_or('0')
}

/// The entry recording that `calls` wait for a decision.
pub fn approval_pending_entry(calls: &[AwaitingCall]) -> Entry {
    call_list_entry(APPROVAL_PENDING_KIND, calls)
}

/// The entry recording `decided`.
pub fn approval_decision_entry(decided: &DecidedCall) -> Entry {
    let fields = match serde_json::to_value(decided) {
        Ok(Value::Object(fields)) => fields,
        // A struct of strings always serializes to an object.
        _ => Map::new(),
    };
    Entry::other(APPROVAL_DECISION_KIND, fields)
}

/// The calls an [`APPROVAL_PENDING_KIND`] entry names; empty for other entries. A
/// call that cannot be read (a damaged or foreign record) is left out.
pub fn awaiting_calls(entry: &Entry) -> Vec<AwaitingCall> {
    listed_calls(entry, APPROVAL_PENDING_KIND)
}

/// The decision an [`APPROVAL_DECISION_KIND`] entry records; `None` for other
/// entries and damaged ones.
pub fn decided_call(entry: &Entry) -> Option<DecidedCall> {
    if entry.kind.as_deref() != Some(APPROVAL_DECISION_KIND) {
        return None;
    }
    serde_json::from_value(Value::Object(entry.extra.clone().into_map())).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_through_a_line() {
        let reply = Uuid::now_v7();
        let waiting = approval_pending_entry(&[AwaitingCall {
            entry: reply,
            tool_call_id: "call_1".to_owned(),
            tool: "pay".to_owned(),
            arguments_hash: arguments_hash("{}"),
        }]);
        let line = serde_json::to_string(&waiting).unwrap();
        assert!(line.contains(r#""kind":"approvalPending""#), "{line}");
        assert!(line.contains(r#""argumentsHash":"sha256:"#), "{line}");
        let back: Entry = serde_json::from_str(&line).unwrap();
        assert!(back.as_message().is_none());
        assert_eq!(awaiting_calls(&back)[0].tool_call_id, "call_1");
        assert_eq!(decided_call(&back), None);

        let decided = DecidedCall {
            entry: reply,
            tool_call_id: "call_1".to_owned(),
            arguments_hash: arguments_hash("{}"),
            decided_by: "ops".to_owned(),
            decision: CallDecision::Deny {
                reason: "not today".to_owned(),
            },
        };
        let line = serde_json::to_string(&approval_decision_entry(&decided)).unwrap();
        assert!(
            line.contains(r#""decision":"deny","reason":"not today""#),
            "{line}"
        );
        let back: Entry = serde_json::from_str(&line).unwrap();
        assert_eq!(decided_call(&back), Some(decided));
        assert!(awaiting_calls(&back).is_empty());
    }

    #[test]
    fn the_hash_is_sha256_in_hex() {
        assert_eq!(
            arguments_hash(""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn a_damaged_decision_is_none() {
        let mut fields = Map::new();
        fields.insert("entry".to_owned(), Value::from(3));
        assert_eq!(
            decided_call(&Entry::other(APPROVAL_DECISION_KIND, fields)),
            None
        );
    }
}
