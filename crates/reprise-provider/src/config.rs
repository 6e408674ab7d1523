//! Configuration of the OpenAI-compatible provider.

use std::fmt;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::generation::Generation;

/// Ollama's OpenAI-compatible endpoint, the default base URL.
pub const DEFAULT_BASE_URL: &str = "http://localhost:11434/v1";

/// The default wait for the first byte of an answer.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The default longest silence inside a streamed answer.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// How to reach an OpenAI-compatible server and how hard to try.
///
/// `Debug` never shows the API key.
///
/// ```
/// use std::time::Duration;
/// use reprise_provider::{OpenAiConfig, OpenAiProvider};
///
/// let mut config = OpenAiConfig::new("gpt-4o-mini")
///     .base_url("https://api.openai.com/v1")
///     .request_timeout(Duration::from_secs(60))
///     .max_attempts(3);
/// if let Ok(key) = std::env::var("OPENAI_API_KEY") {
///     config = config.api_key(key);
/// }
/// assert!(!format!("{config:?}").contains("sk-"));
/// let provider = OpenAiProvider::new(config).expect("a client");
/// # let _ = provider;
/// ```
#[derive(Clone)]
pub struct OpenAiConfig {
    /// The API root, such as `http://localhost:11434/v1`; `/chat/completions` is
    /// appended.
    pub base_url: String,
    /// The model name sent in every request.
    pub model: String,
    /// The API key, sent as `Authorization: Bearer …`. The caller reads it from the
    /// environment; it is never logged.
    pub api_key: Option<String>,
    /// Extra request headers (an organisation id, a proxy token, …).
    pub extra_headers: Vec<(String, String)>,
    /// How replies are generated (`max_tokens`, `temperature`, …).
    pub generation: Generation,
    /// Extra top-level fields merged into every request body as they are, after the
    /// generation fields (a field set in both is sent with this value). Fields named
    /// in [`RESERVED_BODY_FIELDS`](crate::RESERVED_BODY_FIELDS) are left out: the
    /// request writes them itself.
    pub extra_body: Map<String, Value>,
    /// How long to wait for a TCP (and TLS) connection.
    pub connect_timeout: Duration,
    /// How long to wait for the answer to start (its headers, then the first piece
    /// of a stream), and for the whole body of a non-streaming answer. A server that stays silent this long is
    /// not asked again: on a busy single-slot server the retry would queue behind the
    /// request that is still running.
    pub request_timeout: Duration,
    /// How long a stream may stay silent between two pieces before it is given up
    /// (not retried either, for the same reason).
    pub stream_idle_timeout: Duration,
    /// How many times a request is sent at most (the first try included).
    pub max_attempts: u32,
    /// The backoff before the first retry; it doubles each time (full jitter: the
    /// actual wait is uniform in `0..=base·2ⁿ`, capped at `backoff_max`).
    pub backoff_base: Duration,
    /// The longest backoff between two attempts.
    pub backoff_max: Duration,
    /// The longest `Retry-After` honoured; longer values are cut to this.
    pub max_retry_after: Duration,
    /// Stream the response (SSE) or ask for one JSON answer.
    pub stream: bool,
}

impl OpenAiConfig {
    /// A configuration for `model` on the default base URL with default limits:
    /// connect 10 s, first byte 30 s, stream idle 30 s (a hung server fails within
    /// half a minute), 4 attempts, backoff from 500 ms to 30 s, `Retry-After`
    /// honoured up to 60 s, streaming on, `max_tokens` [`DEFAULT_MAX_TOKENS`].
    ///
    /// [`DEFAULT_MAX_TOKENS`]: crate::generation::DEFAULT_MAX_TOKENS
    pub fn new(model: impl Into<String>) -> Self {
        OpenAiConfig {
            base_url: DEFAULT_BASE_URL.to_owned(),
            model: model.into(),
            api_key: None,
            extra_headers: Vec::new(),
            generation: Generation::default(),
            extra_body: Map::new(),
            connect_timeout: Duration::from_secs(10),
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            stream_idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_attempts: 4,
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
            stream: true,
        }
    }

    /// Sets the base URL.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    /// Sets the API key (pass the value of an environment variable).
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Adds a request header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.extra_headers.push((name.into(), value.into()));
        self
    }

    /// Adds a top-level field to every request body (`temperature`, `seed`, …).
    pub fn body_field(mut self, name: impl Into<String>, value: Value) -> Self {
        self.extra_body.insert(name.into(), value);
        self
    }

    /// Sets the generation settings.
    pub fn generation(mut self, generation: Generation) -> Self {
        self.generation = generation;
        self
    }

    /// Sets `max_tokens` (`None`: not sent, the server's default applies).
    pub fn max_tokens(mut self, max_tokens: Option<u32>) -> Self {
        self.generation.max_tokens = max_tokens;
        self
    }

    /// Sets the request timeout (until the response headers arrive).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sets the connect timeout.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets the stream idle timeout.
    pub fn stream_idle_timeout(mut self, timeout: Duration) -> Self {
        self.stream_idle_timeout = timeout;
        self
    }

    /// Sets the maximum number of attempts (at least 1).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// Sets the backoff base (tests use a few milliseconds).
    pub fn backoff_base(mut self, base: Duration) -> Self {
        self.backoff_base = base;
        self
    }

    /// Sets the longest `Retry-After` honoured.
    pub fn max_retry_after(mut self, limit: Duration) -> Self {
        self.max_retry_after = limit;
        self
    }

    /// Turns streaming on or off.
    pub fn stream(mut self, stream: bool) -> Self {
        self.stream = stream;
        self
    }
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field(
                "extra_headers",
                &self
                    .extra_headers
                    .iter()
                    .map(|(name, _)| (name.as_str(), "<redacted>"))
                    .collect::<Vec<_>>(),
            )
            .field("generation", &self.generation)
            .field("extra_body", &self.extra_body.keys().collect::<Vec<_>>())
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("stream_idle_timeout", &self.stream_idle_timeout)
            .field("max_attempts", &self.max_attempts)
            .field("backoff_base", &self.backoff_base)
            .field("backoff_max", &self.backoff_max)
            .field("max_retry_after", &self.max_retry_after)
            .field("stream", &self.stream)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_key_and_header_values() {
        let config = OpenAiConfig::new("m")
            .api_key("sk-very-secret")
            .header("x-proxy-token", "also-secret");
        let shown = format!("{config:?}");
        assert!(!shown.contains("very-secret"), "{shown}");
        assert!(!shown.contains("also-secret"), "{shown}");
        assert!(shown.contains("x-proxy-token"));
    }
}
