//! The servers of one run: started together, their tools offered to the agent,
//! restarted (a bounded number of times) when they fail, shut down together.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use reprise_agent::{Tool, ToolEffects, ToolInvocation, ToolOutput};
use reprise_provider::ToolSpec;
use serde::Serialize;
use serde_json::{Map, Value};
use tokio::sync::mpsc::UnboundedSender;

use crate::McpNotice;
use crate::config::McpConfig;
use crate::connection::{McpConnection, RemoteTool};
use crate::error::{ConfigError, StartError};
use crate::naming::exposed_name;
use crate::notice::{NoticeKind, Notifier};
use crate::render::render_result;
use crate::resolve::{ResolveContext, ServerSpec};
use crate::rmcp_client;

/// How the hub reports and what it allows.
#[derive(Clone, Debug, Default)]
pub struct HubOptions {
    /// Where notices go (start failures, deaths, timeouts, restarts).
    pub notices: Option<UnboundedSender<McpNotice>>,
}

/// A tool of a server, as `reprise mcp list` shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolInfo {
    /// The name the model sees (`<server>__<tool>`).
    pub name: String,
    /// The name on the server.
    pub remote_name: String,
    /// Its description.
    pub description: String,
}

/// How one configured server's start went.
///
/// Serialized (for `reprise mcp list --json`) as `{"name", "transport", "started",
/// "tools": [...] | "error": "...", "elapsed_ms"}`.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerStatus {
    /// The server's name.
    pub name: String,
    /// The command line or URL (no secrets).
    pub transport: String,
    /// Its tools, or why it did not start.
    pub result: Result<Vec<ToolInfo>, String>,
    /// How long starting took (spawn, handshake, tool list).
    pub elapsed: Duration,
}

impl Serialize for ServerStatus {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut out = serializer.serialize_struct("ServerStatus", 5)?;
        out.serialize_field("name", &self.name)?;
        out.serialize_field("transport", &self.transport)?;
        out.serialize_field("started", &self.result.is_ok())?;
        match &self.result {
            Ok(tools) => out.serialize_field("tools", tools)?,
            Err(error) => out.serialize_field("error", error)?,
        }
        out.serialize_field("elapsed_ms", &(self.elapsed.as_secs_f64() * 1000.0).round())?;
        out.end()
    }
}

/// The MCP servers of one run. Build one per run folder; never share it between runs.
///
/// Call [`McpHub::shutdown`] when the run ends (exit, `/resume`); dropping the hub
/// kills the processes without waiting.
pub struct McpHub {
    slots: Vec<Arc<ServerSlot>>,
    tools: Vec<McpTool>,
    statuses: Vec<ServerStatus>,
}

impl McpHub {
    /// Validates `config`, then starts every enabled server concurrently (each within
    /// its startup timeout). A server that fails to start is reported (in
    /// [`McpHub::statuses`] and as a notice) and offers no tools; only an invalid
    /// config is an error.
    pub async fn start(
        config: &McpConfig,
        ctx: &ResolveContext,
        options: HubOptions,
    ) -> Result<McpHub, ConfigError> {
        config.validate()?;
        let notifier = Notifier::new(options.notices);
        let defaults = config.defaults();
        let budget = config.restart_budget();
        let starts = config.servers.iter().map(|(name, server)| {
            let notifier = notifier.clone();
            async move {
                let begun = Instant::now();
                let transport = server
                    .command
                    .iter()
                    .chain(server.args.iter())
                    .chain(server.url.iter())
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(" ");
                let started = if !server.enabled {
                    Err(StartError::Disabled)
                } else {
                    match server.resolve(name, ctx, defaults) {
                        Err(e) => Err(StartError::Config(e)),
                        Ok(spec) => rmcp_client::start(&spec).await.map(|ok| (spec, ok)),
                    }
                };
                (name.clone(), transport, started, begun.elapsed(), notifier)
            }
        });
        let results = futures::future::join_all(starts).await;

        let mut hub = McpHub {
            slots: Vec::new(),
            tools: Vec::new(),
            statuses: Vec::new(),
        };
        for (name, transport, started, elapsed, notifier) in results {
            match started {
                Err(error) => {
                    if !matches!(error, StartError::Disabled) {
                        notifier.send(
                            &name,
                            NoticeKind::StartFailed,
                            format!("did not start: {error}"),
                        );
                    }
                    hub.statuses.push(ServerStatus {
                        name,
                        transport,
                        result: Err(error.to_string()),
                        elapsed,
                    });
                }
                Ok((spec, (connection, remote_tools))) => {
                    let slot = ServerSlot::new(spec, connection, budget, notifier.clone());
                    let tools = slot_tools(&slot, remote_tools, &notifier);
                    notifier.send(
                        &name,
                        NoticeKind::Started,
                        format!(
                            "started in {} ms with {} tools",
                            elapsed.as_millis(),
                            tools.len()
                        ),
                    );
                    hub.statuses.push(ServerStatus {
                        name,
                        transport,
                        result: Ok(tools.iter().map(McpTool::info).collect()),
                        elapsed,
                    });
                    hub.tools.extend(tools);
                    hub.slots.push(slot);
                }
            }
        }
        Ok(hub)
    }

    /// How each configured server's start went, in name order.
    pub fn statuses(&self) -> &[ServerStatus] {
        &self.statuses
    }

    /// The tools of every started server, for the agent.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.tools
            .iter()
            .map(|tool| Arc::new(tool.clone()) as Arc<dyn Tool>)
            .collect()
    }

    /// The same tools, with their MCP details.
    pub fn mcp_tools(&self) -> &[McpTool] {
        &self.tools
    }

    /// Stops every server concurrently and waits for them: the session is closed,
    /// a process gets EOF on stdin, then SIGTERM, then SIGKILL. Later calls of the
    /// hub's tools fail with an error result. Idempotent.
    pub async fn shutdown(&self) {
        futures::future::join_all(self.slots.iter().map(|slot| slot.shutdown())).await;
    }
}

impl Drop for McpHub {
    fn drop(&mut self) {
        for slot in &self.slots {
            slot.kill();
        }
    }
}

/// The tools of one server, named `<server>__<tool>`; a name that clashes after
/// cleaning is skipped (and said).
fn slot_tools(
    slot: &Arc<ServerSlot>,
    remote: Vec<RemoteTool>,
    notifier: &Notifier,
) -> Vec<McpTool> {
    let mut seen = HashSet::new();
    let mut tools = Vec::new();
    for tool in remote {
        let name = exposed_name(&slot.spec.name, &tool.name);
        if !seen.insert(name.clone()) {
            notifier.send(
                &slot.spec.name,
                NoticeKind::Tools,
                format!(
                    "tool {:?} is skipped: its name {name:?} is already taken",
                    tool.name
                ),
            );
            continue;
        }
        tools.push(McpTool {
            slot: slot.clone(),
            effects: tool.effects,
            remote_name: tool.name,
            spec: ToolSpec {
                name,
                description: tool.description,
                parameters: tool.input_schema,
            },
        });
    }
    tools
}

/// A live connection and the generation it belongs to.
type Live = (Arc<dyn McpConnection>, u64);

/// One server's connection and restart bookkeeping.
struct ServerSlot {
    /// Itself, for the tasks that watch its connections.
    me: Weak<ServerSlot>,
    spec: ServerSpec,
    max_restarts: u32,
    state: Mutex<SlotState>,
    /// Held while (re)starting, so concurrent calls wait for one restart.
    start_lock: tokio::sync::Mutex<()>,
    notifier: Notifier,
}

struct SlotState {
    connection: Option<Arc<dyn McpConnection>>,
    /// Bumped at each restart, so a late failure of an old connection is ignored.
    generation: u64,
    restarts: u32,
    /// Why the server is down, when it is.
    down_reason: Option<String>,
    shut_down: bool,
}

impl ServerSlot {
    fn new(
        spec: ServerSpec,
        connection: Arc<dyn McpConnection>,
        max_restarts: u32,
        notifier: Notifier,
    ) -> Arc<Self> {
        let slot = Arc::new_cyclic(|me| ServerSlot {
            me: me.clone(),
            spec,
            max_restarts,
            state: Mutex::new(SlotState {
                connection: Some(connection),
                generation: 0,
                restarts: 0,
                down_reason: None,
                shut_down: false,
            }),
            start_lock: tokio::sync::Mutex::new(()),
            notifier,
        });
        if let Some(connection) = slot.state().connection.clone() {
            slot.watch(&connection);
        }
        slot
    }

    /// Notices a connection that breaks between calls as it happens (so the chat can
    /// say so at once), by retiring it.
    fn watch(&self, connection: &Arc<dyn McpConnection>) {
        let closed = connection.closed();
        let me = self.me.clone();
        tokio::spawn(async move {
            closed.await;
            if let Some(slot) = me.upgrade() {
                let _ = slot.current();
            }
        });
    }

    fn name(&self) -> &str {
        &self.spec.name
    }

    fn state(&self) -> MutexGuard<'_, SlotState> {
        // A panic while holding this lock leaves plain data; keep going.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A usable connection: the current one, or a restarted one.
    async fn connection(&self) -> Result<Live, String> {
        if let Some(found) = self.current()? {
            return Ok(found);
        }
        let _starting = self.start_lock.lock().await;
        if let Some(found) = self.current()? {
            return Ok(found);
        }
        let (attempt, reason) = {
            let mut state = self.state();
            if state.restarts >= self.max_restarts {
                return Err(format!(
                    "MCP server {:?} is down ({}) and was already restarted {} times in this run; it will not be restarted again",
                    self.name(),
                    state.down_reason.as_deref().unwrap_or("unknown reason"),
                    state.restarts
                ));
            }
            state.restarts += 1;
            (
                state.restarts,
                state.down_reason.clone().unwrap_or_default(),
            )
        };
        self.notifier.send(
            self.name(),
            NoticeKind::Restarting,
            format!(
                "restarting ({attempt} of {}) after: {reason}",
                self.max_restarts
            ),
        );
        match rmcp_client::start(&self.spec).await {
            Ok((connection, _tools)) => {
                let mut state = self.state();
                if state.shut_down {
                    connection.kill();
                    return Err(self.shut_down_message());
                }
                state.generation += 1;
                state.connection = Some(connection.clone());
                state.down_reason = None;
                let generation = state.generation;
                drop(state);
                self.watch(&connection);
                self.notifier
                    .send(self.name(), NoticeKind::Restarted, "restarted");
                Ok((connection, generation))
            }
            Err(error) => {
                let mut state = self.state();
                state.down_reason = Some(format!("restart failed: {error}"));
                let last = state.restarts >= self.max_restarts;
                drop(state);
                let message = format!(
                    "MCP server {:?} could not be restarted: {error}{}",
                    self.name(),
                    if last {
                        "; it will not be restarted again in this run"
                    } else {
                        "; another restart will be tried on the next call"
                    }
                );
                self.notifier.send(
                    self.name(),
                    if last {
                        NoticeKind::GaveUp
                    } else {
                        NoticeKind::StartFailed
                    },
                    message.clone(),
                );
                Err(message)
            }
        }
    }

    /// The current connection if it is alive; a dead one is retired (and said).
    fn current(&self) -> Result<Option<Live>, String> {
        let state = self.state();
        if state.shut_down {
            return Err(self.shut_down_message());
        }
        let Some(connection) = state.connection.clone() else {
            return Ok(None);
        };
        match connection.failure() {
            None => Ok(Some((connection, state.generation))),
            Some(reason) => {
                let generation = state.generation;
                drop(state);
                self.retire(generation, reason);
                Ok(None)
            }
        }
    }

    /// Takes a failed connection out of service (if it is still the current one),
    /// closes it in the background, and says so.
    fn retire(&self, generation: u64, reason: String) {
        let mut state = self.state();
        if state.generation != generation || state.connection.is_none() {
            return;
        }
        let old = state.connection.take();
        state.down_reason = Some(reason.clone());
        let spent = state.restarts >= self.max_restarts;
        drop(state);
        if let Some(old) = old {
            tokio::spawn(async move { old.shutdown().await });
        }
        self.notifier.send(
            self.name(),
            NoticeKind::Failed,
            if spent {
                format!("{reason}; its restarts are used up, it stays down for this run")
            } else {
                format!("{reason}; it will be restarted on the next call")
            },
        );
    }

    fn shut_down_message(&self) -> String {
        format!("MCP server {:?} was shut down with its run", self.name())
    }

    /// One call; a cancelled turn abandons it at once, even while the server restarts.
    async fn call(
        &self,
        remote_name: &str,
        arguments: Option<Map<String, Value>>,
        idempotency_key: &str,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> ToolOutput {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => ToolOutput::error(format!(
                "the call of {remote_name:?} on MCP server {:?} was cancelled",
                self.name()
            )),
            output = self.call_uncancelled(remote_name, arguments, idempotency_key) => output,
        }
    }

    async fn call_uncancelled(
        &self,
        remote_name: &str,
        arguments: Option<Map<String, Value>>,
        idempotency_key: &str,
    ) -> ToolOutput {
        let (connection, generation) = match self.connection().await {
            Ok(found) => found,
            Err(message) => return ToolOutput::error(message),
        };
        let timeout = self.spec.call_timeout;
        let outcome = tokio::time::timeout(
            timeout,
            connection.call_tool(remote_name, arguments, idempotency_key),
        )
        .await;
        match outcome {
            Ok(Ok(result)) => render_result(&result),
            Ok(Err(error)) if error.is_fatal() => {
                let reason = error.to_string();
                self.retire(generation, reason.clone());
                ToolOutput::error(format!(
                    "MCP server {:?} failed during the call of {remote_name:?}: {reason}; it will be restarted on the next call",
                    self.name()
                ))
            }
            Ok(Err(error)) => {
                let message = format!(
                    "MCP server {:?} returned an error for {remote_name:?}: {error}",
                    self.name()
                );
                self.notifier
                    .send(self.name(), NoticeKind::CallError, message.clone());
                ToolOutput::error(message)
            }
            Err(_) => {
                let reason = format!(
                    "the call of {remote_name:?} timed out after {}",
                    human_secs(timeout)
                );
                self.retire(generation, reason.clone());
                ToolOutput::error(format!(
                    "MCP server {:?}: {reason}; the server will be restarted on the next call",
                    self.name()
                ))
            }
        }
    }

    async fn shutdown(&self) {
        let _starting = self.start_lock.lock().await;
        let connection = {
            let mut state = self.state();
            state.shut_down = true;
            state.connection.take()
        };
        if let Some(connection) = connection {
            connection.shutdown().await;
        }
    }

    fn kill(&self) {
        let connection = {
            let mut state = self.state();
            state.shut_down = true;
            state.connection.take()
        };
        if let Some(connection) = connection {
            connection.kill();
        }
    }
}

fn human_secs(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs.fract() == 0.0 {
        format!("{secs:.0}s")
    } else {
        format!("{secs:.2}s")
    }
}

/// One MCP tool, offered to the agent as `<server>__<tool>` with the server's schema.
#[derive(Clone)]
pub struct McpTool {
    slot: Arc<ServerSlot>,
    remote_name: String,
    spec: ToolSpec,
    effects: ToolEffects,
}

impl McpTool {
    /// The server's name.
    pub fn server(&self) -> &str {
        self.slot.name()
    }

    /// The tool's name on the server.
    pub fn remote_name(&self) -> &str {
        &self.remote_name
    }

    /// Name, remote name and description.
    pub fn info(&self) -> ToolInfo {
        ToolInfo {
            name: self.spec.name.clone(),
            remote_name: self.remote_name.clone(),
            description: self.spec.description.clone(),
        }
    }
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.spec.name)
            .field("server", &self.server())
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Tool for McpTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn effects(&self) -> ToolEffects {
        self.effects
    }

    async fn call(&self, invocation: ToolInvocation) -> ToolOutput {
        let arguments = match parse_arguments(&invocation.arguments) {
            Ok(arguments) => arguments,
            Err(message) => return ToolOutput::error(message),
        };
        let context = &invocation.context;
        self.slot
            .call(
                &self.remote_name,
                arguments,
                &context.idempotency_key,
                &context.cancel,
            )
            .await
    }
}

/// The model's argument text as a JSON object (empty or `null`: no arguments).
fn parse_arguments(text: &str) -> Result<Option<Map<String, Value>>, String> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(Some(map)),
        Ok(Value::Null) => Ok(None),
        Ok(other) => Err(format!(
            "the arguments must be a JSON object, got {}",
            match other {
                Value::Array(_) => "an array",
                Value::String(_) => "a string",
                Value::Number(_) => "a number",
                _ => "a boolean",
            }
        )),
        Err(e) => Err(format!("the arguments are not valid JSON: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_parsed_as_an_object() {
        assert_eq!(parse_arguments("").unwrap(), None);
        assert_eq!(parse_arguments("null").unwrap(), None);
        let map = parse_arguments(r#"{"a": 1}"#).unwrap().unwrap();
        assert_eq!(map["a"], 1);
        assert!(parse_arguments("[1]").unwrap_err().contains("an array"));
        assert!(parse_arguments("{").unwrap_err().contains("not valid JSON"));
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(human_secs(Duration::from_secs(2)), "2s");
        assert_eq!(human_secs(Duration::from_millis(500)), "0.50s");
    }
}
