//! The loop of one agent over one transcript: call the model, run the tools it asks
//! for, and record every message the moment it exists.
//!
//! The main agent and each subagent are a `Thread` each; they differ only in the
//! transcript key they write to.

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;

use reprise_provider::{ChatRequest, Completion, Provider, StreamEvent, ToolSpec};
use reprise_session::{
    Entry, LoadWarning, Message, SessionKey, SessionStore, ToolCall, model_view, repair_entries,
};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::AgentError;
use crate::events::AgentEvent;
use crate::subagent::SubagentHandle;
use crate::tool::{Approval, Tool, ToolApprover, ToolInvocation, ToolOutput};

/// What the model is told about a tool call that the person cancelled.
pub const CANCELLED_BY_USER: &str = "error: cancelled by the user";

/// Where a run reports to and what cancels it.
#[derive(Clone)]
pub(crate) struct RunContext {
    pub events: Option<UnboundedSender<AgentEvent>>,
    pub cancel: CancellationToken,
}

impl RunContext {
    fn emit(&self, event: impl FnOnce() -> AgentEvent) {
        if let Some(events) = &self.events {
            // A UI that went away must not stop the agent from finishing its turn.
            let _ = events.send(event());
        }
    }
}

/// Something the model can call by name.
#[derive(Clone)]
pub(crate) enum Callable {
    Tool(Arc<dyn Tool>),
    Subagent(Arc<SubagentHandle>),
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
    /// Every entry of the transcript, as recorded (resume repair reads them).
    entries: Vec<Entry>,
    /// The messages among `entries`.
    history: Vec<Message>,
    /// The next request: system prompt, the model view of `history`, the tools. Kept
    /// up to date as messages are recorded so that a turn never rebuilds it.
    request: ChatRequest,
    warnings: Vec<LoadWarning>,
    /// Set when a run ended early; the next run first closes any call left open.
    needs_repair: bool,
}

/// A tool call on its way to a result.
enum Pending {
    Done(ToolOutput),
    Running {
        task: AbortOnDrop,
        /// Subagents stop by themselves when cancelled (closing their own calls), so
        /// they are awaited; plain tools are aborted.
        abort_on_cancel: bool,
    },
}

/// A tool task that is aborted if the turn ends without waiting for it.
struct AbortOnDrop(JoinHandle<ToolOutput>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Thread {
    /// Loads the transcript (a missing one is empty), closes tool calls that never got
    /// a result, and prepares the model view.
    pub async fn open(config: ThreadConfig) -> Result<Thread, AgentError> {
        let loaded = config.store.load(&config.key).await?.unwrap_or_default();
        let history: Vec<Message> = loaded
            .entries
            .iter()
            .filter_map(Entry::as_message)
            .cloned()
            .collect();
        let specs = config.tools.iter().map(|(spec, _)| spec.clone()).collect();
        let tools = config
            .tools
            .into_iter()
            .map(|(spec, callable)| (spec.name, callable))
            .collect();
        let mut thread = Thread {
            name: config.name,
            key: config.key,
            store: config.store,
            provider: config.provider,
            system: config.system,
            tools,
            approver: config.approver,
            max_turns: config.max_turns,
            entries: loaded.entries,
            history,
            request: ChatRequest {
                messages: Vec::new(),
                tools: specs,
            },
            warnings: loaded.warnings,
            needs_repair: true,
        };
        thread
            .repair(&RunContext {
                events: None,
                cancel: CancellationToken::new(),
            })
            .await?;
        Ok(thread)
    }

    pub fn key(&self) -> &SessionKey {
        &self.key
    }

    pub fn history(&self) -> &[Message] {
        &self.history
    }

    pub fn warnings(&self) -> &[LoadWarning] {
        &self.warnings
    }

    /// The request the next model call would send (before the next prompt).
    pub fn request(&self) -> &ChatRequest {
        &self.request
    }

    /// Records a result for every call left without one, then rebuilds the model view
    /// (those results belong next to their calls, wherever those are).
    async fn repair(&mut self, ctx: &RunContext) -> Result<(), AgentError> {
        if !self.needs_repair {
            return Ok(());
        }
        for entry in repair_entries(&self.entries) {
            self.record_entry(entry, ctx).await?;
        }
        let mut messages = Vec::with_capacity(self.history.len() + 1);
        if let Some(system) = &self.system {
            messages.push(Message::system(system.clone()));
        }
        messages.extend(model_view(&self.entries));
        self.request.messages = messages;
        self.needs_repair = false;
        Ok(())
    }

    /// Appends a message to the transcript; only once it is durable does it join the
    /// history and the next request.
    async fn record(&mut self, message: Message, ctx: &RunContext) -> Result<(), AgentError> {
        self.record_entry(Entry::message(message), ctx).await
    }

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
            });
            self.request.messages.push(message.clone());
            self.history.push(message.clone());
        }
        self.entries.push(entry);
        Ok(())
    }

    /// One run: the prompt, then model calls and tool calls until an answer without
    /// tool calls.
    pub async fn run(&mut self, prompt: Message, ctx: &RunContext) -> Result<String, AgentError> {
        let result = self.run_turns(prompt, ctx).await;
        if result.is_err() {
            self.needs_repair = true;
        }
        result
    }

    async fn run_turns(&mut self, prompt: Message, ctx: &RunContext) -> Result<String, AgentError> {
        self.repair(ctx).await?;
        if ctx.cancel.is_cancelled() {
            return Err(AgentError::Cancelled);
        }
        self.record(prompt, ctx).await?;
        for turn in 1..=self.max_turns {
            ctx.emit(|| AgentEvent::ModelCallStarted {
                agent: self.name.clone(),
                turn,
            });
            let completion = self.call_model(ctx).await?;
            let message = completion.message;
            let calls = message.calls().to_vec();
            let text = message.text();
            self.record(message, ctx).await?;
            if calls.is_empty() {
                return Ok(text);
            }
            self.run_tools(&calls, ctx).await?;
            if ctx.cancel.is_cancelled() {
                return Err(AgentError::Cancelled);
            }
        }
        Err(AgentError::MaxTurns {
            max_turns: self.max_turns,
        })
    }

    /// One model call, its stream events forwarded as they arrive. A cancelled or
    /// failed call leaves nothing behind.
    async fn call_model(&self, ctx: &RunContext) -> Result<Completion, AgentError> {
        let cancel = &ctx.cancel;
        let Some(events) = &ctx.events else {
            return tokio::select! {
                biased;
                _ = cancel.cancelled() => Err(AgentError::Cancelled),
                result = self.provider.complete(&self.request, None, cancel) => Ok(result?),
            };
        };
        let (stream_tx, mut stream_rx) = unbounded_channel();
        let call = self
            .provider
            .complete(&self.request, Some(&stream_tx), cancel);
        tokio::pin!(call);
        // Set once the stream reported usage; otherwise the completion's is reported.
        let saw_usage = std::sync::atomic::AtomicBool::new(false);
        let forward = |event: StreamEvent| {
            if matches!(event, StreamEvent::Usage(_)) {
                saw_usage.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            let _ = events.send(AgentEvent::from_stream(&self.name, event));
        };
        let result = loop {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => break Err(AgentError::Cancelled),
                Some(event) = stream_rx.recv() => forward(event),
                result = &mut call => break result.map_err(AgentError::from),
            }
        };
        // Deltas sent just before the call returned come before the message is recorded.
        while let Ok(event) = stream_rx.try_recv() {
            forward(event);
        }
        // A non-streaming answer reports usage only in the completion.
        if let Ok(Completion {
            usage: Some(usage), ..
        }) = &result
            && !saw_usage.load(std::sync::atomic::Ordering::Relaxed)
        {
            forward(StreamEvent::Usage(*usage));
        }
        result
    }

    /// Runs the calls of one assistant message concurrently and records their results
    /// in call order, each as soon as it and those before it are done.
    async fn run_tools(&mut self, calls: &[ToolCall], ctx: &RunContext) -> Result<(), AgentError> {
        let mut pending = Vec::with_capacity(calls.len());
        for call in calls {
            pending.push(self.start_call(call, ctx).await);
        }
        for (call, pending) in calls.iter().zip(pending) {
            let output = match pending {
                Pending::Done(output) => output,
                Pending::Running {
                    mut task,
                    abort_on_cancel,
                } => finish(&call.function.name, &mut task, abort_on_cancel, &ctx.cancel).await,
            };
            self.record(Message::tool(call.id.clone(), output.content.clone()), ctx)
                .await?;
            ctx.emit(|| AgentEvent::ToolCallFinished {
                agent: self.name.clone(),
                id: call.id.clone(),
                name: call.function.name.clone(),
                output,
            });
        }
        Ok(())
    }

    /// Asks the approver, then starts the call as a task of its own (so that a panic
    /// stays inside it).
    async fn start_call(&self, call: &ToolCall, ctx: &RunContext) -> Pending {
        let name = call.function.name.clone();
        ctx.emit(|| AgentEvent::ToolCallStarted {
            agent: self.name.clone(),
            id: call.id.clone(),
            name: name.clone(),
            arguments: call.function.arguments.clone(),
        });
        if ctx.cancel.is_cancelled() {
            return Pending::Done(ToolOutput::error(CANCELLED_BY_USER));
        }
        let invocation = ToolInvocation {
            id: call.id.clone(),
            name: name.clone(),
            arguments: call.function.arguments.clone(),
            cancel: ctx.cancel.child_token(),
        };
        if let Some(approver) = &self.approver {
            let decision = tokio::select! {
                biased;
                _ = ctx.cancel.cancelled() => None,
                decision = approver.approve(&self.name, &invocation) => Some(decision),
            };
            match decision {
                None => return Pending::Done(ToolOutput::error(CANCELLED_BY_USER)),
                Some(Approval::Deny(reason)) => {
                    return Pending::Done(ToolOutput::error(format!(
                        "error: the call to {name} was not allowed: {reason}"
                    )));
                }
                Some(Approval::Allow) => {}
            }
        }
        match self.tools.get(&name) {
            None => Pending::Done(ToolOutput::error(format!(
                "error: there is no tool named {name:?}; the tools are: {}",
                self.tool_names()
            ))),
            Some(Callable::Tool(tool)) => {
                let tool = Arc::clone(tool);
                Pending::Running {
                    task: AbortOnDrop(tokio::spawn(async move { tool.call(invocation).await })),
                    abort_on_cancel: true,
                }
            }
            Some(Callable::Subagent(handle)) => {
                let handle = Arc::clone(handle);
                let child = RunContext {
                    events: ctx.events.clone(),
                    cancel: invocation.cancel.clone(),
                };
                let arguments = invocation.arguments;
                Pending::Running {
                    task: AbortOnDrop(tokio::spawn(
                        async move { handle.call(arguments, child).await },
                    )),
                    abort_on_cancel: false,
                }
            }
        }
    }

    fn tool_names(&self) -> String {
        let mut names: Vec<&str> = self.tools.keys().map(String::as_str).collect();
        names.sort_unstable();
        names.join(", ")
    }
}

/// Waits for a tool task; a panic or an abort becomes an error result.
async fn finish(
    name: &str,
    task: &mut AbortOnDrop,
    abort_on_cancel: bool,
    cancel: &CancellationToken,
) -> ToolOutput {
    let joined = if abort_on_cancel {
        tokio::select! {
            biased;
            joined = &mut task.0 => joined,
            _ = cancel.cancelled() => {
                task.0.abort();
                return ToolOutput::error(CANCELLED_BY_USER);
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
        Err(_) => ToolOutput::error(CANCELLED_BY_USER),
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
