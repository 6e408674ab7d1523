//! Turns streamed chunks into one complete assistant message.

use std::collections::{BTreeMap, HashMap};

use reprise_message::{Content, Message, ToolCall};
use serde_json::Value;

use crate::error::ProviderError;
use crate::provider::{Completion, StreamEvent, Usage};
use crate::wire::ChunkWire;

/// A tool call being assembled from deltas.
#[derive(Clone, Debug, Default)]
struct PartialCall {
    id: String,
    kind: Option<String>,
    name: String,
    arguments: String,
    announced: bool,
}

/// Collects chunks of one streamed response.
///
/// Feed each `data:` payload to [`push_data`](Accumulator::push_data) (or parsed
/// chunks to [`push_chunk`](Accumulator::push_chunk)), then call
/// [`finish`](Accumulator::finish) when the stream ends. Whether the stream was
/// complete is decided there: a `[DONE]` or a `finish_reason` must have been seen.
#[derive(Clone, Debug, Default)]
pub struct Accumulator {
    text: String,
    reasoning: String,
    calls: BTreeMap<usize, PartialCall>,
    /// Wire index -> slot, for servers that reuse an index for a new call.
    aliases: HashMap<usize, usize>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    done: bool,
    chunks: usize,
    /// Whether the response's id and model were told to the current span.
    named: bool,
}

impl Accumulator {
    /// An empty accumulator.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `data: [DONE]` arrived.
    pub fn saw_done(&self) -> bool {
        self.done
    }

    /// Whether a `finish_reason` arrived.
    pub fn saw_finish(&self) -> bool {
        self.finish_reason.is_some()
    }

    /// Whether anything at all arrived.
    pub fn is_empty(&self) -> bool {
        self.chunks == 0 && !self.done
    }

    /// Takes one SSE `data:` payload: a JSON chunk or `[DONE]`. Returns the events
    /// it produced. A payload that is not valid JSON is [`ProviderError::Malformed`];
    /// an `error` object sent in the stream is [`ProviderError::StreamCut`] (the
    /// server gave up mid-way, so the call may be retried).
    pub fn push_data(&mut self, data: &str) -> Result<Vec<StreamEvent>, ProviderError> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(Vec::new());
        }
        if data == "[DONE]" {
            self.done = true;
            return Ok(Vec::new());
        }
        let chunk: ChunkWire = serde_json::from_str(data).map_err(|error| {
            let shown: String = data.chars().take(200).collect();
            ProviderError::malformed(format!("chunk is not valid JSON: {shown}"), error)
        })?;
        self.push_chunk(chunk)
    }

    /// Takes one parsed chunk and returns the events it produced.
    pub fn push_chunk(&mut self, chunk: ChunkWire) -> Result<Vec<StreamEvent>, ProviderError> {
        if let Some(error) = chunk.error {
            let message = error.message.unwrap_or_else(|| "(no message)".to_owned());
            return Err(ProviderError::cut(format!(
                "the server reported an error mid-stream: {message}"
            )));
        }
        self.chunks += 1;
        if !self.named && (chunk.id.is_some() || chunk.model.is_some()) {
            self.named = true;
            crate::trace_context::record_response(chunk.id.as_deref(), chunk.model.as_deref());
        }
        let mut events = Vec::new();
        if let Some(usage) = chunk.usage {
            // vLLM repeats cumulative usage on every chunk: the last one wins.
            self.usage = Some(usage.into());
        }
        for choice in chunk.choices {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.delta {
                if let Some(reasoning) = delta.reasoning_content.filter(|r| !r.is_empty()) {
                    self.reasoning.push_str(&reasoning);
                    events.push(StreamEvent::ReasoningDelta(reasoning));
                }
                if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                    self.text.push_str(&text);
                    events.push(StreamEvent::TextDelta(text));
                }
                for call in delta.tool_calls.unwrap_or_default() {
                    self.push_call(call, &mut events);
                }
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.finish_reason = Some(reason);
            }
        }
        Ok(events)
    }

    /// Where a tool-call delta goes. Usually its `index`; but servers without `index`
    /// send one call per delta, and some put every parallel call at index 0: in both
    /// cases a new id starts a new call, and later id-less deltas with that wire
    /// index follow it.
    fn slot_for(&mut self, wire_index: Option<usize>, id: Option<&str>) -> usize {
        let next_free = self.calls.last_key_value().map_or(0, |(last, _)| last + 1);
        let Some(wire_index) = wire_index else {
            return match (id, self.calls.last_key_value()) {
                (Some(id), Some((_, partial))) if partial.id != id => next_free,
                (_, Some((last, _))) => *last,
                (_, None) => 0,
            };
        };
        let current = self.aliases.get(&wire_index).copied().unwrap_or(wire_index);
        match (id, self.calls.get(&current)) {
            (Some(id), Some(partial)) if !partial.id.is_empty() && partial.id != id => {
                self.aliases.insert(wire_index, next_free);
                next_free
            }
            _ => current,
        }
    }

    fn push_call(&mut self, call: crate::wire::ToolCallDeltaWire, events: &mut Vec<StreamEvent>) {
        let id = call.id.filter(|id| !id.is_empty());
        let index = self.slot_for(call.index, id.as_deref());
        let partial = self.calls.entry(index).or_default();
        if let Some(id) = id
            && partial.id.is_empty()
        {
            partial.id = id;
        }
        if let Some(kind) = call.kind.filter(|k| !k.is_empty()) {
            partial.kind = Some(kind);
        }
        if let Some(function) = call.function {
            if let Some(name) = function.name.filter(|n| !n.is_empty())
                && partial.name.is_empty()
            {
                partial.name = name;
            }
            if let Some(arguments) = function.arguments {
                partial.arguments.push_str(&arguments);
            }
        }
        if !partial.announced && !partial.id.is_empty() && !partial.name.is_empty() {
            partial.announced = true;
            events.push(StreamEvent::ToolCallStarted {
                index,
                id: partial.id.clone(),
                name: partial.name.clone(),
            });
        }
    }

    /// Ends the stream. The response counts as complete when
    /// `[DONE]` or a `finish_reason` arrived; otherwise it is
    /// [`ProviderError::StreamCut`] and no message is returned.
    ///
    /// Returns the completion and the final events (tool calls never announced
    /// because their id was missing, the usage).
    pub fn finish(self) -> Result<(Completion, Vec<StreamEvent>), ProviderError> {
        if !self.done && self.finish_reason.is_none() {
            return Err(ProviderError::cut(if self.is_empty() {
                "the stream ended before any chunk arrived".to_owned()
            } else {
                format!(
                    "the stream ended after {} chunks without a finish_reason or [DONE]",
                    self.chunks
                )
            }));
        }
        let mut events = Vec::new();
        let mut calls = Vec::with_capacity(self.calls.len());
        for (index, partial) in self.calls {
            let id = if partial.id.is_empty() {
                // A result must name its call; invent an id the server never sent.
                format!("call_{index}_{:016x}", rand::random::<u64>())
            } else {
                partial.id
            };
            if !partial.announced {
                events.push(StreamEvent::ToolCallStarted {
                    index,
                    id: id.clone(),
                    name: partial.name.clone(),
                });
            }
            let mut call = ToolCall::function(id, partial.name, partial.arguments);
            if let Some(kind) = partial.kind {
                call.kind = kind;
            }
            calls.push(call);
        }
        let text = (!self.text.is_empty()).then_some(self.text);
        let mut message = if calls.is_empty() {
            Message::assistant(text.unwrap_or_default())
        } else {
            Message::assistant_tool_calls(text, calls)
        };
        if !self.reasoning.is_empty() {
            message.extra.insert(
                "reasoning_content".to_owned(),
                Value::String(self.reasoning),
            );
        }
        if let Some(usage) = self.usage {
            events.push(StreamEvent::Usage(usage));
        }
        Ok((
            Completion {
                message,
                finish_reason: self.finish_reason,
                usage: self.usage,
            },
            events,
        ))
    }
}

/// Normalizes a non-streaming message the same way a streamed one is built: empty
/// content beside tool calls becomes `None`.
pub(crate) fn normalize_message(mut message: Message) -> Message {
    let has_calls = !message.calls().is_empty();
    if message.tool_calls.as_ref().is_some_and(Vec::is_empty) {
        message.tool_calls = None;
    }
    if has_calls && matches!(&message.content, Some(Content::Text(text)) if text.is_empty()) {
        message.content = None;
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a stream of the `data` lines given, in order, assembles to.
    fn finished(data: &[&str]) -> (Completion, Vec<StreamEvent>) {
        let mut acc = Accumulator::new();
        for data in data {
            acc.push_data(data).unwrap();
        }
        acc.finish().unwrap()
    }

    #[test]
    fn stream_without_finish_or_done_is_cut() {
        let mut acc = Accumulator::new();
        acc.push_data(r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#)
            .unwrap();
        assert!(matches!(acc.finish(), Err(ProviderError::StreamCut { .. })));
    }

    #[test]
    fn missing_index_and_id_still_assemble_calls() {
        let mut acc = Accumulator::new();
        acc.push_data(r#"{"choices":[{"delta":{"tool_calls":[{"function":{"name":"a","arguments":"{}"}}]}}]}"#).unwrap();
        acc.push_data(r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#)
            .unwrap();
        let (completion, events) = acc.finish().unwrap();
        let calls = completion.message.calls();
        assert_eq!(calls.len(), 1);
        assert!(calls[0].id.starts_with("call_0_"));
        assert_eq!(calls[0].function.name, "a");
        assert!(matches!(&events[0], StreamEvent::ToolCallStarted { name, .. } if name == "a"));
        assert_eq!(completion.message.content, None);
    }

    #[test]
    fn calls_sharing_index_zero_with_different_ids_stay_apart() {
        let (completion, _) = finished(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{\"x\""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"g","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"b","function":{"arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        ]);
        let calls: Vec<_> = completion
            .message
            .calls()
            .iter()
            .map(|c| {
                (
                    c.id.as_str(),
                    c.function.name.as_str(),
                    c.function.arguments.as_str(),
                )
            })
            .collect();
        assert_eq!(calls, vec![("a", "f", r#"{"x":1}"#), ("b", "g", "{}")]);
    }

    #[test]
    fn calls_without_index_are_told_apart_by_id() {
        let (completion, _) = finished(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"g","arguments":"{"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"}"}}]}}]}"#,
            "[DONE]",
        ]);
        let calls: Vec<_> = completion
            .message
            .calls()
            .iter()
            .map(|c| (c.id.as_str(), c.function.arguments.as_str()))
            .collect();
        assert_eq!(calls, vec![("a", "{}"), ("b", "{}")]);
    }

    #[test]
    fn mid_stream_error_object_is_a_cut() {
        let mut acc = Accumulator::new();
        let error = acc
            .push_data(r#"{"error":{"message":"overloaded"}}"#)
            .unwrap_err();
        assert!(error.to_string().contains("overloaded"), "{error}");
    }

    #[test]
    fn text_only_reply_keeps_text_and_no_tool_calls() {
        let mut acc = Accumulator::new();
        acc.push_data(r#"{"choices":[{"delta":{"role":"assistant","content":"Hi"}}]}"#)
            .unwrap();
        acc.push_data("[DONE]").unwrap();
        let (completion, _) = acc.finish().unwrap();
        assert_eq!(completion.message, Message::assistant("Hi"));
        assert_eq!(completion.finish_reason, None);
    }
}
