//! A run as people read it outside reprise: Markdown, one HTML file, or JSON.
//!
//! The renderers share [`RunView`]: the run's entries turned into what a reader
//! sees, each tool call beside its result, compactions and notes in place, the
//! subagents after the main conversation, and every string passed through the
//! redactor unless the person asked to keep secrets.

pub mod highlight;
pub mod html;
pub mod markdown;

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};

use jiff::Timestamp;
use reprise_redact::Redactor;
use reprise_runs::RunRecord;
use reprise_session::{Content, Entry, Message, Role};
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
    pub items: Vec<Item>,
    /// Each subagent's name and conversation.
    pub subagents: Vec<(String, Vec<Item>)>,
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

fn is_meta(entry: &Entry) -> bool {
    entry.extra.get("isMeta") == Some(&Value::Bool(true))
        || entry
            .message
            .as_ref()
            .is_some_and(|m| m.extra.get("isMeta") == Some(&Value::Bool(true)))
}

/// The items of one conversation, each call with its result (the first result
/// after it that answers its id), every string masked.
pub fn items_of(entries: &[Entry], mask: &Masker) -> Vec<Item> {
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
    let mut items = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        if used[index] {
            continue;
        }
        let ts = entry.ts;
        let Some(message) = entry.as_message() else {
            items.push(other_item(entry, mask));
            continue;
        };
        let text = mask.text(&text_of(message)).into_owned();
        match message.role {
            Role::User => items.push(Item::User {
                ts,
                text,
                images: images_of(message),
                meta: is_meta(entry),
            }),
            Role::Assistant => {
                let mut calls = Vec::new();
                for call in message.calls() {
                    let result = results.get_mut(call.id.as_str()).and_then(|queue| {
                        while queue.front().is_some_and(|&j| j < index || used[j]) {
                            queue.pop_front();
                        }
                        queue.pop_front()
                    });
                    let result = result.map(|j| {
                        used[j] = true;
                        entries[j]
                            .message
                            .as_ref()
                            .map(|m| mask.text(&m.text()).into_owned())
                            .unwrap_or_default()
                    });
                    calls.push(CallView {
                        name: mask.text(&call.function.name).into_owned(),
                        arguments: mask
                            .text(&pretty_arguments(&call.function.arguments))
                            .into_owned(),
                        result,
                    });
                }
                let reasoning = message
                    .extra
                    .get("reasoning_content")
                    .or_else(|| message.extra.get("reasoning"))
                    .and_then(Value::as_str)
                    .filter(|text| !text.trim().is_empty())
                    .map(|text| mask.text(text).into_owned());
                items.push(Item::Assistant {
                    ts,
                    reasoning,
                    text,
                    calls,
                });
            }
            Role::Tool => items.push(Item::Result {
                ts,
                call_id: message.tool_call_id.clone().unwrap_or_default(),
                text,
            }),
            _ => items.push(Item::System { ts, text }),
        }
    }
    items
}

fn other_item(entry: &Entry, mask: &Masker) -> Item {
    let kind = entry.kind.clone().unwrap_or_default();
    let field = |name: &str| {
        entry
            .extra
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    if kind == "compaction" {
        return Item::Compaction {
            ts: entry.ts,
            summary: mask.text(field("summary")).into_owned(),
            tokens_before: entry.extra.get("tokens_before").and_then(Value::as_u64),
            tokens_after: entry.extra.get("tokens_after").and_then(Value::as_u64),
        };
    }
    let (label, text) = if kind == "note" {
        let from = field("from");
        let label = if from.is_empty() {
            "note".to_owned()
        } else {
            format!("note: {from}")
        };
        (label, field("text").to_owned())
    } else {
        let mut extra = entry.extra.clone();
        extra.remove("uuid");
        (
            kind,
            serde_json::to_string_pretty(&extra).unwrap_or_default(),
        )
    };
    Item::Note {
        ts: entry.ts,
        label: mask.text(&label).into_owned(),
        text: mask.text(&text).into_owned(),
    }
}

/// The heading of a run: the title it was given (`reprise rename`), its title in
/// `session.json`, the title it had where it was imported from, or its first
/// prompt, cut.
fn title_of(given: Option<&str>, session: &Value, items: &[Item], run: &str) -> String {
    let named = given
        .filter(|t| !t.trim().is_empty())
        .or_else(|| session["title"].as_str())
        .or_else(|| session["importedFrom"]["title"].as_str())
        .filter(|t| !t.trim().is_empty());
    if let Some(title) = named {
        return title.trim().to_owned();
    }
    let first = items.iter().find_map(|item| match item {
        Item::User {
            text, meta: false, ..
        } if !text.trim().is_empty() => Some(text.trim()),
        _ => None,
    });
    match first {
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

/// What the renderers show of a loaded run; `title` is the one it was given.
pub fn view_of(run: &RunRecord, title: Option<&str>, mask: &Masker) -> RunView {
    let items = items_of(&run.main, mask);
    let subagents: Vec<(String, Vec<Item>)> = run
        .subagents
        .iter()
        .map(|(name, entries)| (name.clone(), items_of(entries, mask)))
        .collect();
    let title = mask
        .text(&title_of(title, &run.session, &items, &run.name))
        .into_owned();
    let mut facts = vec![("Run".to_owned(), run.name.clone())];
    if let Some(id) = run.session["sessionId"].as_str() {
        facts.push(("Session".to_owned(), id.to_owned()));
    }
    let from = &run.session["importedFrom"];
    if let Some(tool) = from["tool"].as_str() {
        let path = from["path"].as_str().unwrap_or_default();
        facts.push((
            "Imported from".to_owned(),
            mask.text(&format!("{tool}: {path}")).into_owned(),
        ));
    }
    if let Some(forked) = run.session["forkedFrom"]["session"].as_str() {
        facts.push(("Forked from".to_owned(), forked.to_owned()));
    }
    let messages = run.main.iter().filter(|e| e.as_message().is_some()).count();
    facts.push(("Messages".to_owned(), messages.to_string()));
    if !subagents.is_empty() {
        facts.push(("Subagents".to_owned(), subagents.len().to_string()));
    }
    RunView {
        title,
        run: run.name.clone(),
        facts,
        items,
        subagents,
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
