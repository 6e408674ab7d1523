//! The agent's `tracing` spans, named and attributed by the OpenTelemetry GenAI
//! semantic conventions (`invoke_agent`, `chat`, `execute_tool`), plus spans of
//! its own for what the conventions have no name for (compaction, checkpoints,
//! approval waits, the resume of a cut turn). A subscriber that bridges to
//! OpenTelemetry (reprise-telemetry's layer) exports them; without one they cost
//! next to nothing.
//!
//! Every span carries `gen_ai.conversation.id`, the session id. Text (prompts,
//! replies, arguments, results) is added only after [`capture_content`] turned it
//! on, through the redactor given there.

use std::sync::{Arc, OnceLock, RwLock};

use opentelemetry::{Array, StringValue, Value};
use reprise_provider::Completion;
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::error::AgentError;
use crate::tool::Approval;

/// What text goes through before a span carries it (the transcript's redactor).
pub type Redact = Arc<dyn Fn(&str) -> String + Send + Sync>;

static CONTENT: RwLock<Option<Redact>> = RwLock::new(None);

/// Turns on (`Some`: text goes through `redact` first) or off the text of
/// prompts, replies, tool arguments and results on spans, for the whole process.
pub fn capture_content(redact: Option<Redact>) {
    if let Ok(mut content) = CONTENT.write() {
        *content = redact;
    }
}

/// `text` redacted, when content is captured.
fn content(text: &str) -> Option<String> {
    let redact = CONTENT.read().ok()?.clone()?;
    Some(redact(text))
}

/// Whether `OTEL_SEMCONV_STABILITY_OPT_IN` asks for the latest experimental GenAI
/// conventions (`gen_ai_latest_experimental`); otherwise the provider is named
/// by `gen_ai.system`, as the conventions up to 1.36 had it.
fn latest_conventions() -> bool {
    static LATEST: OnceLock<bool> = OnceLock::new();
    *LATEST.get_or_init(|| {
        std::env::var("OTEL_SEMCONV_STABILITY_OPT_IN").is_ok_and(|value| {
            value
                .split(',')
                .any(|item| item.trim() == "gen_ai_latest_experimental")
        })
    })
}

/// The name of the provider attribute the conventions in use give.
pub(crate) fn provider_attribute() -> &'static str {
    if latest_conventions() {
        "gen_ai.provider.name"
    } else {
        "gen_ai.system"
    }
}

fn record_provider(span: &Span, provider: Option<&str>) {
    if let Some(name) = provider {
        span.record(provider_attribute(), name);
    }
}

/// A span of the GenAI operation `$operation` on `$subject` (its `otel.name`, and
/// the attribute `$key`) in the session `$session`, with the status fields
/// [`record_error`] fills; `$fields` are the operation's own.
macro_rules! operation_span {
    ($operation:literal, $($key:ident).+ = $subject:expr, $session:expr, $($fields:tt)*) => {
        tracing::info_span!(
            target: "reprise_agent",
            $operation,
            otel.name = %format_args!("{} {}", $operation, $subject),
            gen_ai.operation.name = $operation,
            gen_ai.conversation.id = $session,
            $($key).+ = $subject,
            $($fields)*
            otel.status_code = Empty,
            otel.status_description = Empty,
            error.type = Empty,
        )
    };
}

/// One run of an agent (a prompt answered, a pending turn taken up).
pub(crate) fn invoke_agent(
    agent: &str,
    session: &str,
    model: &str,
    provider: Option<&str>,
) -> Span {
    let span = operation_span!(
        "invoke_agent",
        gen_ai.agent.name = agent,
        session,
        gen_ai.request.model = model,
        gen_ai.provider.name = Empty,
        gen_ai.system = Empty,
    );
    record_provider(&span, provider);
    span
}

/// The prompt of a run, when content is captured.
pub(crate) fn record_prompt(span: &Span, prompt: Option<&str>) {
    if let Some(text) = prompt.and_then(content) {
        span.set_attribute("gen_ai.input.messages", text);
    }
}

/// One model call.
pub(crate) fn chat(
    session: &str,
    model: &str,
    provider: Option<&str>,
    max_tokens: Option<u32>,
    temperature: Option<f64>,
) -> Span {
    let span = operation_span!(
        "chat",
        gen_ai.request.model = model,
        session,
        otel.kind = "client",
        gen_ai.provider.name = Empty,
        gen_ai.system = Empty,
        gen_ai.request.max_tokens = Empty,
        gen_ai.request.temperature = Empty,
        gen_ai.response.id = Empty,
        gen_ai.response.model = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read.input_tokens = Empty,
    );
    record_provider(&span, provider);
    if let Some(limit) = max_tokens {
        span.record("gen_ai.request.max_tokens", limit);
    }
    if let Some(temperature) = temperature {
        span.record("gen_ai.request.temperature", temperature);
    }
    span
}

/// What a model call answered: finish reason, token counts, the reply's text
/// (when content is captured).
pub(crate) fn record_completion(span: &Span, completion: &Completion) {
    if let Some(reason) = &completion.finish_reason {
        let reasons = Array::String(vec![StringValue::from(reason.clone())]);
        span.set_attribute("gen_ai.response.finish_reasons", Value::Array(reasons));
    }
    if let Some(usage) = completion.usage {
        span.record("gen_ai.usage.input_tokens", usage.prompt_tokens);
        span.record("gen_ai.usage.output_tokens", usage.completion_tokens);
        if let Some(cached) = usage.cached_tokens {
            span.record("gen_ai.usage.cache_read.input_tokens", cached);
        }
    }
    if let Some(text) = content(&completion.message.text()) {
        span.set_attribute("gen_ai.output.messages", text);
    }
}

/// One tool call, from its start to its result.
pub(crate) fn execute_tool(
    session: &str,
    tool: &str,
    call_id: &str,
    idempotency_key: &str,
    subagent: bool,
    arguments: &str,
) -> Span {
    let span = operation_span!(
        "execute_tool",
        gen_ai.tool.name = tool,
        session,
        gen_ai.tool.call.id = call_id,
        // A subagent is an agent called as a tool.
        gen_ai.tool.type = if subagent { "agent" } else { "function" },
        reprise.tool.idempotency_key = idempotency_key,
    );
    if let Some(text) = content(arguments) {
        span.set_attribute("gen_ai.tool.call.arguments", text);
    }
    span
}

/// A tool's result: an error result sets the span's status.
pub(crate) fn record_tool_result(span: &Span, text: &str, is_error: bool) {
    if is_error {
        span.record("otel.status_code", "error");
        span.record("error.type", "tool_error");
    }
    if let Some(text) = content(text) {
        span.set_attribute("gen_ai.tool.call.result", text);
    }
}

/// The wait for the approver's answer about a call.
pub(crate) fn approval(session: &str, tool: &str, call_id: &str) -> Span {
    tracing::info_span!(
        target: "reprise_agent",
        "approval",
        otel.name = %format_args!("approval {tool}"),
        gen_ai.conversation.id = session,
        gen_ai.tool.name = tool,
        gen_ai.tool.call.id = call_id,
        reprise.approval.decision = Empty,
    )
}

/// A compaction of the history (`cause`: why).
pub(crate) fn compaction(session: &str, agent: &str, cause: &str) -> Span {
    tracing::info_span!(
        target: "reprise_agent",
        "compaction",
        gen_ai.conversation.id = session,
        gen_ai.agent.name = agent,
        reprise.compaction.cause = cause,
        reprise.compaction.tokens_before = Empty,
        reprise.compaction.tokens_after = Empty,
        otel.status_code = Empty,
        otel.status_description = Empty,
        error.type = Empty,
    )
}

/// The approver's answer (`None`: the wait was cancelled).
pub(crate) fn record_decision(span: &Span, decision: Option<&Approval>) {
    let said = match decision {
        None => "cancelled",
        Some(Approval::Allow) => "allow",
        Some(Approval::Deny(_)) => "deny",
        Some(Approval::Defer) => "defer",
    };
    span.record("reprise.approval.decision", said);
}

/// The checkpoint taken before calls that may change files.
pub(crate) fn checkpoint(session: &str) -> Span {
    tracing::info_span!(
        target: "reprise_agent",
        "checkpoint",
        gen_ai.conversation.id = session,
        reprise.checkpoint.id = Empty,
    )
}

/// The open calls of a turn a crash (or a wait for decisions) cut, taken up.
pub(crate) fn resume_turn(session: &str, agent: &str) -> Span {
    tracing::info_span!(
        target: "reprise_agent",
        "resume_turn",
        gen_ai.conversation.id = session,
        gen_ai.agent.name = agent,
    )
}

/// The conventions' `error.type` of a failed run or call.
pub(crate) fn error_type(error: &AgentError) -> &'static str {
    match error {
        AgentError::Store(_) => "store",
        AgentError::Provider(error) if error.is_context_exceeded() => "context_length_exceeded",
        AgentError::Provider(_) => "provider",
        AgentError::MaxTurns { .. } => "max_turns",
        AgentError::ReplyCutOff { .. } => "reply_cut_off",
        AgentError::TurnTimeout { .. } => "timeout",
        AgentError::EmptySummary => "empty_summary",
        AgentError::Cancelled => "cancelled",
        AgentError::PromptSuperseded { .. } => "prompt_superseded",
        AgentError::AwaitingDecision { .. } => "awaiting_decision",
        AgentError::Decision(_) => "decision",
        _ => "_OTHER",
    }
}

/// A failure as the span's status (error) and `error.type`. A run that stops to
/// wait for decisions did not fail: it says so as an event.
pub(crate) fn record_error(span: &Span, error: &AgentError) {
    if let AgentError::AwaitingDecision { calls } = error {
        span.in_scope(|| {
            tracing::info!(
                target: "reprise_agent",
                waiting_calls = calls.len(),
                "calls wait for a decision"
            );
        });
        return;
    }
    span.record("otel.status_code", "error");
    span.record("otel.status_description", error.to_string());
    span.record("error.type", error_type(error));
}
