//! Subagents' past work, read back from a run of the catalog: each call the main
//! agent made to a subagent, where it sits in the conversation, and what the
//! subagent did for it (its replies and tool calls), for redraws and
//! `reprise show --subagents`.
//!
//! A subagent keeps one transcript (`subagents/<name>.jsonl` in a run folder) across
//! all its tasks;
//! each task's user entry names the parent call that gave it (`parentCall`), which
//! is how the transcript is split back into the calls.

use std::collections::HashMap;

use crate::error::Result;
use crate::text::arguments_preview;
use reprise_agent::PARENT_CALL_FIELD;
use reprise_runs::{RunCatalog, RunFolder, shows_as_message};
use reprise_session::{Entry, Role};

/// A tool call's result as kept: its text and whether it was an error.
#[derive(Clone, Debug, PartialEq)]
pub struct PastResult {
    /// What the tool returned.
    pub content: String,
    /// Whether it failed (or was denied, or interrupted).
    pub is_error: bool,
}

/// Whether a tool result entry is an error: marked so when it was written
/// (`isError`, or `interrupted` for a call closed on resume), or, for results
/// written before the mark existed, by its text.
pub fn result_is_error(entry: &Entry, text: &str) -> bool {
    let marked = |field: &str| entry.extra.get(field) == Some(&serde_json::Value::Bool(true));
    marked(reprise_agent::TOOL_ERROR_FIELD)
        || marked(reprise_session::INTERRUPTED)
        || text.starts_with("error")
        || text.starts_with("Error")
}

/// One step of a subagent's work on a task.
#[derive(Clone, Debug, PartialEq)]
pub enum PastStep {
    /// A reply's text.
    Text(String),
    /// A tool call and its result, if it got one.
    Tool {
        /// The call id.
        id: String,
        /// The tool.
        name: String,
        /// The arguments, as JSON text.
        arguments: String,
        /// The result.
        result: Option<PastResult>,
    },
}

/// A call the main agent made to a subagent.
#[derive(Clone, Debug, PartialEq)]
pub struct PastCall {
    /// The subagent.
    pub agent: String,
    /// The call id.
    pub id: String,
    /// The arguments (`{"task": …}`), as JSON text.
    pub arguments: String,
    /// How many of the conversation's shown messages (see
    /// `reprise_runs::read_conversation`) come before the call.
    pub after_shown: usize,
    /// What the subagent did for it.
    pub steps: Vec<PastStep>,
    /// The call's result, if it got one.
    pub result: Option<PastResult>,
}

/// One task of a subagent's transcript: the call that gave it, and the work.
struct Segment {
    parent: Option<String>,
    steps: Vec<PastStep>,
}

/// Splits a subagent's transcript into its tasks.
fn segments(entries: &[Entry]) -> Vec<Segment> {
    let mut segments: Vec<Segment> = Vec::new();
    for entry in entries {
        let Some(message) = entry.as_message() else {
            continue;
        };
        match message.role {
            Role::User => segments.push(Segment {
                parent: entry
                    .extra
                    .get(PARENT_CALL_FIELD)
                    .and_then(|value| value.as_str())
                    .map(str::to_owned),
                steps: Vec::new(),
            }),
            Role::Assistant => {
                let Some(segment) = segments.last_mut() else {
                    continue;
                };
                let text = message.text();
                if !text.trim().is_empty() {
                    segment.steps.push(PastStep::Text(text));
                }
                for call in message.calls() {
                    segment.steps.push(PastStep::Tool {
                        id: call.id.clone(),
                        name: call.function.name.clone(),
                        arguments: call.function.arguments.to_string(),
                        result: None,
                    });
                }
            }
            Role::Tool => {
                let Some(segment) = segments.last_mut() else {
                    continue;
                };
                let id = message.tool_call_id.as_deref().unwrap_or_default();
                let text = message.text();
                // The first result answers the oldest unanswered call with the id.
                if let Some(PastStep::Tool { result, .. }) =
                    segment.steps.iter_mut().find(|step| {
                        matches!(step, PastStep::Tool { id: call, result: None, .. } if call == id)
                    })
                {
                    *result = Some(PastResult {
                        is_error: result_is_error(entry, &text),
                        content: text,
                    });
                }
            }
            _ => {}
        }
    }
    segments
}

/// The calls to subagents in a run of `catalog`, in conversation order, each with
/// the subagent's work for it. A run without subagents has none (and costs one
/// directory read, or one query).
pub async fn past_calls(catalog: &dyn RunCatalog, folder: &RunFolder) -> Result<Vec<PastCall>> {
    if catalog.subagent_names(folder).await?.is_empty() {
        return Ok(Vec::new());
    }
    let main = catalog
        .entries(folder, None)
        .await?
        .map(|loaded| loaded.entries)
        .unwrap_or_default();
    past_calls_of(catalog, folder, &main).await
}

/// [`past_calls`] for a run whose main conversation is already loaded (`main`, as
/// the agent holds it on resume): only the subagents' transcripts are read.
pub async fn past_calls_of(
    catalog: &dyn RunCatalog,
    folder: &RunFolder,
    main: &[Entry],
) -> Result<Vec<PastCall>> {
    let names = catalog.subagent_names(folder).await?;
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let mut calls: Vec<PastCall> = Vec::new();
    let mut shown = 0;
    for entry in main {
        let Some(message) = entry.as_message() else {
            continue;
        };
        if shows_as_message(entry) {
            shown += 1;
        }
        match message.role {
            Role::Assistant => {
                for call in message.calls() {
                    if names.contains(&call.function.name) {
                        calls.push(PastCall {
                            agent: call.function.name.clone(),
                            id: call.id.clone(),
                            arguments: call.function.arguments.to_string(),
                            after_shown: shown,
                            steps: Vec::new(),
                            result: None,
                        });
                    }
                }
            }
            Role::Tool => {
                let id = message.tool_call_id.as_deref().unwrap_or_default();
                if let Some(call) = calls
                    .iter_mut()
                    .find(|call| call.id == id && call.result.is_none())
                {
                    let text = message.text();
                    call.result = Some(PastResult {
                        is_error: result_is_error(entry, &text),
                        content: text,
                    });
                }
            }
            _ => {}
        }
    }
    // Each subagent's tasks, matched to its calls in order by the call id they carry.
    let mut tasks: HashMap<String, (Vec<Segment>, usize)> = HashMap::new();
    for call in &mut calls {
        if !tasks.contains_key(&call.agent) {
            let entries = catalog
                .entries(folder, Some(&call.agent))
                .await?
                .map(|loaded| loaded.entries)
                .unwrap_or_default();
            tasks.insert(call.agent.clone(), (segments(&entries), 0));
        }
        let Some((segments, next)) = tasks.get_mut(&call.agent) else {
            continue;
        };
        if let Some(offset) = segments[*next..]
            .iter()
            .position(|segment| segment.parent.as_deref() == Some(call.id.as_str()))
        {
            call.steps = std::mem::take(&mut segments[*next + offset].steps);
            *next += offset + 1;
        }
    }
    Ok(calls)
}

/// Whether a kept tool result reads as a failure: the chat writes a failed,
/// denied or interrupted call's result starting with "error" (imports, "Error").
pub fn is_error_text(text: &str) -> bool {
    text.starts_with("error") || text.starts_with("Error")
}

/// The task text of a subagent call's arguments (the arguments themselves when they
/// hold none).
pub fn task_of(arguments: &str) -> String {
    serde_json::from_str::<serde_json::Value>(arguments)
        .ok()
        .and_then(|value| value.get("task")?.as_str().map(str::to_owned))
        .unwrap_or_else(|| arguments.to_owned())
}

/// The one line a finished subagent call folds its work into: how many tool calls
/// and replies it made.
pub fn folded_line(agent: &str, tools: usize, replies: usize) -> String {
    let count = |n: usize, one: &str, many: &str| {
        if n == 1 {
            format!("1 {one}")
        } else {
            format!("{n} {many}")
        }
    };
    format!(
        "▸ [{agent}] {}, {} (folded)",
        count(tools, "tool call", "tool calls"),
        count(replies, "reply", "replies")
    )
}

impl PastResult {
    fn redacted(&self, redactor: &reprise_redact::Redactor) -> PastResult {
        PastResult {
            content: redactor.redact(&self.content).into_owned(),
            is_error: self.is_error,
        }
    }
}

impl PastCall {
    /// The call with every text passed through `redactor`: the transcripts it comes
    /// from are the model's history, kept raw.
    pub fn redacted(&self, redactor: &reprise_redact::Redactor) -> PastCall {
        let text = |text: &str| redactor.redact(text).into_owned();
        PastCall {
            agent: self.agent.clone(),
            id: self.id.clone(),
            arguments: text(&self.arguments),
            after_shown: self.after_shown,
            steps: self
                .steps
                .iter()
                .map(|step| match step {
                    PastStep::Text(body) => PastStep::Text(text(body)),
                    PastStep::Tool {
                        id,
                        name,
                        arguments,
                        result,
                    } => PastStep::Tool {
                        id: id.clone(),
                        name: name.clone(),
                        arguments: text(arguments),
                        result: result.as_ref().map(|r| r.redacted(redactor)),
                    },
                })
                .collect(),
            result: self.result.as_ref().map(|r| r.redacted(redactor)),
        }
    }

    /// How many tool calls and replies the subagent made for it.
    pub fn counts(&self) -> (usize, usize) {
        let tools = self
            .steps
            .iter()
            .filter(|step| matches!(step, PastStep::Tool { .. }))
            .count();
        (tools, self.steps.len() - tools)
    }

    /// The call folded, as plain text: the call, the folded work, the result's
    /// first line.
    pub fn folded_text(&self) -> String {
        let (tools, replies) = self.counts();
        let result = match &self.result {
            Some(result) => format!(
                "  {} {}",
                if result.is_error { "✗" } else { "↳" },
                result.content.lines().next().unwrap_or("")
            ),
            None => "  ✗ (interrupted)".to_owned(),
        };
        format!(
            "⚙ {} {}\n  {}\n{result}\n",
            self.agent,
            arguments_preview(&self.arguments, str::to_owned),
            folded_line(&self.agent, tools, replies)
        )
    }

    /// The call with all its work, as plain text: each line of the subagent's
    /// indented and marked with its name.
    pub fn full_text(&self) -> String {
        let mark = format!("  [{}] ", self.agent);
        let mut text = format!(
            "⚙ {} {}\n",
            self.agent,
            arguments_preview(&self.arguments, str::to_owned)
        );
        for step in &self.steps {
            match step {
                PastStep::Text(body) => {
                    for line in body.trim_end().lines() {
                        text.push_str(&format!("{mark}{line}\n"));
                    }
                }
                PastStep::Tool {
                    name,
                    arguments,
                    result,
                    ..
                } => {
                    text.push_str(&format!(
                        "{mark}⚙ {name} {}\n",
                        arguments_preview(arguments, str::to_owned)
                    ));
                    let (marker, first) = match result {
                        Some(result) => (
                            if result.is_error { "✗" } else { "↳" },
                            result.content.lines().next().unwrap_or(""),
                        ),
                        None => ("✗", "(interrupted)"),
                    };
                    text.push_str(&format!("{mark}  {marker} {first}\n"));
                }
            }
        }
        match &self.result {
            Some(result) => {
                let marker = if result.is_error { "✗" } else { "↳" };
                for (i, line) in result.content.trim_end().lines().enumerate() {
                    let lead = if i == 0 { marker } else { " " };
                    text.push_str(&format!("  {lead} {line}\n"));
                }
            }
            None => text.push_str("  ✗ (interrupted)\n"),
        }
        text
    }
}
