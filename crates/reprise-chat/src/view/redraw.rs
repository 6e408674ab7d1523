//! What a resumed conversation shows, from the entries the agent loaded: the
//! conversation's items ([`super::items_of`]) as the screens draw them, the
//! person's messages, the replies, and the tool calls with their results folded as
//! the live view folds them. The conversation file is read once, by the agent.

use std::borrow::Cow;
use std::collections::BTreeMap;

use reprise_runs::shows_as_message;
use reprise_session::{Content, Entry, Message, Role, short_tokens};

use super::live::{LiveItem as Item, RESULT_LINES_SHOWN, SubagentWork, ToolResultView, ToolView};
use super::{ItemKind, items_of};
use crate::subagents::{PastCall, PastStep};

/// How much of a call's arguments a redrawn call keeps: more than a screen shows,
/// far less than a file written through a tool.
const ARGUMENTS_KEPT: usize = 400;

/// The items that redraw a conversation of `entries` (system messages, notes,
/// records and slash-command expansions left out).
pub fn redraw_items(entries: &[Entry]) -> Vec<Item> {
    let mut items = Vec::new();
    let text_item = |message: &Message, item: fn(String) -> Item| {
        let text = text_of(message);
        (!text.trim().is_empty()).then(|| item(text.into_owned()))
    };
    for shown in items_of(entries) {
        match shown.kind {
            ItemKind::Person(person) => items.extend(person.typed_text().map(Item::User)),
            ItemKind::Reply { message, calls } => {
                items.extend(text_item(message, Item::Assistant));
                items.extend(calls.into_iter().map(|call| {
                    Item::Tool(ToolView {
                        id: call.call.id.clone(),
                        agent: String::new(),
                        name: call.call.function.name.clone(),
                        arguments: prefix(&call.call.function.arguments, ARGUMENTS_KEPT),
                        arguments_len: None,
                        result: call
                            .result
                            .map(|result| folded(&text_of(result.message), result.is_error)),
                    })
                }));
            }
            // Where the model's view was summarised; every message stays shown.
            ItemKind::Compaction {
                marker: Some(marker),
                ..
            } => items.push(Item::Notice(marker)),
            // What it summarised is before what is redrawn.
            ItemKind::Compaction {
                marker: None,
                tokens_before: Some(before),
                tokens_after: Some(after),
                ..
            } => items.push(Item::Notice(format!(
                "(compacted earlier messages: {} → {} tokens)",
                short_tokens(before),
                short_tokens(after)
            ))),
            _ => {}
        }
    }
    items
}

/// The items that redraw a conversation of `entries` with its calls to subagents,
/// each call's work folded under it (by the index of its item).
pub fn redraw_with_subagents(
    entries: &[Entry],
    calls: &[PastCall],
) -> (Vec<Item>, BTreeMap<usize, SubagentWork>) {
    let items = redraw_items(entries);
    let mut work = BTreeMap::new();
    for (index, item) in items.iter().enumerate() {
        let Item::Tool(tool) = item else {
            continue;
        };
        let Some(call) = calls.iter().find(|call| call.id == tool.id) else {
            continue;
        };
        let steps = call
            .steps
            .iter()
            .map(|step| match step {
                PastStep::Text(text) => Item::Assistant(text.clone()),
                PastStep::Tool {
                    id,
                    name,
                    arguments,
                    result,
                } => Item::Tool(ToolView {
                    id: id.clone(),
                    agent: String::new(),
                    name: name.clone(),
                    arguments: arguments.clone(),
                    arguments_len: None,
                    result: result.as_ref().map(|r| ToolResultView {
                        content: r.content.clone(),
                        is_error: r.is_error,
                        folded_lines: 0,
                    }),
                }),
            })
            .collect();
        work.insert(
            index,
            SubagentWork {
                agent: call.agent.clone(),
                items: steps,
                streaming: String::new(),
            },
        );
    }
    (items, work)
}

/// Where to start redrawing to show at least the last `wanted` messages: at a
/// person's message, so that every call shown has its result. Entries before it
/// hold [`shown_messages`] of them.
pub fn tail_start(entries: &[Entry], wanted: usize) -> usize {
    let mut seen = 0;
    for (index, entry) in entries.iter().enumerate().rev() {
        let Some(message) = entry.as_message() else {
            continue;
        };
        seen += 1;
        if seen >= wanted && message.role == Role::User {
            return index;
        }
    }
    0
}

/// How many of `entries` a redraw shows as a message (the person's or a reply's
/// text), without copying any text.
pub fn shown_messages(entries: &[Entry]) -> usize {
    entries
        .iter()
        .filter(|entry| shows_as_message(entry))
        .count()
}

/// The line above a redraw that leaves messages out: how many of the loaded ones
/// are not drawn, and, when the history before the latest compaction was not read
/// (`skipped_history`), that it holds more; `None` when nothing is left out.
pub fn earlier_notice(earlier: usize, skipped_history: bool, run: &str) -> Option<String> {
    let counted = crate::text::counted(earlier, "earlier message", "earlier messages");
    match (earlier, skipped_history) {
        (0, false) => None,
        (_, false) => Some(format!("({counted}; reprise show {run} prints them all)")),
        (0, true) => Some(format!(
            "(earlier messages before the last compaction; reprise show {run} prints them all)"
        )),
        (_, true) => Some(format!(
            "({counted} since the last compaction, and those before it; reprise show {run} prints them all)"
        )),
    }
}

/// A message's text, borrowed when it is one string (most are).
fn text_of(message: &Message) -> Cow<'_, str> {
    match &message.content {
        Some(Content::Text(text)) => Cow::Borrowed(text),
        None => Cow::Borrowed(""),
        Some(Content::Parts(_)) => Cow::Owned(message.text()),
    }
}

/// A result as the screen shows it: its first lines, and how many are left out.
fn folded(content: &str, is_error: bool) -> ToolResultView {
    let trimmed = content.trim_end();
    let mut lines = trimmed.lines();
    let shown: Vec<&str> = lines.by_ref().take(RESULT_LINES_SHOWN).collect();
    ToolResultView {
        content: shown.join("\n"),
        is_error,
        folded_lines: lines.count(),
    }
}

/// The first `max` characters of `text`.
fn prefix(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => text[..end].to_owned(),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reprise_session::{Message, ToolCall};

    #[test]
    fn calls_carry_their_folded_results_and_orphans_are_left_out() {
        let long = (1..=10).map(|i| format!("line {i}")).collect::<Vec<_>>();
        let entries = vec![
            Entry::message(Message::user("read it")),
            Entry::message(Message::assistant_tool_calls(
                Some("Reading.".into()),
                vec![
                    ToolCall::function("a", "read_file", "{\"path\":\"x\"}"),
                    ToolCall::function("b", "list", "{}"),
                ],
            )),
            Entry::message(Message::tool("b", "one\ntwo")),
            Entry::message(Message::tool("a", long.join("\n"))),
            Entry::message(Message::tool("nobody", "lost")),
            Entry::message(Message::assistant("Done.")),
        ];
        let items = redraw_items(&entries);
        assert_eq!(items.len(), 5, "{items:?}");
        assert_eq!(items[0], Item::User("read it".into()));
        assert_eq!(items[1], Item::Assistant("Reading.".into()));
        let Item::Tool(a) = &items[2] else {
            panic!("{items:?}")
        };
        assert_eq!((a.id.as_str(), a.name.as_str()), ("a", "read_file"));
        let result = a.result.as_ref().unwrap();
        assert_eq!(result.content, "line 1\nline 2\nline 3");
        assert_eq!(result.folded_lines, 7);
        let Item::Tool(b) = &items[3] else {
            panic!("{items:?}")
        };
        assert_eq!(b.result.as_ref().unwrap().content, "one\ntwo");
        assert_eq!(b.result.as_ref().unwrap().folded_lines, 0);
        assert_eq!(items[4], Item::Assistant("Done.".into()));
    }

    #[test]
    fn a_result_marked_as_an_error_is_redrawn_as_one() {
        let mut denied = Entry::message(Message::tool("a", "the call was not allowed"));
        denied.extra.insert(
            reprise_agent::TOOL_ERROR_FIELD.to_owned(),
            serde_json::Value::Bool(true),
        );
        let entries = vec![
            Entry::message(Message::assistant_tool_calls(
                None,
                vec![
                    ToolCall::function("a", "read_file", "{}"),
                    ToolCall::function("b", "read_file", "{}"),
                ],
            )),
            denied,
            Entry::message(Message::tool("b", "fine")),
        ];
        let marks: Vec<bool> = redraw_items(&entries)
            .iter()
            .map(|item| match item {
                Item::Tool(tool) => tool.result.as_ref().unwrap().is_error,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(marks, [true, false]);
    }

    #[test]
    fn a_tail_starts_at_a_person_s_message_and_earlier_ones_are_counted() {
        let mut entries = Vec::new();
        for i in 0..10 {
            entries.push(Entry::message(Message::user(format!("q{i}"))));
            entries.push(Entry::message(Message::assistant_tool_calls(
                None,
                vec![ToolCall::function(format!("c{i}"), "t", "{}")],
            )));
            entries.push(Entry::message(Message::tool(format!("c{i}"), "r")));
            entries.push(Entry::message(Message::assistant(format!("a{i}"))));
        }
        let start = tail_start(&entries, 6);
        assert_eq!(start, 32, "two whole turns: the last 8 entries");
        assert_eq!(shown_messages(&entries[..start]), 16);
        let items = redraw_items(&entries[start..]);
        assert_eq!(items[0], Item::User("q8".into()));
        assert!(
            items
                .iter()
                .all(|item| !matches!(item, Item::Tool(t) if t.result.is_none()))
        );
        assert_eq!(tail_start(&entries, 1000), 0);
    }

    #[test]
    fn long_arguments_are_kept_only_as_far_as_shown() {
        let arguments = format!("{{\"text\":\"{}\"}}", "é".repeat(2000));
        let entries = vec![Entry::message(Message::assistant_tool_calls(
            None,
            vec![ToolCall::function("a", "write_file", arguments)],
        ))];
        let Item::Tool(tool) = &redraw_items(&entries)[0] else {
            panic!()
        };
        assert_eq!(tool.arguments.chars().count(), ARGUMENTS_KEPT);
    }
}
