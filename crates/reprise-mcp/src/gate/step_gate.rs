//! The step gate: before each tool call, allow, deny, or ask the person.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use reprise_agent::{Approval, ToolApprover, ToolInvocation};
use serde::Serialize;

use super::policy::{GatePolicy, PolicyDecision};

/// What the person is asked about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateRequest {
    /// The agent making the call (the main agent's name or a subagent's).
    pub agent: String,
    /// The call id.
    pub call_id: String,
    /// The tool's name.
    pub tool: String,
    /// The arguments as the model sent them (JSON text).
    pub arguments: String,
}

/// The person's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateAnswer {
    /// Run this call.
    Yes,
    /// Do not run it.
    No,
    /// Run it, and every later call of this tool in this run, without asking.
    AlwaysForThisRun,
}

/// Asks the person about one call. The chat implements it for its screen; the plain
/// mode can use [`super::LineAsker`]. The gate never asks two questions at once.
#[async_trait]
pub trait GateAsker: Send + Sync {
    /// Shows the request and waits for the answer.
    async fn ask(&self, request: &GateRequest) -> GateAnswer;

    /// The call `request` started before a crash and may have taken effect: shows it
    /// and asks whether to run it again (`true`) or tell the model it was
    /// interrupted (`false`). By default `false`: an asker that cannot ask never
    /// runs a call twice.
    async fn ask_again(&self, request: &GateRequest) -> bool {
        let _ = request;
        false
    }
}

/// How a call was decided, as written to `transcript.jsonl`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    /// Run without asking: an `allow` pattern, a read-only tool of the program's own,
    /// `--yes`, or an earlier "always".
    Allow,
    /// Not run: a `deny` pattern.
    Deny,
    /// The person answered yes.
    AskYes,
    /// The person answered no.
    AskNo,
    /// The person answered always-for-this-run.
    Always,
    /// Not run: it needed a question and no one could answer one
    /// ([`GateMode::Unattended`]).
    NoOneToAsk,
}

impl Decision {
    /// The name written to the transcript: `allow`, `deny`, `ask-yes`, `ask-no`, `always`.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
            Decision::AskYes => "ask-yes",
            Decision::AskNo => "ask-no",
            Decision::Always => "always",
            Decision::NoOneToAsk => "no-one-to-ask",
        }
    }

    /// Whether the call runs.
    pub fn runs(self) -> bool {
        matches!(self, Decision::Allow | Decision::AskYes | Decision::Always)
    }
}

/// One decision, reported as it is made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GateDecision {
    /// The agent that made the call.
    pub agent: String,
    /// The call id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// The decision.
    pub decision: Decision,
    /// Why, in words (the pattern that matched, `--yes`, the person's answer).
    pub reason: String,
}

/// Whether the gate asks.
#[derive(Clone)]
pub enum GateMode {
    /// Calls that no pattern decides are asked about through this asker.
    Ask(Arc<dyn GateAsker>),
    /// `--yes`: calls that no pattern decides run without asking (for scripts).
    /// `deny` patterns still deny.
    Yes,
    /// No one can answer a question (the input is not a terminal): calls that no
    /// pattern decides are not run. The text says why, after "no one could
    /// approve: " in what the model is told (e.g. `not a terminal; --yes allows`).
    Unattended(String),
}

type Reporter = Arc<dyn Fn(&GateDecision) + Send + Sync>;

/// The gate of one run. Its always-for-this-run answers live in this instance
/// only: build a new gate for every run folder, never share one.
pub struct StepGate {
    policy: GatePolicy,
    mode: GateMode,
    read_only: HashSet<String>,
    always: Mutex<HashSet<String>>,
    /// One question at a time.
    asking: tokio::sync::Mutex<()>,
    reporter: Option<Reporter>,
}

impl StepGate {
    /// A gate with this policy and mode.
    pub fn new(policy: GatePolicy, mode: GateMode) -> StepGate {
        StepGate {
            policy,
            mode,
            read_only: HashSet::new(),
            always: Mutex::new(HashSet::new()),
            asking: tokio::sync::Mutex::new(()),
            reporter: None,
        }
    }

    /// Lets the tools named here run without asking unless a `deny` pattern matches:
    /// the program's own tools that only read (never a server's, whose claim to
    /// only read is not to be trusted).
    pub fn with_read_only_tools(mut self, names: impl IntoIterator<Item = String>) -> StepGate {
        self.read_only.extend(names);
        self
    }

    /// Calls `report` with each decision, before the call runs (to write it to the
    /// transcript next to the call).
    pub fn with_reporter(
        mut self,
        report: impl Fn(&GateDecision) + Send + Sync + 'static,
    ) -> StepGate {
        self.reporter = Some(Arc::new(report));
        self
    }

    /// The tools the person allowed for the rest of this run, sorted.
    pub fn always_allowed(&self) -> Vec<String> {
        let mut tools: Vec<String> = self.remembered().iter().cloned().collect();
        tools.sort();
        tools
    }

    fn remembered(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.always
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Decides about one call (asking if needed) and reports the decision.
    pub async fn decide(&self, agent: &str, invocation: &ToolInvocation) -> GateDecision {
        let (decision, reason) = self.decide_inner(agent, invocation).await;
        let decision = GateDecision {
            agent: agent.to_string(),
            call_id: invocation.context.call_id.clone(),
            tool: invocation.name.clone(),
            decision,
            reason,
        };
        if let Some(report) = &self.reporter {
            report(&decision);
        }
        decision
    }

    async fn decide_inner(&self, agent: &str, invocation: &ToolInvocation) -> (Decision, String) {
        let tool = invocation.name.as_str();
        match self.policy.decide(tool) {
            PolicyDecision::Deny { pattern } => {
                return (Decision::Deny, format!("matches deny pattern {pattern:?}"));
            }
            PolicyDecision::Allow { pattern } => {
                return (
                    Decision::Allow,
                    format!("matches allow pattern {pattern:?}"),
                );
            }
            PolicyDecision::Ask => {}
        }
        if self.read_only.contains(tool) {
            return (Decision::Allow, "a read-only built-in tool".to_string());
        }
        let asker = match &self.mode {
            GateMode::Yes => return (Decision::Allow, "--yes".to_string()),
            GateMode::Unattended(why) => {
                return (Decision::NoOneToAsk, format!("no one could approve: {why}"));
            }
            GateMode::Ask(asker) => asker,
        };
        if self.remembered().contains(tool) {
            return (Decision::Allow, "always allowed for this run".to_string());
        }
        let _one_question = self.asking.lock().await;
        // The answer to a question asked while this call waited may cover it.
        if self.remembered().contains(tool) {
            return (Decision::Allow, "always allowed for this run".to_string());
        }
        let request = GateRequest {
            agent: agent.to_string(),
            call_id: invocation.context.call_id.clone(),
            tool: tool.to_string(),
            arguments: invocation.arguments.to_string(),
        };
        match asker.ask(&request).await {
            GateAnswer::Yes => (Decision::AskYes, "the person answered yes".to_string()),
            GateAnswer::No => (Decision::AskNo, "the person answered no".to_string()),
            GateAnswer::AlwaysForThisRun => {
                self.remembered().insert(tool.to_string());
                (
                    Decision::Always,
                    "the person allowed it for the rest of this run".to_string(),
                )
            }
        }
    }
}

impl StepGate {
    /// Asks the person whether to run again a call that a crash cut after it
    /// started; without someone to ask (`--yes`), no.
    pub async fn ask_again(&self, invocation: &ToolInvocation) -> bool {
        let GateMode::Ask(asker) = &self.mode else {
            return false;
        };
        let _one_question = self.asking.lock().await;
        asker
            .ask_again(&GateRequest {
                agent: invocation.context.agent.clone(),
                call_id: invocation.context.call_id.clone(),
                tool: invocation.name.clone(),
                arguments: invocation.arguments.to_string(),
            })
            .await
    }
}

#[async_trait]
impl ToolApprover for StepGate {
    async fn approve(&self, invocation: &ToolInvocation) -> Approval {
        self.approve_with_reason(invocation).await.0
    }

    async fn run_again(&self, invocation: &ToolInvocation) -> bool {
        self.ask_again(invocation).await
    }

    async fn approve_with_reason(&self, invocation: &ToolInvocation) -> (Approval, String) {
        let decision = self.decide(&invocation.context.agent, invocation).await;
        let approval = match decision.decision {
            Decision::Allow | Decision::AskYes | Decision::Always => Approval::Allow,
            Decision::Deny => Approval::Deny(format!(
                "denied by policy: the tool {:?} {}; it was not run",
                decision.tool, decision.reason
            )),
            Decision::AskNo => Approval::Deny(format!(
                "denied: the person declined to run the tool {:?}; it was not run",
                decision.tool
            )),
            Decision::NoOneToAsk => Approval::Deny(decision.reason.clone()),
        };
        (approval, decision.reason)
    }
}
