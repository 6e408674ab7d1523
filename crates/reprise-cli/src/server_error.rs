//! Turning a failed model call into one message a person can act on.

use reprise_agent::AgentError;
use reprise_provider::{ProviderError, error_chain};

use crate::config::DEFAULT_BASE_URL;

/// What to show when a turn failed.
pub fn describe_agent_error(error: &AgentError, base_url: &str, model: &str) -> String {
    match error {
        AgentError::Provider(provider) => describe_provider_error(provider, base_url, model),
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
    let how_to = format!(
        "reprise talks to any OpenAI-compatible server. Point it at one with\n  \
         --base-url URL  (now {base_url}; default {DEFAULT_BASE_URL}, Ollama's)\n  \
         --model NAME    (now {model})\n\
         or set REPRISE_BASE_URL / REPRISE_MODEL, or base_url / model in the config file.\n\
         With Ollama: `ollama serve`, then `ollama pull {model}`."
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
                "no model server answered at {url}: {}{tries}.\n{how_to}",
                error_chain(source)
            )
        }
        ProviderError::Timeout(after) => {
            format!("the model server at {base_url} did not answer within {after:?}.\n{how_to}")
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
