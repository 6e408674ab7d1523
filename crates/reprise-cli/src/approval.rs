//! Asking the person before a tool runs, and remembering what was decided so the
//! transcript can say it.
//!
//! The policy (allow/deny patterns from the config) belongs to the step gate of
//! reprise-mcp; until it is wired in, every tool call is asked about (or allowed
//! with `--yes`), with "always" remembered for the current run only.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use reprise_agent::{Approval, ToolApprover, ToolInvocation};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::oneshot;

use crate::config::Settings;
use crate::driver::UiEvent;

/// The person's answer to "may this tool call run?".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Run it.
    Yes,
    /// Do not run it.
    No,
    /// Run it, and every later call of this tool in this run.
    Always,
}

/// A question for the person; the screen answers through `reply`.
#[derive(Debug)]
pub struct Ask {
    /// The agent asking (`main` or a subagent).
    pub agent: String,
    /// The tool.
    pub tool: String,
    /// Its arguments (redacted).
    pub arguments: String,
    /// Where the answer goes.
    pub reply: oneshot::Sender<Answer>,
}

/// What was decided about each call, by call id, until its result is written.
#[derive(Clone, Debug, Default)]
pub struct Decisions(Arc<Mutex<HashMap<String, String>>>);

impl Decisions {
    /// Remembers the decision about call `id`.
    pub fn put(&self, id: &str, decision: &str) {
        if let Ok(mut map) = self.0.lock() {
            map.insert(id.to_owned(), decision.to_owned());
        }
    }

    /// The decision about call `id`, forgotten once taken.
    pub fn take(&self, id: &str) -> Option<String> {
        self.0.lock().ok()?.remove(id)
    }
}

/// The approver for one run's session, or none when every call may run unasked.
pub fn approver_for_run(
    settings: &Settings,
    ui: UnboundedSender<UiEvent>,
    decisions: Decisions,
) -> Option<Arc<dyn ToolApprover>> {
    Some(Arc::new(AskingApprover {
        yes: settings.yes,
        ui,
        decisions,
        always: Mutex::new(HashSet::new()),
        redactor: reprise_redact::Redactor::new().with_env_secrets(),
    }))
}

/// Asks the screen about every call, except tools answered "always" in this run.
struct AskingApprover {
    yes: bool,
    ui: UnboundedSender<UiEvent>,
    decisions: Decisions,
    always: Mutex<HashSet<String>>,
    redactor: reprise_redact::Redactor,
}

#[async_trait]
impl ToolApprover for AskingApprover {
    async fn approve(&self, agent: &str, invocation: &ToolInvocation) -> Approval {
        if self.yes {
            self.decisions.put(&invocation.id, "allow (--yes)");
            return Approval::Allow;
        }
        let remembered = self
            .always
            .lock()
            .map(|set| set.contains(&invocation.name))
            .unwrap_or(false);
        if remembered {
            self.decisions
                .put(&invocation.id, "allow (always for this run)");
            return Approval::Allow;
        }
        let (reply, answer) = oneshot::channel();
        let ask = Ask {
            agent: agent.to_owned(),
            tool: invocation.name.clone(),
            arguments: self.redactor.redact(&invocation.arguments).into_owned(),
            reply,
        };
        if self.ui.send(UiEvent::Ask(ask)).is_err() {
            self.decisions.put(&invocation.id, "deny (nobody to ask)");
            return Approval::Deny("nobody was there to approve it".to_owned());
        }
        match answer.await {
            Ok(Answer::Yes) => {
                self.decisions.put(&invocation.id, "ask: yes");
                Approval::Allow
            }
            Ok(Answer::Always) => {
                if let Ok(mut set) = self.always.lock() {
                    set.insert(invocation.name.clone());
                }
                self.decisions
                    .put(&invocation.id, "ask: always for this run");
                Approval::Allow
            }
            Ok(Answer::No) | Err(_) => {
                self.decisions.put(&invocation.id, "ask: no");
                Approval::Deny("the person said no".to_owned())
            }
        }
    }
}
