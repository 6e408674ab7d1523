//! `reprise mcp list`.

use anyhow::Result;

use reprise_chat::config::Settings;

/// Shows the configured MCP servers: whether each starts, and its tools.
pub async fn list(settings: &Settings) -> Result<()> {
    let config = settings.mcp.clone().unwrap_or_default();
    let report =
        reprise_mcp::list_servers(&config, &reprise_mcp::ResolveContext::from_process()).await?;
    print!("{}", crate::display::terminal::visible(&report.to_text()));
    if config.servers.is_empty()
        && let Some(file) = &settings.config_file
    {
        crate::display::terminal::print_line(&format!("(config file: {})", file.display()));
    }
    Ok(())
}
