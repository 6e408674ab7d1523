//! The `Tool` trait: something the model can call, and what a tool and an approver
//! know about each call.

use std::sync::Arc;

use async_trait::async_trait;
use reprise_provider::ToolSpec;
use reprise_session::Arguments;
use tokio_util::sync::CancellationToken;

/// What a tool or an approver knows about one call besides its arguments: where it
/// was made, by which agent, and the handles that go with it.
#[derive(Clone, Debug)]
pub struct ToolContext {
    /// The session the call belongs to (a subagent's calls belong to its parent's
    /// session).
    pub session_id: String,
    /// The agent that made the call: the main agent's name, or a subagent's.
    pub agent: String,
    /// Whether that agent is a subagent.
    pub subagent: bool,
    /// The call id the result answers.
    pub call_id: String,
    /// The same on every attempt of this call and different for every other call
    /// (see [`idempotency_key`](crate::idempotency_key)): a service that the tool
    /// calls can drop a request it has already done.
    pub idempotency_key: String,
    /// Cancelled when the turn is cancelled or runs out of time.
    pub cancel: CancellationToken,
}

/// One call of a tool, as the model made it.
#[derive(Clone, Debug)]
pub struct ToolInvocation {
    /// The tool's name.
    pub name: String,
    /// The arguments as the model sent them (JSON text, possibly invalid).
    pub arguments: Arguments,
    /// Who made the call, in which session, and its cancellation token.
    pub context: ToolContext,
}

/// What a tool returns to the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolOutput {
    /// The text the model sees.
    pub content: String,
    /// Whether the call failed (bad arguments, a tool error, a denial, a panic).
    pub is_error: bool,
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            is_error: false,
        }
    }

    /// A failed result; the model is told what went wrong.
    pub fn error(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            is_error: true,
        }
    }
}

/// What running a tool does besides answering. It decides what happens to a call
/// that a crash may have cut: a read-only call is simply run again, an idempotent
/// one is run again with the same idempotency key, any other one is never run again
/// without a decision.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolEffects {
    /// It only reads: running a call again is harmless.
    ReadOnly,
    /// It changes things, but a second call with the same idempotency key changes
    /// nothing more.
    Idempotent,
    /// It may change things, and a second call may change them again.
    #[default]
    Changes,
}

/// What to do, after a crash, with a call that had started and whose outcome is
/// unknown (a start record and no result).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnUnknown {
    /// Run it again, with the same idempotency key.
    Rerun,
    /// Ask the approver ([`ToolApprover::run_again`]); without one, or with no one
    /// to ask, [`OnUnknown::Skip`].
    Ask,
    /// Tell the model it was interrupted and may or may not have taken effect.
    Skip,
}

impl OnUnknown {
    /// The default for a tool with these effects: [`OnUnknown::Rerun`] for a tool
    /// that only reads or is idempotent, [`OnUnknown::Ask`] for any other.
    pub fn default_for(effects: ToolEffects) -> OnUnknown {
        match effects {
            ToolEffects::ReadOnly | ToolEffects::Idempotent => OnUnknown::Rerun,
            ToolEffects::Changes => OnUnknown::Ask,
        }
    }
}

/// A tool the agent offers the model. Object-safe; an `Arc` of a tool is a tool, so
/// one tool can be given to many agents.
///
/// [`tool()`](crate::tool()) makes one from an async function; implement the trait
/// for full control of the schema and the result:
///
/// ```
/// use reprise_agent::{Tool, ToolInvocation, ToolOutput};
/// use reprise_provider::ToolSpec;
///
/// struct Clock;
///
/// #[async_trait::async_trait]
/// impl Tool for Clock {
///     fn spec(&self) -> ToolSpec {
///         ToolSpec {
///             name: "clock".into(),
///             description: "The time in the town.".into(),
///             parameters: serde_json::json!({"type": "object", "properties": {}}),
///         }
///     }
///
///     async fn call(&self, invocation: ToolInvocation) -> ToolOutput {
///         if invocation.context.cancel.is_cancelled() {
///             return ToolOutput::error("cancelled");
///         }
///         ToolOutput::ok("noon")
///     }
/// }
/// ```
#[async_trait]
pub trait Tool: Send + Sync {
    /// The name, description and argument schema offered to the model.
    fn spec(&self) -> ToolSpec;

    /// Runs one call. Failures are returned as [`ToolOutput::error`], never raised.
    async fn call(&self, invocation: ToolInvocation) -> ToolOutput;

    /// What a call does besides answering; [`ToolEffects::Changes`] unless the tool
    /// says otherwise.
    fn effects(&self) -> ToolEffects {
        ToolEffects::Changes
    }

    /// What to do with a call that a crash cut after it started
    /// ([`OnUnknown::default_for`] its effects unless the tool says otherwise). A
    /// read-only tool's calls are run again whatever this says.
    fn on_unknown(&self) -> OnUnknown {
        OnUnknown::default_for(self.effects())
    }
}

#[async_trait]
impl<T: Tool + ?Sized> Tool for Arc<T> {
    fn spec(&self) -> ToolSpec {
        (**self).spec()
    }

    async fn call(&self, invocation: ToolInvocation) -> ToolOutput {
        (**self).call(invocation).await
    }

    fn effects(&self) -> ToolEffects {
        (**self).effects()
    }

    fn on_unknown(&self) -> OnUnknown {
        (**self).on_unknown()
    }
}

/// What the step gate decided about one tool call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Approval {
    /// Run it.
    Allow,
    /// Do not run it; the model gets an error result carrying this reason.
    Deny(String),
    /// Not now: the call waits for a decision made later, possibly by another
    /// process. The agent records the waiting calls durably and the run ends with
    /// [`AgentError::AwaitingDecision`](crate::AgentError::AwaitingDecision); the
    /// other calls of the reply are decided and run as usual. A subagent's call
    /// cannot wait: for one, `Defer` is a denial saying so.
    Defer,
}

/// Decides, before each tool call runs, whether it may run. Object-safe.
///
/// The agent asks it for every call (its own and its subagents'), in call order; an
/// implementation may ask the person and wait for the answer. A denied call's
/// `ToolCallFinished` event has `denied` set.
///
/// ```
/// use reprise_agent::{Approval, ToolApprover, ToolInvocation};
///
/// struct NoDemolition;
///
/// #[async_trait::async_trait]
/// impl ToolApprover for NoDemolition {
///     async fn approve(&self, call: &ToolInvocation) -> Approval {
///         if call.name.starts_with("demolish") && !call.context.subagent {
///             Approval::Deny("demolition needs a permit".into())
///         } else {
///             Approval::Allow
///         }
///     }
/// }
/// ```
#[async_trait]
pub trait ToolApprover: Send + Sync {
    /// Decides about one call; `call.context` says which agent made it, in which
    /// session.
    async fn approve(&self, call: &ToolInvocation) -> Approval;

    /// [`approve`](Self::approve), with who allowed the call in words (a config
    /// pattern, `--yes`, the person): it is written to the call's start record. By
    /// default `approve`'s answer and "the approver".
    async fn approve_with_reason(&self, call: &ToolInvocation) -> (Approval, String) {
        (self.approve(call).await, "the approver".to_owned())
    }

    /// A call of a tool with effects started before a crash, and no result was
    /// recorded: it may or may not have taken effect. `true` runs it again (with the
    /// same idempotency key), `false` tells the model it was interrupted. Asked only
    /// for tools whose [`Tool::on_unknown`] is [`OnUnknown::Ask`]. By default `false`:
    /// no call is run again without someone saying so.
    async fn run_again(&self, call: &ToolInvocation) -> bool {
        let _ = call;
        false
    }
}
