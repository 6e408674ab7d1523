//! A run as people read it outside the chat (Markdown, one HTML file, JSON): the
//! run's items ([`super::items_of`]) as a reader sees them, each tool call beside its
//! result and what the records say of it, compactions, notes and rewinds in place,
//! what a rewind took out marked, the subagents after the main conversation, and
//! every string passed through the redactor unless the person asked to keep
//! secrets. Renderers walk them with [`write_items`].

use std::borrow::Cow;

use super::{self as view, ItemKind};
use jiff::Timestamp;
use reprise_redact::Redactor;
use reprise_runs::RunRecord;
use reprise_session::{Content, Entry, Message};
use serde_json::Value;

/// Longest title taken from the first prompt, in characters.
const TITLE_CHARS: usize = 80;

/// One thing a reader sees, in conversation order.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// A message the person wrote (or, `meta`, the program wrote in their name).
    User {
        /// When.
        ts: Timestamp,
        /// Its text.
        text: String,
        /// Its images, as URLs (`data:` URLs for images held in the run).
        images: Vec<String>,
        /// Written by a program, not typed.
        meta: bool,
    },
    /// A message of the model, with its calls and their results.
    Assistant {
        /// When.
        ts: Timestamp,
        /// Its reasoning, if the server sent it.
        reasoning: Option<String>,
        /// Its text.
        text: String,
        /// Its tool calls, each with its result.
        calls: Vec<CallView>,
    },
    /// A tool result whose call is not in the conversation.
    Result {
        /// When.
        ts: Timestamp,
        /// The call id it answers.
        call_id: String,
        /// Its text.
        text: String,
    },
    /// A system message.
    System {
        /// When.
        ts: Timestamp,
        /// Its text.
        text: String,
    },
    /// The history before this point was summarised.
    Compaction {
        /// When.
        ts: Timestamp,
        /// The summary.
        summary: String,
        /// Tokens before and after, when known.
        tokens_before: Option<u64>,
        /// Tokens after, when known.
        tokens_after: Option<u64>,
    },
    /// A line about the conversation: a rewind, the stretch a rewind took out, a
    /// turn stopped on purpose.
    Mark {
        /// When.
        ts: Timestamp,
        /// What it says.
        text: String,
    },
    /// Any other entry (a note kept by an import, a marker): shown, never sent.
    Note {
        /// When.
        ts: Timestamp,
        /// What it is (`note`, or the entry's kind).
        label: String,
        /// Its text.
        text: String,
    },
}

/// A tool call and its result.
#[derive(Clone, Debug, PartialEq)]
pub struct CallView {
    /// The tool.
    pub name: String,
    /// The arguments, pretty-printed when they are JSON.
    pub arguments: String,
    /// The result, `None` when the run holds none.
    pub result: Option<String>,
    /// Whether the result is a failure.
    pub failed: bool,
    /// What the records say of it (who allowed it, a resume after a crash, why it
    /// has no result).
    pub notes: Vec<String>,
}

/// An item, and whether a rewind took it out of the model's view.
#[derive(Clone, Debug, PartialEq)]
pub struct Shown {
    /// The item.
    pub item: Item,
    /// Whether a rewind took it out of the model's view.
    pub rewound: bool,
}

/// A run, ready to render.
#[derive(Clone, Debug, PartialEq)]
pub struct RunView {
    /// The heading: the run's title, or its first prompt.
    pub title: String,
    /// The run folder's name.
    pub run: String,
    /// Facts shown under the heading (session, source of an import…).
    pub facts: Vec<(String, String)>,
    /// The main conversation.
    pub items: Vec<Shown>,
    /// Each subagent's name and conversation.
    pub subagents: Vec<(String, Vec<Shown>)>,
}

/// Masks secrets, or keeps them when the person asked to.
pub struct Masker {
    redactor: Option<Redactor>,
}

impl Masker {
    /// Masks with the built-in patterns and the process's secret environment
    /// variables when `redact`, else keeps everything.
    pub fn new(redact: bool) -> Self {
        Masker {
            redactor: redact.then(|| Redactor::new().with_env_secrets()),
        }
    }

    /// Masks with `redactor`, or keeps everything when `None`.
    pub fn with_redactor(redactor: Option<Redactor>) -> Self {
        Masker { redactor }
    }

    /// `text` with its secrets masked.
    pub fn text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match &self.redactor {
            Some(redactor) => redactor.redact(text),
            None => Cow::Borrowed(text),
        }
    }

    /// A JSON value with every string masked.
    pub fn value(&self, value: Value) -> Value {
        match &self.redactor {
            Some(redactor) => reprise_runs::redact_value(redactor, value),
            None => value,
        }
    }

    /// A JSON value of the run (an entry, `session.json`) with every string masked
    /// but its ids ([`ID_FIELDS`]): they are no secrets, and a reader matches calls
    /// to results and entries to each other through them.
    pub fn record_value(&self, value: Value) -> Value {
        if self.redactor.is_none() {
            return value;
        }
        match value {
            Value::Object(object) => Value::Object(
                object
                    .into_iter()
                    .map(|(key, item)| {
                        let item = match item {
                            Value::String(_) if ID_FIELDS.contains(&key.as_str()) => item,
                            Value::Object(_) | Value::Array(_) => self.record_value(item),
                            // Masked beside its key: the key may say it is a secret.
                            scalar => {
                                let mut one = serde_json::Map::new();
                                one.insert(key.clone(), scalar);
                                match self.value(Value::Object(one)) {
                                    Value::Object(one) => {
                                        one.into_iter().next().map_or(Value::Null, |(_, v)| v)
                                    }
                                    _ => Value::Null,
                                }
                            }
                        };
                        (key, item)
                    })
                    .collect(),
            ),
            Value::Array(items) => Value::Array(
                items
                    .into_iter()
                    .map(|item| self.record_value(item))
                    .collect(),
            ),
            other => self.value(other),
        }
    }
}

/// Fields of a run's records that hold ids: an entry's `uuid`, a call's `id` and
/// its result's `tool_call_id`, the session's id, what a compaction or a repaired
/// result points at, a subagent's parent call, a fork's source session.
pub const ID_FIELDS: &[&str] = &[
    "uuid",
    "id",
    "tool_call_id",
    "sessionId",
    "session",
    "through",
    reprise_session::ANSWERS_ENTRY,
    reprise_agent::PARENT_CALL_FIELD,
];

fn pretty_arguments(arguments: &str) -> String {
    match serde_json::from_str::<Value>(arguments) {
        Ok(value) => serde_json::to_string_pretty(&value).unwrap_or_else(|_| arguments.to_owned()),
        Err(_) => arguments.to_owned(),
    }
}

fn images_of(message: &Message) -> Vec<String> {
    match &message.content {
        Some(Content::Parts(parts)) => parts
            .iter()
            .filter_map(|part| part.extra.get("image_url")?.get("url")?.as_str())
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// The text of a message, its text parts one paragraph each.
fn text_of(message: &Message) -> String {
    match &message.content {
        Some(Content::Parts(parts)) => parts
            .iter()
            .filter_map(|part| part.text.as_deref())
            .collect::<Vec<_>>()
            .join("\n\n"),
        _ => message.text(),
    }
}

/// What a reader is told of a call besides its arguments and result: who allowed
/// it, what a resume after a crash did, and why it has no result.
fn call_notes(call: &view::Call<'_>) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(started) = &call.started {
        let again = if started.rerun { ", started again" } else { "" };
        notes.push(format!("allowed by {}{again}", started.allowed_by));
    }
    if call.waited
        && let Some(reprise_session::CallDecision::Allow) = &call.decision
    {
        notes.push("waited for a decision: allowed".to_owned());
    }
    if let Some(mark) = call.result.as_ref().and_then(|result| result.after_crash) {
        notes.push(format!("after a crash: {}", mark.describe()));
    }
    notes.extend(call.state());
    notes
}

/// The items of one conversation as the exports show them, every string masked.
pub fn items_of(entries: &[Entry], mask: &Masker) -> Vec<Shown> {
    view::items_of(entries)
        .into_iter()
        .map(|item| shown_of(item, mask))
        .collect()
}

/// An item as the exports show it, every string masked.
pub fn shown_of(shown: view::Item<'_>, mask: &Masker) -> Shown {
    let text = |text: &str| mask.text(text).into_owned();
    let ts = shown.entry.ts;
    let item = match shown.kind {
        ItemKind::Person(person) => Item::User {
            ts,
            text: text(&text_of(person.message)),
            images: images_of(person.message),
            meta: person.expansion,
        },
        ItemKind::Reply { message, calls } => Item::Assistant {
            ts,
            reasoning: message
                .extra
                .get("reasoning_content")
                .or_else(|| message.extra.get("reasoning"))
                .and_then(Value::as_str)
                .filter(|reasoning| !reasoning.trim().is_empty())
                .map(text),
            text: text(&text_of(message)),
            calls: calls
                .iter()
                .map(|call| CallView {
                    name: text(&call.call.function.name),
                    arguments: text(&pretty_arguments(&call.call.function.arguments)),
                    result: call
                        .result
                        .as_ref()
                        .map(|result| text(&result.message.text())),
                    failed: call.result.as_ref().is_some_and(|result| result.is_error),
                    notes: call_notes(call).iter().map(|note| text(note)).collect(),
                })
                .collect(),
        },
        ItemKind::Result(result) => Item::Result {
            ts,
            call_id: result.message.tool_call_id.clone().unwrap_or_default(),
            text: text(&text_of(result.message)),
        },
        ItemKind::System(message) => Item::System {
            ts,
            text: text(&text_of(message)),
        },
        ItemKind::Compaction {
            summary,
            tokens_before,
            tokens_after,
            ..
        } => Item::Compaction {
            ts,
            summary: text(summary),
            tokens_before,
            tokens_after,
        },
        ItemKind::Note { label, text: body } => Item::Note {
            ts,
            label: text(&label),
            text: text(&body),
        },
        ItemKind::Rewound { messages } => Item::Mark {
            ts,
            text: format!(
                "Rewound: the {} marked “rewound” below left the model's view",
                crate::text::counted(messages, "message", "messages")
            ),
        },
        ItemKind::Rewind { line } => Item::Mark {
            ts,
            text: text(line.trim_matches(|c| c == '─' || c == ' ')),
        },
        ItemKind::Stopped { reason } => Item::Mark {
            ts,
            text: format!("The turn stopped here ({})", text(&reason)),
        },
    };
    Shown {
        item,
        rewound: shown.rewound,
    }
}

/// What an entry gives a run's heading when it comes first: the text of a message
/// the person typed, masked, when it is not blank.
pub fn first_prompt(entry: &Entry, mask: &Masker) -> Option<String> {
    let message = entry.as_message()?;
    if message.role != reprise_session::Role::User {
        return None;
    }
    let person = reprise_runs::PersonMessage::of(entry)?;
    if person.expansion {
        return None;
    }
    let text = mask.text(&text_of(person.message)).into_owned();
    (!text.trim().is_empty()).then_some(text)
}

/// The heading of a run: the title it was given (`reprise rename`), its title in
/// `session.json`, the title it had where it was imported from, or its first
/// prompt ([`first_prompt`]), cut.
fn title_of(given: Option<&str>, session: &Value, first: Option<&str>, run: &str) -> String {
    let named = given
        .filter(|t| !t.trim().is_empty())
        .or_else(|| session["title"].as_str())
        .or_else(|| session["importedFrom"]["title"].as_str())
        .filter(|t| !t.trim().is_empty());
    if let Some(title) = named {
        return title.trim().to_owned();
    }
    match first.map(str::trim) {
        Some(text) => {
            let line = text.lines().next().unwrap_or_default();
            let cut: String = line.chars().take(TITLE_CHARS).collect();
            if cut.len() < text.len() {
                format!("{cut}…")
            } else {
                cut
            }
        }
        None => format!("Run {run}"),
    }
}

/// What is shown above a run's items.
#[derive(Clone, Debug, PartialEq)]
pub struct RunHead {
    /// The heading: the run's title, or its first prompt.
    pub title: String,
    /// Facts shown under the heading (session, source of an import…).
    pub facts: Vec<(String, String)>,
}

/// What a run's conversation says of it, gathered from its entries in order, for
/// its heading ([`RunHead::of`]).
#[derive(Clone, Debug, Default)]
pub struct HeadFacts {
    /// The first prompt ([`first_prompt`]).
    pub first_prompt: Option<String>,
    /// How many messages the main conversation holds.
    pub messages: usize,
}

impl HeadFacts {
    /// Takes in the next entry of the main conversation.
    pub fn push(&mut self, entry: &Entry, mask: &Masker) {
        if entry.as_message().is_some() {
            self.messages += 1;
            if self.first_prompt.is_none() {
                self.first_prompt = first_prompt(entry, mask);
            }
        }
    }
}

impl RunHead {
    /// The heading of the run `run` (its folder's name), whose `session.json` is
    /// `session`, `given` the title it was given, with `subagents` subagents.
    pub fn of(
        run: &str,
        session: &Value,
        given: Option<&str>,
        head: &HeadFacts,
        subagents: usize,
        mask: &Masker,
    ) -> RunHead {
        let title = mask
            .text(&title_of(given, session, head.first_prompt.as_deref(), run))
            .into_owned();
        let mut facts = vec![("Run".to_owned(), run.to_owned())];
        if let Some(id) = session["sessionId"].as_str() {
            facts.push(("Session".to_owned(), id.to_owned()));
        }
        let from = &session["importedFrom"];
        if let Some(tool) = from["tool"].as_str() {
            let path = from["path"].as_str().unwrap_or_default();
            facts.push((
                "Imported from".to_owned(),
                mask.text(&format!("{tool}: {path}")).into_owned(),
            ));
        }
        if let Some(forked) = session["forkedFrom"]["session"].as_str() {
            facts.push(("Forked from".to_owned(), forked.to_owned()));
        }
        facts.push(("Messages".to_owned(), head.messages.to_string()));
        if subagents > 0 {
            facts.push(("Subagents".to_owned(), subagents.to_string()));
        }
        RunHead { title, facts }
    }
}

/// What the renderers show of a loaded run; `title` is the one it was given.
pub fn view_of(run: &RunRecord, title: Option<&str>, mask: &Masker) -> RunView {
    let mut head = HeadFacts::default();
    for entry in &run.main {
        head.push(entry, mask);
    }
    let items = items_of(&run.main, mask);
    let subagents: Vec<(String, Vec<Shown>)> = run
        .subagents
        .iter()
        .map(|(name, entries)| (name.clone(), items_of(entries, mask)))
        .collect();
    let RunHead { title, facts } =
        RunHead::of(&run.name, &run.session, title, &head, subagents.len(), mask);
    RunView {
        title,
        run: run.name.clone(),
        facts,
        items,
        subagents,
    }
}

/// One format's writing of each kind of item: [`write_items`] walks a
/// conversation's items once, for the Markdown and the HTML export alike.
pub trait ItemWriter {
    /// A message of the person's, with its images.
    fn user(&mut self, ts: Timestamp, text: &str, images: &[String]);
    /// Text the program sent in the person's name (a slash command's expansion).
    fn program_text(&mut self, ts: Timestamp, text: &str);
    /// A reply, with its reasoning and its calls.
    fn assistant(&mut self, reply: ReplyView<'_>);
    /// A tool result whose call is not in the conversation.
    fn result(&mut self, ts: Timestamp, call_id: &str, text: &str);
    /// A system message.
    fn system(&mut self, ts: Timestamp, text: &str);
    /// A compaction: its summary and what it says of its size ([`tokens_note`]).
    fn compaction(&mut self, ts: Timestamp, summary: &str, tokens: &str);
    /// A line about the conversation (a rewind, a stretch it took out, a stop).
    fn mark(&mut self, ts: Timestamp, text: &str);
    /// A note, or an entry of a kind this program does not know.
    fn note(&mut self, ts: Timestamp, label: &str, text: &str);
    /// Called before (`true`) and after (`false`) each item a rewind took out of
    /// the model's view.
    fn rewound(&mut self, start: bool);
}

/// A reply as [`ItemWriter::assistant`] writes it.
#[derive(Clone, Copy, Debug)]
pub struct ReplyView<'a> {
    /// When it was written.
    pub ts: Timestamp,
    /// Its reasoning, if it showed any.
    pub reasoning: Option<&'a str>,
    /// Its text.
    pub text: &'a str,
    /// Its calls, each with its result and state.
    pub calls: &'a [CallView],
}

/// Writes `items` through `writer`, in order.
pub fn write_items(items: &[Shown], writer: &mut dyn ItemWriter) {
    for shown in items {
        write_item(shown, writer);
    }
}

/// Writes one item through `writer`.
pub fn write_item(shown: &Shown, writer: &mut dyn ItemWriter) {
    if shown.rewound {
        writer.rewound(true);
    }
    match &shown.item {
        Item::User {
            ts,
            text,
            meta: true,
            ..
        } => writer.program_text(*ts, text),
        Item::User {
            ts, text, images, ..
        } => writer.user(*ts, text, images),
        Item::Assistant {
            ts,
            reasoning,
            text,
            calls,
        } => writer.assistant(ReplyView {
            ts: *ts,
            reasoning: reasoning.as_deref(),
            text,
            calls,
        }),
        Item::Result { ts, call_id, text } => writer.result(*ts, call_id, text),
        Item::System { ts, text } => writer.system(*ts, text),
        Item::Compaction {
            ts,
            summary,
            tokens_before,
            tokens_after,
        } => writer.compaction(*ts, summary, &tokens_note(*tokens_before, *tokens_after)),
        Item::Mark { ts, text } => writer.mark(*ts, text),
        Item::Note { ts, label, text } => writer.note(*ts, label, text),
    }
    if shown.rewound {
        writer.rewound(false);
    }
}

/// What a compaction marker says of its size: ` (before → after tokens)`, or less when
/// the entry records less.
pub fn tokens_note(before: Option<u64>, after: Option<u64>) -> String {
    match (before, after) {
        (Some(before), Some(after)) => format!(" ({before} → {after} tokens)"),
        (Some(before), None) => format!(" ({before} tokens before)"),
        _ => String::new(),
    }
}

/// A timestamp as the exports show it: UTC, to the second.
pub fn show_ts(ts: Timestamp) -> String {
    ts.strftime("%Y-%m-%d %H:%M:%S UTC").to_string()
}
