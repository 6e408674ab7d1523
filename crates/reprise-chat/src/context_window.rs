//! The model's context window for a run: the setting, else what the server says
//! (asked once per run folder and kept in it), else the fallback.

use std::path::Path;
use std::time::Duration;

use reprise_redact::Redactor;
use serde::{Deserialize, Serialize};

use crate::config::Settings;

use reprise_runs::CONTEXT_WINDOW_JSON;

/// How long each lookup request may take: a server that does not answer at once
/// does not hold up the chat.
pub const LOOKUP_TIMEOUT: Duration = Duration::from_millis(1_500);

/// What `context-window.json` holds.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Cached {
    /// Redacted, as every file of a run folder but the conversation: a password
    /// in the URL (`http://user:password@host`) is masked. Compared redacted too.
    base_url: String,
    model: String,
    tokens: u32,
    source: String,
}

/// The window to compact for: `context_window` / `--context-window`; else the
/// answer cached in the run folder for this server and model; else the server's
/// answer (then cached, its URL passed through `redactor`); else
/// [`reprise_agent::FALLBACK_CONTEXT_WINDOW`].
pub async fn window_for(settings: &Settings, redactor: &Redactor, run_dir: &Path) -> u32 {
    if let Some(tokens) = settings.context_window {
        return tokens;
    }
    let path = run_dir.join(CONTEXT_WINDOW_JSON);
    // The runs folder: below it no link is followed, for reading as for writing.
    let root = reprise_session::fs::parent_of(run_dir);
    let base_url = redactor.redact(&settings.base_url).into_owned();
    let cached = reprise_session::fs::open_read_beneath(root, &path)
        .ok()
        .flatten()
        .and_then(|file| serde_json::from_reader::<_, Cached>(std::io::BufReader::new(file)).ok());
    if let Some(cached) =
        cached.filter(|cached| cached.base_url == base_url && cached.model == settings.model)
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
        base_url,
        model: settings.model.clone(),
        tokens: found.tokens,
        source: found.source.to_owned(),
    };
    // Only a cache: a run folder that cannot take it asks again next time. Made
    // 0600 at creation, as every file of a run folder.
    if let Ok(text) = serde_json::to_vec_pretty(&cached)
        && let Err(error) = reprise_session::fs::write_file_atomic(root, &path, &text, false)
    {
        tracing::warn!(
            "{}: {}",
            path.display(),
            crate::error_text::with_causes(&error)
        );
    }
    found.tokens
}
