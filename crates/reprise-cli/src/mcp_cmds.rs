//! `reprise mcp list`.

use anyhow::Result;

use crate::config::Settings;

/// Shows the configured MCP servers.
pub async fn list(settings: &Settings) -> Result<()> {
    let servers = settings
        .mcp
        .as_ref()
        .and_then(|mcp| mcp.get("servers"))
        .and_then(|servers| servers.as_table());
    match servers {
        None => println!(
            "no MCP servers configured{}",
            settings
                .config_file
                .as_ref()
                .map(|p| format!(" in {}", p.display()))
                .unwrap_or_default()
        ),
        Some(servers) => {
            for name in servers.keys() {
                println!("{name}");
            }
        }
    }
    Ok(())
}
