//! `transcript.jsonl`: a run's tool calls and results, secrets redacted.
//!
//! ```json
//! {"ts":"…","agent":"main","type":"tool_call","id":"call_1","name":"bash","arguments":{"cmd":"ls"}}
//! {"ts":"…","agent":"main","type":"tool_result","id":"call_1","name":"bash","content":"…","is_error":false}
//! ```
//!
//! Every string in a record (keys too, and every string nested inside the arguments)
//! passes [`Redactor::redact`] before anything reaches the file. Arguments that are
//! valid JSON are written as JSON, so that each string inside is redacted after JSON
//! unescaping (a secret written as `\u0073k-…` is still found); other arguments are
//! written as one redacted string. Arguments or results over 1 MiB give the same
//! line without being copied or parsed whole (see `long_record`).

use std::fs::File;
use std::path::{Path, PathBuf};

use reprise_redact::Redactor;
use serde_json::{Map, Value};

use crate::error::RunError;
use crate::fs::{append_json_line, append_line_with, open_private_append};
use crate::long_record::{Body, LONG, write_record};
use crate::value_redaction::redact_value;
use reprise_session::{Arguments, now_millis};

/// The transcript's file name inside a run folder.
pub const TRANSCRIPT_JSONL: &str = "transcript.jsonl";

/// What a record is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TranscriptEvent {
    /// The model asked for a tool call.
    ToolCall {
        /// The arguments as the model sent them (a JSON text).
        arguments: Arguments,
    },
    /// A tool returned (or failed, or was refused).
    ToolResult {
        /// What it returned.
        content: String,
        /// Whether the result is an error.
        is_error: bool,
    },
}

/// One line of `transcript.jsonl`.
#[derive(Clone, Debug, PartialEq)]
pub struct TranscriptRecord {
    /// Which agent made the call: `main`, or a subagent's name.
    pub agent: String,
    /// The tool call's id.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The call or the result.
    pub event: TranscriptEvent,
    /// What a gate decided about the call (`allow`, `deny`, `ask`, …), when one did.
    pub decision: Option<String>,
    /// Any other fields, written after the ones above (redacted like them).
    pub extra: Map<String, Value>,
}

impl TranscriptRecord {
    /// A tool call.
    pub fn tool_call(
        agent: impl Into<String>,
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<Arguments>,
    ) -> Self {
        Self::with_event(
            agent.into(),
            id.into(),
            name.into(),
            TranscriptEvent::ToolCall {
                arguments: arguments.into(),
            },
        )
    }

    /// A tool result.
    pub fn tool_result(
        agent: impl Into<String>,
        id: impl Into<String>,
        name: impl Into<String>,
        content: impl Into<String>,
        is_error: bool,
    ) -> Self {
        Self::with_event(
            agent.into(),
            id.into(),
            name.into(),
            TranscriptEvent::ToolResult {
                content: content.into(),
                is_error,
            },
        )
    }

    fn with_event(agent: String, id: String, name: String, event: TranscriptEvent) -> Self {
        TranscriptRecord {
            agent,
            id,
            name,
            event,
            decision: None,
            extra: Default::default(),
        }
    }

    /// The record with a gate's decision.
    pub fn with_decision(mut self, decision: impl Into<String>) -> Self {
        self.decision = Some(decision.into());
        self
    }

    /// The record with one more field. The standard fields cannot be replaced.
    pub fn with_field(mut self, key: impl Into<String>, value: Value) -> Self {
        self.extra.insert(key.into(), value);
        self
    }

    /// The arguments or result, when too long for [`to_json`](Self::to_json) to copy:
    /// the key they go under, and how they are walked.
    fn long_body(&self) -> Option<(&'static str, Body<'_>)> {
        match &self.event {
            TranscriptEvent::ToolCall { arguments } if arguments.len() > LONG => {
                Some(("arguments", Body::of_arguments(arguments)))
            }
            TranscriptEvent::ToolResult { content, .. } if content.len() > LONG => {
                Some(("content", Body::Text(content)))
            }
            _ => None,
        }
    }

    /// The JSON object written for this record at time `ts`, before redaction; with
    /// `body` false, `null` stands in the place of the arguments or result.
    fn to_json(&self, ts: &str, body: bool) -> Map<String, Value> {
        let mut object = Map::new();
        object.insert("ts".into(), Value::String(ts.to_owned()));
        object.insert("agent".into(), Value::String(self.agent.clone()));
        let kind = match self.event {
            TranscriptEvent::ToolCall { .. } => "tool_call",
            TranscriptEvent::ToolResult { .. } => "tool_result",
        };
        object.insert("type".into(), Value::String(kind.to_owned()));
        object.insert("id".into(), Value::String(self.id.clone()));
        object.insert("name".into(), Value::String(self.name.clone()));
        match &self.event {
            TranscriptEvent::ToolCall { .. } if !body => {
                object.insert("arguments".into(), Value::Null);
            }
            TranscriptEvent::ToolCall { arguments } => {
                let value = serde_json::from_str::<Value>(arguments)
                    .unwrap_or_else(|_| Value::String(arguments.to_string()));
                object.insert("arguments".into(), value);
            }
            TranscriptEvent::ToolResult { content, is_error } => {
                let content = if body {
                    Value::String(content.clone())
                } else {
                    Value::Null
                };
                object.insert("content".into(), content);
                object.insert("is_error".into(), Value::Bool(*is_error));
            }
        }
        if let Some(decision) = &self.decision {
            object.insert("decision".into(), Value::String(decision.clone()));
        }
        for (key, value) in &self.extra {
            if !object.contains_key(key) {
                object.insert(key.clone(), value.clone());
            }
        }
        object
    }
}

/// Appends records to a run's `transcript.jsonl` (0600), one durable write each.
/// Shareable between tasks: every record is a single append.
///
/// The file is created with the first record: a run with no conversation yet holds
/// only `session.log` (SPEC).
#[derive(Debug)]
pub struct Transcript {
    file: std::sync::Mutex<Option<File>>,
    path: PathBuf,
    redactor: Redactor,
}

impl Transcript {
    /// A transcript appending to `run_dir/transcript.jsonl`, created (0600) with the
    /// first record. A transcript that is a symbolic link is refused here, as
    /// `session.log` is, rather than found unwritable at the first tool call.
    pub fn open(run_dir: &Path, redactor: Redactor) -> Result<Transcript, RunError> {
        let path = run_dir.join(TRANSCRIPT_JSONL);
        if crate::fs::is_link(&path) {
            return Err(reprise_session::fs::link_refused(&path).into());
        }
        Ok(Transcript {
            file: std::sync::Mutex::new(None),
            path,
            redactor,
        })
    }

    /// The transcript's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Redacts a record and appends it as one line.
    pub fn record(&self, record: &TranscriptRecord) -> Result<(), RunError> {
        let ts = format!("{:.3}", now_millis());
        let long_body = record.long_body();
        let mut object = redact_value(
            &self.redactor,
            Value::Object(record.to_json(&ts, long_body.is_none())),
        );
        keep_ids(&mut object, record);
        let mut file = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let file = match file.take() {
            Some(open) => file.insert(open),
            None => file.insert(open_private_append(
                crate::fs::run_file_root(&self.path),
                &self.path,
            )?),
        };
        match (long_body, &object) {
            (Some((key, body)), Value::Object(fields)) => {
                append_line_with(file, &self.path, true, |out| {
                    write_record(out, fields, key, &body, &self.redactor)
                })?;
            }
            _ => append_json_line(file, &self.path, &object, true)?,
        }
        Ok(())
    }
}

/// Puts the call id back as it was: ids are the server's (llama.cpp's are 32
/// random letters and digits, which look like a secret to the redactor), and a
/// transcript whose ids are masked can no longer match results to calls.
fn keep_ids(object: &mut Value, record: &TranscriptRecord) {
    let Value::Object(fields) = object else {
        return;
    };
    fields.insert("id".to_owned(), Value::String(record.id.clone()));
    if let Some(id @ Value::String(_)) = record.extra.get("tool_call_id") {
        fields.insert("tool_call_id".to_owned(), id.clone());
    }
}
