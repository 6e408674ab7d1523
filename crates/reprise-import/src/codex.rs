//! Codex rollouts: `~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`, one
//! `{timestamp, type, payload}` envelope per line.
//!
//! The conversation is in the `response_item` lines (what was sent to and received
//! from the model); `event_msg` lines repeat it for the UI and are counted, not
//! converted, except the two that change the conversation (a rollback and a rename)
//! and `token_count`, whose counts of the model call just made go on its reply.

use std::path::Path;

use jiff::Timestamp;
use reprise_session::ContentPart;
use serde::Deserialize;
use serde_json::Value;

use crate::builder::{Builder, image_description, image_part, parse_ts, text_part};
use crate::error::ImportError;
use crate::report::Report;
use crate::{Converted, SourceTool, split_lines};

#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    payload: Value,
}

/// A JSON object whose contents are not kept: a long line is checked without
/// building it.
struct AnObject;

impl<'de> Deserialize<'de> for AnObject {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Skip;
        impl<'de> serde::de::Visitor<'de> for Skip {
            type Value = AnObject;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<AnObject, A::Error> {
                use serde::de::IgnoredAny;
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(AnObject)
            }
        }
        deserializer.deserialize_map(Skip)
    }
}

/// What the sniffer reads of a line.
#[derive(Deserialize)]
struct Probe {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    payload: Option<AnObject>,
}

/// Whether the first lines of a file look like a Codex rollout.
pub(crate) fn sniff(head: &[u8]) -> bool {
    split_lines(head).take(20).any(|line| {
        serde_json::from_slice::<Probe>(line).is_ok_and(|probe| {
            matches!(
                probe.kind.as_str(),
                "session_meta" | "response_item" | "turn_context"
            ) && probe.payload.is_some()
        })
    })
}

/// Text shown by Codex to the model that the person did not type.
fn is_program_text(text: &str) -> bool {
    let text = text.trim_start();
    text.starts_with("<environment_context>")
        || text.starts_with("<user_instructions>")
        || text.starts_with("# AGENTS.md instructions")
        || text.starts_with("<user_shell_command>")
        || text.starts_with("<turn_aborted>")
}

/// The text of a call's output. Its parts are joined as the model read them, one
/// after the other (a line break only between parts that do not end in one); an
/// image, which a tool result cannot hold, is described in its place and counted.
fn output_text(output: &Value, report: &mut Report) -> String {
    match output {
        Value::String(text) => text.clone(),
        Value::Array(items) => {
            let mut text = String::new();
            for item in items {
                let part = match item["type"].as_str() {
                    Some("input_image" | "output_image" | "image") => {
                        report.skip("images in tool results (described in their text)", 1);
                        image_description(item["image_url"].as_str().unwrap_or_default())
                    }
                    _ => match item["text"].as_str() {
                        Some(part) => part.to_owned(),
                        None => continue,
                    },
                };
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(&part);
            }
            text
        }
        Value::Object(object) => match object.get("content") {
            Some(content) => output_text(content, report),
            None => output.to_string(),
        },
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn message(payload: &Value, ts: Option<Timestamp>, builder: &mut Builder) {
    let role = payload["role"].as_str().unwrap_or_default();
    let items = payload["content"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    match role {
        "assistant" => {
            for item in items {
                match item["type"].as_str() {
                    Some("output_text" | "input_text" | "text") => {
                        builder.assistant_text(ts, item["text"].as_str().unwrap_or_default());
                    }
                    Some(other) => builder
                        .report
                        .skip(format!("{other} items in assistant messages"), 1),
                    None => {}
                }
            }
        }
        "user" => {
            let mut parts: Vec<ContentPart> = Vec::new();
            let mut program = true;
            for item in items {
                match item["type"].as_str() {
                    Some("input_text" | "output_text" | "text") => {
                        let text = item["text"].as_str().unwrap_or_default();
                        program &= is_program_text(text);
                        parts.push(text_part(text));
                    }
                    Some("input_image") => match item["image_url"].as_str() {
                        Some(url) => {
                            program = false;
                            parts.push(image_part(url.to_owned()));
                        }
                        None => builder.report.skip("images without data", 1),
                    },
                    Some(other) => builder
                        .report
                        .skip(format!("{other} items in user messages"), 1),
                    None => {}
                }
            }
            builder.user(ts, parts, program);
        }
        other => {
            // Developer and system instructions belong to Codex, not to the next model.
            let text = items
                .iter()
                .filter_map(|item| item["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n");
            builder.note(ts, &format!("{other} messages"), text);
        }
    }
}

fn response_item(payload: &Value, ts: Option<Timestamp>, builder: &mut Builder) {
    let kind = payload["type"].as_str().unwrap_or_default();
    match kind {
        "message" => {
            if payload["role"] == "assistant" && !builder.assistant_has_output() {
                // Joins the reasoning and calls before it.
            } else if payload["role"] == "assistant" {
                builder.flush();
            }
            message(payload, ts, builder);
        }
        "reasoning" => {
            if builder.assistant_has_output() {
                builder.flush();
            }
            let mut texts: Vec<&str> = Vec::new();
            for list in [&payload["summary"], &payload["content"]] {
                if let Some(items) = list.as_array() {
                    texts.extend(items.iter().filter_map(|item| item["text"].as_str()));
                }
            }
            if texts.is_empty() && payload.get("encrypted_content").is_some() {
                builder
                    .report
                    .skip("reasoning readable only by OpenAI (encrypted)", 1);
            } else {
                if payload["encrypted_content"].is_string() {
                    builder
                        .report
                        .skip("encrypted reasoning beside its summary", 1);
                }
                builder.assistant_reasoning(ts, &texts.join("\n\n"));
            }
        }
        "function_call" => builder.tool_call(
            ts,
            payload["call_id"].as_str().unwrap_or_default(),
            payload["name"].as_str().unwrap_or_default(),
            payload["arguments"].as_str().unwrap_or("{}"),
        ),
        "custom_tool_call" => {
            let input = payload["input"].as_str().unwrap_or_default();
            builder.tool_call(
                ts,
                payload["call_id"].as_str().unwrap_or_default(),
                payload["name"].as_str().unwrap_or_default(),
                &serde_json::json!({ "input": input }).to_string(),
            );
        }
        "local_shell_call" => builder.tool_call(
            ts,
            payload["call_id"].as_str().unwrap_or_default(),
            "local_shell",
            &payload["action"].to_string(),
        ),
        "function_call_output" | "custom_tool_call_output" | "local_shell_call_output" => {
            let text = output_text(&payload["output"], &mut builder.report);
            builder.tool_result(ts, payload["call_id"].as_str().unwrap_or_default(), text);
        }
        "web_search_call" => {
            let query = payload["action"]["query"].as_str().unwrap_or_default();
            builder.note(
                ts,
                "web searches run by OpenAI",
                format!("web search: {query}"),
            );
        }
        other => builder.report.skip(format!("response_item {other}"), 1),
    }
}

/// Converts a Codex rollout.
pub(crate) fn convert(path: &Path, bytes: &[u8]) -> Result<Converted, ImportError> {
    let mut report = Report::default();
    let mut envelopes = Vec::new();
    for line in split_lines(bytes) {
        match serde_json::from_slice::<Envelope>(line) {
            Ok(envelope) => envelopes.push(envelope),
            Err(_) => report.skip("lines that are not JSON records", 1),
        }
    }
    let meta = envelopes.iter().find(|e| e.kind == "session_meta");
    let session_id = meta
        .and_then(|meta| meta.payload["id"].as_str())
        .map(str::to_owned)
        .or_else(|| path.file_stem().and_then(|s| s.to_str()).map(str::to_owned))
        .unwrap_or_else(|| "rollout".to_owned());
    let started = meta
        .and_then(|meta| parse_ts(meta.payload["timestamp"].as_str()))
        .or_else(|| {
            envelopes
                .iter()
                .find_map(|e| parse_ts(e.timestamp.as_deref()))
        });
    let mut builder = Builder::new(format!("codex:{session_id}:main"));
    builder.report = report;
    let mut title = None;
    let mut model: Option<String> = None;
    // `token_count` is repeated (with the same totals) at each turn's start: a call
    // is counted when the running total changes.
    let mut counted_total: Option<u64> = None;
    for envelope in &envelopes {
        let ts = parse_ts(envelope.timestamp.as_deref());
        let payload = &envelope.payload;
        let event = if envelope.kind == "event_msg" {
            payload["type"].as_str().unwrap_or_default()
        } else {
            envelope.kind.as_str()
        };
        match (envelope.kind.as_str(), event) {
            (_, "thread_rolled_back") => {
                let turns = payload["num_turns"].as_u64().unwrap_or(1) as usize;
                let removed = builder.roll_back(turns);
                builder
                    .report
                    .skip("entries undone by a rollback", removed as u64);
                let text = format!(
                    "Codex rolled back the last {turns} turn(s) here; the {removed} entries \
                     they held were left out."
                );
                builder.report.remarks.push(text.clone());
                builder.note(ts, "rollbacks", text);
            }
            (_, "thread_name_updated") => {
                if let Some(name) = payload["thread_name"].as_str().or(payload["name"].as_str()) {
                    title = Some(name.to_owned());
                }
            }
            ("event_msg", "token_count") => {
                let info = &payload["info"];
                let total = info["total_token_usage"]["total_tokens"].as_u64();
                let last = &info["last_token_usage"];
                match (total, last["input_tokens"].as_u64()) {
                    (Some(total), Some(input)) if counted_total != Some(total) => {
                        counted_total = Some(total);
                        // Codex writes the counts of a call before the items of its
                        // reply: they go on the reply being built, or the next one.
                        builder.assistant_usage(
                            input,
                            last["output_tokens"].as_u64().unwrap_or(0),
                            last["cached_input_tokens"].as_u64(),
                        );
                        if let Some(model) = &model {
                            builder.assistant_model(model);
                        }
                    }
                    _ => builder
                        .report
                        .skip("event_msg token_count repeated or empty (UI events)", 1),
                }
            }
            ("turn_context", _) => {
                if let Some(name) = payload["model"].as_str() {
                    model = Some(name.to_owned());
                }
                builder
                    .report
                    .skip("turn_context lines (settings per turn)", 1);
            }
            ("session_meta", _) => {}
            ("response_item", _) => response_item(payload, ts, &mut builder),
            ("compacted", _) => {
                let summary = payload["message"].as_str().unwrap_or_default().to_owned();
                builder.compaction(ts, summary, None);
            }
            ("event_msg", event) => builder
                .report
                .skip(format!("event_msg {event} (UI events)"), 1),
            (other, _) => builder
                .report
                .skip(format!("lines of unknown type {other}"), 1),
        }
    }
    let converted = Converted::single(SourceTool::Codex, session_id, started, title, builder);
    Ok(converted)
}
