//! The loop of one agent over one transcript: call the model, run the tools it asks
//! for, and record every message the moment it exists.
//!
//! The main agent and each subagent are a `Thread` each; they differ only in the
//! transcript key they write to.

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use reprise_provider::{ChatRequest, Completion, Provider, StreamEvent, ToolSpec};
use reprise_session::{
    AFTER_CRASH, ANSWERS_ENTRY, AfterCrash, AwaitingCall, CHECKPOINT_FIELD, CallDecision,
    Compaction, DecidedCall, Entry, LoadWarning, Message, Role, SessionKey, SessionStore,
    StartedCall, TOOL_START_KIND, ToolCall, approval_decision_entry, approval_pending_entry,
    arguments_are_an_object, compacted_tail, cut_turn, inspect, interrupted_result, model_view,
    repair_entries_except, request_message, results_unanswered, tool_start_entry,
    turn_stopped_entry, visible_entries, visit_model_view, was_started,
};
use tokio::sync::mpsc::unbounded_channel;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use uuid::Uuid;

use crate::before_changes::BeforeChanges;
use crate::compact::{
    Budget, ContextSettings, FALLBACK_CONTEXT_WINDOW, Summary, choose_cut, header, summarise,
    view_messages,
};
use crate::deferred::{PendingCall, decision_for, decision_record, pending_calls, was_deferred};
use crate::error::AgentError;
use crate::events::{AgentEvent, EventSink};
use crate::idempotency::idempotency_key;
use crate::metrics;
use crate::spans;
use crate::tokens::{estimate_message, estimate_messages, estimate_request, estimate_tools};
use crate::tool::{
    Approval, OnUnknown, Tool, ToolApprover, ToolContext, ToolEffects, ToolInvocation, ToolOutput,
};
use crate::usage::{set_usage, usage_of};

/// The smallest window assumed after a context-exceeded answer.
const MIN_ASSUMED_WINDOW: u32 = 2_048;

/// The entry field that marks a tool result as an error (a failed, denied or
/// stopped call): `true`, or absent.
pub const TOOL_ERROR_FIELD: &str = "isError";

/// What the model is told about a tool call that the person cancelled.
pub const CANCELLED_BY_USER: &str = "error: cancelled by the user";

/// What the model is told about a tool call that was stopped because the turn's
/// time budget ran out.
pub const STOPPED_BY_TURN_TIMEOUT: &str =
    "error: stopped: the turn ran out of time (turn_timeout) before this call ended";

/// Where a run reports to and what cancels it.
#[derive(Clone)]
pub(crate) struct RunContext {
    pub events: Option<EventSink>,
    pub cancel: CancellationToken,
    /// Set when `cancel` was cancelled because the turn's time budget ran out (not
    /// by the person); shared with the subagents the run starts.
    pub timed_out: Arc<AtomicBool>,
}

impl RunContext {
    /// A context that reports to `events` and stops when `cancel` is cancelled.
    pub fn new(events: Option<EventSink>, cancel: CancellationToken) -> Self {
        RunContext {
            events,
            cancel,
            timed_out: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Sends an event (made only when someone listens), waiting while a bounded
    /// channel is full.
    pub(crate) async fn emit(&self, event: impl FnOnce() -> AgentEvent) {
        if let Some(events) = &self.events {
            events.send(event()).await;
        }
    }

    /// The result given to a call that was stopped: by the person, or by the clock.
    pub fn stopped_text(&self) -> &'static str {
        if self.timed_out.load(Ordering::Relaxed) {
            STOPPED_BY_TURN_TIMEOUT
        } else {
            CANCELLED_BY_USER
        }
    }
}

/// Whether a call's arguments can be given to its tool: a JSON object, or nothing
/// at all (some servers send no arguments for a tool without parameters).
fn arguments_usable(arguments: &str) -> bool {
    arguments.trim().is_empty() || arguments_are_an_object(arguments)
}

/// The start of a text, for an error message about it.
fn preview(text: &str) -> String {
    const LIMIT: usize = 80;
    let mut shown: String = text.chars().take(LIMIT).collect();
    if text.chars().count() > LIMIT {
        shown.push('…');
    }
    shown
}

/// Something the model can call by name.
#[derive(Clone)]
pub(crate) enum Callable {
    Tool(Arc<dyn Tool>),
    Subagent(Arc<dyn Delegate>),
}

/// The entry field, on a subagent's task (its user message), naming the parent's
/// tool call that gave the task: how a transcript of many tasks is split back into
/// the calls that started them.
pub const PARENT_CALL_FIELD: &str = "parentCall";

/// A subagent as the loop calls it: a conversation of its own, given a task by one
/// of the parent's calls. A trait here, so that the loop knows subagents without
/// depending on how they are made.
pub(crate) trait Delegate: Send + Sync {
    /// The subagent's conversation; calls take turns on it.
    fn thread(&self) -> &tokio::sync::Mutex<Thread>;

    /// Whether the subagent has tools that may change things (so a call to it is
    /// preceded by the [`BeforeChanges`] hook).
    fn may_change(&self) -> bool;

    /// Runs the task the parent's call `call_id` gives in `arguments`; its answer,
    /// or what went wrong, is the call's result.
    fn call(
        self: Arc<Self>,
        call_id: String,
        arguments: reprise_session::Arguments,
        ctx: RunContext,
    ) -> futures::future::BoxFuture<'static, ToolOutput>;

    /// Finishes the task of the parent's call `call_id` that a crash cut.
    fn resume(
        self: Arc<Self>,
        call_id: String,
        ctx: RunContext,
    ) -> futures::future::BoxFuture<'static, ToolOutput>;
}

/// Everything a thread needs to open its transcript.
pub(crate) struct ThreadConfig {
    pub name: String,
    pub key: SessionKey,
    pub store: Arc<dyn SessionStore>,
    pub provider: Arc<dyn Provider>,
    pub system: Option<String>,
    pub tools: Vec<(ToolSpec, Callable)>,
    pub approver: Option<Arc<dyn ToolApprover>>,
    pub max_turns: usize,
    /// The wall-clock budget of one run, if any.
    pub turn_timeout: Option<Duration>,
    /// The context window and when to compact.
    pub context: ContextSettings,
    /// Told before calls that may change things start.
    pub before_changes: Option<Arc<dyn BeforeChanges>>,
    /// Whether the transcript is read from its latest compaction on.
    pub from_compaction: bool,
}

/// Why a compaction is made; it decides how much stays verbatim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CompactionCause {
    /// The next request would pass the threshold: the recent messages that fit a
    /// share of the limit stay.
    Threshold,
    /// The server refused a request as too long: fewer stay.
    Exceeded,
    /// Asked for (`/compact`): only the latest message stays.
    Requested,
}

impl CompactionCause {
    /// As spans name it.
    fn as_str(self) -> &'static str {
        match self {
            CompactionCause::Threshold => "threshold",
            CompactionCause::Exceeded => "exceeded",
            CompactionCause::Requested => "requested",
        }
    }
}

/// What a compaction did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactionReport {
    /// The compaction entry's uuid.
    pub uuid: uuid::Uuid,
    /// How many messages the summary took in.
    pub messages: usize,
    /// The estimated request size before, in tokens.
    pub tokens_before: u64,
    /// The estimated request size after, in tokens.
    pub tokens_after: u64,
}

/// One agent's conversation over one transcript.
pub(crate) struct Thread {
    name: String,
    key: SessionKey,
    store: Arc<dyn SessionStore>,
    provider: Arc<dyn Provider>,
    system: Option<String>,
    tools: HashMap<String, Callable>,
    approver: Option<Arc<dyn ToolApprover>>,
    max_turns: usize,
    turn_timeout: Option<Duration>,
    /// Every entry of the transcript, as recorded (resume repair reads them).
    entries: Vec<Entry>,
    /// The messages among `entries`, copied out only when asked for: a resumed
    /// session is held once as entries and once as the request, not a third time.
    history: OnceLock<Vec<Message>>,
    /// The tools offered to the model.
    specs: Vec<ToolSpec>,
    /// The next request: system prompt, the model view of `history`, the tools.
    /// Built when first needed (a resumed session is not held twice before a turn
    /// or a caller asks for it), then kept up to date as messages are recorded so
    /// that a turn never rebuilds it.
    request: OnceLock<ChatRequest>,
    warnings: Vec<LoadWarning>,
    /// Set when a run ended early; the next run first closes any call left open.
    needs_repair: bool,
    /// The assistant entry of a turn a crash cut in the middle of its tool calls, or
    /// after their results and before the model's reply (found when the transcript
    /// was opened): the next run finishes its open calls instead of closing them,
    /// then calls the model.
    cut_turn: Option<Uuid>,
    /// The context window and when to compact.
    context: ContextSettings,
    /// The summary of the latest compaction, sent in place of what it covers.
    summary: Option<String>,
    /// Where in `entries` the model view starts (after the latest compaction's
    /// `through`; 0 without one).
    view_start: usize,
    /// The server's count of the last request (`usage.prompt_tokens`) and how many
    /// of `request.messages` it held: later messages are the only ones estimated.
    measured: Option<(u64, usize)>,
    /// Real tokens per estimated token, as the server's counts showed them (at
    /// least 1): text full of digits or symbols has more tokens than its bytes say.
    scale: f64,
    /// Told before calls that may change things start.
    before_changes: Option<Arc<dyn BeforeChanges>>,
    /// The token counts recorded on the entries of the transcript not held here (those
    /// a rewind took out of the model's view, and the history before the latest
    /// compaction when it was not read): calls the session made, counted in its
    /// totals.
    unheld_usage: Option<reprise_provider::Usage>,
    /// Whether the history before the latest compaction's `through` was not read.
    skipped_history: bool,
}

/// A tool call on its way to a result.
enum Pending {
    Done(ToolOutput),
    /// Refused by the approver.
    Denied(ToolOutput),
    /// Allowed, not started yet: calls are started together, after their start
    /// records are durable.
    Allowed {
        invocation: Box<ToolInvocation>,
        callable: Callable,
        /// The start record to write first (`None`: a call that only reads, or a
        /// subagent's task, whose transcript records its start).
        start: Option<StartedCall>,
        /// A subagent's task cut by a crash: the subagent goes on with it.
        continued: bool,
    },
    Running {
        task: AbortOnDrop,
        /// Subagents stop by themselves when cancelled (closing their own calls), so
        /// they are awaited; plain tools are aborted.
        abort_on_cancel: bool,
    },
    /// The approver said "not now": no result until a decision is recorded.
    Deferred,
}

/// A call of a turn on its way to a result, and what the resume of a cut turn did
/// with it (recorded with the result).
struct Slot {
    pending: Pending,
    after_crash: Option<AfterCrash>,
}

/// What the resume of a turn cut by a crash does with one of its open calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ResumePlan {
    /// Never started: through the approver, then run.
    Reask,
    /// Only reads: run again, with no question about running it twice (the
    /// approver still decides whether it may run at all: its start is not
    /// recorded, so whether anyone allowed it is not known).
    RunReadOnly,
    /// Started, outcome unknown: what the tool says.
    Unknown(OnUnknown),
    /// A subagent's task that was started: the subagent goes on with it.
    Continue,
    /// Recorded as waiting for a decision (not a crash): the recorded decision is
    /// acted on; without one the approver is asked, and without an approver the
    /// call keeps waiting.
    Waiting,
}

impl ResumePlan {
    /// The mark a call's result gets when it is not run (or is refused) before the
    /// plan is acted on: calls of a turn a crash cut are marked, calls that waited
    /// for a decision are not.
    fn crash_mark(plan: Option<ResumePlan>) -> Option<AfterCrash> {
        match plan {
            None | Some(ResumePlan::Waiting) => None,
            Some(_) => Some(AfterCrash::Reasked),
        }
    }
}

/// A tool task that is aborted if the turn ends without waiting for it.
struct AbortOnDrop(JoinHandle<ToolOutput>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The transcript `config` names (a missing one is empty), and, when it was read from
/// its latest compaction on, the token counts recorded before that compaction
/// (`Some(None)`: none). A compaction that does not record them (written before
/// they were kept) means reading the transcript whole.
async fn load_transcript(
    config: &ThreadConfig,
) -> Result<
    (
        reprise_session::Loaded,
        Option<Option<reprise_provider::Usage>>,
    ),
    AgentError,
> {
    if config.from_compaction
        && let Some(view) = config.store.load_view(&config.key).await?
    {
        if view.skipped_bytes.is_none() {
            return Ok((view.loaded, None));
        }
        if let Some(before) = crate::usage::usage_before_view(&view.loaded.entries) {
            return Ok((view.loaded, Some(before)));
        }
    }
    let loaded = config.store.load(&config.key).await?.unwrap_or_default();
    Ok((loaded, None))
}

impl Thread {
    /// Loads the transcript (a missing one is empty), closes the tool calls of earlier
    /// turns that never got a result, and prepares the model view. The open calls of
    /// a last turn that a crash cut are left for the next run to finish.
    pub async fn open(config: ThreadConfig) -> Result<Thread, AgentError> {
        let (mut loaded, before) = load_transcript(&config).await?;
        // What a rewind took out of the model's view stays in the file only; the
        // calls it holds still count in the session's totals.
        let hidden = reprise_session::rewound(&loaded.entries);
        let mut unheld_usage = crate::usage::usage_totals(
            loaded
                .entries
                .iter()
                .zip(&hidden)
                .filter_map(|(entry, hidden)| hidden.then_some(entry)),
        );
        let skipped_history = before.is_some();
        if let Some(Some(before)) = before {
            crate::usage::add_usage(unheld_usage.get_or_insert_with(Default::default), before);
        }
        loaded.entries = visible_entries(std::mem::take(&mut loaded.entries));
        let specs = config.tools.iter().map(|(spec, _)| spec.clone()).collect();
        let (summary, view_start) = match compacted_tail(&loaded.entries) {
            Some((compaction, start)) => (Some(compaction.summary), start),
            None => (None, 0),
        };
        let tools = config
            .tools
            .into_iter()
            .map(|(spec, callable)| (spec.name, callable))
            .collect();
        let cut_turn = cut_turn(&loaded.entries);
        let mut thread = Thread {
            name: config.name,
            key: config.key,
            store: config.store,
            provider: config.provider,
            system: config.system,
            tools,
            approver: config.approver,
            max_turns: config.max_turns,
            turn_timeout: config.turn_timeout,
            entries: loaded.entries,
            history: OnceLock::new(),
            specs,
            request: OnceLock::new(),
            warnings: loaded.warnings,
            needs_repair: true,
            cut_turn,
            context: config.context,
            summary,
            view_start,
            measured: None,
            scale: 1.0,
            before_changes: config.before_changes,
            unheld_usage,
            skipped_history,
        };
        thread
            .repair(&RunContext::new(None, CancellationToken::new()))
            .await?;
        if thread.key.subagent_name().is_none() {
            metrics::session_opened(thread.key.session_id(), &thread.name);
        }
        Ok(thread)
    }

    /// The next run first closes calls left open and rebuilds the view.
    pub fn mark_needs_repair(&mut self) {
        self.needs_repair = true;
    }

    pub fn key(&self) -> &SessionKey {
        &self.key
    }

    pub fn history(&self) -> &[Message] {
        self.history.get_or_init(|| {
            self.entries
                .iter()
                .filter_map(Entry::as_message)
                .cloned()
                .collect()
        })
    }

    /// Every entry of the transcript, as loaded and recorded since.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The token counts of the calls whose entries are not among
    /// [`Thread::entries`] (a rewind took them out of view, or they are before the
    /// latest compaction and were not read), when any recorded some.
    pub fn unheld_usage(&self) -> Option<reprise_provider::Usage> {
        self.unheld_usage
    }

    /// Whether the history before the latest compaction's `through` was not read.
    pub fn skipped_history(&self) -> bool {
        self.skipped_history
    }

    pub fn warnings(&self) -> &[LoadWarning] {
        &self.warnings
    }

    /// The request the next model call would send (before the next prompt).
    pub fn request(&self) -> &ChatRequest {
        self.request.get_or_init(|| ChatRequest {
            messages: view_messages(
                self.system.as_deref(),
                self.summary.as_deref(),
                &self.entries,
                self.view_start,
            ),
            tools: self.specs.clone(),
            max_tokens: None,
        })
    }

    /// Records a result for every call left without one, then rebuilds the model view
    /// (those results belong next to their calls, wherever those are).
    async fn repair(&mut self, ctx: &RunContext) -> Result<(), AgentError> {
        if !self.needs_repair {
            return Ok(());
        }
        for entry in repair_entries_except(&self.entries, self.cut_turn) {
            self.record_entry(entry, ctx).await?;
        }
        // Rebuilt from the entries when next needed.
        self.request = OnceLock::new();
        self.measured = None;
        self.needs_repair = false;
        Ok(())
    }

    /// The estimated size of the next request in tokens: the server's count of the
    /// last one, plus an estimate of the messages added since.
    pub fn context_used(&self) -> u64 {
        let Some(request) = self.request.get() else {
            // Not built yet (a resumed session before its first turn): from the
            // entries, so that showing the figure does not copy the history.
            return self.unbuilt_context();
        };
        let messages = &request.messages;
        match self.measured {
            Some((tokens, counted)) if counted <= messages.len() => {
                tokens + self.scaled(estimate_messages(&messages[counted..]))
            }
            // Resumed, or just compacted or repaired: as before the request was built.
            _ => self.unbuilt_context(),
        }
    }

    /// [`Thread::context_used`] without a count of this process's own: as a live
    /// session counts, the server's count of the last request (the
    /// `usage.prompt_tokens` of the latest reply) plus an estimate of that reply and
    /// what came after it. Only a reply after the latest entry that changed the view
    /// (a compaction, …) counts, since its request held the view as it is now;
    /// without one the whole view is estimated. Estimating a long history measures
    /// every message as JSON, which took a third of the time a 100 MB session takes
    /// to resume.
    fn unbuilt_context(&self) -> u64 {
        let tail = &self.entries[self.view_start.min(self.entries.len())..];
        let last_count = tail
            .iter()
            .enumerate()
            .rev()
            .take_while(|(_, entry)| {
                entry.kind.is_none() || entry.kind.as_deref() == Some(TOOL_START_KIND)
            })
            .find_map(|(at, entry)| {
                if entry.as_message()?.role != Role::Assistant {
                    return None;
                }
                let prompt_tokens = usage_of(entry)?.prompt_tokens;
                (prompt_tokens > 0).then_some((at, prompt_tokens))
            });
        let Some((at, prompt_tokens)) = last_count else {
            return self.scaled(self.estimate_unbuilt());
        };
        let mut since = 0;
        visit_model_view(&tail[at..], |message| since += estimate_message(message));
        prompt_tokens + self.scaled(since)
    }

    /// [`estimate_request`] of the request [`Thread::request`] would build (calls
    /// whose arguments that repairs are estimated as stored).
    fn estimate_unbuilt(&self) -> u64 {
        let tail = &self.entries[self.view_start.min(self.entries.len())..];
        let mut starts_with_assistant = None;
        let mut estimate = 0;
        visit_model_view(tail, |message| {
            starts_with_assistant.get_or_insert(message.role == Role::Assistant);
            estimate += estimate_message(message);
        });
        let header = header(
            self.system.as_deref(),
            self.summary.as_deref(),
            starts_with_assistant == Some(true),
        );
        estimate + estimate_messages(&header) + estimate_tools(&self.specs)
    }

    fn scaled(&self, estimate: u64) -> u64 {
        (estimate as f64 * self.scale).ceil() as u64
    }

    /// The context window and when to compact.
    pub fn context(&self) -> ContextSettings {
        self.context
    }

    fn budget(&self, window: u32) -> Budget {
        Budget::new(
            window,
            self.context.threshold,
            self.provider.max_tokens(),
            self.context.summary_max_tokens,
        )
    }

    /// Compacts when the next request would pass the threshold of a known window.
    async fn compact_if_needed(&mut self, ctx: &RunContext) -> Result<(), AgentError> {
        let Some(window) = self.context.window else {
            return Ok(());
        };
        if self.context_used() > self.budget(window).limit {
            self.compact(None, CompactionCause::Threshold, ctx).await?;
        }
        Ok(())
    }

    /// Summarises the older part of the view and appends one compaction entry. The
    /// latest messages stay verbatim (how many depends on the `cause`). `None` when
    /// there is nothing old enough to summarise. Nothing is written unless the
    /// summary is complete: the entry is one append.
    pub async fn compact(
        &mut self,
        focus: Option<&str>,
        cause: CompactionCause,
        ctx: &RunContext,
    ) -> Result<Option<CompactionReport>, AgentError> {
        let span = spans::compaction(self.key.session_id(), &self.name, cause.as_str());
        let result = self
            .compact_unobserved(focus, cause, ctx)
            .instrument(span.clone())
            .await;
        match &result {
            Ok(Some(report)) => {
                span.record("reprise.compaction.tokens_before", report.tokens_before);
                span.record("reprise.compaction.tokens_after", report.tokens_after);
            }
            Ok(None) => {}
            Err(error) => spans::record_error(&span, error),
        }
        result
    }

    async fn compact_unobserved(
        &mut self,
        focus: Option<&str>,
        cause: CompactionCause,
        ctx: &RunContext,
    ) -> Result<Option<CompactionReport>, AgentError> {
        let after_exceeded = cause == CompactionCause::Exceeded;
        self.repair(ctx).await?;
        let before = self.context_used();
        let mut window = self.context.window.unwrap_or(FALLBACK_CONTEXT_WINDOW);
        if after_exceeded {
            // The server refused `before`: its window is smaller than that, whatever
            // was configured. Below a floor no summary request would fit anyway.
            let refused = u32::try_from(before.saturating_mul(9) / 10).unwrap_or(u32::MAX);
            window = window.min(refused.max(MIN_ASSUMED_WINDOW));
        }
        let budget = self.budget(window);
        let keep = match cause {
            CompactionCause::Threshold => budget.keep(false),
            CompactionCause::Exceeded => budget.keep(true),
            // Asked for: everything but the latest message.
            CompactionCause::Requested => 0,
        };
        let Some(cut) = choose_cut(&self.entries, self.view_start, keep) else {
            return Ok(None);
        };
        let summarised = model_view(&self.entries[self.view_start..cut]);
        // Asked for with one message behind the latest: nothing worth a summary.
        let least = if cause == CompactionCause::Requested {
            2
        } else {
            1
        };
        if summarised.len() < least {
            return Ok(None);
        }
        ctx.emit(|| AgentEvent::Compacting {
            agent: self.name.clone(),
        })
        .await;
        let Summary {
            text: summary,
            usage,
            cut_off_at,
        } = summarise(
            self.provider.as_ref(),
            &budget,
            self.summary.as_deref(),
            &summarised,
            focus,
            self.scale,
            &ctx.cancel,
        )
        .await?;
        let messages = view_messages(self.system.as_deref(), Some(&summary), &self.entries, cut);
        let after = self.scaled(estimate_messages(&messages) + estimate_tools(&self.specs));
        let compaction = Compaction {
            summary,
            through: self.entries[cut - 1].uuid,
            tokens_before: before,
            tokens_after: after,
        };
        let mut entry = compaction.to_entry();
        // Every count recorded before this entry, so that a resume that reads from
        // here on still has the session's totals.
        let mut recorded = crate::usage::usage_totals(&self.entries);
        if let Some(unheld) = self.unheld_usage {
            crate::usage::add_usage(recorded.get_or_insert_with(Default::default), unheld);
        }
        entry.extra.insert(
            crate::usage::USAGE_BEFORE_FIELD.to_owned(),
            crate::usage::usage_value(recorded),
        );
        if let Some(usage) = usage {
            set_usage(&mut entry, usage, self.provider.model());
            ctx.emit(|| AgentEvent::Usage {
                agent: self.name.clone(),
                usage,
            })
            .await;
        }
        self.store
            .append(&self.key, std::slice::from_ref(&entry))
            .await?;
        let report = CompactionReport {
            uuid: entry.uuid,
            messages: summarised.len(),
            tokens_before: before,
            tokens_after: after,
        };
        self.entries.push(entry);
        self.summary = Some(compaction.summary);
        self.view_start = cut;
        self.request = OnceLock::from(ChatRequest {
            messages,
            tools: self.specs.clone(),
            max_tokens: None,
        });
        self.measured = None;
        ctx.emit(|| AgentEvent::Compacted {
            agent: self.name.clone(),
            key: self.key.clone(),
            uuid: report.uuid,
            messages: report.messages,
            tokens_before: report.tokens_before,
            tokens_after: report.tokens_after,
        })
        .await;
        if let Some(max_tokens) = cut_off_at {
            ctx.emit(|| AgentEvent::SummaryCutOff {
                agent: self.name.clone(),
                max_tokens,
            })
            .await;
        }
        Ok(Some(report))
    }

    /// Appends a message to the transcript; only once it is durable does it join the
    /// history and the next request.
    async fn record_entry(&mut self, entry: Entry, ctx: &RunContext) -> Result<(), AgentError> {
        self.store
            .append(&self.key, std::slice::from_ref(&entry))
            .await?;
        if let Some(message) = entry.as_message() {
            ctx.emit(|| AgentEvent::MessageRecorded {
                agent: self.name.clone(),
                key: self.key.clone(),
                uuid: entry.uuid,
                message: message.clone(),
            })
            .await;
            if let Some(request) = self.request.get_mut() {
                request.messages.push(request_message(message));
            }
            if let Some(history) = self.history.get_mut() {
                history.push(message.clone());
            }
        }
        self.entries.push(entry);
        Ok(())
    }

    /// One run: the prompt's entry (`None`: the history as it is, for a prompt stored
    /// and never answered), then model calls and tool calls until an answer without
    /// tool calls. A prompt whose uuid the transcript holds is not recorded again.
    pub async fn run_entry(
        &mut self,
        prompt: Option<Entry>,
        ctx: &RunContext,
    ) -> Result<String, AgentError> {
        let span = spans::invoke_agent(
            &self.name,
            self.key.session_id(),
            self.provider.model(),
            self.provider.provider_name(),
        );
        if let Some(message) = prompt.as_ref().and_then(Entry::as_message) {
            spans::record_prompt(&span, Some(&message.text()));
        }
        let turn_timeout = self.turn_timeout;
        let result = async {
            match turn_timeout {
                None => self.run_turns(prompt, ctx).await,
                Some(budget) => self.run_with_budget(prompt, ctx, budget).await,
            }
        }
        .instrument(span.clone())
        .await;
        if let Err(error) = &result {
            spans::record_error(&span, error);
            self.needs_repair = true;
            self.note_stopped_on_results(error, ctx).await;
        }
        result
    }

    /// When a run ends with an error on its tool results (no reply after them), says
    /// so durably, so that the next process does not take the turn for one a crash
    /// cut before the reply. Best effort: when the append fails too (the disk that
    /// failed the run), the next process calls the model, as after a crash.
    async fn note_stopped_on_results(&mut self, error: &AgentError, ctx: &RunContext) {
        if results_unanswered(&self.entries).is_none() {
            return;
        }
        let reason = match error {
            AgentError::Cancelled => "cancelled",
            AgentError::TurnTimeout { .. } => "timeout",
            AgentError::MaxTurns { .. } => "maxTurns",
            AgentError::ReplyCutOff { .. } => "cutOff",
            _ => "failed",
        };
        if let Err(failure) = self.record_entry(turn_stopped_entry(reason), ctx).await {
            tracing::warn!(agent = %self.name, error = %failure, "the stop of the turn was not recorded");
        }
    }

    /// A run that is stopped, as a cancel would stop it, once `budget` has passed.
    async fn run_with_budget(
        &mut self,
        prompt: Option<Entry>,
        ctx: &RunContext,
        budget: Duration,
    ) -> Result<String, AgentError> {
        let timed = RunContext {
            events: ctx.events.clone(),
            cancel: ctx.cancel.child_token(),
            timed_out: Arc::clone(&ctx.timed_out),
        };
        let clock = {
            let cancel = timed.cancel.clone();
            let timed_out = Arc::clone(&timed.timed_out);
            tokio::spawn(async move {
                tokio::time::sleep(budget).await;
                timed_out.store(true, Ordering::Relaxed);
                cancel.cancel();
            })
        };
        let result = self.run_turns(prompt, &timed).await;
        clock.abort();
        match result {
            Err(AgentError::Cancelled)
                if timed.timed_out.load(Ordering::Relaxed) && !ctx.cancel.is_cancelled() =>
            {
                Err(AgentError::TurnTimeout { after: budget })
            }
            other => other,
        }
    }

    async fn run_turns(
        &mut self,
        prompt: Option<Entry>,
        ctx: &RunContext,
    ) -> Result<String, AgentError> {
        self.repair(ctx).await?;
        if ctx.cancel.is_cancelled() {
            return Err(AgentError::Cancelled);
        }
        if let Some(reply) = self.cut_turn.take() {
            let span = spans::resume_turn(self.key.session_id(), &self.name);
            let waiting = self.finish_cut_turn(reply, ctx).instrument(span).await?;
            self.stop_if_waiting(reply, waiting)?;
        }
        // A prompt the session holds already (a retry of a run that failed, or whose
        // answer its caller never saw) is not stored or sent again.
        let held = prompt.as_ref().and_then(|prompt| {
            let at = self.entries.iter().position(|e| e.uuid == prompt.uuid)?;
            Some((prompt.uuid, answer_after(&self.entries[at + 1..])))
        });
        match held {
            None => {
                if let Some(prompt) = prompt {
                    self.record_entry(prompt, ctx).await?;
                }
            }
            Some((_, PromptState::Answered(text))) => return Ok(text),
            Some((id, PromptState::Superseded)) => {
                return Err(AgentError::PromptSuperseded { id });
            }
            // Stored and never answered: answered from the history as it is.
            Some((_, PromptState::Pending)) => {}
        }
        for turn in 1..=self.max_turns {
            ctx.emit(|| AgentEvent::ModelCallStarted {
                agent: self.name.clone(),
                turn,
            })
            .await;
            let completion = self.call_model_compacting(ctx).await?;
            let cut_off = completion.finish_reason.as_deref() == Some("length");
            let message = completion.message;
            let calls = message.calls().to_vec();
            let text = message.text();
            let mut entry = Entry::message(message);
            if let Some(usage) = completion.usage {
                set_usage(&mut entry, usage, self.provider.model());
            }
            let reply = entry.uuid;
            self.record_entry(entry, ctx).await?;
            // A reply cut at `max_tokens`: what it holds is kept, its complete calls
            // run as usual, and the call it was cut in (arguments that are not
            // JSON) is answered with an error. With nothing left to run, the turn
            // ends: asking again would most likely be cut the same way.
            // The note comes after the reply's calls and their results, which it
            // explains.
            let cut_limit = cut_off.then(|| self.provider.max_tokens());
            if let Some(max_tokens) = cut_limit
                && !calls.is_empty()
                && !calls
                    .iter()
                    .any(|call| arguments_usable(&call.function.arguments))
            {
                // No call is usable, so none reached the approver and none waits.
                self.run_tools(reply, &calls, cut_limit, ctx).await?;
                self.note_cut_off(cut_limit, ctx).await;
                return Err(AgentError::ReplyCutOff { max_tokens });
            }
            if calls.is_empty() {
                self.note_cut_off(cut_limit, ctx).await;
                return Ok(text);
            }
            let waiting = self.run_tools(reply, &calls, cut_limit, ctx).await?;
            self.note_cut_off(cut_limit, ctx).await;
            self.stop_if_waiting(reply, waiting)?;
            if ctx.cancel.is_cancelled() {
                return Err(AgentError::Cancelled);
            }
        }
        Err(AgentError::MaxTurns {
            max_turns: self.max_turns,
        })
    }

    /// One model call with the history kept inside the context: compacted first
    /// when the request would pass the threshold, and when the server answers that
    /// it did not fit, compacted once more and sent once more.
    async fn call_model_compacting(&mut self, ctx: &RunContext) -> Result<Completion, AgentError> {
        self.compact_if_needed(ctx).await?;
        let completion = match self.call_model(ctx).await {
            Err(AgentError::Provider(error)) if error.is_context_exceeded() => {
                tracing::info!(agent = %self.name, "the request did not fit the context; compacting");
                if self
                    .compact(None, CompactionCause::Exceeded, ctx)
                    .await?
                    .is_none()
                {
                    return Err(AgentError::Provider(error));
                }
                self.call_model(ctx).await?
            }
            other => other?,
        };
        if let Some(usage) = completion.usage
            && usage.prompt_tokens > 0
        {
            let request = self.request();
            let counted = request.messages.len();
            let estimated = estimate_request(request).max(1);
            self.measured = Some((usage.prompt_tokens, counted));
            self.scale = (usage.prompt_tokens as f64 / estimated as f64).clamp(1.0, 4.0);
        }
        Ok(completion)
    }

    /// One model call in a `chat` span of its own, measured.
    async fn call_model(&self, ctx: &RunContext) -> Result<Completion, AgentError> {
        let call = metrics::CallAttributes {
            session: self.key.session_id(),
            model: self.provider.model(),
            provider: self.provider.provider_name(),
        };
        let span = spans::chat(
            call.session,
            call.model,
            call.provider,
            self.request().max_tokens.or(self.provider.max_tokens()),
            self.provider.temperature(),
        );
        let started = std::time::Instant::now();
        let result = self
            .call_model_streaming(ctx)
            .instrument(span.clone())
            .await;
        match &result {
            Ok(completion) => {
                spans::record_completion(&span, completion);
                metrics::model_call(&call, started.elapsed(), completion.usage, None);
            }
            Err(error) => {
                spans::record_error(&span, error);
                let kind = spans::error_type(error);
                metrics::model_call(&call, started.elapsed(), None, Some(kind));
            }
        }
        result
    }

    /// One model call, its stream events forwarded as they arrive. A cancelled or
    /// failed call leaves nothing behind.
    async fn call_model_streaming(&self, ctx: &RunContext) -> Result<Completion, AgentError> {
        let cancel = &ctx.cancel;
        let Some(events) = &ctx.events else {
            return tokio::select! {
                biased;
                _ = cancel.cancelled() => Err(AgentError::Cancelled),
                result = self.provider.complete(self.request(), None, cancel) => Ok(result?),
            };
        };
        let (stream_tx, mut stream_rx) = unbounded_channel();
        let call = self
            .provider
            .complete(self.request(), Some(&stream_tx), cancel);
        tokio::pin!(call);
        // Set once the stream reported usage; otherwise the completion's is reported.
        let saw_usage = std::sync::atomic::AtomicBool::new(false);
        let forward = |event: StreamEvent| {
            if matches!(event, StreamEvent::Usage(_)) {
                saw_usage.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            events.send(AgentEvent::from_stream(&self.name, event))
        };
        let result = loop {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => break Err(AgentError::Cancelled),
                Some(event) = stream_rx.recv() => forward(event).await,
                result = &mut call => break result.map_err(AgentError::from),
            }
        };
        // Deltas sent just before the call returned come before the message is recorded.
        while let Ok(event) = stream_rx.try_recv() {
            forward(event).await;
        }
        // A non-streaming answer reports usage only in the completion.
        if let Ok(Completion {
            usage: Some(usage), ..
        }) = &result
            && !saw_usage.load(std::sync::atomic::Ordering::Relaxed)
        {
            forward(StreamEvent::Usage(*usage)).await;
        }
        result
    }

    /// Whether a crash cut the last turn in the middle of its tool calls, and the
    /// next run will finish them.
    pub fn has_cut_turn(&self) -> bool {
        self.cut_turn.is_some()
    }

    /// Finishes the open calls of the turn a crash cut (the assistant entry
    /// `reply`): each is run, asked about again or closed, as [`ResumePlan`] says,
    /// and every decision is durable before it is acted on (a start record before a
    /// run, the result of a call that is not run again).
    async fn finish_cut_turn(
        &mut self,
        reply: Uuid,
        ctx: &RunContext,
    ) -> Result<Vec<PendingCall>, AgentError> {
        let Some(at) = self.entries.iter().position(|entry| entry.uuid == reply) else {
            return Ok(Vec::new());
        };
        let open: Vec<ToolCall> = inspect(&self.entries[at..])
            .dangling
            .into_iter()
            .filter(|dangling| dangling.entry == Some(reply))
            .map(|dangling| dangling.call)
            .collect();
        let mut plans = Vec::with_capacity(open.len());
        for call in &open {
            plans.push(self.resume_plan(at, call).await);
        }
        self.run_tools_with(reply, &open, None, Some(&plans), ctx)
            .await
    }

    /// What the resume does with the open call `call` of the assistant entry at
    /// `at`.
    async fn resume_plan(&self, at: usize, call: &ToolCall) -> ResumePlan {
        let reply = &self.entries[at];
        match self.tools.get(&call.function.name) {
            // Unknown tools and broken arguments get their error result, as they would
            // have the first time.
            None => ResumePlan::Reask,
            Some(Callable::Subagent(handle)) => {
                let thread = handle.thread().lock().await;
                if thread.task_started_by(&call.id, reply.ts) {
                    ResumePlan::Continue
                } else if was_deferred(&self.entries[at..], reply.uuid, &call.id) {
                    ResumePlan::Waiting
                } else {
                    ResumePlan::Reask
                }
            }
            Some(Callable::Tool(tool)) => {
                let read_only = tool.effects() == ToolEffects::ReadOnly;
                // A call that waited, was allowed and started before a crash is one
                // whose outcome is unknown: the decision does not run it twice.
                if !read_only && was_started(&self.entries[at..], reply.uuid, &call.id) {
                    ResumePlan::Unknown(tool.on_unknown())
                } else if was_deferred(&self.entries[at..], reply.uuid, &call.id) {
                    ResumePlan::Waiting
                } else if read_only {
                    ResumePlan::RunReadOnly
                } else {
                    ResumePlan::Reask
                }
            }
        }
    }

    /// Whether this (subagent) thread's last task was given by the parent's call
    /// `call_id`, made at or after `since`.
    pub(crate) fn task_started_by(&self, call_id: &str, since: jiff::Timestamp) -> bool {
        self.last_task()
            .is_some_and(|(at, parent)| parent == call_id && self.entries[at].ts >= since)
    }

    /// The last task (user entry) of this transcript and the parent's call named on
    /// it.
    fn last_task(&self) -> Option<(usize, &str)> {
        let at = self.entries.iter().rposition(|entry| {
            entry
                .as_message()
                .is_some_and(|message| message.role == Role::User)
        })?;
        let parent = self.entries[at].extra.get(PARENT_CALL_FIELD)?.as_str()?;
        Some((at, parent))
    }

    /// The answer to the last task when the model gave it (the parent's call was cut
    /// after the subagent answered): `None` while the task's turn is not over.
    pub(crate) fn last_task_answer(&self) -> Option<String> {
        let (at, _) = self.last_task()?;
        match answer_after(&self.entries[at + 1..]) {
            PromptState::Answered(text) => Some(text),
            _ => None,
        }
    }

    /// Runs the calls of one assistant message concurrently and records their results
    /// in call order, each as soon as it and those before it are done. `cut_limit`
    /// is set when the reply was cut off at `max_tokens` (the limit, when known).
    async fn run_tools(
        &mut self,
        reply: Uuid,
        calls: &[ToolCall],
        cut_limit: Option<Option<u32>>,
        ctx: &RunContext,
    ) -> Result<Vec<PendingCall>, AgentError> {
        self.run_tools_with(reply, calls, cut_limit, None, ctx)
            .await
    }

    /// [`Thread::run_tools`], for a turn taken up again (cut by a crash, or
    /// waiting for decisions) when `plans` is given (one per call). Every call is
    /// decided first (the approver asked, in call order), then the calls that wait
    /// for a decision are recorded, then the start records of those allowed are
    /// written in one append, then they all start. Returns the calls that wait.
    async fn run_tools_with(
        &mut self,
        reply: Uuid,
        calls: &[ToolCall],
        cut_limit: Option<Option<u32>>,
        plans: Option<&[ResumePlan]>,
        ctx: &RunContext,
    ) -> Result<Vec<PendingCall>, AgentError> {
        let mut slots: Vec<Option<Slot>> = Vec::with_capacity(calls.len());
        let mut recorded = 0;
        // Results of a turn taken up again are pinned to their call (ids may repeat).
        let pin = plans.is_some();
        let mut waiting = Vec::new();
        let mut newly_waiting = Vec::new();
        for (index, call) in calls.iter().enumerate() {
            let plan = plans.and_then(|plans| plans.get(index).copied());
            let slot = self.decide_call(reply, call, cut_limit, plan, ctx).await;
            if matches!(slot.pending, Pending::Deferred) {
                ctx.emit(|| AgentEvent::CallAwaitingDecision {
                    agent: self.name.clone(),
                    id: call.id.clone(),
                    name: call.function.name.clone(),
                })
                .await;
                let pending = PendingCall::of(reply, call);
                if plan != Some(ResumePlan::Waiting) {
                    newly_waiting.push(AwaitingCall {
                        entry: reply,
                        tool_call_id: pending.call_id.clone(),
                        tool: pending.tool.clone(),
                        arguments_hash: pending.arguments_hash.clone(),
                    });
                }
                waiting.push(pending);
            }
            slots.push(Some(slot));
            // Results already there (a denied call, an unknown tool) are recorded
            // before the next call is asked about.
            recorded = self
                .record_ready(reply, calls, &mut slots, recorded, pin, ctx)
                .await?;
        }
        if !newly_waiting.is_empty() {
            self.record_entry(approval_pending_entry(&newly_waiting), ctx)
                .await?;
        }
        let starts: Vec<StartedCall> = slots
            .iter()
            .flatten()
            .filter_map(|slot| match &slot.pending {
                Pending::Allowed { start, .. } => start.clone(),
                _ => None,
            })
            .collect();
        let checkpoint = match &self.before_changes {
            Some(hook) if !starts.is_empty() || self.starts_changing_subagent(&slots) => {
                let span = spans::checkpoint(self.key.session_id());
                let id = hook.before_changes().instrument(span.clone()).await;
                if let Some(id) = &id {
                    span.record("reprise.checkpoint.id", id.as_str());
                }
                id
            }
            _ => None,
        };
        if !starts.is_empty() || checkpoint.is_some() {
            let mut entry = tool_start_entry(&starts);
            if let Some(id) = checkpoint {
                entry
                    .extra
                    .insert(CHECKPOINT_FIELD.to_owned(), serde_json::Value::String(id));
            }
            self.record_entry(entry, ctx).await?;
        }
        for slot in slots.iter_mut().flatten() {
            if matches!(slot.pending, Pending::Allowed { .. }) {
                let allowed =
                    std::mem::replace(&mut slot.pending, Pending::Done(ToolOutput::ok("")));
                slot.pending = start_allowed(allowed, ctx);
            }
        }
        let recorded = self
            .record_ready(reply, calls, &mut slots, recorded, pin, ctx)
            .await?;
        for (call, slot) in calls.iter().zip(slots).skip(recorded) {
            if let Some(slot) = slot {
                self.finish_and_record(reply, call, slot, pin, ctx).await?;
            }
        }
        Ok(waiting)
    }

    /// Ends the run when calls of the reply `reply` wait for a decision: the turn
    /// stays open (the next run, or [`Thread::record_decision`], takes it up) and
    /// nothing else is done.
    fn stop_if_waiting(
        &mut self,
        reply: Uuid,
        waiting: Vec<PendingCall>,
    ) -> Result<(), AgentError> {
        if waiting.is_empty() {
            return Ok(());
        }
        self.cut_turn = Some(reply);
        Err(AgentError::AwaitingDecision { calls: waiting })
    }

    /// The calls of the open turn that wait for a decision.
    pub fn pending_calls(&self) -> Vec<PendingCall> {
        match self.open_turn() {
            Some((at, reply)) => pending_calls(&self.entries, at, reply),
            None => Vec::new(),
        }
    }

    /// The open turn (a crash cut it, or it waits for decisions): where its
    /// assistant entry is, and its uuid.
    fn open_turn(&self) -> Option<(usize, Uuid)> {
        let reply = self.cut_turn?;
        let at = self.entries.iter().position(|entry| entry.uuid == reply)?;
        Some((at, reply))
    }

    /// Records `decision` about the waiting call `call`, after checking that the
    /// call waits, is not decided yet, and has the arguments the decision was made
    /// for. The next run acts on it.
    pub async fn record_decision(
        &mut self,
        call: &PendingCall,
        decision: CallDecision,
        decided_by: String,
    ) -> Result<(), AgentError> {
        let decided = decision_record(&self.entries, self.open_turn(), call, decision, decided_by)?;
        let ctx = RunContext::new(None, CancellationToken::new());
        self.record_entry(approval_decision_entry(&decided), &ctx)
            .await
    }

    /// Whether an allowed call among `slots` gives a task to a subagent whose tools
    /// may change things.
    fn starts_changing_subagent(&self, slots: &[Option<Slot>]) -> bool {
        slots.iter().flatten().any(|slot| {
            matches!(
                &slot.pending,
                Pending::Allowed { callable: Callable::Subagent(handle), .. } if handle.may_change()
            )
        })
    }

    /// Records, in call order from `recorded`, the results that are there; returns
    /// how many calls are recorded now.
    async fn record_ready(
        &mut self,
        reply: Uuid,
        calls: &[ToolCall],
        slots: &mut [Option<Slot>],
        mut recorded: usize,
        pin: bool,
        ctx: &RunContext,
    ) -> Result<usize, AgentError> {
        while let Some(entry) = slots.get_mut(recorded) {
            let ready = match entry {
                // No result until a decision: the calls after it are recorded.
                Some(Slot {
                    pending: Pending::Deferred,
                    ..
                }) => {
                    recorded += 1;
                    continue;
                }
                Some(Slot {
                    pending: Pending::Done(_) | Pending::Denied(_),
                    ..
                }) => true,
                Some(Slot {
                    pending: Pending::Running { task, .. },
                    ..
                }) => task.0.is_finished(),
                _ => false,
            };
            if !ready {
                break;
            }
            let Some(slot) = entry.take() else { break };
            self.finish_and_record(reply, &calls[recorded], slot, pin, ctx)
                .await?;
            recorded += 1;
        }
        Ok(recorded)
    }

    /// Waits for a call's result (at once when it has one) and records it (a call
    /// waiting for a decision has none). `pin`: the result names the assistant
    /// entry it answers.
    async fn finish_and_record(
        &mut self,
        reply: Uuid,
        call: &ToolCall,
        slot: Slot,
        pin: bool,
        ctx: &RunContext,
    ) -> Result<(), AgentError> {
        let (output, denied) = match slot.pending {
            Pending::Deferred => return Ok(()),
            Pending::Done(output) => (output, false),
            Pending::Denied(output) => (output, true),
            // Started by `run_tools_with` before results are waited for.
            Pending::Allowed { .. } => (ToolOutput::error(ctx.stopped_text()), false),
            Pending::Running {
                mut task,
                abort_on_cancel,
            } => (
                finish(&call.function.name, &mut task, abort_on_cancel, ctx).await,
                false,
            ),
        };
        let answers = (pin || slot.after_crash.is_some()).then_some(reply);
        self.record_result(call, output, denied, answers, slot.after_crash, ctx)
            .await
    }

    /// Says that the reply was cut off at its `max_tokens`, after its calls and their
    /// results, which the note explains.
    async fn note_cut_off(&self, cut_limit: Option<Option<u32>>, ctx: &RunContext) {
        if let Some(max_tokens) = cut_limit {
            ctx.emit(|| AgentEvent::ReplyCutOff {
                agent: self.name.clone(),
                max_tokens,
            })
            .await;
        }
    }

    /// Records a call's result and reports it. `answers`: the assistant entry
    /// holding the call, named on a result written after other entries (a turn taken
    /// up again); `after_crash`: what the resume of a turn a crash cut did.
    async fn record_result(
        &mut self,
        call: &ToolCall,
        output: ToolOutput,
        denied: bool,
        answers: Option<Uuid>,
        after_crash: Option<AfterCrash>,
        ctx: &RunContext,
    ) -> Result<(), AgentError> {
        let mut entry = Entry::message(Message::tool(call.id.clone(), output.content.clone()));
        if output.is_error {
            // Kept with the result, so that a redraw marks it as the live view did.
            entry
                .extra
                .insert(TOOL_ERROR_FIELD.to_owned(), serde_json::Value::Bool(true));
        }
        if let Some(reply) = answers {
            // Written after other results, so pinned to its call (ids may repeat).
            entry.extra.insert(
                ANSWERS_ENTRY.to_owned(),
                serde_json::Value::String(reply.to_string()),
            );
        }
        if let Some(mark) = after_crash {
            entry.extra.insert(
                AFTER_CRASH.to_owned(),
                serde_json::Value::String(mark.as_str().to_owned()),
            );
        }
        self.record_entry(entry, ctx).await?;
        ctx.emit(|| AgentEvent::ToolCallFinished {
            agent: self.name.clone(),
            id: call.id.clone(),
            name: call.function.name.clone(),
            output,
            denied,
        })
        .await;
        Ok(())
    }

    async fn announce_call(&self, call: &ToolCall, ctx: &RunContext) {
        ctx.emit(|| AgentEvent::ToolCallStarted {
            agent: self.name.clone(),
            id: call.id.clone(),
            name: call.function.name.clone(),
            arguments: call.function.arguments.clone(),
        })
        .await;
    }

    /// Tells what the resume of a turn a crash cut does with `call`.
    async fn announce_resumed(&self, call: &ToolCall, action: AfterCrash, ctx: &RunContext) {
        ctx.emit(|| AgentEvent::CallResumed {
            agent: self.name.clone(),
            id: call.id.clone(),
            name: call.function.name.clone(),
            action,
        })
        .await;
    }

    /// Decides about one call: the approver is asked (or, for a call of a turn a
    /// crash cut, what `plan` says is done). The call is not started here.
    /// `reply` is the assistant entry that holds the call.
    async fn decide_call(
        &self,
        reply: Uuid,
        call: &ToolCall,
        cut_limit: Option<Option<u32>>,
        plan: Option<ResumePlan>,
        ctx: &RunContext,
    ) -> Slot {
        let name = call.function.name.clone();
        self.announce_call(call, ctx).await;
        let done = |output| Slot {
            pending: Pending::Done(output),
            after_crash: ResumePlan::crash_mark(plan),
        };
        if ctx.cancel.is_cancelled() {
            return done(ToolOutput::error(ctx.stopped_text()));
        }
        // Neither run nor offered to the approver: no tool can act on them, and a
        // person cannot judge a call whose arguments are broken.
        if !arguments_usable(&call.function.arguments) {
            let shown = preview(&call.function.arguments);
            return done(ToolOutput::error(match cut_limit {
                Some(max_tokens) => format!(
                    "error: not run: the reply was cut off at max_tokens{} in the middle \
                     of this call's arguments ({shown:?})",
                    max_tokens.map(|n| format!(" ({n})")).unwrap_or_default()
                ),
                None => format!(
                    "error: not run: the arguments of this call to {name} are not a JSON \
                     object ({shown:?}). Call it again with its arguments as one JSON object."
                ),
            }));
        }
        let session_id = self.key.session_id();
        let idempotency_key = idempotency_key(session_id, reply, &call.id);
        let invocation = ToolInvocation {
            name: name.clone(),
            arguments: call.function.arguments.clone(),
            context: ToolContext {
                session_id: session_id.to_owned(),
                agent: self.name.clone(),
                subagent: self.key.subagent_name().is_some(),
                call_id: call.id.clone(),
                idempotency_key: idempotency_key.clone(),
                cancel: ctx.cancel.child_token(),
            },
        };
        // A tool that does not exist cannot run whatever the person says: no question.
        let Some(callable) = self.tools.get(&name) else {
            return done(ToolOutput::error(format!(
                "error: no such tool: there is no tool named {name:?}; the tools are: {}",
                self.tool_names()
            )));
        };
        let start = |allowed_by: String, rerun: bool| StartedCall {
            entry: reply,
            tool_call_id: call.id.clone(),
            tool: name.clone(),
            allowed_by,
            idempotency_key: idempotency_key.clone(),
            rerun,
        };
        let needs_record = match callable {
            Callable::Tool(tool) => tool.effects() != ToolEffects::ReadOnly,
            Callable::Subagent(_) => false,
        };
        // What a resumed call does instead of asking the approver.
        let resumed = match plan {
            None | Some(ResumePlan::Reask | ResumePlan::RunReadOnly | ResumePlan::Waiting) => None,
            Some(ResumePlan::Continue) => Some((AfterCrash::Continued, None)),
            Some(ResumePlan::Unknown(on_unknown)) => {
                let again = match on_unknown {
                    OnUnknown::Rerun => Some("run again after a crash: the tool says so"),
                    OnUnknown::Skip => None,
                    OnUnknown::Ask => {
                        let asked = async {
                            match &self.approver {
                                Some(approver) => approver.run_again(&invocation).await,
                                None => false,
                            }
                        }
                        .instrument(spans::approval(session_id, &name, &call.id));
                        let answer = tokio::select! {
                            biased;
                            _ = ctx.cancel.cancelled() => None,
                            again = asked => Some(again),
                        };
                        match answer {
                            None => return done(ToolOutput::error(ctx.stopped_text())),
                            Some(true) => Some("run again after a crash: the person said so"),
                            Some(false) => None,
                        }
                    }
                };
                Some(match again {
                    Some(why) => (AfterCrash::RanAgain, Some(start(why.to_owned(), true))),
                    None => (AfterCrash::Interrupted, None),
                })
            }
        };
        if let Some((action, _)) = resumed {
            self.announce_resumed(call, action, ctx).await;
        }
        let allowed = |start: Option<StartedCall>, continued: bool, mark| Slot {
            pending: Pending::Allowed {
                invocation: Box::new(invocation.clone()),
                callable: callable.clone(),
                start,
                continued,
            },
            after_crash: mark,
        };
        let denied = |reason: &str, mark| Slot {
            pending: Pending::Denied(ToolOutput::error(format!(
                "error: the call to {name} was not allowed: {reason}"
            ))),
            after_crash: mark,
        };
        let deferred = Slot {
            pending: Pending::Deferred,
            after_crash: None,
        };
        if plan == Some(ResumePlan::Waiting) {
            match decision_for(&self.entries, reply, call) {
                Some(DecidedCall {
                    decision: CallDecision::Allow,
                    decided_by,
                    ..
                }) => {
                    let allowed_by = format!("a recorded decision by {decided_by}");
                    return allowed(needs_record.then(|| start(allowed_by, false)), false, None);
                }
                Some(DecidedCall {
                    decision: CallDecision::Deny { reason },
                    ..
                }) => return denied(&reason, None),
                // Nobody to ask: it keeps waiting for a decision.
                None if self.approver.is_none() => return deferred,
                None => {}
            }
        }
        match resumed {
            Some((AfterCrash::Interrupted, _)) => {
                return Slot {
                    pending: Pending::Done(ToolOutput::error(interrupted_result(call).text())),
                    after_crash: Some(AfterCrash::Interrupted),
                };
            }
            Some((action, start)) => {
                return allowed(start, action == AfterCrash::Continued, Some(action));
            }
            None => {}
        }
        // A call that never started, or one that only reads (whose start is not
        // recorded), goes through the approver again: the crash may have come before
        // anyone allowed it.
        let mark = match plan {
            Some(ResumePlan::RunReadOnly) => Some(AfterCrash::RanAgainReadOnly),
            other => ResumePlan::crash_mark(other),
        };
        if let Some(action) = mark {
            self.announce_resumed(call, action, ctx).await;
        }
        let allowed_by = match &self.approver {
            None => "no approver: every call runs".to_owned(),
            Some(approver) => {
                let span = spans::approval(session_id, &name, &call.id);
                let asked = approver
                    .approve_with_reason(&invocation)
                    .instrument(span.clone());
                let decision = tokio::select! {
                    biased;
                    _ = ctx.cancel.cancelled() => None,
                    decision = asked => Some(decision),
                };
                spans::record_decision(&span, decision.as_ref().map(|(approval, _)| approval));
                match decision {
                    None => return done(ToolOutput::error(ctx.stopped_text())),
                    Some((Approval::Deny(reason), _)) => return denied(&reason, mark),
                    // A subagent's task runs inside its parent's call, which cannot
                    // end without an answer.
                    Some((Approval::Defer, _)) if self.key.subagent_name().is_some() => {
                        return denied("a subagent's call cannot wait for a decision", mark);
                    }
                    Some((Approval::Defer, _)) => return deferred,
                    Some((Approval::Allow, allowed_by)) => allowed_by,
                }
            }
        };
        allowed(needs_record.then(|| start(allowed_by, false)), false, mark)
    }

    fn tool_names(&self) -> String {
        let mut names: Vec<&str> = self.tools.keys().map(String::as_str).collect();
        names.sort_unstable();
        names.join(", ")
    }
}

/// Starts an allowed call as a task of its own (so that a panic stays inside it);
/// anything else is returned as it is.
fn start_allowed(pending: Pending, ctx: &RunContext) -> Pending {
    let Pending::Allowed {
        invocation,
        callable,
        continued,
        ..
    } = pending
    else {
        return pending;
    };
    let span = spans::execute_tool(
        &invocation.context.session_id,
        &invocation.name,
        &invocation.context.call_id,
        &invocation.context.idempotency_key,
        matches!(callable, Callable::Subagent(_)),
        &invocation.arguments,
    );
    let observed = |output: &ToolOutput, session: &str, tool: &str| {
        spans::record_tool_result(&tracing::Span::current(), &output.content, output.is_error);
        metrics::tool_call(session, tool, output.is_error);
    };
    let (session, tool_name) = (
        invocation.context.session_id.clone(),
        invocation.name.clone(),
    );
    match callable {
        Callable::Tool(tool) => Pending::Running {
            task: AbortOnDrop(tokio::spawn(
                async move {
                    let output = tool.call(*invocation).await;
                    observed(&output, &session, &tool_name);
                    output
                }
                .instrument(span),
            )),
            abort_on_cancel: true,
        },
        Callable::Subagent(handle) => {
            let child = RunContext {
                events: ctx.events.clone(),
                cancel: invocation.context.cancel.clone(),
                timed_out: Arc::clone(&ctx.timed_out),
            };
            let (call_id, arguments) = (invocation.context.call_id, invocation.arguments);
            Pending::Running {
                task: AbortOnDrop(tokio::spawn(
                    async move {
                        let output = if continued {
                            handle.resume(call_id, child).await
                        } else {
                            handle.call(call_id, arguments, child).await
                        };
                        observed(&output, &session, &tool_name);
                        output
                    }
                    .instrument(span),
                )),
                abort_on_cancel: false,
            }
        }
    }
}

/// Where a prompt the session holds stands, from the entries after it.
enum PromptState {
    /// A reply without tool calls answered it: its text.
    Answered(String),
    /// Another prompt came after it before any answer.
    Superseded,
    /// Its turn never ended.
    Pending,
}

fn answer_after(entries: &[Entry]) -> PromptState {
    for message in entries.iter().filter_map(Entry::as_message) {
        match message.role {
            Role::User => return PromptState::Superseded,
            Role::Assistant if message.calls().is_empty() => {
                return PromptState::Answered(message.text());
            }
            _ => {}
        }
    }
    PromptState::Pending
}

/// Waits for a tool task; a panic or an abort becomes an error result.
async fn finish(
    name: &str,
    task: &mut AbortOnDrop,
    abort_on_cancel: bool,
    ctx: &RunContext,
) -> ToolOutput {
    let joined = if abort_on_cancel {
        tokio::select! {
            biased;
            joined = &mut task.0 => joined,
            _ = ctx.cancel.cancelled() => {
                task.0.abort();
                return ToolOutput::error(ctx.stopped_text());
            }
        }
    } else {
        (&mut task.0).await
    };
    match joined {
        Ok(output) => output,
        Err(error) if error.is_panic() => {
            let message = panic_message(error.into_panic());
            tracing::warn!(tool = name, "a tool panicked: {message}");
            ToolOutput::error(format!("error: the tool {name} crashed: {message}"))
        }
        Err(_) => ToolOutput::error(ctx.stopped_text()),
    }
}

fn panic_message(payload: Box<dyn Any + Send>) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "panicked".to_owned()
    }
}
