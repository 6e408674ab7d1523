//! opencode sessions as `opencode export <session>` writes them:
//! `{"info": Session, "messages": [{"info": Message, "parts": [Part]}]}`.
//!
//! An assistant message holds several steps (`step-start` … `step-finish`), each
//! one model call: text, reasoning and tool parts, a tool part holding both the call
//! and its state (its output, its error, or still pending).

use std::path::Path;

use reprise_session::ContentPart;
use serde::Deserialize;
use serde_json::Value;

use crate::builder::{Builder, image_part, millis_ts, text_part};
use crate::error::ImportError;
use crate::{Converted, SourceTool};

#[derive(Deserialize)]
struct Export {
    info: Value,
    messages: Vec<ExportMessage>,
}

#[derive(Deserialize)]
struct ExportMessage {
    info: Value,
    #[serde(default)]
    parts: Vec<Value>,
}

/// Whether a file's start looks like an `opencode export` document.
pub(crate) fn sniff(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    let text = text.trim_start();
    text.starts_with('{')
        && text.contains("\"info\"")
        && text.contains("\"messages\"")
        && (text.contains("\"ses_") || text.contains("\"projectID\""))
}

fn user(message: &ExportMessage, builder: &mut Builder) {
    let ts = millis_ts(&message.info["time"]["created"]);
    let mut parts: Vec<ContentPart> = Vec::new();
    let mut synthetic_only = true;
    for part in &message.parts {
        match part["type"].as_str().unwrap_or_default() {
            "text" => {
                if part["ignored"] == true {
                    builder.report.skip("text parts opencode marked ignored", 1);
                    continue;
                }
                synthetic_only &= part["synthetic"] == true;
                parts.push(text_part(part["text"].as_str().unwrap_or_default()));
            }
            "file" => {
                let url = part["url"].as_str().unwrap_or_default();
                let mime = part["mime"].as_str().unwrap_or_default();
                if mime.starts_with("image/") && url.starts_with("data:") {
                    synthetic_only = false;
                    parts.push(image_part(url.to_owned()));
                } else {
                    // Text files arrive as synthetic text parts beside this one.
                    let name = part["filename"].as_str().unwrap_or(url);
                    builder.note(ts, "file references", format!("file: {name} ({mime})"));
                }
            }
            "compaction" => {
                builder.note(ts, "compaction requests", "compaction requested".to_owned())
            }
            "agent" | "subtask" => {
                let what = part["type"].as_str().unwrap_or_default();
                builder.note(ts, &format!("{what} parts"), part.to_string());
            }
            other => builder
                .report
                .skip(format!("{other} parts in user messages"), 1),
        }
    }
    builder.user(ts, parts, synthetic_only);
}

fn assistant(message: &ExportMessage, builder: &mut Builder) {
    let ts = millis_ts(&message.info["time"]["created"]);
    builder.assistant_key(message.info["id"].as_str());
    for part in &message.parts {
        let part_ts = millis_ts(&part["time"]["start"]).or(ts);
        match part["type"].as_str().unwrap_or_default() {
            "step-start" => {
                // A new model call: the previous one's message and results end here.
                builder.flush();
            }
            "text" => builder.assistant_text(part_ts, part["text"].as_str().unwrap_or_default()),
            "reasoning" => {
                builder.assistant_reasoning(part_ts, part["text"].as_str().unwrap_or_default())
            }
            "tool" => {
                let state = &part["state"];
                let id = part["callID"].as_str().unwrap_or_default();
                let input = &state["input"];
                let arguments = if input.is_object() {
                    input.to_string()
                } else {
                    "{}".to_owned()
                };
                builder.tool_call(
                    part_ts,
                    id,
                    part["tool"].as_str().unwrap_or_default(),
                    &arguments,
                );
                let end = millis_ts(&state["time"]["end"]).or(part_ts);
                match state["status"].as_str() {
                    Some("completed") => {
                        builder.deferred_result(
                            end,
                            id,
                            state["output"].as_str().unwrap_or_default().to_owned(),
                        );
                    }
                    Some("error") => builder.deferred_result(
                        end,
                        id,
                        format!("Error: {}", state["error"].as_str().unwrap_or_default()),
                    ),
                    // Pending or running: answered "interrupted" when paired.
                    _ => {}
                }
            }
            "step-finish" | "snapshot" | "patch" => {
                let what = part["type"].as_str().unwrap_or_default();
                builder
                    .report
                    .skip(format!("{what} parts (opencode state)"), 1);
            }
            other => builder
                .report
                .skip(format!("{other} parts in assistant messages"), 1),
        }
    }
    if let Some(error) = message.info.get("error").filter(|e| !e.is_null()) {
        builder.flush();
        builder.note(ts, "assistant errors", error.to_string());
    }
}

/// Converts an `opencode export` document.
pub(crate) fn convert(path: &Path, bytes: &[u8]) -> Result<Converted, ImportError> {
    let export: Export = serde_json::from_slice(bytes).map_err(|error| ImportError::Malformed {
        path: path.to_path_buf(),
        message: format!("not an opencode export document: {error}"),
    })?;
    let session_id = export.info["id"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| "opencode".to_owned());
    let started = millis_ts(&export.info["time"]["created"]);
    let title = export.info["title"].as_str().map(str::to_owned);
    let mut builder = Builder::new(format!("opencode:{session_id}:main"));
    for message in &export.messages {
        match message.info["role"].as_str() {
            Some("user") => user(message, &mut builder),
            Some("assistant") => assistant(message, &mut builder),
            other => builder
                .report
                .skip(format!("messages of role {}", other.unwrap_or("none")), 1),
        }
    }
    let converted = Converted::single(SourceTool::Opencode, session_id, started, title, builder);
    Ok(converted)
}
