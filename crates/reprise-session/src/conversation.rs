//! `read_conversation`: what was said in a run, to redraw it when the run is resumed.
//!
//! Only the person's messages and the agent's text replies come back. Left out:
//! system messages, tool calls (an assistant message with only tool calls has no
//! text), tool results, entries of other kinds (compaction, fork markers), and
//! slash-command expansions: user messages that the chat wrote for a command rather
//! than typed by the person, marked with `"isMeta": true` on the entry or on the
//! message (the same mark Claude Code uses; see [`mark_command_expansion`]). A line the
//! person typed that starts with `/` is kept: it is what they wrote.

use std::collections::HashSet;
use std::path::Path;

use serde_json::Value;
use uuid::Uuid;

use crate::entry::Entry;
use crate::message::{Message, Role};
use crate::private_fs::for_each_complete_line;
use crate::run_error::RunError;
use crate::store::LoadWarning;

/// The main transcript of a run folder.
pub const CONVERSATION_JSONL: &str = "conversation.jsonl";

/// The field that marks a user message as a slash-command expansion.
pub const COMMAND_EXPANSION_MARK: &str = "isMeta";

/// One message to redraw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConversationMessage {
    /// [`Role::User`] or [`Role::Assistant`].
    pub role: Role,
    /// The text as written (text parts joined).
    pub text: String,
}

/// A conversation read back, with the lines that could not be used.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Conversation {
    /// The messages, in order.
    pub messages: Vec<ConversationMessage>,
    /// Corrupt lines skipped and a torn last line ignored.
    pub warnings: Vec<LoadWarning>,
}

/// Marks an entry as a slash-command expansion so that [`read_conversation`] does
/// not redraw it as something the person said. The mark is on the entry, not the
/// message, so it is never sent to a model.
pub fn mark_command_expansion(entry: &mut Entry) {
    entry
        .extra
        .insert(COMMAND_EXPANSION_MARK.to_owned(), Value::Bool(true));
}

/// The person's messages and the agent's text replies in `dir/conversation.jsonl`
/// (none when the file does not exist). Problems with single lines are logged with
/// `tracing` and skipped; use [`read_conversation_with_warnings`] to get them.
pub fn read_conversation(dir: &Path) -> Result<Vec<ConversationMessage>, RunError> {
    let conversation = read_conversation_with_warnings(dir)?;
    for warning in &conversation.warnings {
        tracing::warn!("{warning}");
    }
    Ok(conversation.messages)
}

/// Like [`read_conversation`], returning the skipped lines as warnings.
///
/// Lines are entry lines or bare messages (the seed's reference format); a torn last
/// line is ignored, a line that is not JSON or not an entry is skipped with a
/// warning, and an entry whose uuid was already seen is skipped.
pub fn read_conversation_with_warnings(dir: &Path) -> Result<Conversation, RunError> {
    let path = dir.join(CONVERSATION_JSONL);
    let mut conversation = Conversation::default();
    let mut seen: HashSet<Uuid> = HashSet::new();
    let messages = &mut conversation.messages;
    for_each_complete_line(&path, &mut conversation.warnings, |line, text, warnings| {
        if text.trim().is_empty() {
            return;
        }
        match parse_line(text) {
            Ok(Parsed::Entry(entry)) => {
                if !seen.insert(entry.uuid) {
                    return;
                }
                let expansion = is_marked(&entry.extra);
                if let Some(message) = entry.as_message()
                    && !expansion
                {
                    push_shown(messages, message);
                }
            }
            Ok(Parsed::Bare(message)) => push_shown(messages, &message),
            Err(message) => warnings.push(LoadWarning {
                file: path.clone(),
                line,
                message,
            }),
        }
    })?;
    Ok(conversation)
}

enum Parsed {
    Entry(Entry),
    Bare(Message),
}

fn parse_line(text: &str) -> Result<Parsed, String> {
    let value: Value =
        serde_json::from_str(text).map_err(|error| format!("not JSON, skipped: {error}"))?;
    let bare = value.get("role").is_some() && value.get("uuid").is_none();
    if bare {
        serde_json::from_value(value)
            .map(Parsed::Bare)
            .map_err(|error| format!("not a message, skipped: {error}"))
    } else {
        serde_json::from_value(value)
            .map(Parsed::Entry)
            .map_err(|error| format!("not an entry, skipped: {error}"))
    }
}

fn is_marked(extra: &serde_json::Map<String, Value>) -> bool {
    extra.get(COMMAND_EXPANSION_MARK) == Some(&Value::Bool(true))
}

fn push_shown(messages: &mut Vec<ConversationMessage>, message: &Message) {
    let shown = match message.role {
        Role::User => !is_marked(&message.extra),
        Role::Assistant => true,
        _ => false,
    };
    if !shown {
        return;
    }
    let text = message.text();
    if text.trim().is_empty() {
        return;
    }
    messages.push(ConversationMessage {
        role: message.role.clone(),
        text,
    });
}
