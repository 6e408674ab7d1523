//! Turning a failed model call into one message a person can act on.

use reprise_agent::AgentError;
use reprise_provider::{ProviderError, TimeoutPhase, error_chain};
use reprise_session::StoreError;

use crate::config::DEFAULT_BASE_URL;

/// What to show when a turn failed.
pub fn describe_agent_error(error: &AgentError, base_url: &str, model: &str) -> String {
    match error {
        AgentError::Provider(provider) => describe_provider_error(provider, base_url, model),
        AgentError::TurnTimeout { .. } => format!(
            "{error}.\nRaise the budget with --turn-timeout DURATION or turn_timeout in the \
             config (0 for none)."
        ),
        // Every later message would be refused the same way: only a new chat, which
        // takes the lease again and loads what was stored meanwhile, goes on.
        AgentError::Store(StoreError::TakenOver { session, .. }) => format!(
            "{}.\nThis chat can no longer write to run {session}: restart it to go on with \
             the conversation (reprise --resume {session}).",
            crate::error_text::with_causes(error)
        ),
        other => crate::error_text::with_causes(other),
    }
}

fn innermost(error: &ProviderError) -> &ProviderError {
    match error {
        ProviderError::RetriesExhausted { last, .. } => innermost(last),
        other => other,
    }
}

/// What to show when the model server could not be used.
pub fn describe_provider_error(error: &ProviderError, base_url: &str, model: &str) -> String {
    let ollama = if is_ollama(base_url, error) {
        format!("\nWith Ollama: `ollama serve`, then `ollama pull {model}`.")
    } else {
        String::new()
    };
    let how_to = format!(
        "reprise talks to any OpenAI-compatible server. Point it at one with\n  \
         --base-url URL  (now {base_url}; default {DEFAULT_BASE_URL}, Ollama's)\n  \
         --model NAME    (now {model})\n\
         or set REPRISE_BASE_URL / REPRISE_MODEL, or base_url / model in the config file.\
         {ollama}"
    );
    match innermost(error) {
        ProviderError::Connect {
            url,
            attempts,
            source,
        } => {
            let tries = if *attempts > 1 {
                format!(" ({attempts} attempts)")
            } else {
                String::new()
            };
            format!(
                "no model server answered at {url}: {}{tries}.\n{how_to}\n\
                 No server at hand? `reprise --local` starts a small one on this machine \
                 (llama.cpp's server with SmolLM2-135M-Instruct).",
                error_chain(source)
            )
        }
        ProviderError::Timeout { after, phase } => {
            let (what, flag, key) = match phase {
                TimeoutPhase::Connect => {
                    ("could not be reached", "(the connect timeout is fixed)", "")
                }
                TimeoutPhase::FirstByte => (
                    "did not start answering",
                    "--request-timeout DURATION",
                    "request_timeout",
                ),
                TimeoutPhase::Idle => (
                    "stopped sending in the middle of its answer",
                    "--idle-timeout DURATION",
                    "idle_timeout",
                ),
            };
            let raise = if key.is_empty() {
                String::new()
            } else {
                format!(
                    "\nA slow server (a big model on a CPU, a long prompt) may need longer: \
                     raise {key} with {flag} or {key} in the config."
                )
            };
            format!(
                "the model server at {base_url} {what} within {} ({}).{raise}",
                humanize(*after),
                if key.is_empty() {
                    "connect timeout"
                } else {
                    key
                }
            )
        }
        ProviderError::Status {
            url,
            status: 404,
            message,
        } => format!(
            "{url} answered 404 (not found): {message}\n\
             Is the model {model:?} available there, and does the base URL end in /v1?\n{how_to}"
        ),
        ProviderError::Status {
            url,
            status: status @ (401 | 403),
            message,
        } => format!(
            "{url} answered {status}: {message}\n\
             The server wants an API key: put it in the environment variable that \
             --api-key-env names (OPENAI_API_KEY by default)."
        ),
        _ => format!("model call failed: {}", error_chain(error)),
    }
}

/// Whether the server is Ollama: its port, or its own words in the error.
fn is_ollama(base_url: &str, error: &ProviderError) -> bool {
    let authority = base_url
        .split_once("://")
        .map_or(base_url, |(_, rest)| rest)
        .split(['/', '?', '#'])
        .next()
        .unwrap_or("");
    let port_11434 = authority.rsplit_once(':').map(|(_, port)| port) == Some("11434");
    port_11434 || error_chain(error).to_ascii_lowercase().contains("ollama")
}

/// `30s`, `2m`, `1m30s`, `500ms`.
fn humanize(duration: std::time::Duration) -> String {
    let seconds = duration.as_secs();
    if seconds == 0 {
        return format!("{}ms", duration.as_millis());
    }
    match (seconds / 60, seconds % 60) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m}m"),
        (m, s) => format!("{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use reprise_provider::{ChatRequest, OpenAiConfig, OpenAiProvider, Provider};
    use tokio_util::sync::CancellationToken;

    /// The error a real call to a port nobody listens on ends with.
    async fn refused_call(attempts: u32) -> ProviderError {
        let config = OpenAiConfig::new("llama3.2")
            .base_url(reprise_testkit::unreachable_base_url())
            .max_attempts(attempts)
            .backoff_base(std::time::Duration::from_millis(1));
        let request = ChatRequest {
            messages: Vec::new(),
            tools: Vec::new(),
            max_tokens: None,
        };
        OpenAiProvider::new(config)
            .unwrap()
            .complete(&request, None, &CancellationToken::new())
            .await
            .unwrap_err()
    }

    #[tokio::test]
    async fn a_refused_connection_names_the_url_the_cause_and_the_way_out() {
        let error = refused_call(2).await;
        let ProviderError::Connect { url, .. } = &error else {
            panic!("expected Connect, got {error:?}");
        };
        let text = describe_provider_error(&error, "http://localhost:11434/v1", "llama3.2");
        assert!(text.contains(url.as_str()), "{text}");
        // The cause under reqwest's own text, from the error chain.
        assert!(text.to_lowercase().contains("connect"), "{text}");
        assert!(text.contains("refused"), "{text}");
        assert!(text.contains("(2 attempts)"), "{text}");
        assert!(text.contains("--base-url"), "{text}");
        assert!(text.contains("--model"), "{text}");
        assert!(text.contains("ollama"), "{text}");
    }

    #[tokio::test]
    async fn the_ollama_hint_is_only_for_ollama() {
        let error = refused_call(1).await;
        let other = describe_provider_error(&error, "http://127.0.0.1:8080/v1", "gemma");
        assert!(!other.contains("ollama"), "{other}");
        let ollama = describe_provider_error(&error, "http://gpu-box:11434/v1", "gemma");
        assert!(ollama.contains("ollama pull gemma"), "{ollama}");
        let said_so = ProviderError::Status {
            url: "http://x/v1/chat/completions".into(),
            status: 503,
            message: "ollama: model is loading".into(),
        };
        let text = describe_provider_error(&said_so, "http://x/v1", "gemma");
        assert!(!text.contains("ollama serve"), "only with a how-to: {text}");
    }

    #[test]
    fn another_failure_shows_its_whole_chain() {
        let error = ProviderError::RetriesExhausted {
            attempts: 3,
            last: Box::new(ProviderError::StreamCut {
                reason: "the stream ended after 2 chunks".into(),
                source: None,
            }),
        };
        let text = describe_provider_error(&error, "http://localhost:11434/v1", "llama3.2");
        assert_eq!(
            text,
            "model call failed: gave up after 3 attempts: \
             the response stream was cut off: the stream ended after 2 chunks"
        );
    }
}
