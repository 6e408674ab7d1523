//! Calls that wait for a decision: which calls of a turn wait, and whether a
//! decision about one may be recorded.
//!
//! An approver that answers [`Approval::Defer`](crate::Approval::Defer) stops the
//! turn; the calls stay open in the transcript, named by an `approvalPending`
//! entry. A decision is an `approvalDecision` entry bound to the hash of the call's
//! arguments; what is read here decides which calls still wait.

use reprise_session::{
    CallDecision, DecidedCall, Entry, ToolCall, arguments_hash, awaiting_calls, decided_call,
    inspect,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A tool call that waits for a decision: what a person needs to judge it, and what
/// binds a decision to it.
///
/// It serializes (camelCase fields), so a process that stopped a turn can hand its
/// waiting calls to whoever decides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingCall {
    /// The assistant entry holding the call.
    pub entry: Uuid,
    /// The call's `tool_call_id`.
    pub call_id: String,
    /// The tool's name.
    pub tool: String,
    /// The arguments as the model sent them (JSON text).
    pub arguments: String,
    /// [`arguments_hash`] of `arguments`: a decision is recorded for these
    /// arguments only.
    pub arguments_hash: String,
}

impl PendingCall {
    /// The call `call` of the assistant entry `entry`, as the session holds it.
    pub fn of(entry: Uuid, call: &ToolCall) -> PendingCall {
        PendingCall {
            entry,
            call_id: call.id.clone(),
            tool: call.function.name.clone(),
            arguments: call.function.arguments.to_string(),
            arguments_hash: arguments_hash(&call.function.arguments),
        }
    }
}

/// Why a decision about a waiting call was refused. Nothing was written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecisionError {
    /// No call of that entry and id waits for a decision in this session's open
    /// turn.
    #[error("no tool call {call_id} of entry {entry} waits for a decision")]
    UnknownCall {
        /// The assistant entry named.
        entry: Uuid,
        /// The call id named.
        call_id: String,
    },
    /// The call's arguments are not the ones the decision was made for.
    #[error(
        "the arguments of tool call {call_id} are not the ones decided about \
         (the call's hash is {recorded}, the decision's {given})"
    )]
    ArgumentsChanged {
        /// The call id.
        call_id: String,
        /// The hash of the call's arguments, as the session holds them.
        recorded: String,
        /// The hash the decision was made for.
        given: String,
    },
    /// The call was decided already; a decision is made once.
    #[error("tool call {call_id} was already decided by {decided_by}")]
    AlreadyDecided {
        /// The call id.
        call_id: String,
        /// Who made the first decision.
        decided_by: String,
    },
}

/// Whether an `approvalPending` entry among `entries` names call `call_id` of the
/// assistant entry `reply`.
pub(crate) fn was_deferred(entries: &[Entry], reply: Uuid, call_id: &str) -> bool {
    entries.iter().any(|entry| {
        awaiting_calls(entry)
            .iter()
            .any(|call| call.entry == reply && call.tool_call_id == call_id)
    })
}

/// The first decision among `entries` about call `call_id` of `reply`, whatever the
/// arguments it was made for.
fn first_decision(entries: &[Entry], reply: Uuid, call_id: &str) -> Option<DecidedCall> {
    entries
        .iter()
        .filter_map(decided_call)
        .find(|decided| decided.entry == reply && decided.tool_call_id == call_id)
}

/// The decision that counts for `call` of `reply`: the first one recorded, when it
/// was made for the call's arguments as they are.
pub(crate) fn decision_for(entries: &[Entry], reply: Uuid, call: &ToolCall) -> Option<DecidedCall> {
    first_decision(entries, reply, &call.id)
        .filter(|decided| decided.arguments_hash == arguments_hash(&call.function.arguments))
}

/// The calls of the open turn `reply` (the assistant entry at `at`) that wait for a
/// decision: without a result, named by an `approvalPending` entry, and with no
/// decision that counts.
pub(crate) fn pending_calls(entries: &[Entry], at: usize, reply: Uuid) -> Vec<PendingCall> {
    let after = &entries[at..];
    inspect(after)
        .dangling
        .into_iter()
        .filter(|dangling| dangling.entry == Some(reply))
        .map(|dangling| dangling.call)
        .filter(|call| {
            was_deferred(after, reply, &call.id) && decision_for(after, reply, call).is_none()
        })
        .map(|call| PendingCall::of(reply, &call))
        .collect()
}

/// Checks that `decision` may be recorded for `call` in the open turn `reply` (the
/// assistant entry at `at`), and returns the record to write.
pub(crate) fn decision_record(
    entries: &[Entry],
    open_turn: Option<(usize, Uuid)>,
    call: &PendingCall,
    decision: CallDecision,
    decided_by: String,
) -> Result<DecidedCall, DecisionError> {
    let unknown = || DecisionError::UnknownCall {
        entry: call.entry,
        call_id: call.call_id.clone(),
    };
    let Some(at) = entries.iter().position(|entry| entry.uuid == call.entry) else {
        return Err(unknown());
    };
    if let Some(first) = first_decision(&entries[at..], call.entry, &call.call_id) {
        return Err(DecisionError::AlreadyDecided {
            call_id: call.call_id.clone(),
            decided_by: first.decided_by,
        });
    }
    let Some((open_at, reply)) = open_turn.filter(|(_, reply)| *reply == call.entry) else {
        return Err(unknown());
    };
    let waiting = pending_calls(entries, open_at, reply);
    let Some(recorded) = waiting
        .iter()
        .find(|pending| pending.call_id == call.call_id)
    else {
        return Err(unknown());
    };
    // The hash given and the arguments given must both be the call's: a decision
    // made after looking at other arguments is not one about this call.
    for given in [&call.arguments_hash, &arguments_hash(&call.arguments)] {
        if *given != recorded.arguments_hash {
            return Err(DecisionError::ArgumentsChanged {
                call_id: call.call_id.clone(),
                recorded: recorded.arguments_hash.clone(),
                given: given.clone(),
            });
        }
    }
    Ok(DecidedCall {
        entry: call.entry,
        tool_call_id: call.call_id.clone(),
        arguments_hash: call.arguments_hash.clone(),
        decided_by,
        decision,
    })
}
