//! `Agent`: a model, tools and a session, loaded when built and written as it goes.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use reprise_provider::{ChatRequest, Provider};
use reprise_session::{
    CallDecision, LoadWarning, MemoryStore, Message, SessionFork, SessionKey, SessionStore,
    StoreError, WriterLock,
};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::before_changes::BeforeChanges;
use crate::compact::ContextSettings;
use crate::deferred::PendingCall;
use crate::error::AgentError;
use crate::events::EventSink;
use crate::prompt::Prompt;
use crate::subagent::{Subagent, SubagentHandle};
use crate::thread::{
    Callable, CompactionCause, CompactionReport, RunContext, Thread, ThreadConfig,
};
use crate::tool::{Tool, ToolApprover};

/// The default turn budget of a run.
pub const DEFAULT_MAX_TURNS: usize = 25;

/// The default wall-clock budget of a run.
pub const DEFAULT_TURN_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// The default name of the main agent (in events and transcripts).
pub const DEFAULT_AGENT_NAME: &str = "main";

/// What an agent is made of, kept so that a fork gets the same agent.
#[derive(Clone)]
struct AgentConfig {
    provider: Arc<dyn Provider>,
    name: String,
    system: Option<String>,
    tools: Vec<Arc<dyn Tool>>,
    subagents: Vec<Subagent>,
    approver: Option<Arc<dyn ToolApprover>>,
    max_turns: usize,
    turn_timeout: Option<Duration>,
    context: ContextSettings,
    before_changes: Option<Arc<dyn BeforeChanges>>,
    /// Whether transcripts are read from their latest compaction on.
    resume_from_compaction: bool,
}

/// Builds an [`Agent`]; see [`Agent::builder`].
///
/// A builder is a definition that can open many sessions: clone it, or call
/// [`AgentBuilder::open`] with each session id.
///
/// ```
/// use std::sync::Arc;
/// use reprise_agent::{Agent, AgentError};
/// use reprise_provider::{OpenAiConfig, OpenAiProvider, Provider};
/// use reprise_session::MemoryStore;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let provider: Arc<dyn Provider> = Arc::new(OpenAiProvider::new(OpenAiConfig::new("llama3.1"))?);
/// let agents = Agent::builder(provider)
///     .system("You are the town's guide.")
///     .store(Arc::new(MemoryStore::new()));
/// let first = agents.open("visitor-1").await?;
/// let second = agents.open("visitor-2").await?;
/// // One writer per session: the same id again is refused while `first` holds it.
/// assert!(agents.open("visitor-1").await.unwrap_err().is_locked());
/// first.close().await?;
/// second.close().await?;
/// # Ok(()) }
/// # tokio::runtime::Runtime::new().unwrap().block_on(demo()).unwrap();
/// ```
#[derive(Clone)]
pub struct AgentBuilder {
    config: AgentConfig,
    store: Option<Arc<dyn SessionStore>>,
    session_id: Option<String>,
}

impl AgentBuilder {
    /// The system prompt, sent first in every request. It is configuration, not
    /// history: it is not written to the session.
    pub fn system(mut self, system: impl Into<String>) -> Self {
        self.config.system = Some(system.into());
        self
    }

    /// Adds a tool.
    pub fn tool(mut self, tool: impl Tool + 'static) -> Self {
        self.config.tools.push(Arc::new(tool));
        self
    }

    /// Adds tools (each as [`AgentBuilder::tool`] takes it: an `Arc<dyn Tool>` is a
    /// tool too).
    pub fn tools<T: Tool + 'static>(mut self, tools: impl IntoIterator<Item = T>) -> Self {
        self.config.tools.extend(
            tools
                .into_iter()
                .map(|tool| Arc::new(tool) as Arc<dyn Tool>),
        );
        self
    }

    /// Adds a subagent, offered to the model as a tool named after it.
    pub fn subagent(mut self, subagent: Subagent) -> Self {
        self.config.subagents.push(subagent);
        self
    }

    /// Where the session lives. Without one, a [`MemoryStore`] (nothing survives).
    pub fn store(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// The session to load and write. A new id starts empty; without one, a fresh id.
    pub fn session_id(mut self, session_id: impl Into<String>) -> Self {
        self.session_id = Some(session_id.into());
        self
    }

    /// How many model calls one run may make before it fails with
    /// [`AgentError::MaxTurns`].
    pub fn max_turns(mut self, max_turns: usize) -> Self {
        self.config.max_turns = max_turns;
        self
    }

    /// The wall-clock budget of one run (model calls, tools and the approver's
    /// questions together). When it runs out the run stops as a cancel would (what
    /// is complete is kept, open tool calls are closed) and fails with
    /// [`AgentError::TurnTimeout`]. Default: [`DEFAULT_TURN_TIMEOUT`]; `None`: no
    /// budget.
    pub fn turn_timeout(mut self, budget: Option<Duration>) -> Self {
        self.config.turn_timeout = budget;
        self
    }

    /// Asked before every tool call (the agent's and its subagents').
    pub fn approver(mut self, approver: Arc<dyn ToolApprover>) -> Self {
        self.config.approver = Some(approver);
        self
    }

    /// Told before calls that may change things start (see [`BeforeChanges`]); what
    /// it returns is recorded with their start. Calls of subagents are covered by
    /// the parent's call that gives the subagent its task.
    pub fn before_changes(mut self, hook: Arc<dyn BeforeChanges>) -> Self {
        self.config.before_changes = Some(hook);
        self
    }

    /// The agent's name in events and transcripts (default `main`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.config.name = name.into();
        self
    }

    /// The model's context window in tokens. With one, the history is compacted
    /// before a request would pass [`AgentBuilder::compact_threshold`] of it
    /// (leaving room for the reply's `max_tokens`). Without one, only a server's
    /// context-exceeded answer leads to a compaction (sized for
    /// [`FALLBACK_CONTEXT_WINDOW`](crate::FALLBACK_CONTEXT_WINDOW) at most). Subagents
    /// use the same window.
    pub fn context_window(mut self, tokens: u32) -> Self {
        self.config.context.window = Some(tokens);
        self
    }

    /// Reads a transcript that has a compaction from its latest compaction's
    /// `through` on, when the store can ([`SessionStore::load_view`]): opening a long
    /// session then costs what the model sees, not its whole history. The history
    /// before is not among [`Agent::entries`] and [`Agent::messages`] then
    /// ([`Agent::skipped_history`] says so); the token totals still count it, from the
    /// compaction's `usage_before`. Off by default.
    pub fn resume_from_compaction(mut self, on: bool) -> Self {
        self.config.resume_from_compaction = on;
        self
    }

    /// The share of the context window a request may fill before the history is
    /// compacted (default [`DEFAULT_COMPACT_THRESHOLD`](crate::DEFAULT_COMPACT_THRESHOLD);
    /// clamped to 0.1..=1).
    pub fn compact_threshold(mut self, share: f64) -> Self {
        self.config.context.threshold = share;
        self
    }

    /// The most tokens a summary of the older history may have (the summary
    /// request's `max_tokens`); unset, a third of the compaction limit, at least 64.
    /// At most a quarter of the context window either way. A summary cut at this
    /// limit is kept and reported ([`AgentEvent::SummaryCutOff`](crate::AgentEvent::SummaryCutOff)).
    pub fn summary_max_tokens(mut self, tokens: u32) -> Self {
        self.config.context.summary_max_tokens = Some(tokens);
        self
    }

    /// Takes the session's writer lock (failing at once with
    /// [`StoreError::Locked`] if another writer has it), loads the session and its
    /// subagents' transcripts, and closes tool calls left without a result (but
    /// those of a last turn a crash cut, which the next run finishes: see
    /// [`Agent::resume_turn`]).
    pub async fn build(self) -> Result<Agent, AgentError> {
        let store = self
            .store
            .unwrap_or_else(|| Arc::new(MemoryStore::new()) as Arc<dyn SessionStore>);
        let session_id = self
            .session_id
            .unwrap_or_else(|| Uuid::now_v7().to_string());
        open(self.config, store, session_id).await
    }

    /// [`build`](Self::build)s an agent of this definition on `session_id`, leaving
    /// the builder as it is for the next session. Without a store set, each call
    /// gets a new [`MemoryStore`].
    pub async fn open(&self, session_id: impl Into<String>) -> Result<Agent, AgentError> {
        self.clone().session_id(session_id).build().await
    }
}

/// An agent over one session: a model, tools, subagents, and a history that is on
/// disk the moment each message exists.
///
/// The agent holds the session's writer lock until it is closed
/// ([`Agent::close`]) or dropped. Closing lets go of it before returning; a drop
/// lets go too, but a store shared across processes (PostgreSQL) may finish that
/// in the background, after the drop: close an agent whose session another process
/// may take next.
///
/// ```no_run
/// use std::sync::Arc;
/// use reprise_agent::Agent;
/// use reprise_provider::{OpenAiConfig, OpenAiProvider};
/// use reprise_session::FileSessionStore;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let provider = Arc::new(OpenAiProvider::new(OpenAiConfig::new("llama3.1"))?);
/// let mut agent = Agent::builder(provider)
///     .system("You are Astor, an adventurer.")
///     .store(Arc::new(FileSessionStore::new("./sessions")))
///     .session_id("quest-1")
///     .build()
///     .await?;
/// let answer = agent.run("Where is the Cave of Echoes?").await?;
/// println!("{answer}");
/// agent.close().await?;
/// # Ok(()) }
/// ```
pub struct Agent {
    config: AgentConfig,
    store: Arc<dyn SessionStore>,
    session_id: String,
    thread: Thread,
    subagents: Vec<Arc<SubagentHandle>>,
    warnings: Vec<LoadWarning>,
    lock: WriterLock,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("name", &self.config.name)
            .field("session_id", &self.session_id)
            .field("messages", &self.thread.history().len())
            .finish()
    }
}

async fn open(
    config: AgentConfig,
    store: Arc<dyn SessionStore>,
    session_id: String,
) -> Result<Agent, AgentError> {
    check_unique_names(&config)?;
    let lock = store.lock(&session_id).await?;
    let Loaded {
        thread,
        subagents,
        warnings,
    } = load_threads(&config, &store, &session_id).await?;
    Ok(Agent {
        config,
        store,
        session_id,
        thread,
        subagents,
        warnings,
        lock,
    })
}

/// An agent's threads as read from its store.
struct Loaded {
    thread: Thread,
    subagents: Vec<Arc<SubagentHandle>>,
    warnings: Vec<LoadWarning>,
}

/// Reads the session `session_id` and its subagents' transcripts from `store` into
/// threads (the caller holds the writer lock).
async fn load_threads(
    config: &AgentConfig,
    store: &Arc<dyn SessionStore>,
    session_id: &str,
) -> Result<Loaded, AgentError> {
    let key = SessionKey::session(session_id)?;
    let mut tools: Vec<(_, Callable)> = config
        .tools
        .iter()
        .map(|tool| (tool.spec(), Callable::Tool(Arc::clone(tool))))
        .collect();
    let mut subagents = Vec::with_capacity(config.subagents.len());
    let mut warnings = Vec::new();
    for subagent in &config.subagents {
        let thread = Thread::open(ThreadConfig {
            name: subagent.name.clone(),
            key: SessionKey::subagent(session_id, &subagent.name)?,
            store: Arc::clone(store),
            provider: subagent
                .provider
                .clone()
                .unwrap_or_else(|| Arc::clone(&config.provider)),
            system: Some(subagent.system.clone()),
            tools: subagent
                .tools
                .iter()
                .map(|tool| (tool.spec(), Callable::Tool(Arc::clone(tool))))
                .collect(),
            approver: config.approver.clone(),
            max_turns: subagent.max_turns,
            // A subagent's task runs inside its parent's run and its budget.
            turn_timeout: None,
            context: config.context,
            // The parent's call that gives the task is preceded by the hook.
            before_changes: None,
            from_compaction: config.resume_from_compaction,
        })
        .await?;
        warnings.extend_from_slice(thread.warnings());
        let handle = Arc::new(SubagentHandle {
            name: subagent.name.clone(),
            may_change: subagent
                .tools
                .iter()
                .any(|tool| tool.effects() != crate::tool::ToolEffects::ReadOnly),
            thread: Mutex::new(thread),
        });
        tools.push((subagent.spec(), Callable::Subagent(handle.clone())));
        subagents.push(handle);
    }

    let thread = Thread::open(ThreadConfig {
        name: config.name.clone(),
        key,
        store: Arc::clone(store),
        provider: Arc::clone(&config.provider),
        system: config.system.clone(),
        tools,
        approver: config.approver.clone(),
        max_turns: config.max_turns,
        turn_timeout: config.turn_timeout,
        context: config.context,
        before_changes: config.before_changes.clone(),
        from_compaction: config.resume_from_compaction,
    })
    .await?;
    // The main transcript's warnings first: they are the ones a person reads first.
    let mut all_warnings = thread.warnings().to_vec();
    all_warnings.extend(warnings);
    Ok(Loaded {
        thread,
        subagents,
        warnings: all_warnings,
    })
}

fn check_unique_names(config: &AgentConfig) -> Result<(), AgentError> {
    let mut seen = HashSet::new();
    let names = config.tools.iter().map(|tool| tool.spec().name).chain(
        config
            .subagents
            .iter()
            .map(|subagent| subagent.name.clone()),
    );
    for name in names {
        if !seen.insert(name.clone()) {
            return Err(AgentError::Config(format!(
                "two tools or subagents are named {name:?}"
            )));
        }
    }
    for subagent in &config.subagents {
        let mut seen = HashSet::new();
        for tool in &subagent.tools {
            let name = tool.spec().name;
            if !seen.insert(name.clone()) {
                return Err(AgentError::Config(format!(
                    "subagent {:?} has two tools named {name:?}",
                    subagent.name
                )));
            }
        }
    }
    Ok(())
}

impl Agent {
    /// Starts building an agent that calls `provider`.
    pub fn builder(provider: Arc<dyn Provider>) -> AgentBuilder {
        AgentBuilder {
            config: AgentConfig {
                provider,
                name: DEFAULT_AGENT_NAME.to_owned(),
                system: None,
                tools: Vec::new(),
                subagents: Vec::new(),
                approver: None,
                max_turns: DEFAULT_MAX_TURNS,
                turn_timeout: Some(DEFAULT_TURN_TIMEOUT),
                context: ContextSettings::default(),
                before_changes: None,
                resume_from_compaction: false,
            },
            store: None,
            session_id: None,
        }
    }

    /// Sends `prompt` and runs until the model answers without calling a tool;
    /// returns that answer's text. The prompt, each assistant message and each tool
    /// result are durable before the next model or tool call starts.
    ///
    /// `prompt` is text or a [`Prompt`]. A prompt given with an id
    /// ([`Prompt::with_id`]) is stored and sent once: run again with the same id
    /// after a failure or a cancel, the run goes on from the stored prompt (as
    /// [`Agent::answer_pending`] does); after it was answered, the run returns
    /// that answer without calling the model.
    pub async fn run(&mut self, prompt: impl Into<Prompt>) -> Result<String, AgentError> {
        self.run_message(prompt, None, CancellationToken::new())
            .await
    }

    /// [`Agent::run`] for a UI: what happens is sent to `events` as it happens (an
    /// unbounded or a bounded channel, see [`EventSink`]), and cancelling `cancel`
    /// stops the run. After a cancel, every complete message is kept, tool calls
    /// still running are closed with an error result ("cancelled by the user"), and
    /// a half-streamed answer is dropped; the run returns [`AgentError::Cancelled`]
    /// and the agent can run again.
    pub async fn run_streaming(
        &mut self,
        prompt: impl Into<Prompt>,
        events: impl Into<EventSink>,
        cancel: CancellationToken,
    ) -> Result<String, AgentError> {
        self.run_message(prompt, Some(events.into()), cancel).await
    }

    /// The most general run: any prompt (multi-part content: [`Prompt::message`]),
    /// optional events.
    pub async fn run_message(
        &mut self,
        prompt: impl Into<Prompt>,
        events: Option<EventSink>,
        cancel: CancellationToken,
    ) -> Result<String, AgentError> {
        let ctx = RunContext::new(events, cancel);
        self.thread
            .run_entry(Some(prompt.into().into_entry()), &ctx)
            .await
    }

    /// Runs on the session as it is, without a new prompt, until the model answers
    /// without calling a tool: for a prompt that was stored and never answered (the
    /// process running it died mid-turn, and another took the session over). Tool
    /// calls left without a result are closed first, as on every run.
    pub async fn answer_pending(&mut self) -> Result<String, AgentError> {
        let ctx = RunContext::new(None, CancellationToken::new());
        self.thread.run_entry(None, &ctx).await
    }

    /// Whether the session's last turn is open: in the middle of its tool calls (a
    /// call without a result: a crash cut it, or calls wait for a decision), or
    /// after their results and before the model's reply (a crash fell there). The
    /// next run finishes that turn (see [`Agent::resume_turn`]). A run that ends
    /// with an error on its results records that it stopped there, so its turn is
    /// not taken for a cut one.
    pub fn has_cut_turn(&self) -> bool {
        self.thread.has_cut_turn()
    }

    /// The tool calls of the open turn that wait for a decision (the approver
    /// answered [`Approval::Defer`](crate::Approval::Defer), and no decision is
    /// recorded yet), in call order; empty when none wait.
    pub fn pending_calls(&self) -> Vec<PendingCall> {
        self.thread.pending_calls()
    }

    /// Records a decision about a call that waits, durably, as one entry: allow it,
    /// or deny it with a reason the model is told. `decided_by` says who decided
    /// (written to the call's start record). The decision is bound to the call's
    /// arguments: `call` must be one [`Agent::pending_calls`] lists (here or in
    /// the process that stopped the turn), with the same arguments and hash.
    ///
    /// Nothing runs until the turn is continued ([`Agent::resume_turn`], or any
    /// run): then allowed calls run, denied ones get an error result with the
    /// reason, calls still undecided go to the approver (which may answer, or
    /// defer again; without an approver they keep waiting), and once every call of
    /// the turn has a result the model is called as usual.
    ///
    /// Refused, with nothing written, as [`AgentError::Decision`]: a call that does
    /// not wait ([`DecisionError::UnknownCall`](crate::DecisionError::UnknownCall)),
    /// other arguments ([`DecisionError::ArgumentsChanged`](crate::DecisionError::ArgumentsChanged)),
    /// a call decided already ([`DecisionError::AlreadyDecided`](crate::DecisionError::AlreadyDecided)).
    pub async fn decide(
        &mut self,
        call: &PendingCall,
        decision: CallDecision,
        decided_by: impl Into<String>,
    ) -> Result<(), AgentError> {
        self.thread
            .record_decision(call, decision, decided_by.into())
            .await
    }

    /// Finishes the turn a crash cut, as if the crash had not happened, or the turn
    /// whose calls waited for a decision, and returns the model's answer; `Ok(None)`
    /// when no turn is open. For each call of that turn without a result:
    ///
    /// - **waiting for a decision** ([`Agent::decide`]): run if allowed, answered
    ///   with the reason if denied; undecided, the approver is asked again, and
    ///   without an approver it keeps waiting. While a call waits the run ends with
    ///   [`AgentError::AwaitingDecision`] (the decided calls have run) and the
    ///   model is not called;
    /// - **never started** (no start record): the approver is asked again, and the
    ///   call runs if allowed;
    /// - **read-only** ([`ToolEffects::ReadOnly`](crate::ToolEffects)): run again
    ///   with no question about running it twice (the approver still decides
    ///   whether it may run: its start is never recorded);
    /// - **started, outcome unknown**: as the tool's [`Tool::on_unknown`](crate::Tool::on_unknown)
    ///   says: run again with the same idempotency key, ask the approver
    ///   ([`ToolApprover::run_again`](crate::ToolApprover::run_again)), or tell the
    ///   model the call was interrupted;
    /// - **a subagent's task**: the subagent goes on from where it was cut, and its
    ///   answer is the result.
    ///
    /// Then the model is called. Each decision is durable before it is acted on, so
    /// a crash during the resume is resumed the same way. What is done with each
    /// call is reported as [`AgentEvent::CallResumed`](crate::AgentEvent::CallResumed),
    /// and written on its result (`afterCrash`). Any run ([`Agent::run`],
    /// [`Agent::answer_pending`]) finishes a cut turn first as well.
    pub async fn resume_turn(
        &mut self,
        events: Option<EventSink>,
        cancel: CancellationToken,
    ) -> Result<Option<String>, AgentError> {
        if !self.thread.has_cut_turn() {
            return Ok(None);
        }
        let ctx = RunContext::new(events, cancel);
        self.thread.run_entry(None, &ctx).await.map(Some)
    }

    /// The session's messages, in the order they were recorded (the system prompt
    /// is not among them).
    pub fn messages(&self) -> &[Message] {
        self.thread.history()
    }

    /// The session's entries (the main transcript) as loaded and recorded since:
    /// the messages with their uuids and the fields beside them.
    pub fn entries(&self) -> &[reprise_session::Entry] {
        self.thread.entries()
    }

    /// The messages the next model call would send: the system prompt, the summary
    /// of the latest compaction (if any), then the history after it, with tool
    /// results whose call is missing left out.
    pub fn model_view(&self) -> &ChatRequest {
        self.thread.request()
    }

    /// The estimated size of the next request in tokens (before the next prompt):
    /// the server's count of the last request plus an estimate of what was added
    /// since.
    pub fn context_used(&self) -> u64 {
        self.thread.context_used()
    }

    /// The context window, when known.
    pub fn context_window(&self) -> Option<u32> {
        self.thread.context().window
    }

    /// Compacts the history now: everything but the latest message is summarised by
    /// the model (with `focus`, what the summary must keep, added to its
    /// instructions) and one compaction entry is appended. `Ok(None)`
    /// when there is too little to compact. What happens goes to `events`;
    /// cancelling `cancel` stops it with nothing written.
    pub async fn compact(
        &mut self,
        focus: Option<&str>,
        events: Option<EventSink>,
        cancel: CancellationToken,
    ) -> Result<Option<CompactionReport>, AgentError> {
        let ctx = RunContext::new(events, cancel);
        let result = self
            .thread
            .compact(focus, CompactionCause::Requested, &ctx)
            .await;
        if result.is_err() {
            self.thread.mark_needs_repair();
        }
        result
    }

    /// Whether the main transcript's history before its latest compaction was left
    /// unread when the session was loaded
    /// ([`AgentBuilder::resume_from_compaction`]): [`Agent::entries`] then start at
    /// that compaction's `through`.
    pub fn skipped_history(&self) -> bool {
        self.thread.skipped_history()
    }

    /// What was wrong in the transcripts when they were loaded (a torn last line
    /// cut, corrupt lines skipped): the main transcript's, then the subagents'.
    pub fn load_warnings(&self) -> &[LoadWarning] {
        &self.warnings
    }

    /// The session id.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// The store the session lives in.
    pub fn store(&self) -> &Arc<dyn SessionStore> {
        &self.store
    }

    /// The session's token totals as the server reported them, across every model
    /// call recorded in it (its subagents' and compactions' included, and those
    /// of what a rewind took out of view), from the counts stored on the entries;
    /// `None` when no call reported any.
    pub async fn usage_totals(&self) -> Option<reprise_provider::Usage> {
        let mut totals = crate::usage::usage_totals(self.thread.entries());
        if let Some(rewound) = self.thread.unheld_usage() {
            crate::usage::add_usage(totals.get_or_insert_with(Default::default), rewound);
        }
        for handle in &self.subagents {
            let thread = handle.thread.lock().await;
            if let Some(more) = crate::usage::usage_totals(thread.entries()) {
                crate::usage::add_usage(totals.get_or_insert_with(Default::default), more);
            }
        }
        totals
    }

    /// The names of the subagents.
    pub fn subagent_names(&self) -> Vec<&str> {
        self.subagents
            .iter()
            .map(|handle| handle.name.as_str())
            .collect()
    }

    /// A subagent's messages (its own conversation), or `None` for an unknown name.
    pub async fn subagent_messages(&self, name: &str) -> Option<Vec<Message>> {
        let handle = self.subagents.iter().find(|handle| handle.name == name)?;
        let thread = handle.thread.lock().await;
        Some(thread.history().to_vec())
    }

    /// A new agent, same configuration, on a copy of this session named `new_id`
    /// (in the same store, with `forked_from` recorded). This session stays as it is
    /// and keeps being this agent's. A run-folder store holds one session and refuses;
    /// fork a run with `reprise_runs::fork_run` and [`Agent::with_session`], or
    /// use [`Agent::fork_into`].
    ///
    /// A session nothing was written to yet is not in the store; its fork is a new
    /// empty session (`new_id` must not exist either).
    pub async fn fork(&self, new_id: &str) -> Result<Agent, AgentError> {
        let fork = SessionFork::whole(self.session_id.as_str(), new_id);
        match self.store.fork(fork).await {
            Ok(()) => {}
            Err(StoreError::NotFound { .. }) if self.is_empty().await => {
                let lock = self.store.lock(new_id).await?;
                let exists = self.store.load(&SessionKey::session(new_id)?).await?;
                lock.release().await?;
                if exists.is_some() {
                    return Err(StoreError::AlreadyExists {
                        session: new_id.to_owned(),
                    }
                    .into());
                }
            }
            Err(error) => return Err(error.into()),
        }
        open(
            self.config.clone(),
            Arc::clone(&self.store),
            new_id.to_owned(),
        )
        .await
    }

    /// Whether nothing is recorded in the session, in its main transcript or its
    /// subagents'.
    async fn is_empty(&self) -> bool {
        if !self.thread.entries().is_empty() {
            return false;
        }
        for handle in &self.subagents {
            if !handle.thread.lock().await.entries().is_empty() {
                return false;
            }
        }
        true
    }

    /// Reads the session back from the store, keeping the writer lock: what was
    /// appended beside the agent through [`Agent::store`] (a rewind entry, which takes
    /// messages out of the model's view) reaches the model's view. On an error the
    /// agent stays as it was.
    pub async fn reload(&mut self) -> Result<(), AgentError> {
        let Loaded {
            thread,
            subagents,
            warnings,
        } = load_threads(&self.config, &self.store, &self.session_id).await?;
        self.thread = thread;
        self.subagents = subagents;
        self.warnings = warnings;
        Ok(())
    }

    /// Lets go of the session: when this returns, the writer lock is released in
    /// the store (another process can open the session at once) and the agent is
    /// gone. The store itself stays open for other agents; close it with
    /// [`SessionStore::close`] before the process ends.
    pub async fn close(self) -> Result<(), AgentError> {
        self.lock.release().await?;
        Ok(())
    }

    /// A new agent with this agent's configuration (provider, system prompt, tools,
    /// subagents, approver, turn budget) on another session: for example the run
    /// folder that `reprise_runs::fork_run` just made. Takes that session's
    /// writer lock and loads it, as [`AgentBuilder::build`] does.
    pub async fn with_session(
        &self,
        store: Arc<dyn SessionStore>,
        session_id: &str,
    ) -> Result<Agent, AgentError> {
        open(self.config.clone(), store, session_id.to_owned()).await
    }

    /// A new agent, same configuration, on a copy of this session (its subagents'
    /// transcripts included) written into another store as `new_id` — for example a
    /// new run folder. The target session must not exist there yet. Works with any
    /// pair of stores; `forked_from` is not recorded (the store API has no field for
    /// it), which `fork_run` does for run folders.
    pub async fn fork_into(
        &self,
        target: Arc<dyn SessionStore>,
        new_id: &str,
    ) -> Result<Agent, AgentError> {
        let target_key = SessionKey::session(new_id)?;
        {
            let _lock = target.lock(new_id).await?;
            if target.load(&target_key).await?.is_some() {
                return Err(StoreError::AlreadyExists {
                    session: new_id.to_owned(),
                }
                .into());
            }
            // Subagents first: the main transcript, written last, marks the copy done.
            for handle in &self.subagents {
                let source = self.thread.key().main();
                let source = SessionKey::subagent(source.session_id(), &handle.name)?;
                if let Some(loaded) = self.store.load(&source).await? {
                    let key = SessionKey::subagent(new_id, &handle.name)?;
                    target.append(&key, &loaded.entries).await?;
                }
            }
            let entries = self
                .store
                .load(self.thread.key())
                .await?
                .map(|loaded| loaded.entries)
                .unwrap_or_default();
            target.append(&target_key, &entries).await?;
        }
        open(self.config.clone(), target, new_id.to_owned()).await
    }
}
