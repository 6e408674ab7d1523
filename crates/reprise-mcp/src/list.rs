//! `reprise mcp list`: each configured server, whether it starts, and its tools.

use serde::Serialize;

use crate::config::McpConfig;
use crate::error::ConfigError;
use crate::hub::{HubOptions, McpHub, ServerStatus};
use crate::resolve::ResolveContext;

/// What `reprise mcp list` shows.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct McpListReport {
    /// One entry per configured server, in name order.
    pub servers: Vec<ServerStatus>,
}

/// Starts every configured server (concurrently), lists its tools, stops it.
pub async fn list_servers(
    config: &McpConfig,
    ctx: &ResolveContext,
) -> Result<McpListReport, ConfigError> {
    let hub = McpHub::start(config, ctx, HubOptions::default()).await?;
    let servers = hub.statuses().to_vec();
    hub.shutdown().await;
    Ok(McpListReport { servers })
}

impl McpListReport {
    /// The report as text, one block per server.
    pub fn to_text(&self) -> String {
        if self.servers.is_empty() {
            return "No MCP servers are configured ([mcp.servers.<name>] in the config file).\n"
                .to_string();
        }
        let mut out = String::new();
        for server in &self.servers {
            out.push_str(&format!("{}  ({})\n", server.name, server.transport));
            match &server.result {
                Ok(tools) => {
                    out.push_str(&format!(
                        "  started in {} ms, {} tools\n",
                        server.elapsed.as_millis(),
                        tools.len()
                    ));
                    for tool in tools {
                        let description = tool.description.lines().next().unwrap_or("");
                        out.push_str(&format!("    {}  {}\n", tool.name, description));
                    }
                }
                Err(reason) => out.push_str(&format!("  does not start: {reason}\n")),
            }
        }
        out
    }
}
