//! One conversation as people read it: the entries of a transcript turned into
//! items, which `reprise show` and the exports draw.
//!
//! The person's messages, the replies with their tool calls (each with its result
//! and what the records say of it: started, by whose leave, waiting for a decision,
//! decided, taken up after a crash), notes, compactions, rewinds with what they took
//! out, and stopped turns. Records the program keeps for itself (start records, stop
//! records, approval records) become the state of their call or a line, never their
//! JSON. Each item says whether a rewind took it out of the model's view, and a
//! [`ItemKind::Rewound`] item opens each stretch of such items with the one count of
//! what left the view ([`counts_as_message`]).
//!
//! Items borrow the entries: each renderer takes the text as it shows it (masked,
//! cut, made safe for a terminal). The screens hold owned items instead, which
//! [`redraw`] makes from these for a resumed conversation and [`live`] grows with
//! each of the agent's events.

pub mod export;
pub mod facts;
pub mod live;
pub mod redraw;
pub mod stream;
#[cfg(test)]
mod stream_tests;

use reprise_runs::{CompactionMarkers, PersonMessage};
use reprise_session::{AfterCrash, CallDecision, Entry, Message, Rewind, Role, ToolCall};
use serde_json::Value;
use uuid::Uuid;

use crate::text::counted;
use facts::CallRecords;
pub use facts::{Facts, FactsReader, counts_as_message};

/// One thing a reader sees, in conversation order.
#[derive(Clone, Debug, PartialEq)]
pub struct Item<'a> {
    /// The entry it stands for.
    pub entry: &'a Entry,
    /// Whether a rewind took it out of the model's view.
    pub rewound: bool,
    /// What it is.
    pub kind: ItemKind<'a>,
}

/// What an item is.
#[derive(Clone, Debug, PartialEq)]
pub enum ItemKind<'a> {
    /// A message in the person's name: typed, or written by the chat for a slash
    /// command ([`PersonMessage::typed_text`] tells which, as the run's listing
    /// does).
    Person(PersonMessage<'a>),
    /// A reply of the model's, with its tool calls.
    Reply {
        /// The message.
        message: &'a Message,
        /// Its calls, each with what became of it.
        calls: Vec<Call<'a>>,
    },
    /// A tool result whose call is not in the conversation.
    Result(CallResult<'a>),
    /// A system message.
    System(&'a Message),
    /// The history before this point was summarised.
    Compaction {
        /// The summary.
        summary: &'a str,
        /// Tokens before, when recorded.
        tokens_before: Option<u64>,
        /// Tokens after, when recorded.
        tokens_after: Option<u64>,
        /// The chat's marker line (how many messages it took in), when what it
        /// summarised is in the conversation.
        marker: Option<String>,
    },
    /// A note kept by an import, or an entry of a kind this program does not know:
    /// shown, never sent.
    Note {
        /// What it is (`note`, `note: FROM`, or the entry's kind).
        label: String,
        /// Its text (the fields of an unknown kind, as JSON).
        text: String,
    },
    /// The start of a stretch of items a rewind took out of the model's view.
    Rewound {
        /// How many messages the stretch holds ([`counts_as_message`]).
        messages: usize,
    },
    /// A rewind (or the undo of one), said in a line.
    Rewind {
        /// What it did.
        line: String,
    },
    /// A turn that ended on its tool results without the model's reply, on purpose.
    Stopped {
        /// Why (`cancelled`, `timeout`, `maxTurns`, `cutOff`, `failed`).
        reason: String,
    },
}

/// A tool call and what became of it.
#[derive(Clone, Debug, PartialEq)]
pub struct Call<'a> {
    /// The call as the model made it.
    pub call: &'a ToolCall,
    /// Its result, `None` when the conversation holds none.
    pub result: Option<CallResult<'a>>,
    /// What its start record says: who allowed it, its checkpoint.
    pub started: Option<Started>,
    /// Whether it waited for a decision.
    pub waited: bool,
    /// The decision made about it, when it waited.
    pub decision: Option<CallDecision>,
}

/// What a call's start record says of it.
#[derive(Clone, Debug, PartialEq)]
pub struct Started {
    /// Who allowed it.
    pub allowed_by: String,
    /// Whether it was started a second time after a crash.
    pub rerun: bool,
    /// The checkpoint of the working folder taken just before it started.
    pub checkpoint: Option<String>,
}

/// A tool result.
#[derive(Clone, Debug, PartialEq)]
pub struct CallResult<'a> {
    /// Its entry.
    pub entry: &'a Entry,
    /// Its message.
    pub message: &'a Message,
    /// Whether it is a failure (marked so, interrupted, or saying so).
    pub is_error: bool,
    /// What the resume of a turn a crash cut did with the call.
    pub after_crash: Option<AfterCrash>,
}

impl Call<'_> {
    /// What the records say of the call's state, for a reader: `waiting for a
    /// decision`, `denied: REASON`, `started, no result recorded`; `None` for a
    /// call that returned, or one without a result that no record speaks of.
    pub fn state(&self) -> Option<String> {
        if let Some(CallDecision::Deny { reason }) = &self.decision {
            return Some(format!("denied: {reason}"));
        }
        if self.result.is_some() {
            return None;
        }
        if self.waited && self.decision.is_none() {
            Some("waiting for a decision".to_owned())
        } else if self.started.is_some() {
            Some("started, no result recorded".to_owned())
        } else {
            None
        }
    }
}

/// The items of one conversation, in order: each call beside its result (the first
/// result after it that answers its id) and its records.
pub fn items_of(entries: &[Entry]) -> Vec<Item<'_>> {
    let facts = Facts::of(entries);
    let mut walk = Walk::new(&facts);
    let mut items = Vec::with_capacity(entries.len());
    for (index, entry) in entries.iter().enumerate() {
        walk.items_at(index, entry, &|at| entries.get(at), &mut |item| {
            items.push(item)
        });
    }
    items
}

/// Draws the items of a conversation's entries, handed over in order, from the
/// [`Facts`] a first reading gathered: the one way from entries to items, for a
/// conversation held whole ([`items_of`]) or read as it goes ([`stream`]).
pub struct Walk<'f> {
    facts: &'f Facts,
    markers: CompactionMarkers,
    /// The first of the stretches out of view not yet behind.
    stretch: usize,
    /// The first of the used results not yet behind.
    used: usize,
}

impl<'f> Walk<'f> {
    /// A walk from the start of the conversation `facts` speak of.
    pub fn new(facts: &'f Facts) -> Self {
        Walk {
            facts,
            markers: CompactionMarkers::through(facts.compaction_throughs().clone()),
            stretch: 0,
            used: 0,
        }
    }

    /// Hands the items of the entry at `index` to `emit`; `entry_at` gives the
    /// entries its calls' results are ([`Facts::needs_until`] says how far).
    pub fn items_at<'a>(
        &mut self,
        index: usize,
        entry: &'a Entry,
        entry_at: &dyn Fn(usize) -> Option<&'a Entry>,
        emit: &mut dyn FnMut(Item<'a>),
    ) {
        let marker = self.markers.next(entry);
        let used = self.facts.used();
        while used.get(self.used).is_some_and(|&at| at < index) {
            self.used += 1;
        }
        if used.get(self.used) == Some(&index) {
            return;
        }
        let stretches = self.facts.stretches();
        while stretches.get(self.stretch).is_some_and(|s| s.end <= index) {
            self.stretch += 1;
        }
        let stretch = stretches
            .get(self.stretch)
            .filter(|stretch| stretch.start <= index);
        let hidden = stretch.is_some();
        if let Some(stretch) = stretch
            && stretch.start == index
        {
            // The line about the stretch is not itself out of view.
            emit(Item {
                entry,
                rewound: false,
                kind: ItemKind::Rewound {
                    messages: stretch.messages,
                },
            });
        }
        let kind = match entry.as_message() {
            None => match other_kind(entry, self.facts, marker) {
                Some(kind) => kind,
                None => return,
            },
            Some(message) => match message.role {
                Role::User => match PersonMessage::of(entry) {
                    Some(person) => ItemKind::Person(person),
                    None => ItemKind::System(message),
                },
                Role::Assistant => {
                    let mut results = self.facts.results_of(index).peekable();
                    let calls = message
                        .calls()
                        .iter()
                        .enumerate()
                        .map(|(place, call)| {
                            let result = results
                                .next_if(|(of, _)| *of == place)
                                .and_then(|(_, at)| entry_at(at))
                                .and_then(call_result);
                            self.facts.records().call(entry.uuid, call, result)
                        })
                        .collect();
                    ItemKind::Reply { message, calls }
                }
                Role::Tool => match call_result(entry) {
                    Some(result) => ItemKind::Result(result),
                    None => return,
                },
                _ => ItemKind::System(message),
            },
        };
        emit(Item {
            entry,
            rewound: hidden,
            kind,
        });
    }
}

fn call_result(entry: &Entry) -> Option<CallResult<'_>> {
    let message = entry.as_message()?;
    let is_error = match &message.content {
        Some(reprise_session::Content::Text(text)) => {
            crate::subagents::result_is_error(entry, text)
        }
        _ => crate::subagents::result_is_error(entry, &message.text()),
    };
    Some(CallResult {
        entry,
        message,
        is_error,
        after_crash: AfterCrash::of_entry(entry),
    })
}

/// The item of an entry that holds no message, if it shows as one. Start and
/// approval records show as the state of their calls, not here.
fn other_kind<'a>(entry: &'a Entry, facts: &Facts, marker: Option<String>) -> Option<ItemKind<'a>> {
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
            line: rewind_line(&Rewind::from_entry(entry)?, facts),
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
fn rewind_line(rewind: &Rewind, facts: &Facts) -> String {
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
    match rewind.to.and_then(|to| facts.target_text(to)) {
        Some(line) => format!("── rewind to just before “{line}”: {files} ──"),
        None if rewind.files.is_some() => {
            "── rewind of the files only: the conversation stays ──".to_owned()
        }
        None => "── rewind (its message is not in the conversation) ──".to_owned(),
    }
}

/// The line that opens a stretch of rewound items.
pub fn rewound_line(messages: usize) -> String {
    format!(
        "── rewound: what is marked │ below left the model's view ({}) ──",
        counted(messages, "message", "messages")
    )
}

impl CallRecords {
    fn call<'a>(
        &self,
        reply: Uuid,
        call: &'a ToolCall,
        result: Option<CallResult<'a>>,
    ) -> Call<'a> {
        let key = (reply, call.id.clone());
        Call {
            call,
            result,
            started: self.started.get(&key).map(|started| Started {
                allowed_by: started.allowed_by.clone(),
                rerun: started.rerun,
                checkpoint: self.checkpoints.get(&key).cloned(),
            }),
            waited: self.waited.contains(&key),
            decision: self.decided.get(&key).cloned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reprise_session::{Message, StartedCall, ToolCall, tool_start_entry, turn_stopped_entry};

    fn kinds(items: &[Item<'_>]) -> Vec<String> {
        items
            .iter()
            .map(|item| {
                let kind = match &item.kind {
                    ItemKind::Person(_) => "person".to_owned(),
                    ItemKind::Reply { calls, .. } => format!("reply({})", calls.len()),
                    ItemKind::Result(_) => "result".to_owned(),
                    ItemKind::System(_) => "system".to_owned(),
                    ItemKind::Compaction { .. } => "compaction".to_owned(),
                    ItemKind::Note { label, .. } => format!("note {label}"),
                    ItemKind::Rewound { messages } => format!("rewound {messages}"),
                    ItemKind::Rewind { .. } => "rewind".to_owned(),
                    ItemKind::Stopped { reason } => format!("stopped {reason}"),
                };
                if item.rewound {
                    format!("│{kind}")
                } else {
                    kind
                }
            })
            .collect()
    }

    #[test]
    fn records_become_states_and_a_rewind_says_what_it_took_out() {
        let ask = Entry::message(Message::user("run it"));
        let reply = Entry::message(Message::assistant_tool_calls(
            None,
            vec![ToolCall::function("c1", "run_command", "{\"cmd\":\"ls\"}")],
        ));
        let start = tool_start_entry(&[StartedCall {
            entry: reply.uuid,
            tool_call_id: "c1".into(),
            tool: "run_command".into(),
            allowed_by: "--yes".into(),
            idempotency_key: "secret-key".into(),
            rerun: false,
        }]);
        let entries = vec![
            Entry::message(Message::user("first")),
            Entry::message(Message::assistant("one")),
            ask.clone(),
            reply,
            start,
            Entry::message(Message::tool("c1", "a.txt")),
            turn_stopped_entry("cancelled"),
            Rewind {
                to: Some(ask.uuid),
                files: None,
                undo: None,
                undoes: None,
            }
            .to_entry(),
            Entry::message(Message::user("again")),
        ];
        let items = items_of(&entries);
        assert_eq!(
            kinds(&items),
            [
                "person",
                "reply(0)",
                "rewound 3",
                "│person",
                "│reply(1)",
                "│stopped cancelled",
                "rewind",
                "person"
            ]
        );
        let ItemKind::Reply { calls, .. } = &items[4].kind else {
            panic!("{items:?}")
        };
        assert_eq!(calls[0].started.as_ref().unwrap().allowed_by, "--yes");
        assert_eq!(calls[0].result.as_ref().unwrap().message.text(), "a.txt");
        assert_eq!(calls[0].state(), None);
        let ItemKind::Rewind { line } = &items[6].kind else {
            panic!("{items:?}")
        };
        assert_eq!(
            line,
            "── rewind to just before “run it”: the conversation only ──"
        );
    }

    #[test]
    fn a_call_without_a_result_says_why() {
        let reply = Entry::message(Message::assistant_tool_calls(
            None,
            vec![ToolCall::function("c1", "write_file", "{}")],
        ));
        let waiting = reprise_session::approval_pending_entry(&[reprise_session::AwaitingCall {
            entry: reply.uuid,
            tool_call_id: "c1".into(),
            tool: "write_file".into(),
            arguments_hash: reprise_session::arguments_hash("{}"),
        }]);
        let entries = vec![reply, waiting];
        let items = items_of(&entries);
        assert_eq!(kinds(&items), ["reply(1)"]);
        let ItemKind::Reply { calls, .. } = &items[0].kind else {
            panic!()
        };
        assert_eq!(calls[0].state().as_deref(), Some("waiting for a decision"));
    }
}
