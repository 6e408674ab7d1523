//! The model's context window for a run: the setting, else what the server says
//! (asked once per run folder and kept in it), else the fallback.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::Settings;

use reprise_session::runs::CONTEXT_WINDOW_JSON;

/// How long each lookup request may take: a server that does not answer at once
/// does not hold up the chat.
pub const LOOKUP_TIMEOUT: Duration = Duration::from_millis(1_500);

/// What `context-window.json` holds.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Cached {
    base_url: String,
    model: String,
    tokens: u32,
    source: String,
}

/// The window to compact for: `context_window` / `--context-window`; else the
/// answer cached in the run folder for this server and model; else the server's
/// answer (then cached); else [`reprise_agent::FALLBACK_CONTEXT_WINDOW`].
pub async fn window_for(settings: &Settings, run_dir: &Path) -> u32 {
    if let Some(tokens) = settings.context_window {
        return tokens;
    }
    let path = run_dir.join(CONTEXT_WINDOW_JSON);
    if let Some(cached) = std::fs::read(&path)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Cached>(&bytes).ok())
        .filter(|cached| cached.base_url == settings.base_url && cached.model == settings.model)
    {
        return cached.tokens;
    }
    let found = reprise_provider::discover_context_window(
        &settings.base_url,
        &settings.model,
        settings.api_key.as_deref(),
        LOOKUP_TIMEOUT,
    )
    .await;
    let Some(found) = found else {
        tracing::info!(
            "the server did not say its context window; assuming {}",
            reprise_agent::FALLBACK_CONTEXT_WINDOW
        );
        return reprise_agent::FALLBACK_CONTEXT_WINDOW;
    };
    let cached = Cached {
        base_url: settings.base_url.clone(),
        model: settings.model.clone(),
        tokens: found.tokens,
        source: found.source.to_owned(),
    };
    // Only a cache: a run folder that cannot take it asks again next time.
    if let Ok(text) = serde_json::to_vec_pretty(&cached)
        && let Err(error) = std::fs::write(&path, text)
    {
        tracing::warn!("{}: {error}", path.display());
    }
    found.tokens
}
