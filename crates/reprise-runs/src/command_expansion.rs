//! Slash-command expansions: messages the chat wrote in the person's place, marked
//! so that neither a redraw nor a run's listing takes them for the person's words.

use reprise_session::Entry;
use serde_json::Value;

/// The field that marks a user message as a slash-command expansion.
pub const COMMAND_EXPANSION_MARK: &str = "isMeta";

/// Marks an entry as a slash-command expansion so that [`read_conversation`](crate::read_conversation) does
/// not redraw it as something the person said. The mark is on the entry, not the
/// message, so it is never sent to a model.
pub fn mark_command_expansion(entry: &mut Entry) {
    entry
        .extra
        .insert(COMMAND_EXPANSION_MARK.to_owned(), Value::Bool(true));
}

/// Whether an entry is a slash-command expansion (marked `"isMeta": true` on the
/// entry or on its message): something the chat wrote, not the person. The run
/// store should not take such an entry as the person's last message either.
pub fn is_command_expansion(entry: &Entry) -> bool {
    is_marked(&entry.extra)
        || entry
            .message
            .as_ref()
            .is_some_and(|message| is_marked(&message.extra))
}

fn is_marked(extra: &serde_json::Map<String, Value>) -> bool {
    extra.get(COMMAND_EXPANSION_MARK) == Some(&Value::Bool(true))
}
