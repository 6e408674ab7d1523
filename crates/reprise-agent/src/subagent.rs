//! Subagents: a tool that hands a task to a child agent with its own system prompt
//! and tools. The child's messages go to the subkey `subagents/<name>` of the same
//! session, so its conversation survives and continues across resumes.

use std::sync::Arc;

use futures::future::BoxFuture;
use reprise_provider::{Provider, ToolSpec};
use reprise_session::{Entry, Message};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::sync::Mutex;

use crate::error::AgentError;
use crate::events::AgentEvent;
use crate::fn_tool::parse_arguments;
use crate::schema::parameters_schema;
use crate::thread::{Delegate, PARENT_CALL_FIELD, RunContext, Thread};
use crate::tool::{Tool, ToolOutput};

/// The default turn budget of a subagent.
pub const DEFAULT_SUBAGENT_MAX_TURNS: usize = 20;

/// What the parent's model is told when the person stopped a subagent's task.
pub fn subagent_interrupted_text(name: &str) -> String {
    format!("error: interrupted: the subagent {name} was stopped by the user before it answered")
}

/// A child agent offered to the model as a tool named after it.
///
/// ```
/// use reprise_agent::Subagent;
///
/// let scout = Subagent::new(
///     "scout",
///     "Explores the cave and reports what it finds.",
///     "You are a scout. Explore, then report in three lines.",
/// );
/// # let _ = scout;
/// ```
#[derive(Clone)]
pub struct Subagent {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) system: String,
    pub(crate) tools: Vec<Arc<dyn Tool>>,
    pub(crate) max_turns: usize,
    pub(crate) provider: Option<Arc<dyn Provider>>,
}

impl Subagent {
    /// A subagent: its name (also its tool name and its transcript's name), what it
    /// is for (the tool description the parent's model reads), and its system prompt.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        system: impl Into<String>,
    ) -> Self {
        Subagent {
            name: name.into(),
            description: description.into(),
            system: system.into(),
            tools: Vec::new(),
            max_turns: DEFAULT_SUBAGENT_MAX_TURNS,
            provider: None,
        }
    }

    /// Adds a tool the child may call.
    pub fn tool(mut self, tool: impl Tool + 'static) -> Self {
        self.tools.push(Arc::new(tool));
        self
    }

    /// Adds tools the child may call (each as [`Subagent::tool`] takes it: an
    /// `Arc<dyn Tool>` is a tool too).
    pub fn tools<T: Tool + 'static>(mut self, tools: impl IntoIterator<Item = T>) -> Self {
        self.tools.extend(
            tools
                .into_iter()
                .map(|tool| Arc::new(tool) as Arc<dyn Tool>),
        );
        self
    }

    /// The child's turn budget per task.
    pub fn max_turns(mut self, max_turns: usize) -> Self {
        self.max_turns = max_turns;
        self
    }

    /// A provider of its own (another model); by default the parent's.
    pub fn provider(mut self, provider: Arc<dyn Provider>) -> Self {
        self.provider = Some(provider);
        self
    }

    /// The subagent's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tool the parent's model sees.
    pub(crate) fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: parameters_schema::<SubagentArgs>(),
        }
    }
}

/// What the parent's model passes to a subagent.
#[derive(Deserialize, JsonSchema)]
struct SubagentArgs {
    /// The task, with everything needed to do it: the subagent does not see this
    /// conversation, only its own earlier exchanges.
    task: String,
}

/// A subagent's live conversation, shared by the parent's tool calls.
pub(crate) struct SubagentHandle {
    pub(crate) name: String,
    /// Calls to the same subagent take turns: each continues the one conversation.
    pub(crate) thread: Mutex<Thread>,
    /// Whether any of its tools may change things.
    pub(crate) may_change: bool,
}

impl Delegate for SubagentHandle {
    fn thread(&self) -> &Mutex<Thread> {
        &self.thread
    }

    fn may_change(&self) -> bool {
        self.may_change
    }

    /// Runs one task in the child; its answer, or what went wrong, is the result.
    /// `call_id` is the parent's call, recorded on the task's entry.
    fn call(
        self: Arc<Self>,
        call_id: String,
        arguments: reprise_session::Arguments,
        ctx: RunContext,
    ) -> BoxFuture<'static, ToolOutput> {
        Box::pin(async move {
            let args: SubagentArgs = match parse_arguments(&self.name, &arguments) {
                Ok(args) => args,
                Err(output) => return output,
            };
            let mut thread = self.thread.lock().await;
            // From here until the call's result, this subagent's events are this call's.
            ctx.emit(|| AgentEvent::SubagentTask {
                agent: self.name.clone(),
                call_id: call_id.clone(),
            })
            .await;
            let mut task = Entry::message(Message::user(args.task));
            task.extra.insert(
                PARENT_CALL_FIELD.to_owned(),
                serde_json::Value::String(call_id),
            );
            let result = thread.run_entry(Some(task), &ctx).await;
            self.output(result, &ctx)
        })
    }

    /// Goes on with the task that the parent's call `call_id` gave before a crash
    /// cut it: its answer when the subagent had given one, else the subagent's turn
    /// finished from where it was cut (its own open calls included).
    fn resume(self: Arc<Self>, call_id: String, ctx: RunContext) -> BoxFuture<'static, ToolOutput> {
        Box::pin(async move {
            let mut thread = self.thread.lock().await;
            ctx.emit(|| AgentEvent::SubagentTask {
                agent: self.name.clone(),
                call_id,
            })
            .await;
            if let Some(answer) = thread.last_task_answer() {
                return ToolOutput::ok(answer);
            }
            let result = thread.run_entry(None, &ctx).await;
            self.output(result, &ctx)
        })
    }
}

impl SubagentHandle {
    /// The parent's result for a task's run.
    fn output(&self, result: Result<String, AgentError>, ctx: &RunContext) -> ToolOutput {
        match result {
            Ok(answer) => ToolOutput::ok(answer),
            Err(AgentError::Cancelled) => ToolOutput::error(match ctx.stopped_text() {
                crate::thread::CANCELLED_BY_USER => subagent_interrupted_text(&self.name),
                other => other.to_owned(),
            }),
            Err(error) => {
                ToolOutput::error(format!("error: the subagent {} failed: {error}", self.name))
            }
        }
    }
}
