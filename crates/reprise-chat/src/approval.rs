//! The step gate of a run (reprise-mcp's [`StepGate`]), asking through the screen,
//! and what it decided, kept until the transcript records the call's result.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::Result;
use async_trait::async_trait;
use reprise_agent::{Approval, ToolApprover, ToolInvocation};
use reprise_mcp::{
    GateAnswer, GateAsker, GateDecision, GateMode, GatePolicy, GateRequest, StepGate,
};
use reprise_redact::Redactor;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::oneshot;

use crate::config::Settings;
use crate::events::{Answer, Ask, UiEvent};
use crate::text::arguments_head;

/// Why no one could approve a call, when the chat reads its lines from something
/// that is not a terminal: what the model is told after "no one could approve: ".
pub const NOT_A_TERMINAL: &str = "not a terminal; --yes allows";

/// What the gate decided about each call (`(decision, reason)` by call id), until
/// the call's result is written to the transcript.
#[derive(Clone, Debug, Default)]
pub struct Decisions(Arc<Mutex<HashMap<String, (String, String)>>>);

impl Decisions {
    /// Remembers the decision about call `id`.
    pub fn put(&self, id: &str, decision: &str, reason: &str) {
        if let Ok(mut map) = self.0.lock() {
            map.insert(id.to_owned(), (decision.to_owned(), reason.to_owned()));
        }
    }

    /// The decision about call `id`, forgotten once taken.
    pub fn take(&self, id: &str) -> Option<(String, String)> {
        self.0.lock().ok()?.remove(id)
    }
}

/// Asks the person through the screen (the full-screen question box, or a line in
/// the plain mode).
struct ScreenAsker {
    ui: UnboundedSender<UiEvent>,
    redactor: Redactor,
}

impl ScreenAsker {
    /// Puts the question on the screen and waits for the answer (no answer: no).
    async fn put(&self, request: &GateRequest, again: bool) -> Answer {
        let (reply, answer) = oneshot::channel();
        let ask = Ask {
            agent: request.agent.clone(),
            tool: request.tool.clone(),
            arguments: self
                .redactor
                .redact(arguments_head(&request.arguments).0)
                .into_owned(),
            arguments_len: arguments_head(&request.arguments).1,
            again,
            reply,
        };
        if self.ui.send(UiEvent::Ask(ask)).is_err() {
            return Answer::No;
        }
        answer.await.unwrap_or(Answer::No)
    }
}

#[async_trait]
impl GateAsker for ScreenAsker {
    async fn ask(&self, request: &GateRequest) -> GateAnswer {
        match self.put(request, false).await {
            Answer::Yes => GateAnswer::Yes,
            Answer::Always => GateAnswer::AlwaysForThisRun,
            Answer::No => GateAnswer::No,
        }
    }

    async fn ask_again(&self, request: &GateRequest) -> bool {
        self.put(request, true).await != Answer::No
    }
}

fn label(decision: &GateDecision) -> String {
    serde_json::to_value(decision.decision)
        .ok()
        .and_then(|value| value.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{:?}", decision.decision))
}

/// A new gate for one run: its "always for this run" answers die with it. The
/// `read_only` tools (the chat's own that only read) run without asking.
pub fn gate_for_run(
    settings: &Settings,
    ui: UnboundedSender<UiEvent>,
    redactor: Redactor,
    decisions: Decisions,
    read_only: Vec<String>,
) -> Result<StepGate> {
    let policy = GatePolicy::from_config(&settings.gate.clone().unwrap_or_default())?;
    let mode = if settings.yes {
        GateMode::Yes
    } else if let Some(why) = &settings.unattended {
        GateMode::Unattended(why.clone())
    } else {
        GateMode::Ask(Arc::new(ScreenAsker { ui, redactor }))
    };
    Ok(StepGate::new(policy, mode)
        .with_read_only_tools(read_only)
        .with_reporter(move |decision| {
            decisions.put(&decision.call_id, &label(decision), &decision.reason);
        }))
}

/// Hands a task to a subagent without asking: a delegation does nothing by itself,
/// and every tool call the subagent then makes goes through the gate (`inner`).
pub struct DelegationPassesGate {
    /// The gate.
    pub inner: Arc<dyn ToolApprover>,
    /// The subagents' names (their tools' names).
    pub subagents: Vec<String>,
}

#[async_trait]
impl ToolApprover for DelegationPassesGate {
    async fn approve(&self, invocation: &ToolInvocation) -> Approval {
        self.approve_with_reason(invocation).await.0
    }

    async fn approve_with_reason(&self, invocation: &ToolInvocation) -> (Approval, String) {
        if !invocation.context.subagent && self.subagents.contains(&invocation.name) {
            return (Approval::Allow, "a delegation to a subagent".to_owned());
        }
        self.inner.approve_with_reason(invocation).await
    }

    async fn run_again(&self, invocation: &ToolInvocation) -> bool {
        self.inner.run_again(invocation).await
    }
}
