//! Stop records: a note, written when a run ends on its tool results without the
//! model's reply (cancelled, out of time or turns, a reply cut at `max_tokens`, a
//! failed model call), that the turn was stopped on purpose.
//!
//! Without one, a history whose last messages are the results of the last reply's
//! calls was cut by a crash between those results and the model's reply, and the
//! next run calls the model as if the crash had not happened (see
//! [`cut_turn`](crate::cut_turn)). With one, the turn is over and the next prompt
//! follows the results.

use reprise_message::Entry;
use serde_json::{Map, Value};

/// The `kind` of a stop record.
pub const TURN_STOPPED_KIND: &str = "turnStopped";

/// The entry recording that a run ended on its tool results, for `reason` (a short
/// word: `cancelled`, `timeout`, `maxTurns`, `cutOff`, `failed`).
pub fn turn_stopped_entry(reason: &str) -> Entry {
    let mut fields = Map::new();
    fields.insert("reason".to_owned(), Value::String(reason.to_owned()));
    Entry::other(TURN_STOPPED_KIND, fields)
}

/// Whether `entry` is a stop record.
pub fn is_turn_stopped(entry: &Entry) -> bool {
    entry.kind.as_deref() == Some(TURN_STOPPED_KIND)
}
