//! The items of a conversation drawn as it is read, against the items drawn
//! before the first reading was split off: the same for any conversation.

use std::collections::{HashMap, VecDeque};

use proptest::prelude::*;
use reprise_runs::{CompactionMarkers, PersonMessage};
use reprise_session::{
    AwaitingCall, CallDecision, Compaction, DecidedCall, Entry, Message, Rewind, Role, StartedCall,
    ToolCall, approval_decision_entry, approval_pending_entry, rewound, tool_start_entry,
    turn_stopped_entry,
};
use serde_json::Value;
use uuid::Uuid;

use super::facts::CallRecords;
use super::stream::ItemStream;
use super::{FactsReader, Item, ItemKind, call_result, counts_as_message, items_of};
use crate::text::{one_line, shorten};

/// The items of one conversation, in order: each call beside its result (the first
/// result after it that answers its id) and its records.
fn reference_items(entries: &[Entry]) -> Vec<Item<'_>> {
    let hidden = rewound(entries);
    let mut records = CallRecords::default();
    for entry in entries.iter().filter(|entry| entry.message.is_none()) {
        records.add(entry);
    }
    let mut results: HashMap<&str, VecDeque<usize>> = HashMap::new();
    for (index, entry) in entries.iter().enumerate() {
        if let Some(message) = entry.as_message()
            && message.role == Role::Tool
            && let Some(id) = message.tool_call_id.as_deref()
        {
            results.entry(id).or_default().push_back(index);
        }
    }
    let mut used = vec![false; entries.len()];
    let mut markers = CompactionMarkers::default();
    let mut items = Vec::with_capacity(entries.len());
    for (index, entry) in entries.iter().enumerate() {
        let marker = markers.next(entry);
        if used[index] {
            continue;
        }
        if hidden[index] && (index == 0 || !hidden[index - 1]) {
            let messages = entries[index..]
                .iter()
                .zip(&hidden[index..])
                .take_while(|(_, hidden)| **hidden)
                .filter(|(entry, _)| counts_as_message(entry))
                .count();
            // The line about the stretch is not itself out of view.
            items.push(Item {
                entry,
                rewound: false,
                kind: ItemKind::Rewound { messages },
            });
        }
        let kind = match entry.as_message() {
            None => match reference_other_kind(entry, entries, marker) {
                Some(kind) => kind,
                None => continue,
            },
            Some(message) => match message.role {
                Role::User => match PersonMessage::of(entry) {
                    Some(person) => ItemKind::Person(person),
                    None => ItemKind::System(message),
                },
                Role::Assistant => {
                    let calls = message
                        .calls()
                        .iter()
                        .map(|call| {
                            let result = results.get_mut(call.id.as_str()).and_then(|queue| {
                                while queue.front().is_some_and(|&j| j < index || used[j]) {
                                    queue.pop_front();
                                }
                                queue.pop_front()
                            });
                            let result = result.and_then(|j| {
                                used[j] = true;
                                call_result(&entries[j])
                            });
                            records.call(entry.uuid, call, result)
                        })
                        .collect();
                    ItemKind::Reply { message, calls }
                }
                Role::Tool => match call_result(entry) {
                    Some(result) => ItemKind::Result(result),
                    None => continue,
                },
                _ => ItemKind::System(message),
            },
        };
        items.push(Item {
            entry,
            rewound: hidden[index],
            kind,
        });
    }
    items
}

/// The item of an entry that holds no message, if it shows as one. Start and
/// approval records show as the state of their calls, not here.
fn reference_other_kind<'a>(
    entry: &'a Entry,
    entries: &[Entry],
    marker: Option<String>,
) -> Option<ItemKind<'a>> {
    let kind = entry.kind.as_deref().unwrap_or_default();
    let field = |name: &str| entry.extra.get(name).and_then(Value::as_str);
    match kind {
        reprise_session::TOOL_START_KIND
        | reprise_session::APPROVAL_PENDING_KIND
        | reprise_session::APPROVAL_DECISION_KIND => None,
        reprise_session::TURN_STOPPED_KIND => Some(ItemKind::Stopped {
            reason: field("reason").unwrap_or("stopped").to_owned(),
        }),
        reprise_session::COMPACTION_KIND => Some(ItemKind::Compaction {
            summary: field("summary").unwrap_or_default(),
            tokens_before: entry.extra.get("tokens_before").and_then(Value::as_u64),
            tokens_after: entry.extra.get("tokens_after").and_then(Value::as_u64),
            marker,
        }),
        reprise_session::REWIND_KIND => Some(ItemKind::Rewind {
            line: reference_rewind_line(&Rewind::from_entry(entry)?, entries),
        }),
        "note" => Some(ItemKind::Note {
            label: match field("from") {
                Some(from) if !from.is_empty() => format!("note: {from}"),
                _ => "note".to_owned(),
            },
            text: field("text").unwrap_or_default().to_owned(),
        }),
        _ => {
            let mut extra = entry.extra.clone().into_map();
            extra.remove("uuid");
            Some(ItemKind::Note {
                label: kind.to_owned(),
                text: serde_json::to_string_pretty(&extra).unwrap_or_default(),
            })
        }
    }
}

/// What a rewind entry did, in a line.
fn reference_rewind_line(rewind: &Rewind, entries: &[Entry]) -> String {
    if rewind.undoes.is_some() {
        let files = if rewind.files.is_some() {
            "; the files went back too"
        } else {
            ""
        };
        return format!(
            "── undo of the last rewind: its messages are back in the model's view{files} ──"
        );
    }
    let files = if rewind.files.is_some() {
        "the conversation and the files"
    } else {
        "the conversation only"
    };
    let message = rewind.to.and_then(|to| {
        let entry = entries.iter().find(|entry| entry.uuid == to)?;
        Some(entry.as_message()?.text())
    });
    match message {
        Some(text) => format!(
            "── rewind to just before “{}”: {files} ──",
            shorten(&one_line(&text), 60)
        ),
        None if rewind.files.is_some() => {
            "── rewind of the files only: the conversation stays ──".to_owned()
        }
        None => "── rewind (its message is not in the conversation) ──".to_owned(),
    }
}

/// A conversation of any shape: each step one entry, its numbers picking what it
/// points at (entries by position, call ids from a few).
fn conversation(steps: &[(u8, usize, usize)]) -> Vec<Entry> {
    let uuids: Vec<Uuid> = (0..steps.len()).map(|_| Uuid::new_v4()).collect();
    let id = |n: usize| format!("c{}", n % 3);
    let mut entries: Vec<Entry> = Vec::new();
    for (i, &(kind, a, b)) in steps.iter().enumerate() {
        let earlier = |n: usize| if i == 0 { None } else { Some(n % i) };
        let mut entry = match kind % 12 {
            0 => Entry::message(Message::user(format!("ask {i}\nsecond line"))),
            1 => Entry::message(Message::assistant(format!("reply {i}"))),
            2 => Entry::message(Message::assistant_tool_calls(
                Some(format!("calling {i}")),
                (0..=b % 2)
                    .map(|k| ToolCall::function(id(a + k), "read_file", "{\"path\":\"a\"}"))
                    .collect(),
            )),
            3 => Entry::message(Message::tool(id(a), format!("result {i}"))),
            4 => Rewind {
                to: Some(uuids[a % steps.len()]),
                files: (b % 2 == 0).then(|| "abc".to_owned()),
                undo: None,
                undoes: None,
            }
            .to_entry(),
            5 => Rewind {
                undoes: earlier(a).map(|k| uuids[k]),
                ..Rewind::default()
            }
            .to_entry(),
            6 => Compaction {
                summary: format!("summary {i}"),
                through: earlier(a).map_or_else(Uuid::new_v4, |k| uuids[k]),
                tokens_before: 100,
                tokens_after: 10,
            }
            .to_entry(),
            7 => tool_start_entry(&[StartedCall {
                entry: earlier(a).map_or_else(Uuid::new_v4, |k| uuids[k]),
                tool_call_id: id(b),
                tool: "read_file".into(),
                allowed_by: "--yes".into(),
                idempotency_key: "k".into(),
                rerun: b % 2 == 0,
            }]),
            8 => approval_pending_entry(&[AwaitingCall {
                entry: earlier(a).map_or_else(Uuid::new_v4, |k| uuids[k]),
                tool_call_id: id(b),
                tool: "read_file".into(),
                arguments_hash: "h".into(),
            }]),
            9 => approval_decision_entry(&DecidedCall {
                entry: earlier(a).map_or_else(Uuid::new_v4, |k| uuids[k]),
                tool_call_id: id(b),
                arguments_hash: "h".into(),
                decided_by: "person".into(),
                decision: if b % 2 == 0 {
                    CallDecision::Allow
                } else {
                    CallDecision::Deny {
                        reason: "no".into(),
                    }
                },
            }),
            10 => turn_stopped_entry("cancelled"),
            _ => Entry::message(Message::system(format!("system {i}"))),
        };
        entry.uuid = uuids[i];
        entries.push(entry);
    }
    entries
}

/// The items of `entries` drawn as a second reading hands them over.
fn streamed(entries: &[Entry]) -> Vec<String> {
    let mut reader = FactsReader::default();
    for entry in entries {
        reader.push(entry);
    }
    let mut facts = reader.finish();
    if facts.wants_targets() {
        for entry in entries {
            facts.push_target(entry);
        }
        facts.end_targets();
    }
    let mut shown = Vec::new();
    let mut stream = ItemStream::new(&facts);
    for entry in entries {
        stream.push(entry.clone(), &mut |item| shown.push(format!("{item:?}")));
    }
    stream.finish(&mut |item| shown.push(format!("{item:?}")));
    shown
}

fn debug(items: &[Item<'_>]) -> Vec<String> {
    items.iter().map(|item| format!("{item:?}")).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]
    #[test]
    fn items_drawn_as_read_are_those_of_the_whole_conversation(
        steps in prop::collection::vec((0u8..12, 0usize..40, 0usize..4), 0..40)
    ) {
        let entries = conversation(&steps);
        let reference = debug(&reference_items(&entries));
        prop_assert_eq!(&debug(&items_of(&entries)), &reference);
        prop_assert_eq!(&streamed(&entries), &reference);
    }
}

#[test]
fn every_shape_is_generated() {
    // A reply's call c0 answered, started, waited for and allowed, a second
    // reply's denied; rewinds, an undo and a compaction around them.
    let steps = [
        (0, 0, 0),
        (1, 0, 0),
        (2, 0, 0),
        (3, 0, 0),
        (7, 2, 0),
        (8, 2, 0),
        (9, 2, 0),
        (2, 0, 0),
        (9, 7, 3),
        (0, 0, 0),
        (4, 2, 0),
        (6, 3, 0),
        (4, 9, 1),
        (5, 12, 0),
        (10, 0, 0),
        (11, 0, 0),
    ];
    let entries = conversation(&steps);
    let items = reference_items(&entries);
    let mut kinds: Vec<String> = items
        .iter()
        .map(|item| match &item.kind {
            ItemKind::Rewound { .. } => "rewound".to_owned(),
            ItemKind::Rewind { .. } => "rewind".to_owned(),
            ItemKind::Compaction { .. } => "compaction".to_owned(),
            ItemKind::Reply { calls, .. } if !calls.is_empty() => {
                format!("call {} {:?}", calls[0].result.is_some(), calls[0].state())
            }
            _ => "other".to_owned(),
        })
        .collect();
    kinds.sort();
    kinds.dedup();
    assert_eq!(
        kinds,
        [
            "call false Some(\"denied: no\")",
            "call true None",
            "compaction",
            "other",
            "rewind",
            "rewound"
        ]
    );
    assert_eq!(streamed(&entries), debug(&items));
}
