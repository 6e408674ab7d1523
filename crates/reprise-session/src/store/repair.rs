//! Resume repair: making a loaded history one that OpenAI-compatible servers accept.
//!
//! A chat-completions server wants every assistant tool call answered by exactly one
//! `tool` message, all of them before the next non-tool message, and no `tool`
//! message without its call. A history on disk can break that: a crash while a tool
//! ran leaves a call without a result (at the end of the file, or in the middle when
//! the session went on without repair), a retried write can leave a duplicate
//! result, and a history cut by hand can hold a result whose call is gone.
//!
//! Two steps fix it, and they are separate because the file only grows at its end:
//!
//! 1. [`repair_entries`] returns one `tool` entry per call that has no result,
//!    saying that the call was interrupted before it returned. The caller appends
//!    them to the session, so that the file records what happened. They go at the
//!    END of the file, even for a call in the middle of the history.
//! 2. [`model_view`] builds the messages to send: each assistant message followed
//!    at once by the results of its calls, in the order of the calls, wherever in
//!    the file those results are (so a repair entry appended at the end is moved up
//!    to its call). Results without a call are left out, a second result for the
//!    same call is left out (the first one counts), and a call that still has no
//!    result gets the same interrupted result in the view, so the view is valid
//!    even when the repair was never appended.
//!
//! Pairing a result with its call: a `tool` message answers the most recent call
//! before it with the same `tool_call_id` that is still unanswered. Ids are not
//! trusted to be unique across turns (some local servers number calls `call_0`,
//! `call_1`, … in every turn), hence "most recent". A repair entry also names the
//! assistant entry it answers (`"answersEntry"`), which pins it to the right call
//! when two unanswered calls share an id (within that entry, the first unanswered
//! call with the id, matching the order repairs are made in). A result that comes
//! before any call with its id is an orphan.
//!
//! Entries that are not messages (`kind` set) are not part of the view.
//!
//! Arguments: servers parse the `arguments` of every replayed call as JSON and
//! refuse the whole request when one is not (llama.cpp answers 500 "Failed to parse
//! tool call arguments as JSON"). A reply cut off at `max_tokens` in the middle of
//! a call leaves arguments such as `{`, and a model can write broken ones. The view
//! sends `{}` in place of arguments that are not a JSON object ([`request_message`]);
//! the stored message keeps what the model sent, and the call's result says why it
//! did not run.

use std::collections::HashMap;

use reprise_message::{Entry, Message, Role, ToolCall};
use serde_json::Value;
use uuid::Uuid;

/// The entry field a repair entry uses to name the assistant entry it answers.
pub const ANSWERS_ENTRY: &str = "answersEntry";

/// The entry field that marks a repair entry.
pub const INTERRUPTED: &str = "interrupted";

/// The tool message that stands in for a result that never came.
pub fn interrupted_result(call: &ToolCall) -> Message {
    Message::tool(
        call.id.clone(),
        format!(
            "Error: the call to tool `{}` was interrupted before it returned. No result \
             was recorded; it may or may not have taken effect.",
            call.function.name
        ),
    )
}

/// Whether `arguments` can be sent back to a server as they are: a JSON object.
/// Empty arguments (sent by some servers for a tool without parameters) are not.
pub fn arguments_are_an_object(arguments: &str) -> bool {
    serde_json::from_str::<AnObject>(arguments).is_ok()
}

/// A JSON object, checked and not kept: arguments can be as large as a file the
/// model writes, and a [`Value`] of them would be a second copy.
struct AnObject;

impl<'de> serde::Deserialize<'de> for AnObject {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(AnObject)
    }
}

impl<'de> serde::de::Visitor<'de> for AnObject {
    type Value = AnObject;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<AnObject, A::Error> {
        use serde::de::IgnoredAny;
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(AnObject)
    }
}

/// `message` as it is sent to a model: calls whose arguments are not a JSON object
/// carry `{}` instead (see the module docs). Other messages are unchanged.
pub fn request_message(message: &Message) -> Message {
    let mut message = message.clone();
    // `tool_calls: []` is refused by OpenAI ("too short"); no calls means none.
    if message.tool_calls.as_ref().is_some_and(Vec::is_empty) {
        message.tool_calls = None;
    }
    if let Some(calls) = message.tool_calls.as_mut() {
        for call in calls {
            if !arguments_are_an_object(&call.function.arguments) {
                call.function.arguments = "{}".into();
            }
        }
    }
    message
}

/// A tool call without a result.
#[derive(Clone, Debug, PartialEq)]
pub struct DanglingCall {
    /// The position of the assistant message in the history given.
    pub index: usize,
    /// The uuid of the assistant entry, when the history was entries.
    pub entry: Option<Uuid>,
    /// The call.
    pub call: ToolCall,
}

/// What pairing found in a history.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RepairReport {
    /// Calls without a result, in history order.
    pub dangling: Vec<DanglingCall>,
    /// Positions of tool messages whose call is not in the history before them.
    pub orphan_results: Vec<usize>,
    /// Positions of tool messages answering a call that was already answered.
    pub duplicate_results: Vec<usize>,
}

/// One message of the history, with its entry when the history was entries.
struct Item<'a> {
    index: usize,
    message: &'a Message,
    entry: Option<&'a Entry>,
}

impl Item<'_> {
    fn uuid(&self) -> Option<Uuid> {
        self.entry.map(|entry| entry.uuid)
    }

    /// The assistant entry a repair entry names as the one it answers. Only read
    /// for tool messages: a lookup in every entry's fields was a good part of
    /// pairing a long history.
    fn answers(&self) -> Option<Uuid> {
        self.entry?
            .extra
            .get(ANSWERS_ENTRY)
            .and_then(Value::as_str)
            .and_then(|text| text.parse().ok())
    }
}

/// A call and the item that answers it.
struct Slot<'a> {
    item: usize,
    call: &'a ToolCall,
    result: Option<usize>,
    /// While unanswered: the next older unanswered call with the same id.
    earlier: Option<usize>,
}

/// Among the unanswered calls of one id (newest `first`, older ones linked through
/// [`Slot::earlier`]), the oldest made in the entry `answers`, with the unanswered
/// call of the id made just after it; `None` when that entry made none.
fn pinned_slot(
    items: &[Item<'_>],
    slots: &[Slot<'_>],
    first: usize,
    answers: Uuid,
) -> Option<(Option<usize>, usize)> {
    let mut found = None;
    let mut later = None;
    let mut at = Some(first);
    while let Some(slot) = at {
        if items[slots[slot].item].uuid() == Some(answers) {
            found = Some((later, slot));
        }
        later = Some(slot);
        at = slots[slot].earlier;
    }
    found
}

struct Pairing<'a> {
    slots: Vec<Slot<'a>>,
    /// For each item, by position: its slots (empty for all but assistant messages
    /// with calls).
    slots_of: Vec<std::ops::Range<usize>>,
    orphans: Vec<usize>,
    duplicates: Vec<usize>,
}

fn pair<'a>(items: &[Item<'a>]) -> Pairing<'a> {
    let mut slots: Vec<Slot<'a>> = Vec::new();
    let mut slots_of = vec![0..0; items.len()];
    // The newest unanswered call of each id (`None` for an id whose calls are all
    // answered), the older ones linked from it through `Slot::earlier`: no list
    // to allocate per id. Pairing runs on every resume over the whole history: a
    // seeded fast hash, as ids come from files that anyone could have written;
    // sized for a history where every other message makes a call, since growing
    // it rehashes every id.
    let mut pending: HashMap<&'a str, Option<usize>, foldhash::fast::RandomState> =
        HashMap::with_capacity_and_hasher(items.len() / 2, Default::default());
    let mut orphans = Vec::new();
    let mut duplicates = Vec::new();
    for (position, item) in items.iter().enumerate() {
        match item.message.role {
            Role::Assistant if !item.message.calls().is_empty() => {
                let start = slots.len();
                for call in item.message.calls() {
                    let newest = pending.entry(call.id.as_str()).or_insert(None);
                    slots.push(Slot {
                        item: position,
                        call,
                        result: None,
                        earlier: newest.replace(slots.len()),
                    });
                }
                slots_of[position] = start..slots.len();
            }
            Role::Tool => {
                let Some(id) = item.message.tool_call_id.as_deref() else {
                    orphans.push(position);
                    continue;
                };
                let Some(newest) = pending.get_mut(id) else {
                    orphans.push(position);
                    continue;
                };
                let Some(first) = *newest else {
                    duplicates.push(position);
                    continue;
                };
                // The call answered, and the unanswered one after it (by time) with
                // the same id, if any.
                let (later, chosen) = item
                    .answers()
                    .and_then(|answers| pinned_slot(items, &slots, first, answers))
                    .unwrap_or((None, first));
                let earlier = slots[chosen].earlier.take();
                match later {
                    None => *newest = earlier,
                    Some(later) => slots[later].earlier = earlier,
                }
                slots[chosen].result = Some(position);
            }
            _ => {}
        }
    }
    Pairing {
        slots,
        slots_of,
        orphans,
        duplicates,
    }
}

fn items_of_entries(history: &[Entry]) -> Vec<Item<'_>> {
    history
        .iter()
        .enumerate()
        .filter_map(|(index, entry)| {
            entry.as_message().map(|message| Item {
                index,
                message,
                entry: Some(entry),
            })
        })
        .collect()
}

fn items_of_messages(history: &[Message]) -> Vec<Item<'_>> {
    history
        .iter()
        .enumerate()
        .map(|(index, message)| Item {
            index,
            message,
            entry: None,
        })
        .collect()
}

fn report(items: &[Item<'_>], pairing: &Pairing<'_>) -> RepairReport {
    RepairReport {
        dangling: pairing
            .slots
            .iter()
            .filter(|slot| slot.result.is_none())
            .map(|slot| DanglingCall {
                index: items[slot.item].index,
                entry: items[slot.item].uuid(),
                call: slot.call.clone(),
            })
            .collect(),
        orphan_results: pairing.orphans.iter().map(|&at| items[at].index).collect(),
        duplicate_results: pairing
            .duplicates
            .iter()
            .map(|&at| items[at].index)
            .collect(),
    }
}

/// What pairing finds in a history of entries (positions are entry indexes).
pub fn inspect(history: &[Entry]) -> RepairReport {
    let items = items_of_entries(history);
    let pairing = pair(&items);
    report(&items, &pairing)
}

/// What pairing finds in a history of messages.
pub fn inspect_messages(history: &[Message]) -> RepairReport {
    let items = items_of_messages(history);
    let pairing = pair(&items);
    report(&items, &pairing)
}

/// The entries to append to a history so that every tool call has a result: one
/// interrupted result per call without one, in history order. Empty when nothing is
/// dangling. Each names the assistant entry it answers (`"answersEntry"`) and is
/// marked `"interrupted": true`; both marks are on the entry, never sent to a model.
pub fn repair_entries(history: &[Entry]) -> Vec<Entry> {
    repair_entries_except(history, None)
}

/// [`repair_entries`], leaving open the calls of the assistant entry `open_turn`
/// (the turn a crash cut, which its opener finishes: see [`cut_turn`]).
pub fn repair_entries_except(history: &[Entry], open_turn: Option<Uuid>) -> Vec<Entry> {
    inspect(history)
        .dangling
        .into_iter()
        .filter(|dangling| open_turn.is_none() || dangling.entry != open_turn)
        .map(|dangling| {
            let mut entry = Entry::message(interrupted_result(&dangling.call));
            if let Some(uuid) = dangling.entry {
                entry
                    .extra
                    .insert(ANSWERS_ENTRY.to_owned(), Value::String(uuid.to_string()));
            }
            entry
                .extra
                .insert(INTERRUPTED.to_owned(), Value::Bool(true));
            entry
        })
        .collect()
}

/// The assistant entry of the last turn when a crash cut it: in the middle of its
/// tool calls (the last message is that entry or a result of one of its calls, and
/// at least one of its calls has no result), or after its calls' results and before
/// the model's reply ([`results_unanswered`]). `None` when the history ends
/// otherwise (calls without a result further back belong to turns that went on,
/// and are closed by [`repair_entries`]).
pub fn cut_turn(history: &[Entry]) -> Option<Uuid> {
    let (last, reply) = last_reply_with_calls(history)?;
    let open = inspect(&history[last..])
        .dangling
        .iter()
        .any(|dangling| dangling.entry == Some(reply));
    if open {
        return Some(reply);
    }
    results_unanswered(history)
}

/// The assistant entry of the last turn when every one of its calls has a result,
/// the last message is one of those results, and nothing says the run stopped there
/// on purpose (no stop record after the reply: see
/// [`turn_stopped_entry`](crate::turn_stopped_entry)): a crash came between the
/// results and the model's reply, which the next run asks for.
pub fn results_unanswered(history: &[Entry]) -> Option<Uuid> {
    let (last, reply) = last_reply_with_calls(history)?;
    let after = &history[last + 1..];
    let ends_on_result = after
        .iter()
        .rev()
        .find_map(Entry::as_message)
        .is_some_and(|message| message.role == Role::Tool);
    let stopped = after.iter().any(crate::store::turn_stop::is_turn_stopped);
    let open = inspect(&history[last..])
        .dangling
        .iter()
        .any(|dangling| dangling.entry == Some(reply));
    (ends_on_result && !stopped && !open).then_some(reply)
}

/// The position and uuid of the last non-tool message entry, when it is an
/// assistant message with calls.
fn last_reply_with_calls(history: &[Entry]) -> Option<(usize, Uuid)> {
    let last = history.iter().rposition(|entry| {
        entry
            .as_message()
            .is_some_and(|message| message.role != Role::Tool)
    })?;
    let entry = &history[last];
    let message = entry.as_message()?;
    (message.role == Role::Assistant && !message.calls().is_empty()).then_some((last, entry.uuid))
}

/// The messages to append to a history of bare messages (see [`repair_entries`]).
///
/// Bare messages cannot name the call they answer, so they come latest call first:
/// each then pairs with the most recent unanswered call of its id, which is the one
/// it was made for even when ids repeat across turns.
pub fn repair_messages(history: &[Message]) -> Vec<Message> {
    inspect_messages(history)
        .dangling
        .iter()
        .rev()
        .map(|dangling| interrupted_result(&dangling.call))
        .collect()
}

/// The messages to send to a model for a history of entries (see the module docs).
pub fn model_view(history: &[Entry]) -> Vec<Message> {
    view(&items_of_entries(history))
}

/// The messages to send to a model for a history of bare messages.
pub fn model_view_messages(history: &[Message]) -> Vec<Message> {
    view(&items_of_messages(history))
}

/// Passes each message of [`model_view`]`(history)` to `visit`, in order, without
/// copying the history: for a figure about the next request (its estimated size)
/// that should not need a second copy of a long session. Calls are passed as stored,
/// before the argument repair of [`request_message`].
pub fn visit_model_view(history: &[Entry], mut visit: impl FnMut(&Message)) {
    let items = items_of_entries(history);
    let pairing = pair(&items);
    for (position, item) in items.iter().enumerate() {
        if item.message.role == Role::Tool {
            continue;
        }
        visit(item.message);
        for slot in &pairing.slots[pairing.slots_of[position].clone()] {
            match slot.result {
                Some(result) => visit(items[result].message),
                None => visit(&interrupted_result(slot.call)),
            }
        }
    }
}

fn view(items: &[Item<'_>]) -> Vec<Message> {
    let pairing = pair(items);
    let mut out = Vec::with_capacity(items.len());
    for (position, item) in items.iter().enumerate() {
        if item.message.role == Role::Tool {
            continue;
        }
        out.push(request_message(item.message));
        for slot in &pairing.slots[pairing.slots_of[position].clone()] {
            out.push(match slot.result {
                Some(result) => items[result].message.clone(),
                None => interrupted_result(slot.call),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str, name: &str) -> ToolCall {
        ToolCall::function(id, name, "{}")
    }

    fn calls(ids: &[&str]) -> Message {
        Message::assistant_tool_calls(None, ids.iter().map(|id| call(id, "look")).collect())
    }

    /// (role, tool_call_id or first call id) of each message, to compare shapes.
    fn shape(view: &[Message]) -> Vec<String> {
        view.iter()
            .map(|message| match message.role {
                Role::Tool => format!(
                    "tool:{}:{}",
                    message.tool_call_id.as_deref().unwrap_or("?"),
                    if message.text().starts_with("Error: the call") {
                        "interrupted"
                    } else {
                        "real"
                    }
                ),
                Role::Assistant if !message.calls().is_empty() => format!(
                    "assistant:{}",
                    message
                        .calls()
                        .iter()
                        .map(|call| call.id.as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                ),
                ref role => format!("{}:{}", role.as_str(), message.text()),
            })
            .collect()
    }

    fn entries(messages: Vec<Message>) -> Vec<Entry> {
        messages.into_iter().map(Entry::message).collect()
    }

    #[test]
    fn a_complete_history_is_unchanged_and_needs_no_repair() {
        let history = entries(vec![
            Message::user("hi"),
            calls(&["a", "b"]),
            Message::tool("a", "A"),
            Message::tool("b", "B"),
            Message::assistant("done"),
        ]);
        assert!(repair_entries(&history).is_empty());
        let expected: Vec<Message> = history
            .iter()
            .filter_map(|entry| entry.as_message().cloned())
            .collect();
        assert_eq!(model_view(&history), expected);
    }

    #[test]
    fn an_interrupted_call_at_the_end_gets_one_repair_entry() {
        let history = entries(vec![Message::user("hi"), calls(&["a"])]);
        let repairs = repair_entries(&history);
        assert_eq!(repairs.len(), 1);
        let repair = repairs[0].as_message().unwrap();
        assert_eq!(repair.role, Role::Tool);
        assert_eq!(repair.tool_call_id.as_deref(), Some("a"));
        assert!(repair.text().contains("interrupted before it returned"));
        assert!(repair.text().starts_with("Error:"));
        assert_eq!(
            repairs[0].extra.get(ANSWERS_ENTRY),
            Some(&Value::String(history[1].uuid.to_string()))
        );
        let mut repaired = history.clone();
        repaired.extend(repairs);
        assert!(repair_entries(&repaired).is_empty(), "repair is idempotent");
        assert_eq!(
            shape(&model_view(&repaired)),
            ["user:hi", "assistant:a", "tool:a:interrupted"]
        );
    }

    #[test]
    fn parallel_calls_with_some_results_get_only_the_missing_ones() {
        let history = entries(vec![
            Message::user("hi"),
            calls(&["a", "b", "c"]),
            Message::tool("b", "B"),
        ]);
        let repairs = repair_entries(&history);
        let ids: Vec<_> = repairs
            .iter()
            .map(|entry| entry.as_message().unwrap().tool_call_id.clone().unwrap())
            .collect();
        assert_eq!(ids, ["a", "c"]);
        let mut repaired = history.clone();
        repaired.extend(repairs);
        assert_eq!(
            shape(&model_view(&repaired)),
            [
                "user:hi",
                "assistant:a,b,c",
                "tool:a:interrupted",
                "tool:b:real",
                "tool:c:interrupted"
            ]
        );
    }

    #[test]
    fn a_dangling_call_in_the_middle_is_answered_right_after_its_call() {
        let history = entries(vec![
            Message::user("one"),
            calls(&["a"]),
            Message::user("two"),
            calls(&["b"]),
            Message::tool("b", "B"),
            Message::assistant("reply"),
        ]);
        let report = inspect(&history);
        assert_eq!(report.dangling.len(), 1);
        assert_eq!(report.dangling[0].index, 1);
        let mut repaired = history.clone();
        repaired.extend(repair_entries(&history));
        let expected = [
            "user:one",
            "assistant:a",
            "tool:a:interrupted",
            "user:two",
            "assistant:b",
            "tool:b:real",
            "assistant:reply",
        ];
        assert_eq!(shape(&model_view(&repaired)), expected);
        // Without the repair appended the view is the same: it fills the gap itself.
        assert_eq!(shape(&model_view(&history)), expected);
    }

    #[test]
    fn a_late_real_result_is_moved_up_to_its_call() {
        let history = entries(vec![
            calls(&["a"]),
            Message::user("meanwhile"),
            Message::tool("a", "A"),
        ]);
        assert!(repair_entries(&history).is_empty());
        assert_eq!(
            shape(&model_view(&history)),
            ["assistant:a", "tool:a:real", "user:meanwhile"]
        );
    }

    #[test]
    fn duplicate_and_orphan_results_are_left_out() {
        let history = entries(vec![
            Message::tool("ghost", "before anything"),
            calls(&["a"]),
            Message::tool("a", "first"),
            Message::tool("a", "second"),
            Message::tool("zzz", "unknown"),
            Message::assistant("ok"),
        ]);
        let report = inspect(&history);
        assert_eq!(report.orphan_results, [0, 4]);
        assert_eq!(report.duplicate_results, [3]);
        let view = model_view(&history);
        assert_eq!(shape(&view), ["assistant:a", "tool:a:real", "assistant:ok"]);
        assert_eq!(view[1].text(), "first");
    }

    #[test]
    fn a_result_before_its_call_is_an_orphan() {
        let history = entries(vec![Message::tool("a", "early"), calls(&["a"])]);
        assert_eq!(inspect(&history).orphan_results, [0]);
        assert_eq!(repair_entries(&history).len(), 1);
    }

    #[test]
    fn reused_ids_pair_with_the_most_recent_unanswered_call() {
        // Servers that number calls per turn reuse `call_0`.
        let history = entries(vec![
            calls(&["call_0"]),
            Message::user("again"),
            calls(&["call_0"]),
            Message::tool("call_0", "second turn"),
        ]);
        let view = model_view(&history);
        assert_eq!(
            shape(&view),
            [
                "assistant:call_0",
                "tool:call_0:interrupted",
                "user:again",
                "assistant:call_0",
                "tool:call_0:real"
            ]
        );
        assert_eq!(view[4].text(), "second turn");
    }

    #[test]
    fn repair_entries_pin_their_call_when_ids_repeat() {
        let first = Message::assistant_tool_calls(None, vec![call("call_0", "first_tool")]);
        let second = Message::assistant_tool_calls(None, vec![call("call_0", "second_tool")]);
        let history = entries(vec![first, Message::user("u"), second]);
        let mut repaired = history.clone();
        repaired.extend(repair_entries(&history));
        assert!(repair_entries(&repaired).is_empty());
        let view = model_view(&repaired);
        assert!(view[1].text().contains("first_tool"), "{:?}", view[1]);
        assert!(view[4].text().contains("second_tool"), "{:?}", view[4]);
    }

    #[test]
    fn pinned_results_take_their_entrys_oldest_call_and_others_the_newest() {
        let made = |names: &[&str]| {
            Message::assistant_tool_calls(None, names.iter().map(|name| call("x", name)).collect())
        };
        let mut history = entries(vec![
            made(&["first"]),
            Message::user("u"),
            made(&["second-a", "second-b"]),
            Message::user("u"),
            made(&["third"]),
        ]);
        let pinned = |to: &Entry, text: &str| {
            let mut entry = Entry::message(Message::tool("x", text));
            entry
                .extra
                .insert(ANSWERS_ENTRY.to_owned(), Value::String(to.uuid.to_string()));
            entry
        };
        history.push(pinned(&history[2], "for second-a"));
        history.push(Entry::message(Message::tool("x", "for third")));
        history.push(pinned(&history[2], "for second-b"));
        history.push(Entry::message(Message::tool("x", "for first")));
        history.push(Entry::message(Message::tool("x", "one too many")));
        let report = inspect(&history);
        assert!(report.dangling.is_empty(), "{report:?}");
        assert!(report.orphan_results.is_empty(), "{report:?}");
        assert_eq!(report.duplicate_results, [9]);
        let texts: Vec<String> = model_view(&history)
            .iter()
            .map(|message| match message.role {
                Role::Assistant => format!("call {}", message.calls()[0].function.name),
                _ => message.text(),
            })
            .collect();
        assert_eq!(
            texts,
            [
                "call first",
                "for first",
                "u",
                "call second-a",
                "for second-a",
                "for second-b",
                "u",
                "call third",
                "for third",
            ]
        );
    }

    #[test]
    fn empty_tool_call_lists_are_dropped_and_other_kinds_skipped() {
        let mut empty = Message::assistant("text");
        empty.tool_calls = Some(Vec::new());
        let mut history = entries(vec![Message::system("sys"), empty]);
        history.push(Entry::other("compaction", serde_json::Map::new()));
        let view = model_view(&history);
        assert_eq!(view.len(), 2);
        assert_eq!(view[1].tool_calls, None);
    }

    #[test]
    fn arguments_that_are_not_an_object_are_sent_as_an_empty_object() {
        let cut = Message::assistant_tool_calls(
            Some("Let me look.".to_owned()),
            vec![
                ToolCall::function("a", "read_file", r#"{"path": "x"}"#),
                ToolCall::function("b", "read_file", "{"),
                ToolCall::function("c", "read_file", "[1]"),
                ToolCall::function("d", "list", ""),
            ],
        );
        let history = entries(vec![
            Message::user("hi"),
            cut.clone(),
            Message::tool("a", "A"),
            Message::tool("b", "error: cut off"),
        ]);
        let view = model_view(&history);
        let sent: Vec<&str> = view[1]
            .calls()
            .iter()
            .map(|call| call.function.arguments.as_str())
            .collect();
        assert_eq!(sent, [r#"{"path": "x"}"#, "{}", "{}", "{}"]);
        assert_eq!(view[1].text(), "Let me look.");
        assert_eq!(
            shape(&view),
            [
                "user:hi",
                "assistant:a,b,c,d",
                "tool:a:real",
                "tool:b:real",
                "tool:c:interrupted",
                "tool:d:interrupted"
            ]
        );
        // The stored message is untouched.
        assert_eq!(history[1].as_message(), Some(&cut));
        assert!(arguments_are_an_object("{ }"));
        assert!(!arguments_are_an_object("{\"a\":"));
        assert!(!arguments_are_an_object("null"));
    }

    #[test]
    fn bare_messages_repair_the_same_way() {
        let history = vec![
            Message::user("hi"),
            calls(&["a", "b"]),
            Message::tool("a", "A"),
        ];
        let repairs = repair_messages(&history);
        assert_eq!(repairs.len(), 1);
        assert_eq!(repairs[0].tool_call_id.as_deref(), Some("b"));
        let mut repaired = history.clone();
        repaired.extend(repairs);
        assert!(repair_messages(&repaired).is_empty());
        assert_eq!(
            shape(&model_view_messages(&repaired)),
            [
                "user:hi",
                "assistant:a,b",
                "tool:a:real",
                "tool:b:interrupted"
            ]
        );
    }

    #[test]
    fn the_cut_turn_is_the_last_reply_with_an_open_call() {
        let user = Entry::message(Message::user("go"));
        let reply = Entry::message(calls(&["a", "b"]));
        let answered_a = Entry::message(Message::tool("a", "ok"));
        let record = Entry::other("toolStart", serde_json::Map::new());
        // Cut between its calls' results, with an entry of another kind after them.
        let cut = [
            user.clone(),
            reply.clone(),
            answered_a.clone(),
            record.clone(),
        ];
        assert_eq!(cut_turn(&cut), Some(reply.uuid));
        // Only the other calls are closed when the cut turn is kept open.
        let old = Entry::message(calls(&["old"]));
        let history = [old.clone(), user.clone(), reply.clone(), answered_a.clone()];
        let repairs = repair_entries_except(&history, cut_turn(&history));
        assert_eq!(repairs.len(), 1);
        assert_eq!(repairs[0].extra[ANSWERS_ENTRY], old.uuid.to_string());
        assert_eq!(repair_entries(&history).len(), 2);
        // Every call answered and no reply: cut before the reply, unless a stop
        // record says the run ended there.
        let answered_b = Entry::message(Message::tool("b", "ok"));
        let answered = [
            user.clone(),
            reply.clone(),
            answered_a.clone(),
            answered_b.clone(),
            record.clone(),
        ];
        assert_eq!(cut_turn(&answered), Some(reply.uuid));
        assert_eq!(results_unanswered(&answered), Some(reply.uuid));
        assert_eq!(results_unanswered(&cut), None);
        let mut stopped = answered.to_vec();
        stopped.push(crate::turn_stopped_entry("cancelled"));
        assert_eq!(cut_turn(&stopped), None);
        // A turn that went on, a plain answer: nothing cut.
        assert_eq!(
            cut_turn(&[
                user.clone(),
                reply.clone(),
                answered_a.clone(),
                answered_b,
                Entry::message(Message::assistant("done")),
            ]),
            None
        );
        assert_eq!(cut_turn(&[reply.clone(), user.clone()]), None);
        assert_eq!(
            cut_turn(&[user, Entry::message(Message::assistant("hi"))]),
            None
        );
        assert_eq!(cut_turn(&[]), None);
    }
}
