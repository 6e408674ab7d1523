//! The one module that speaks rmcp: starting a server (child process over stdio, or
//! streamable HTTP), and an [`McpConnection`] over rmcp's client peer.

use std::collections::{HashMap, VecDeque};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, ContentBlock, Implementation,
    ProtocolVersion, ResourceContents,
};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{Peer, RoleClient, ServiceError, ServiceExt};
use rustix::process::{Pid, Signal, kill_process_group};
use serde_json::{Map, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{ChildStderr, Command};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::connection::{CallResult, McpConnection, RemoteTool, ResultPart};
use crate::error::{ConnectionError, McpLibraryError, StartError};
use crate::resolve::{ServerSpec, TransportSpec};

/// How long a child gets to exit after its stdin closes, and again after SIGTERM.
const EXIT_GRACE: Duration = Duration::from_millis(1500);
/// How long to wait for a dying child's exit status, to say why it died.
const EXIT_STATUS_WAIT: Duration = Duration::from_millis(300);
/// How often a remote connection is checked for closure.
const TRANSPORT_POLL: Duration = Duration::from_millis(500);
/// Stderr lines kept to explain a failure.
const STDERR_LINES: usize = 20;
/// Stderr lines quoted in a message.
const STDERR_QUOTED: usize = 5;

/// The client identity and handshake we offer: the `initialize` handshake at the
/// newest version that still has one, which every current server accepts.
fn client_config() -> ClientConfig {
    let mut config = ClientConfig::default();
    config.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
    config.client_info = Implementation::new("reprise", env!("CARGO_PKG_VERSION"));
    config
}

/// Starts the server, completes the handshake and lists its tools, all within the
/// spec's startup timeout.
pub(crate) async fn start(
    spec: &ServerSpec,
) -> Result<(Arc<dyn McpConnection>, Vec<RemoteTool>), StartError> {
    match &spec.transport {
        TransportSpec::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut cmd = Command::new(command);
            cmd.args(args)
                .env_clear()
                .envs(env)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                // Its own process group, so a wrapper (npx, sh) dies with its child.
                .process_group(0);
            if let Some(dir) = cwd {
                cmd.current_dir(dir);
            }
            let mut child = cmd.spawn().map_err(|source| StartError::Spawn {
                command: command.clone(),
                source,
            })?;
            let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
                return Err(StartError::Pipes {
                    command: command.clone(),
                });
            };
            let stderr = StderrTail::default();
            if let Some(pipe) = child.stderr.take() {
                stderr.follow(pipe, spec.name.clone());
            }
            let proc = ChildProc::watch(child);
            let handshake = async {
                let service = client_config()
                    .serve((stdout, stdin))
                    .await
                    .map_err(McpLibraryError::from)?;
                let tools = list_tools(service.peer())
                    .await
                    .map_err(McpLibraryError::from)?;
                Ok::<_, McpLibraryError>((service, tools))
            };
            match tokio::time::timeout(spec.startup_timeout, handshake).await {
                Ok(Ok((service, tools))) => {
                    let connection = RmcpConnection::new(service, Some(proc), stderr);
                    Ok((Arc::new(connection), tools))
                }
                Ok(Err(source)) => {
                    let exit = proc.exit_status(EXIT_STATUS_WAIT).await;
                    if exit.is_some() {
                        stderr.settle().await;
                    }
                    Err(StartError::Handshake {
                        exit: exit.map(describe_exit),
                        stderr: stderr.quote_bare(),
                        source,
                    })
                }
                Err(_) => Err(StartError::Timeout {
                    after: spec.startup_timeout,
                    detail: stderr.quote_bare(),
                }),
            }
        }
        TransportSpec::Http { url, headers } => {
            let mut custom = HashMap::new();
            for (name, value) in headers {
                let name = http::HeaderName::from_bytes(name.as_bytes()).map_err(|source| {
                    StartError::HeaderName {
                        name: name.clone(),
                        source,
                    }
                })?;
                let value = http::HeaderValue::from_str(value).map_err(|source| {
                    StartError::HeaderValue {
                        name: name.clone(),
                        source,
                    }
                })?;
                custom.insert(name, value);
            }
            let config =
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(custom);
            let transport = StreamableHttpClientTransport::from_config(config);
            let handshake = async {
                let service = client_config().serve(transport).await.map_err(|source| {
                    StartError::RemoteHandshake {
                        url: url.to_string(),
                        source: source.into(),
                    }
                })?;
                let tools = list_tools(service.peer()).await.map_err(|source| {
                    StartError::RemoteListing {
                        url: url.to_string(),
                        source: source.into(),
                    }
                })?;
                Ok::<_, StartError>((service, tools))
            };
            match tokio::time::timeout(spec.startup_timeout, handshake).await {
                Ok(Ok((service, tools))) => {
                    let connection = RmcpConnection::new(service, None, StderrTail::default());
                    Ok((Arc::new(connection), tools))
                }
                Ok(Err(error)) => Err(error),
                Err(_) => Err(StartError::Timeout {
                    after: spec.startup_timeout,
                    detail: None,
                }),
            }
        }
    }
}

async fn list_tools(peer: &Peer<RoleClient>) -> Result<Vec<RemoteTool>, ServiceError> {
    let tools = peer.list_all_tools().await?;
    Ok(tools
        .into_iter()
        .map(|tool| RemoteTool {
            name: tool.name.to_string(),
            description: tool
                .description
                .map(|d| d.to_string())
                .or(tool.title)
                .unwrap_or_default(),
            input_schema: Value::Object((*tool.input_schema).clone()),
            effects: effects_of(tool.annotations.as_ref()),
        })
        .collect())
}

/// What a tool's annotations say it does: a read-only hint wins over an idempotent
/// one; none says it may change things.
fn effects_of(annotations: Option<&rmcp::model::ToolAnnotations>) -> reprise_agent::ToolEffects {
    let hint = |hint: Option<bool>| hint == Some(true);
    match annotations {
        Some(annotations) if hint(annotations.read_only_hint) => {
            reprise_agent::ToolEffects::ReadOnly
        }
        Some(annotations) if hint(annotations.idempotent_hint) => {
            reprise_agent::ToolEffects::Idempotent
        }
        _ => reprise_agent::ToolEffects::Changes,
    }
}

/// A `tools/call` request's parameters, with the call's idempotency key in `_meta`.
fn call_params(
    name: &str,
    arguments: Option<Map<String, Value>>,
    idempotency_key: &str,
) -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new(name.to_string());
    if let Some(arguments) = arguments {
        params = params.with_arguments(arguments);
    }
    let mut meta = Map::new();
    meta.insert(
        crate::connection::IDEMPOTENCY_KEY_META.to_owned(),
        Value::String(idempotency_key.to_owned()),
    );
    params.meta = Some(rmcp::model::RequestMetaObject(meta.into()));
    params
}

/// A connection over rmcp's client.
struct RmcpConnection {
    peer: Peer<RoleClient>,
    service: tokio::sync::Mutex<Option<RunningService<RoleClient, ClientConfig>>>,
    child: Option<ChildProc>,
    stderr: StderrTail,
}

impl RmcpConnection {
    fn new(
        service: RunningService<RoleClient, ClientConfig>,
        child: Option<ChildProc>,
        stderr: StderrTail,
    ) -> Self {
        RmcpConnection {
            peer: service.peer().clone(),
            service: tokio::sync::Mutex::new(Some(service)),
            child,
            stderr,
        }
    }

    /// Why the connection broke, waiting a moment for a dying process's status.
    async fn explain_closure(&self, fallback: &str) -> String {
        if let Some(child) = &self.child
            && let Some(status) = child.exit_status(EXIT_STATUS_WAIT).await
        {
            self.stderr.settle().await;
            return format!(
                "the process {}{}",
                describe_exit(status),
                self.stderr.quote()
            );
        }
        self.failure().unwrap_or_else(|| fallback.to_string())
    }
}

#[async_trait]
impl McpConnection for RmcpConnection {
    async fn list_tools(&self) -> Result<Vec<RemoteTool>, ConnectionError> {
        match list_tools(&self.peer).await {
            Ok(tools) => Ok(tools),
            Err(e) => Err(self.classify(e).await),
        }
    }

    async fn call_tool(
        &self,
        name: &str,
        arguments: Option<Map<String, Value>>,
        idempotency_key: &str,
    ) -> Result<CallResult, ConnectionError> {
        let params = call_params(name, arguments, idempotency_key);
        match self.peer.call_tool(params).await {
            Ok(result) => Ok(convert_result(result)),
            Err(e) => Err(self.classify(e).await),
        }
    }

    fn failure(&self) -> Option<String> {
        if let Some(child) = &self.child
            && let Some(status) = child.exited()
        {
            return Some(format!(
                "the process {}{}",
                describe_exit(status),
                self.stderr.quote()
            ));
        }
        self.peer
            .is_transport_closed()
            .then(|| format!("the connection closed{}", self.stderr.quote()))
    }

    fn closed(&self) -> BoxFuture<'static, ()> {
        if let Some(child) = &self.child {
            let mut exit = child.exit.clone();
            let stderr = self.stderr.clone();
            return Box::pin(async move {
                let _ = exit.wait_for(Option::is_some).await;
                stderr.settle().await;
            });
        }
        // rmcp offers no close event; its peer is cheap to poll and does not keep the
        // session alive.
        let peer = self.peer.clone();
        Box::pin(async move {
            while !peer.is_transport_closed() {
                tokio::time::sleep(TRANSPORT_POLL).await;
            }
        })
    }

    async fn shutdown(&self) {
        if let Some(mut service) = self.service.lock().await.take() {
            // Cancelling ends rmcp's loop, which closes the transport: the child's
            // stdin reaches EOF, an HTTP session is deleted.
            let _ = service.close_with_timeout(EXIT_GRACE).await;
        }
        if let Some(child) = &self.child {
            child.terminate().await;
        }
    }

    fn kill(&self) {
        if let Some(child) = &self.child {
            child.kill();
        }
    }
}

impl RmcpConnection {
    async fn classify(&self, error: ServiceError) -> ConnectionError {
        match error {
            ServiceError::McpError(data) => ConnectionError::Protocol {
                code: i64::from(data.code.0),
                message: data.message.into_owned(),
            },
            ServiceError::TransportClosed
            | ServiceError::TransportSend(_)
            | ServiceError::Cancelled { .. } => ConnectionError::Closed {
                reason: self.explain_closure(&error.to_string()).await,
                source: error.into(),
            },
            other => ConnectionError::Other(other.into()),
        }
    }
}

impl Drop for RmcpConnection {
    fn drop(&mut self) {
        self.kill();
    }
}

fn convert_result(result: CallToolResult) -> CallResult {
    let parts = result
        .content
        .into_iter()
        .map(|block| match block {
            ContentBlock::Text(text) => ResultPart::Text(text.text),
            ContentBlock::Image(image) => ResultPart::Described(format!(
                "[image: {}, {} bytes of base64]",
                image.mime_type,
                image.data.len()
            )),
            ContentBlock::Audio(audio) => ResultPart::Described(format!(
                "[audio: {}, {} bytes of base64]",
                audio.mime_type,
                audio.data.len()
            )),
            ContentBlock::Resource(embedded) => match embedded.resource {
                ResourceContents::TextResourceContents { uri, text, .. } => {
                    ResultPart::Text(format!("[resource {uri}]\n{text}"))
                }
                ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob,
                    ..
                } => ResultPart::Described(format!(
                    "[resource {uri}: {}, {} bytes of base64]",
                    mime_type.as_deref().unwrap_or("binary"),
                    blob.len()
                )),
                _ => ResultPart::Described("[a resource of a kind reprise does not know]".into()),
            },
            ContentBlock::ResourceLink(link) => {
                ResultPart::Described(format!("[resource link: {} ({})]", link.uri, link.name))
            }
            _ => ResultPart::Described("[content of a kind reprise does not know]".into()),
        })
        .collect();
    CallResult {
        parts,
        structured: result.structured_content,
        is_error: result.is_error.unwrap_or(false),
    }
}

fn describe_exit(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        _ => format!("exited ({status})"),
    }
}

/// A child process, reaped by a task of its own so its exit is seen as it happens.
struct ChildProc {
    /// Also its process group (it was started as a group leader).
    pid: Option<Pid>,
    exit: watch::Receiver<Option<ExitStatus>>,
    waiter: JoinHandle<()>,
}

impl ChildProc {
    fn watch(mut child: tokio::process::Child) -> ChildProc {
        let pid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(Pid::from_raw);
        let (tx, exit) = watch::channel(None);
        let waiter = tokio::spawn(async move {
            if let Ok(status) = child.wait().await {
                let _ = tx.send(Some(status));
            }
        });
        ChildProc { pid, exit, waiter }
    }

    fn exited(&self) -> Option<ExitStatus> {
        *self.exit.borrow()
    }

    async fn exit_status(&self, wait: Duration) -> Option<ExitStatus> {
        let mut exit = self.exit.clone();
        match tokio::time::timeout(wait, exit.wait_for(Option::is_some)).await {
            Ok(Ok(status)) => *status,
            _ => self.exited(),
        }
    }

    fn signal_group(&self, signal: Signal) {
        // Only while the leader is unreaped, so its pid cannot have been reused.
        if self.exited().is_none()
            && let Some(pid) = self.pid
        {
            let _ = kill_process_group(pid, signal);
        }
    }

    /// Waits for a clean exit, then SIGTERM, then SIGKILL (the MCP stdio shutdown).
    async fn terminate(&self) {
        if self.exit_status(EXIT_GRACE).await.is_none() {
            self.signal_group(Signal::TERM);
            if self.exit_status(EXIT_GRACE).await.is_none() {
                self.signal_group(Signal::KILL);
                self.exit_status(EXIT_GRACE).await;
            }
        }
    }

    fn kill(&self) {
        self.signal_group(Signal::KILL);
    }
}

impl Drop for ChildProc {
    fn drop(&mut self) {
        self.kill();
        // Dropping the waiter's `Child` (kill_on_drop) is the last resort.
        self.waiter.abort();
    }
}

/// The last lines a server wrote on stderr, kept to explain its failures (and kept
/// off the terminal, where they would break the chat's screen).
#[derive(Clone)]
struct StderrTail {
    lines: Arc<Mutex<VecDeque<String>>>,
    /// Set when the pipe reaches its end (or when there is no pipe).
    eof: watch::Sender<bool>,
}

impl Default for StderrTail {
    fn default() -> Self {
        StderrTail {
            lines: Arc::default(),
            eof: watch::Sender::new(true),
        }
    }
}

impl StderrTail {
    fn follow(&self, pipe: ChildStderr, server: String) {
        let lines = self.lines.clone();
        let eof = self.eof.clone();
        eof.send_replace(false);
        tokio::spawn(async move {
            let mut reader = BufReader::new(pipe).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                tracing::debug!(server = %server, "stderr: {line}");
                let line: String = line.chars().take(300).collect();
                if let Ok(mut lines) = lines.lock() {
                    if lines.len() == STDERR_LINES {
                        lines.pop_front();
                    }
                    lines.push_back(line);
                }
            }
            eof.send_replace(true);
        });
    }

    /// Waits (briefly) until everything a dead process wrote has been read, so the
    /// lines that explain its death are quoted.
    async fn settle(&self) {
        let mut eof = self.eof.subscribe();
        let _ = tokio::time::timeout(EXIT_STATUS_WAIT, eof.wait_for(|done| *done)).await;
    }

    fn quote_bare(&self) -> Option<String> {
        let lines = self.lines.lock().ok()?;
        let quoted: Vec<&str> = lines
            .iter()
            .rev()
            .filter(|l| !l.trim().is_empty())
            .take(STDERR_QUOTED)
            .map(String::as_str)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        (!quoted.is_empty()).then(|| format!("its stderr ended with: {}", quoted.join(" | ")))
    }

    fn quote(&self) -> String {
        self.quote_bare()
            .map(|q| format!("; {q}"))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_carries_its_idempotency_key_in_meta() {
        let mut arguments = Map::new();
        arguments.insert("amount".to_owned(), Value::from(5));
        let params = call_params("pay", Some(arguments), "key-1");
        let sent = serde_json::to_value(&params).unwrap();
        assert_eq!(sent["_meta"]["reprise/idempotencyKey"], "key-1");
        assert_eq!(sent["name"], "pay");
        assert_eq!(sent["arguments"]["amount"], 5);
    }

    #[test]
    fn annotations_say_what_a_tool_does() {
        use reprise_agent::ToolEffects;
        let annotations = |read_only, idempotent| {
            rmcp::model::ToolAnnotations::from_raw(None, read_only, None, idempotent, None)
        };
        assert_eq!(effects_of(None), ToolEffects::Changes);
        assert_eq!(
            effects_of(Some(&annotations(Some(true), Some(true)))),
            ToolEffects::ReadOnly
        );
        assert_eq!(
            effects_of(Some(&annotations(Some(false), Some(true)))),
            ToolEffects::Idempotent
        );
        assert_eq!(
            effects_of(Some(&annotations(None, Some(false)))),
            ToolEffects::Changes
        );
    }
}
