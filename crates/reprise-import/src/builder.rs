//! Builds a reprise conversation out of another tool's records, in the order they
//! come, and pairs every tool call with exactly one result at the end.
//!
//! Each converter only says what it read (a user message, a piece of an assistant
//! message, a call, a result, a note); the builder merges the pieces of one assistant
//! message, keeps notes out of the model's view, and makes the history one that a
//! chat-completions server accepts: each result right after its call, in call order,
//! a call without a result answered "interrupted", a result without a call kept as a
//! note.

use std::collections::VecDeque;

use foldhash::HashMap;

use jiff::Timestamp;
use reprise_session::{
    ANSWERS_ENTRY, Content, ContentPart, Entry, INTERRUPTED, MODEL_FIELD, Message, Role,
    StoredUsage, TokenCounts, ToolCall, interrupted_result,
};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::report::Report;

/// The `kind` of an entry that shows something of the source in the run without
/// sending it to a model.
pub const NOTE_KIND: &str = "note";
/// The `kind` of a compaction marker: the history up to `through` was summarised.
pub const COMPACTION_KIND: &str = "compaction";

#[derive(Default)]
struct OpenAssistant {
    ts: Option<Timestamp>,
    key: Option<String>,
    text: String,
    reasoning: String,
    calls: Vec<ToolCall>,
    /// The source's token counts of the call that produced it (prompt, completion,
    /// and of the prompt, what was read from the cache when the source says).
    usage: Option<(u64, u64, Option<u64>)>,
    /// The model that produced it, when the source says.
    model: Option<String>,
}

impl OpenAssistant {
    fn is_empty(&self) -> bool {
        self.text.is_empty() && self.reasoning.is_empty() && self.calls.is_empty()
    }
}

/// One conversation (the main one or a subagent's) being built.
pub(crate) struct Builder {
    seed: String,
    counter: u64,
    entries: Vec<Entry>,
    open: OpenAssistant,
    deferred: Vec<Entry>,
    held_notes: Vec<Entry>,
    last_ts: Timestamp,
    pub report: Report,
}

/// Arguments a server takes back: a JSON object. Anything else is wrapped as
/// `{"input": …}` so that nothing of it is lost.
pub(crate) fn arguments_object(text: &str) -> String {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(_)) => text.to_owned(),
        Ok(other) if text.trim().is_empty() || other.is_null() => "{}".to_owned(),
        _ => json!({ "input": text }).to_string(),
    }
}

impl Builder {
    /// A builder whose entry uuids derive from `seed` (the tool, the session and the
    /// conversation), so that importing the same file gives the same entries.
    pub fn new(seed: String) -> Self {
        Builder {
            seed,
            counter: 0,
            entries: Vec::new(),
            open: OpenAssistant::default(),
            deferred: Vec::new(),
            held_notes: Vec::new(),
            last_ts: Timestamp::UNIX_EPOCH,
            report: Report::default(),
        }
    }

    fn entry(
        &mut self,
        ts: Option<Timestamp>,
        kind: Option<&str>,
        message: Option<Message>,
    ) -> Entry {
        self.counter += 1;
        let uuid = Uuid::new_v5(
            &Uuid::NAMESPACE_URL,
            format!("reprise-import:{}:{}", self.seed, self.counter).as_bytes(),
        );
        if let Some(ts) = ts {
            self.last_ts = self.last_ts.max(ts);
        }
        Entry {
            uuid,
            ts: ts.unwrap_or(self.last_ts),
            kind: kind.map(str::to_owned),
            message,
            usage: None,
            extra: Default::default(),
        }
    }

    /// Closes the assistant message being built when its key (the source's message
    /// id) differs from `key`.
    pub fn assistant_key(&mut self, key: Option<&str>) {
        if self.open.key.as_deref() != key && !self.open.is_empty() {
            self.flush();
        }
        self.open.key = key.map(str::to_owned);
    }

    /// Whether the assistant message being built already has text or calls.
    pub fn assistant_has_output(&self) -> bool {
        !self.open.text.is_empty() || !self.open.calls.is_empty()
    }

    fn touch(&mut self, ts: Option<Timestamp>) {
        if self.open.ts.is_none() {
            self.open.ts = ts;
        }
    }

    /// Text of the assistant message being built.
    pub fn assistant_text(&mut self, ts: Option<Timestamp>, text: &str) {
        self.touch(ts);
        if !self.open.text.is_empty() && !text.is_empty() {
            self.open.text.push_str("\n\n");
        }
        self.open.text.push_str(text);
    }

    /// Reasoning of the assistant message being built (`reasoning_content`).
    pub fn assistant_reasoning(&mut self, ts: Option<Timestamp>, text: &str) {
        self.touch(ts);
        if !self.open.reasoning.is_empty() && !text.is_empty() {
            self.open.reasoning.push_str("\n\n");
        }
        self.open.reasoning.push_str(text);
    }

    /// The token counts of the model call behind the assistant message being built
    /// (the latest given wins: a source may repeat them on each of a message's lines,
    /// completed as it streamed).
    pub fn assistant_usage(
        &mut self,
        prompt_tokens: u64,
        completion_tokens: u64,
        cached_tokens: Option<u64>,
    ) {
        self.open.usage = Some((prompt_tokens, completion_tokens, cached_tokens));
    }

    /// The model that produced the assistant message being built.
    pub fn assistant_model(&mut self, model: &str) {
        if !model.is_empty() {
            self.open.model = Some(model.to_owned());
        }
    }

    /// A call of the assistant message being built; `arguments` is made a JSON
    /// object if it is not one.
    pub fn tool_call(&mut self, ts: Option<Timestamp>, id: &str, name: &str, arguments: &str) {
        self.touch(ts);
        let id = if id.is_empty() {
            format!("call_import_{}", self.open.calls.len() + 1)
        } else {
            id.to_owned()
        };
        self.open
            .calls
            .push(ToolCall::function(id, name, arguments_object(arguments)));
    }

    /// Writes the assistant message being built, then the results and notes that
    /// waited for it.
    pub fn flush(&mut self) {
        let open = std::mem::take(&mut self.open);
        if !open.is_empty() {
            let content = if open.text.is_empty() && !open.calls.is_empty() {
                None
            } else {
                Some(Content::Text(open.text))
            };
            let mut message = Message {
                role: Role::Assistant,
                content,
                tool_calls: None,
                tool_call_id: None,
                extra: Default::default(),
            };
            if !open.calls.is_empty() {
                message.tool_calls = Some(open.calls);
            }
            if !open.reasoning.is_empty() {
                message.extra.insert(
                    "reasoning_content".to_owned(),
                    Value::String(open.reasoning),
                );
            }
            let mut entry = self.entry(open.ts, None, Some(message));
            if let Some((prompt, completion, cached)) = open.usage {
                let counts = TokenCounts {
                    prompt_tokens: prompt,
                    completion_tokens: completion,
                    total_tokens: prompt.saturating_add(completion),
                };
                // Stored as a server sends it, so that the usage ledger reads it alike.
                entry.usage = Some(StoredUsage::with_cached(counts, cached));
                if let Some(model) = open.model {
                    entry
                        .extra
                        .insert(MODEL_FIELD.to_owned(), Value::String(model));
                }
            }
            self.entries.push(entry);
        }
        self.entries.append(&mut self.deferred);
        self.entries.append(&mut self.held_notes);
    }

    /// A tool result, after the assistant message being built.
    pub fn tool_result(&mut self, ts: Option<Timestamp>, call_id: &str, text: String) {
        self.flush();
        let entry = self.entry(ts, None, Some(Message::tool(call_id, text)));
        self.entries.push(entry);
    }

    /// A tool result that goes after the assistant message being built, which may
    /// still get more calls.
    pub fn deferred_result(&mut self, ts: Option<Timestamp>, call_id: &str, text: String) {
        let entry = self.entry(ts, None, Some(Message::tool(call_id, text)));
        self.deferred.push(entry);
    }

    /// A user message; `meta` marks one the program wrote rather than the person.
    pub fn user(&mut self, ts: Option<Timestamp>, parts: Vec<ContentPart>, meta: bool) {
        self.flush();
        if parts.is_empty() {
            return;
        }
        self.report.images += parts.iter().filter(|p| p.kind == "image_url").count() as u64;
        let content = match parts.as_slice() {
            [only] if only.kind == "text" && only.extra.is_empty() => {
                Content::Text(only.text.clone().unwrap_or_default())
            }
            _ => Content::Parts(parts),
        };
        let message = Message {
            role: Role::User,
            content: Some(content),
            tool_calls: None,
            tool_call_id: None,
            extra: Default::default(),
        };
        let mut entry = self.entry(ts, None, Some(message));
        if meta {
            entry.extra.insert("isMeta".to_owned(), Value::Bool(true));
        }
        self.entries.push(entry);
    }

    /// A note: shown in the run, never sent to a model. `from` says what it was in
    /// the source.
    pub fn note(&mut self, ts: Option<Timestamp>, from: &str, text: String) {
        self.report.note(from);
        let mut entry = self.entry(ts, Some(NOTE_KIND), None);
        entry
            .extra
            .insert("from".to_owned(), Value::String(from.to_owned()));
        entry.extra.insert("text".to_owned(), Value::String(text));
        if self.open.is_empty() && self.deferred.is_empty() {
            self.entries.push(entry);
        } else {
            self.held_notes.push(entry);
        }
    }

    /// A compaction marker: what came before was summarised as `summary`.
    pub fn compaction(
        &mut self,
        ts: Option<Timestamp>,
        summary: String,
        tokens_before: Option<u64>,
    ) {
        self.flush();
        let through = self.entries.last().map(|entry| entry.uuid.to_string());
        let mut entry = self.entry(ts, Some(COMPACTION_KIND), None);
        entry
            .extra
            .insert("summary".to_owned(), Value::String(summary));
        entry.extra.insert("through".to_owned(), json!(through));
        entry
            .extra
            .insert("tokens_before".to_owned(), json!(tokens_before));
        entry.extra.insert("tokens_after".to_owned(), Value::Null);
        self.entries.push(entry);
    }

    /// Removes the last `turns` turns (each starts at a message the person typed),
    /// as the source's rollback did; returns how many entries went.
    pub fn roll_back(&mut self, turns: usize) -> usize {
        self.flush();
        let mut left = turns;
        let mut cut = self.entries.len();
        for (index, entry) in self.entries.iter().enumerate().rev() {
            if left == 0 {
                break;
            }
            let typed = entry.as_message().is_some_and(|m| m.role == Role::User)
                && !entry.extra.contains_key("isMeta");
            if typed {
                left -= 1;
                cut = index;
            }
        }
        let removed = self.entries.len() - cut;
        self.entries.truncate(cut);
        removed
    }

    /// The entries, every call paired with one result, and the report.
    ///
    /// A result is paired with its call by id wherever it stands: a source may write
    /// a result before its call (Claude Code orders lines by their parent, not by
    /// time). A call takes the first free result after it, else the nearest free one
    /// before it.
    pub fn finish(mut self) -> (Vec<Entry>, Report) {
        self.flush();
        let entries = std::mem::take(&mut self.entries);
        let answers = pair_results(&entries);
        let mut taken = vec![false; entries.len()];
        for &result in answers.values().flatten().flatten() {
            taken[result] = true;
        }
        let mut slots: Vec<Option<Entry>> = entries.into_iter().map(Some).collect();
        let mut out = Vec::with_capacity(slots.len());
        for index in 0..slots.len() {
            if taken[index] {
                continue;
            }
            let Some(entry) = slots[index].take() else {
                continue;
            };
            let Some(message) = entry.as_message() else {
                out.push(entry);
                continue;
            };
            match message.role {
                Role::Tool => {
                    let from = "tool results without their call";
                    let text = message.text();
                    self.report.note(from);
                    let mut note = entry;
                    note.kind = Some(NOTE_KIND.to_owned());
                    note.message = None;
                    note.extra
                        .insert("from".to_owned(), Value::String(from.to_owned()));
                    note.extra.insert("text".to_owned(), Value::String(text));
                    out.push(note);
                }
                Role::Assistant if !message.calls().is_empty() => {
                    let calls = message.calls().to_vec();
                    let assistant_uuid = entry.uuid;
                    let ts = entry.ts;
                    self.report.tool_calls += calls.len() as u64;
                    out.push(entry);
                    let found = answers.get(&index);
                    for (n, call) in calls.iter().enumerate() {
                        let result = found
                            .and_then(|list| list.get(n).copied().flatten())
                            .and_then(|j| slots[j].take());
                        match result {
                            Some(result) => out.push(result),
                            None => {
                                self.report.interrupted += 1;
                                let mut result =
                                    self.entry(Some(ts), None, Some(interrupted_result(call)));
                                result
                                    .extra
                                    .insert(INTERRUPTED.to_owned(), Value::Bool(true));
                                result.extra.insert(
                                    ANSWERS_ENTRY.to_owned(),
                                    Value::String(assistant_uuid.to_string()),
                                );
                                out.push(result);
                            }
                        }
                    }
                }
                _ => out.push(entry),
            }
        }
        self.report.messages += out.iter().filter(|e| e.as_message().is_some()).count() as u64;
        (out, self.report)
    }
}

/// For each assistant entry with calls (by index), the index of the result of each
/// call, `None` for a call no result answers. Calls are served in order; each takes
/// the first free result with its id after it, else the last free one before it.
fn pair_results(entries: &[Entry]) -> HashMap<usize, Vec<Option<usize>>> {
    let mut results: HashMap<&str, Vec<usize>> = HashMap::default();
    for (index, entry) in entries.iter().enumerate() {
        if let Some(message) = entry.as_message()
            && message.role == Role::Tool
            && let Some(id) = &message.tool_call_id
        {
            results.entry(id.as_str()).or_default().push(index);
        }
    }
    let mut free: HashMap<&str, VecDeque<usize>> = results
        .into_iter()
        .map(|(id, list)| (id, list.into()))
        .collect();
    let mut answers = HashMap::default();
    for (index, entry) in entries.iter().enumerate() {
        let Some(message) = entry.as_message() else {
            continue;
        };
        if message.role != Role::Assistant || message.calls().is_empty() {
            continue;
        }
        let found = message
            .calls()
            .iter()
            .map(|call| {
                let queue = free.get_mut(call.id.as_str())?;
                // The queue is in file order: the first after `index`, else the last
                // before it.
                let after = queue.partition_point(|&j| j < index);
                if after < queue.len() {
                    queue.remove(after)
                } else {
                    queue.pop_back()
                }
            })
            .collect();
        answers.insert(index, found);
    }
    answers
}

/// A text part.
pub(crate) fn text_part(text: impl Into<String>) -> ContentPart {
    ContentPart {
        kind: "text".to_owned(),
        text: Some(text.into()),
        extra: Default::default(),
    }
}

/// An image part holding the image itself (a `data:` URL), or a URL as given.
pub(crate) fn image_part(url: String) -> ContentPart {
    let mut part = ContentPart {
        kind: "image_url".to_owned(),
        text: None,
        extra: Default::default(),
    };
    part.extra
        .insert("image_url".to_owned(), json!({ "url": url }));
    part
}

/// What stands for an image where only text can go (a tool result): its type and
/// size, so the reader knows what was there.
pub(crate) fn image_description(url: &str) -> String {
    match url
        .strip_prefix("data:")
        .and_then(|rest| rest.split_once(','))
    {
        Some((header, data)) => {
            let media = header.split(';').next().unwrap_or_default();
            let media = if media.is_empty() { "image" } else { media };
            // Base64 holds three bytes in four characters, less its padding.
            let padding = data.bytes().rev().take_while(|&b| b == b'=').count();
            let bytes = (data.len() / 4 * 3).saturating_sub(padding);
            format!("[image not converted: {media}, {bytes} bytes]")
        }
        None if url.is_empty() => "[image not converted]".to_owned(),
        None => format!("[image not converted: {url}]"),
    }
}

/// A timestamp of the source, read leniently (RFC 3339 with any offset).
pub(crate) fn parse_ts(text: Option<&str>) -> Option<Timestamp> {
    text.and_then(|text| text.parse::<Timestamp>().ok())
        .map(|ts| Timestamp::from_millisecond(ts.as_millisecond()).unwrap_or(ts))
}

/// A timestamp given as milliseconds since the epoch.
pub(crate) fn millis_ts(value: &Value) -> Option<Timestamp> {
    value
        .as_i64()
        .and_then(|ms| Timestamp::from_millisecond(ms).ok())
}
