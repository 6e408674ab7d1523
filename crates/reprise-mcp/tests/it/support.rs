//! Shared by the integration tests: configs, hubs, invocations and process checks.

use reprise_agent::{ToolContext, ToolInvocation};
use reprise_mcp::{HubOptions, McpConfig, McpHub, McpNotice, ResolveContext};
pub use reprise_testkit::{mcp_crashy_proxy, mcp_everything_server};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

/// A TOML value for a path.
pub fn quoted(path: &std::path::Path) -> String {
    format!("{:?}", path.display().to_string())
}

/// Parses a config written in the chat's TOML format (the `[mcp]` section's body).
pub fn config(toml_text: &str) -> McpConfig {
    let config: McpConfig = toml::from_str(toml_text).unwrap();
    config.validate().unwrap();
    config
}

/// `[servers.<name>]` running the reference server over stdio.
pub fn everything_table(name: &str) -> String {
    format!(
        "[servers.{name}]\ncommand = \"node\"\nargs = [{}, \"stdio\"]\n",
        quoted(&mcp_everything_server())
    )
}

/// The process environment plus `extra`, relative paths from the crate directory.
pub fn ctx_with(extra: &[(&str, &str)]) -> ResolveContext {
    let extra: Vec<(String, String)> = extra
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    ResolveContext::new(env!("CARGO_MANIFEST_DIR"), move |name| {
        extra
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var(name).ok())
    })
}

/// A model's call of `name` with these arguments.
pub fn invocation(id: &str, name: &str, arguments: &str) -> ToolInvocation {
    ToolInvocation {
        name: name.to_string(),
        arguments: arguments.into(),
        context: ToolContext {
            session_id: "mcp-tests".to_string(),
            agent: "main".to_string(),
            subagent: false,
            call_id: id.to_string(),
            idempotency_key: format!("key-{id}"),
            cancel: CancellationToken::new(),
        },
    }
}

/// A call of `name` made by the subagent `agent`.
pub fn subagent_invocation(agent: &str, id: &str, name: &str, arguments: &str) -> ToolInvocation {
    let mut call = invocation(id, name, arguments);
    call.context.agent = agent.to_string();
    call.context.subagent = true;
    call
}

/// Whether a process is still running (a zombie counts as gone).
pub fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .chars()
                .next();
            state != Some('Z') && state != Some('X')
        }
        Err(_) => false,
    }
}

/// Waits (up to 10 s, polling) for a process to be gone; returns whether it is.
pub async fn wait_gone(pid: u32) -> bool {
    for _ in 0..200 {
        if !process_alive(pid) {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    false
}

/// Starts a hub on this config with the process environment and default options.
pub async fn start_hub(toml_text: &str) -> McpHub {
    McpHub::start(&config(toml_text), &ctx_with(&[]), HubOptions::default())
        .await
        .unwrap()
}

/// Starts a hub on this config with the process environment, returning its notices too.
pub async fn start_hub_with_notices(toml_text: &str) -> (McpHub, UnboundedReceiver<McpNotice>) {
    let (tx, notices) = tokio::sync::mpsc::unbounded_channel();
    let hub = McpHub::start(
        &config(toml_text),
        &ctx_with(&[]),
        HubOptions { notices: Some(tx) },
    )
    .await
    .unwrap();
    (hub, notices)
}
