//! The chat driver, independent of any screen: opens the session of a run folder
//! (provider, tools, run store, gate), runs turns, and keeps the run's `session.log`
//! and `transcript.jsonl`.
//!
//! Screens talk to it through [`UiEvent`]s (what happened, and questions for the
//! person) and by calling [`ChatSession::turn`].

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{ChatError, Result};
use crate::error_text::with_causes;
use reprise_agent::{Agent, AgentError, AgentEvent, Subagent, Tool, ToolApprover};
use reprise_provider::Provider;
use reprise_redact::Redactor;
use reprise_runs::{
    RunFolder, RunStore, SessionLog, Transcript, TranscriptRecord, create_run_folder,
};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};
use tokio_util::sync::CancellationToken;

use crate::approval::{Decisions, gate_for_run};
use crate::config::Settings;
use crate::events::UiEvent;
use crate::server_error::describe_agent_error;
use crate::text::{
    arguments_preview, compaction_line, cut_off_line, subagent_indent, summary_cut_off_line,
};

/// Everything needed to open the session of any run folder: `/resume` and `/fork`
/// open a new one through it, because the gate and the transcript belong to the run.
pub struct Opener {
    /// The resolved settings.
    pub settings: Settings,
    /// The model.
    pub provider: Arc<dyn Provider>,
    /// The folder the chat was started in: the working folder of runs that recorded
    /// none.
    pub workdir: PathBuf,
    /// What every transcript value and shown tool result passes through.
    pub redactor: Redactor,
    /// Where events and questions go.
    pub ui: UnboundedSender<UiEvent>,
    /// Where the conversations are kept.
    pub runs: Arc<dyn reprise_runs::RunCatalog>,
}

/// The session of one run folder: the agent over its conversation, and its logs.
pub struct ChatSession {
    /// The run folder the conversation, log and transcript live in.
    pub folder: RunFolder,
    /// The agent, holding the session's writer lock.
    pub agent: Agent,
    /// Where the tools work, and what the checkpoints capture.
    pub workdir: PathBuf,
    /// The checkpoints of `workdir` the chat takes (and `/rewind` restores).
    pub checkpoints: crate::checkpoints::FolderCheckpoints,
    log: SessionLog,
    transcript: Transcript,
    decisions: Decisions,
    redactor: Redactor,
    ui: UnboundedSender<UiEvent>,
    settings_summary: (String, String),
    hub: Option<reprise_mcp::McpHub>,
    /// What is wrong with the files kept beside the run (the prompt history).
    notes: Vec<String>,
    /// The store of the fork that made this run, kept (never written through) until
    /// the session ends: dropping it waits for the fork's data to be on disk.
    _fork: Option<RunStore>,
}

/// How a turn ended.
#[derive(Debug)]
pub enum TurnEnd {
    /// The model answered.
    Answered,
    /// Ctrl-C stopped it; what was complete is kept.
    Cancelled,
    /// It failed; the message is what to show.
    Failed(String),
}

impl Opener {
    /// The history file shared by every run.
    pub fn history_path(&self) -> PathBuf {
        self.settings.runs_dir.join("history.jsonl")
    }

    /// What to tell the person about the prompt history, when it cannot be kept: a
    /// symbolic link is never written through.
    fn history_warning(&self) -> Option<String> {
        let path = self.history_path();
        std::fs::symlink_metadata(&path)
            .is_ok_and(|meta| meta.file_type().is_symlink())
            .then(|| format!("{}: {}", path.display(), reprise_runs::HISTORY_LINK_WARNING))
    }

    /// A new, empty run folder.
    pub fn new_folder(&self) -> Result<RunFolder> {
        create_run_folder(&self.settings.runs_dir).map_err(|source| ChatError::NewRunFolder {
            dir: self.settings.runs_dir.clone(),
            source,
        })
    }

    /// Opens the session of `folder`: a new one when the folder has none, its own
    /// (loaded, repaired) when it has.
    pub async fn open(&self, folder: RunFolder) -> Result<ChatSession> {
        let fresh = folder.session_id.is_none().then(|| folder.clone());
        let opened = self.open_with(folder, None).await;
        if opened.is_err()
            && let Some(fresh) = fresh
        {
            // A chat that could not start leaves no empty run folder behind.
            let _ = reprise_runs::remove_unused_run_folder(&fresh);
        }
        opened
    }

    /// Opens the session of a run folder that a fork just filled, keeping the store
    /// that owns the fork's background data sync.
    pub async fn open_forked(&self, forked: reprise_runs::CatalogFork) -> Result<ChatSession> {
        self.open_with(forked.folder, forked.store).await
    }

    /// Opens `folder`'s session with the store the catalog gives; `fork` is the store
    /// a fork into the folder returned, which owns the fork's background data sync.
    async fn open_with(&self, folder: RunFolder, fork: Option<RunStore>) -> Result<ChatSession> {
        // Every file of the run is written through a handle on the runs folder: a
        // command that changes the folders above it cannot cut the chat off its run.
        let run_dir = reprise_runs::held::through_held(&folder.dir);
        let held = RunFolder {
            dir: run_dir.clone(),
            ..folder.clone()
        };
        let store = self.runs.store_for(&held, &self.redactor);
        let session_id = match folder.session_id.clone() {
            Some(session_id) => session_id,
            None => self.runs.new_session_id(&folder).await?,
        };
        self.runs.ensure_local_folder(&held).await?;
        let (workdir, workdir_not_taken) = crate::checkpoints::run_workdir(&run_dir, &self.workdir);
        // A folder a cut restore left half restored is not worked in.
        crate::checkpoints::refuse_unfinished(&workdir, &folder.dir)?;
        let decisions = Decisions::default();
        // Each run gets its own servers and its own gate: nothing one run allowed
        // "always" reaches another.
        let hub = self.start_servers().await?;
        // Only the chat's own tools: a server's claim that a tool only reads is not
        // trusted.
        let own_tools = crate::builtins::chat_tools(&self.settings, workdir.clone());
        let read_only = own_tools
            .iter()
            .filter(|tool| tool.effects() == reprise_agent::ToolEffects::ReadOnly)
            .map(|tool| tool.spec().name)
            .collect();
        let mut tools = own_tools;
        if let Some(hub) = &hub {
            tools.extend(hub.tools());
        }
        let tools = crate::tool_settings::with_settings(tools, &self.settings.tools);
        let gate = gate_for_run(
            &self.settings,
            self.ui.clone(),
            self.redactor.clone(),
            decisions.clone(),
            read_only,
        )?;
        let approver: Arc<dyn ToolApprover> = Arc::new(crate::approval::DelegationPassesGate {
            inner: Arc::new(gate),
            subagents: self
                .settings
                .agents
                .iter()
                .map(|a| a.name.clone())
                .collect(),
        });
        let subagents = match self.subagents(&tools) {
            Ok(subagents) => subagents,
            Err(error) => {
                if let Some(hub) = &hub {
                    hub.shutdown().await;
                }
                return Err(error);
            }
        };
        let window =
            crate::context_window::window_for(&self.settings, &self.redactor, &run_dir).await;
        let checkpoints = crate::checkpoints::FolderCheckpoints::new(
            run_dir.clone(),
            workdir.clone(),
            crate::checkpoints::capture_options(&self.settings),
            self.ui.clone(),
        );
        let mut builder = Agent::builder(Arc::clone(&self.provider))
            .system(self.settings.system_prompt.clone())
            .tools(tools);
        for subagent in subagents {
            builder = builder.subagent(subagent);
        }
        if let Some(tokens) = self.settings.summary_max_tokens {
            builder = builder.summary_max_tokens(tokens);
        }
        let built = builder
            .store(store)
            .session_id(session_id)
            .max_turns(self.settings.max_turns as usize)
            .turn_timeout(self.settings.turn_timeout)
            .context_window(window)
            .compact_threshold(self.settings.compact_threshold)
            .approver(approver)
            .before_changes(Arc::new(checkpoints.clone()))
            // A long run opens in what its model sees: the history before its latest
            // compaction is read by `reprise show`, /rewind and forks, not here.
            .resume_from_compaction(true)
            .build()
            .await;
        let agent = match built {
            Ok(agent) => agent,
            Err(error) => {
                if let Some(hub) = &hub {
                    hub.shutdown().await;
                }
                let run = folder.name().to_owned();
                return Err(
                    if matches!(
                        error,
                        reprise_agent::AgentError::Store(
                            reprise_session::StoreError::Locked { .. }
                        )
                    ) {
                        ChatError::RunOpenElsewhere { run, source: error }
                    } else {
                        ChatError::OpenRun { run, source: error }
                    },
                );
            }
        };
        let log = SessionLog::open(&run_dir)?.with_redactor(self.redactor.clone());
        let transcript = Transcript::open(&run_dir, self.redactor.clone())?;
        let mut notes: Vec<String> = self.history_warning().into_iter().collect();
        notes.extend(workdir_not_taken);
        if workdir != self.workdir {
            notes.push(format!(
                "this run's working folder is {} (its tools work there)",
                workdir.display()
            ));
        }
        Ok(ChatSession {
            _fork: fork,
            folder,
            agent,
            workdir,
            checkpoints,
            log,
            transcript,
            decisions,
            redactor: self.redactor.clone(),
            ui: self.ui.clone(),
            settings_summary: (self.settings.base_url.clone(), self.settings.model.clone()),
            hub,
            notes,
        })
    }

    /// The configured subagents, each with the tools its patterns name among
    /// `tools` (the chat's and the MCP servers') and its own model client when it
    /// has its own model or generation settings.
    fn subagents(&self, tools: &[Arc<dyn Tool>]) -> Result<Vec<Subagent>> {
        let mut subagents = Vec::with_capacity(self.settings.agents.len());
        for agent in &self.settings.agents {
            let mut subagent = Subagent::new(&agent.name, &agent.description, &agent.system_prompt)
                .max_turns(agent.max_turns)
                .tools(
                    tools
                        .iter()
                        .filter(|tool| agent.may_use(&tool.spec().name))
                        .cloned(),
                );
            if agent.own_provider {
                let mut settings = self.settings.clone();
                if let Some(model) = &agent.model {
                    settings.model = model.clone();
                }
                if let Some(base_url) = &agent.base_url {
                    settings.base_url = base_url.clone();
                }
                settings.generation = agent.generation.clone();
                subagent = subagent.provider(crate::provider::build_provider(&settings)?);
            }
            subagents.push(subagent);
        }
        Ok(subagents)
    }

    /// Starts the configured MCP servers (none configured: none started). Their
    /// notices go to the screen.
    async fn start_servers(&self) -> Result<Option<reprise_mcp::McpHub>> {
        let Some(mcp) = self.settings.mcp.as_ref().filter(|m| !m.servers.is_empty()) else {
            return Ok(None);
        };
        let (notices, mut received) = unbounded_channel();
        let ui = self.ui.clone();
        tokio::spawn(async move {
            while let Some(notice) = received.recv().await {
                if ui.send(UiEvent::Mcp(notice)).is_err() {
                    break;
                }
            }
        });
        let hub = reprise_mcp::McpHub::start(
            mcp,
            &reprise_mcp::ResolveContext::from_process(),
            reprise_mcp::HubOptions {
                notices: Some(notices),
            },
        )
        .await?;
        Ok(Some(hub))
    }
}

impl ChatSession {
    /// Ends the session: its MCP servers are shut down (and its writer lock released).
    pub async fn close(self) {
        if let Some(hub) = &self.hub {
            hub.shutdown().await;
        }
    }

    /// The run folder's name.
    pub fn run_name(&self) -> &str {
        self.folder.name()
    }

    /// Problems met opening the run and loading the session (a damaged `session.json`
    /// rebuilt, torn tail cut, corrupt lines skipped).
    pub fn load_warnings(&self) -> Vec<String> {
        let repairs = self.folder.warnings.iter().map(ToString::to_string);
        // The store read the run through the held runs folder: its warnings name
        // the files by their real paths.
        let loaded = self
            .agent
            .load_warnings()
            .iter()
            .map(|warning| reprise_runs::held::shown(&warning.to_string()).into_owned());
        repairs
            .chain(loaded)
            .chain(self.notes.iter().cloned())
            .collect()
    }

    /// Every entry of the conversation as stored, those a rewind took out of the
    /// model's view included (the agent holds only the others).
    pub async fn stored_entries(&self) -> Result<Vec<reprise_session::Entry>> {
        let key = reprise_session::SessionKey::session(self.agent.session_id())?;
        Ok(self
            .agent
            .store()
            .load(&key)
            .await?
            .unwrap_or_default()
            .entries)
    }

    /// Adds a note shown with the problems met opening the run.
    pub fn add_note(&mut self, note: String) {
        self.notes.push(note);
    }

    /// The agent, and where the events of its runs go.
    fn agent_and_sinks(&mut self) -> (&mut Agent, EventSinks<'_>) {
        let sinks = EventSinks {
            log: &mut self.log,
            transcript: &self.transcript,
            decisions: &self.decisions,
            redactor: &self.redactor,
            ui: &self.ui,
        };
        (&mut self.agent, sinks)
    }

    /// Writes a line to `session.log` (what the screen shows that is not a turn).
    pub fn log_line(&mut self, line: &str) {
        if let Err(error) = self.log.write_line(line) {
            tracing::warn!("session.log: {}", with_causes(&error));
        }
    }

    /// The redactor that shown tool arguments and results pass through.
    pub fn redactor(&self) -> Redactor {
        self.redactor.clone()
    }

    /// The context window the agent compacts for.
    pub fn context_window(&self) -> Option<u32> {
        self.agent.context_window()
    }

    /// The estimated size of the next request, in tokens.
    pub fn context_used(&self) -> u64 {
        self.agent.context_used()
    }

    /// What to show when a turn or a compaction failed.
    fn describe(&self, error: &AgentError) -> String {
        if let AgentError::Store(stopped @ reprise_session::StoreError::WritesStopped { .. }) =
            error
        {
            return writes_stopped_text(stopped, self.run_name());
        }
        let (base_url, model) = &self.settings_summary;
        describe_agent_error(error, base_url, model)
    }

    /// `/compact [what to keep]`: summarises the older part of the conversation
    /// now. The marker line reaches the screen as an event, like a compaction
    /// during a turn.
    pub async fn compact(&mut self, focus: Option<&str>, cancel: CancellationToken) -> TurnEnd {
        let (events_tx, events_rx) = unbounded_channel();
        let (agent, mut sinks) = self.agent_and_sinks();
        let run = agent.compact(focus, Some(events_tx.into()), cancel);
        let (result, _) = tokio::join!(run, sinks.forward(events_rx));
        match result {
            Ok(Some(_)) => TurnEnd::Answered,
            Ok(None) => {
                let line = NOTHING_TO_COMPACT.to_owned();
                self.log_line(&line);
                TurnEnd::Failed(line)
            }
            Err(AgentError::Cancelled) => TurnEnd::Cancelled,
            Err(error) => {
                let message = self.describe(&error);
                self.log_line(&format!("✗ {}", self.redactor.redact(&message)));
                TurnEnd::Failed(message)
            }
        }
    }

    /// Sends `prompt` and runs the turn to its end, forwarding what happens to the
    /// screen and writing it to the run's logs. Cancelling `cancel` stops it.
    pub async fn turn(&mut self, prompt: &str, cancel: CancellationToken) -> TurnEnd {
        // The prompt is redacted alone before it is marked, so that the mark cannot
        // change how it reads (the log redacts the whole line again).
        self.log_line(&format!("› {}", self.redactor.redact(prompt)));
        let prompt = prompt.to_owned();
        self.followed(|agent, events| {
            Box::pin(async move { agent.run_streaming(prompt, events, cancel).await.map(drop) })
        })
        .await
    }

    /// Whether a crash cut the conversation's last turn in the middle of its tool
    /// calls: [`ChatSession::resume_cut_turn`] finishes it.
    pub fn has_cut_turn(&self) -> bool {
        self.agent.has_cut_turn()
    }

    /// What the chat says before it finishes the open last turn, `None` when there
    /// is none: a fork whose copy ends on a call ([`RESUMING_FORK_TURN`]) was not
    /// cut by a crash, any other open turn was ([`RESUMING_CUT_TURN`]).
    pub fn cut_turn_line(&self) -> Option<&'static str> {
        if !self.has_cut_turn() {
            return None;
        }
        let entries = self.agent.entries();
        let fork_point = forked_at(&self.folder.dir)
            .and_then(|uuid| entries.iter().position(|entry| entry.uuid == uuid));
        let last_message = entries.iter().rposition(|entry| entry.message.is_some());
        Some(match (fork_point, last_message) {
            (Some(point), Some(last)) if last <= point => RESUMING_FORK_TURN,
            _ => RESUMING_CUT_TURN,
        })
    }

    /// Finishes the open last turn (cut by a crash, or copied open by a fork), as
    /// if nothing had stopped it: each open call is asked about again, run again
    /// or closed (what is done is said, on the screen and in `session.log`), then
    /// the model answers.
    pub async fn resume_cut_turn(&mut self, cancel: CancellationToken) -> TurnEnd {
        self.log_line(self.cut_turn_line().unwrap_or(RESUMING_CUT_TURN));
        self.followed(|agent, events| {
            Box::pin(async move {
                agent
                    .resume_turn(Some(events.into()), cancel)
                    .await
                    .map(drop)
            })
        })
        .await
    }

    /// Runs `work` on the agent, its events forwarded to the screen and the run's
    /// logs, and says in `session.log` how it ended.
    async fn followed(
        &mut self,
        work: impl for<'a> FnOnce(
            &'a mut Agent,
            UnboundedSender<AgentEvent>,
        ) -> futures::future::BoxFuture<'a, Result<(), AgentError>>,
    ) -> TurnEnd {
        let (events_tx, events_rx) = unbounded_channel();
        let (agent, mut sinks) = self.agent_and_sinks();
        let run = work(agent, events_tx);
        let (result, ()) = tokio::join!(run, sinks.follow(events_rx));
        self.checkpoints.settle().await;
        self.end_of(result)
    }

    /// How a run ended, said in `session.log`.
    fn end_of<T>(&mut self, result: Result<T, AgentError>) -> TurnEnd {
        let end = match result {
            Ok(_) => TurnEnd::Answered,
            Err(AgentError::Cancelled) => TurnEnd::Cancelled,
            // The cut-off note was shown when the reply ended; this says what it meant.
            Err(AgentError::ReplyCutOff { .. }) => TurnEnd::Failed(
                "the turn ended: the reply was cut off before any of its tool calls was \
                 complete, so none ran"
                    .to_owned(),
            ),
            Err(error) => TurnEnd::Failed(self.describe(&error)),
        };
        match &end {
            TurnEnd::Answered => {}
            TurnEnd::Cancelled => self.log_line("(cancelled)"),
            TurnEnd::Failed(message) => {
                // Redacted whole (an error can quote a multi-line text), then marked.
                let marked: Vec<String> = self
                    .redactor
                    .redact(message)
                    .lines()
                    .map(|line| format!("✗ {line}"))
                    .collect();
                self.log_line(&marked.join("\n"));
            }
        }
        end
    }
}

/// Where the events of a run go: the run's logs and the screen.
struct EventSinks<'s> {
    log: &'s mut SessionLog,
    transcript: &'s Transcript,
    decisions: &'s Decisions,
    redactor: &'s Redactor,
    ui: &'s UnboundedSender<UiEvent>,
}

impl EventSinks<'_> {
    /// [`EventSinks::forward`] until the run ends, then `session.log` ended at a
    /// line start and flushed.
    async fn follow(&mut self, events_rx: tokio::sync::mpsc::UnboundedReceiver<AgentEvent>) {
        let at_line_start = self.forward(events_rx).await;
        if !at_line_start {
            let _ = self.log.write("\n");
        }
        if let Err(error) = self.log.flush() {
            tracing::warn!("session.log: {}", with_causes(&error));
        }
    }

    /// Records each event of a run in the run's logs and passes it to the screen,
    /// until the run ends. Returns whether `session.log` was left at a line start.
    async fn forward(
        &mut self,
        mut events_rx: tokio::sync::mpsc::UnboundedReceiver<AgentEvent>,
    ) -> bool {
        let mut at_line_start = true;
        while let Some(event) = events_rx.recv().await {
            self.record(&event, &mut at_line_start);
            let _ = self.ui.send(UiEvent::Agent(event));
        }
        at_line_start
    }

    fn record(&mut self, event: &AgentEvent, at_line_start: &mut bool) {
        let log = &mut *self.log;
        let (transcript, decisions, redactor, ui) =
            (self.transcript, self.decisions, self.redactor, self.ui);
        // The transcript is the run's record of its tool calls: a record that may be
        // missing from it is said, not only logged.
        let record = |record: &TranscriptRecord| {
            if let Err(error) = transcript.record(record) {
                let _ = ui.send(UiEvent::Warning(format!(
                    "{}: this tool {} may not be kept: {}",
                    reprise_runs::held::shown(&transcript.path().display().to_string()),
                    match record.event {
                        reprise_runs::TranscriptEvent::ToolCall { .. } => "call",
                        reprise_runs::TranscriptEvent::ToolResult { .. } => "result",
                    },
                    with_causes(&error)
                )));
            }
        };
        let write = |log: &mut SessionLog, text: &str| warn_on_error(log.write(text));
        match event {
            AgentEvent::TextDelta { agent, text } if agent == reprise_agent::DEFAULT_AGENT_NAME => {
                write(log, text);
                *at_line_start = text.ends_with('\n');
            }
            _ if let Some(call) = event.started_call() => {
                if !*at_line_start {
                    write(log, "\n");
                    *at_line_start = true;
                }
                // The reply so far is redacted as one block, before the tool line.
                warn_on_error(log.flush());
                write(
                    log,
                    &format!(
                        "{}⚙ {} {}\n",
                        subagent_indent(call.agent),
                        call.name,
                        arguments_preview(call.arguments, |text| redactor
                            .redact(text)
                            .into_owned())
                    ),
                );
                warn_on_error(log.flush());
                record(&TranscriptRecord::tool_call(
                    call.agent,
                    call.id,
                    call.name,
                    call.arguments.clone(),
                ));
            }
            AgentEvent::ToolCallFinished {
                agent,
                id,
                name,
                output,
                ..
            } => {
                let marker = if output.is_error { "✗" } else { "↳" };
                let first = output.content.lines().next().unwrap_or("");
                write(
                    log,
                    &format!(
                        "{}  {marker} {}\n",
                        subagent_indent(agent),
                        redactor.redact(first)
                    ),
                );
                warn_on_error(log.flush());
                let mut result = TranscriptRecord::tool_result(
                    agent.clone(),
                    id.clone(),
                    name.clone(),
                    output.content.clone(),
                    output.is_error,
                );
                if let Some((decision, reason)) = decisions.take(id) {
                    result = result
                        .with_decision(decision)
                        .with_field("reason", serde_json::Value::String(reason));
                }
                record(&result);
            }
            // A subagent's replies, whole, under the call that started it.
            AgentEvent::MessageRecorded { agent, message, .. }
                if agent != reprise_agent::DEFAULT_AGENT_NAME
                    && message.role == reprise_session::Role::Assistant
                    && !message.text().trim().is_empty() =>
            {
                if !*at_line_start {
                    write(log, "\n");
                    *at_line_start = true;
                }
                warn_on_error(log.flush());
                let indent = subagent_indent(agent);
                let text: String = message
                    .text()
                    .trim_end()
                    .lines()
                    .map(|line| format!("{indent}{line}\n"))
                    .collect();
                write(log, &text);
                warn_on_error(log.flush());
            }
            AgentEvent::CallResumed {
                agent,
                name,
                action,
                ..
            } => {
                if !*at_line_start {
                    write(log, "\n");
                }
                write(
                    log,
                    &format!("{}\n", resumed_call_line(agent, name, *action)),
                );
                *at_line_start = true;
            }
            AgentEvent::Retrying {
                attempt, reason, ..
            } => {
                write(log, &format!("(retrying, attempt {attempt}: {reason})\n"));
                *at_line_start = true;
            }
            AgentEvent::ReplyCutOff { agent, max_tokens } => {
                if !*at_line_start {
                    write(log, "\n");
                }
                write(log, &format!("! {}\n", cut_off_line(agent, *max_tokens)));
                *at_line_start = true;
            }
            AgentEvent::SummaryCutOff { agent, max_tokens } => {
                if !*at_line_start {
                    write(log, "\n");
                }
                write(
                    log,
                    &format!("! {}\n", summary_cut_off_line(agent, *max_tokens)),
                );
                *at_line_start = true;
            }
            AgentEvent::Compacted { .. } => {
                if !*at_line_start {
                    write(log, "\n");
                }
                if let Some(line) = compaction_line(event) {
                    write(log, &format!("{line}\n"));
                }
                *at_line_start = true;
            }
            _ => {}
        }
    }
}

/// A failed write to `session.log` is only logged: the log is a record for people,
/// and a chat goes on without it.
fn warn_on_error(result: Result<(), reprise_runs::RunError>) {
    if let Err(error) = result {
        tracing::warn!("session.log: {}", with_causes(&error));
    }
}

/// What the chat says once the conversation of run `run` takes no more writes.
fn writes_stopped_text(error: &reprise_session::StoreError, run: &str) -> String {
    format!(
        "{}.\nThis chat writes nothing more to run {run}: what the last write left may or \
         may not be on disk, so this chat's view of the conversation and the run's may \
         differ. To go on, leave (/exit) and start `reprise --resume {run}` (or `reprise \
         --continue` if it is the latest run): it reads back what is on disk.",
        with_causes(error)
    )
}

/// The question about a call of a cut turn that had started.
pub const AGAIN_QUESTION: &str = "started before the crash and may have taken effect: \
     run it again, or tell the model it was interrupted?";

/// What the chat says before it finishes a turn that a crash cut.
pub const RESUMING_CUT_TURN: &str = "(a crash cut the last turn: finishing it)";

/// What the chat says before it finishes the turn a fork's copy ended in, on a
/// call without its result.
pub const RESUMING_FORK_TURN: &str =
    "(this fork ends on a tool call without its result: finishing that turn)";

/// The last entry a fork copied into the run folder `dir` (`forkedFrom.entry` of
/// its `session.json`), when it is a fork of part of a conversation.
fn forked_at(dir: &std::path::Path) -> Option<uuid::Uuid> {
    let bytes = std::fs::read(dir.join(reprise_runs::SESSION_JSON)).ok()?;
    let meta: reprise_runs::SessionJson = serde_json::from_slice(&bytes).ok()?;
    meta.forked_from?.entry
}

/// What the chat says about a call of a cut turn, as the resume takes it up.
pub fn resumed_call_line(agent: &str, name: &str, action: reprise_session::AfterCrash) -> String {
    format!("{}{}: {name}", subagent_indent(agent), action.describe())
}

/// What `/compact` says when the conversation is too short to compact.
pub const NOTHING_TO_COMPACT: &str =
    "nothing to compact yet: the conversation is only its latest messages";
