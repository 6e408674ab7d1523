//! The model client that settings describe.

use std::sync::Arc;
use std::time::Duration;

use crate::error::{ChatError, Result};
use reprise_provider::Provider;

use crate::config::Settings;

/// The model client the settings describe.
pub fn build_provider(settings: &Settings) -> Result<Arc<dyn Provider>> {
    let mut config = reprise_provider::OpenAiConfig::new(settings.model.clone())
        .base_url(settings.base_url.clone())
        .generation(settings.generation.clone())
        // No limit: a wait longer than any instant, which tokio takes as "never".
        .request_timeout(settings.request_timeout.unwrap_or(Duration::MAX))
        .stream_idle_timeout(settings.idle_timeout.unwrap_or(Duration::MAX));
    config.extra_body = settings.extra_body.clone();
    if let Some(key) = &settings.api_key {
        config = config.api_key(key.clone());
    }
    let provider =
        reprise_provider::OpenAiProvider::new(config).map_err(|source| ChatError::ModelServer {
            base_url: settings.base_url.clone(),
            source,
        })?;
    Ok(Arc::new(provider))
}
