//! Provider errors.
//!
//! Each variant's text says what failed; the error underneath (from `reqwest`,
//! `serde_json`, the SSE parser) is kept as the [`source`](std::error::Error::source),
//! not copied into the text. [`error_chain`] prints the whole chain in one line.

use std::time::Duration;

/// An underlying error of any kind (a JSON, UTF-8 or URL error).
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a model call failed.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// No connection could be made to the server.
    #[error("could not connect to {url}{}", attempts_note(*.attempts))]
    Connect {
        /// The URL tried.
        url: String,
        /// How many connection attempts failed (the last one's error is `source`).
        attempts: u32,
        /// What failed, from the HTTP client.
        #[source]
        source: reqwest::Error,
    },
    /// The server answered with an error status that retrying cannot fix.
    #[error("{url} answered {status}: {message}")]
    Status {
        /// The URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The server's message.
        message: String,
    },
    /// Retries ran out; `last` is the last attempt's error, and the source (in the
    /// chain it is the `Box<ProviderError>` itself, so downcast to that type).
    #[error("gave up after {attempts} attempts")]
    RetriesExhausted {
        /// How many attempts were made.
        attempts: u32,
        /// The last failure.
        #[source]
        last: Box<ProviderError>,
    },
    /// No connection, no answer, or no new chunk within the configured time.
    #[error("timed out after {after:?} {}", phase.waiting_for())]
    Timeout {
        /// The limit that ran out.
        after: Duration,
        /// What was being waited for.
        phase: TimeoutPhase,
    },
    /// The stream ended before the response was complete.
    #[error("the response stream was cut off: {reason}")]
    StreamCut {
        /// What happened, as seen from the stream.
        reason: String,
        /// The transport error, when the connection failed.
        #[source]
        source: Option<reqwest::Error>,
    },
    /// A chunk or body could not be understood.
    #[error("malformed response: {what}")]
    Malformed {
        /// What could not be read (with the start of the offending text).
        what: String,
        /// The decoding error.
        #[source]
        source: Option<Cause>,
    },
    /// The call was cancelled.
    #[error("cancelled")]
    Cancelled,
    /// The configuration is unusable (bad URL, bad header).
    #[error("invalid provider configuration: {reason}")]
    Config {
        /// What is wrong.
        reason: String,
        /// The error that showed it, if any.
        #[source]
        source: Option<Cause>,
    },
}

/// What a request was waiting for when it timed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutPhase {
    /// The TCP (and TLS) connection (`connect_timeout`).
    Connect,
    /// The first byte of the answer, or a whole non-streamed answer
    /// (`request_timeout`).
    FirstByte,
    /// The next piece of a streamed answer (`stream_idle_timeout`).
    Idle,
}

impl TimeoutPhase {
    /// What was being waited for, as words after "timed out after N".
    pub fn waiting_for(self) -> &'static str {
        match self {
            TimeoutPhase::Connect => "waiting for the connection",
            TimeoutPhase::FirstByte => "waiting for the server to start answering",
            TimeoutPhase::Idle => "waiting for the next piece of the streamed answer",
        }
    }
}

/// Words with which servers say a request is larger than the model's context:
/// llama.cpp ("the request exceeds the available context size"), vLLM and OpenAI
/// ("maximum context length", `context_length_exceeded`), and others.
const CONTEXT_EXCEEDED_WORDS: &[&str] = &[
    "exceeds the available context size",
    "exceed_context_size",
    "maximum context length",
    "context_length_exceeded",
    "context length exceeded",
    "context window",
];

/// Whether a server's error answer says that the request did not fit the model's
/// context: one of the known messages, or any 400 that speaks of the context (never
/// a 429, a rate limit).
pub fn is_context_exceeded_answer(status: u16, body: &str) -> bool {
    // A rate limit speaks of tokens too, and passes with time.
    if status == 429 {
        return false;
    }
    let lower = body.to_ascii_lowercase();
    CONTEXT_EXCEEDED_WORDS
        .iter()
        .any(|words| lower.contains(words))
        || (status == 400 && lower.contains("context"))
}

impl ProviderError {
    /// Whether the server refused the request because it is larger than the
    /// model's context window (see [`is_context_exceeded_answer`]); looks through
    /// [`ProviderError::RetriesExhausted`].
    pub fn is_context_exceeded(&self) -> bool {
        match self {
            ProviderError::Status {
                status, message, ..
            } => is_context_exceeded_answer(*status, message),
            ProviderError::RetriesExhausted { last, .. } => last.is_context_exceeded(),
            _ => false,
        }
    }

    /// A cut stream, seen in the data itself (no transport error under it).
    pub(crate) fn cut(reason: impl Into<String>) -> Self {
        ProviderError::StreamCut {
            reason: reason.into(),
            source: None,
        }
    }

    /// A response that could not be read, with the error that says why.
    pub(crate) fn malformed(what: impl Into<String>, source: impl Into<Cause>) -> Self {
        ProviderError::Malformed {
            what: what.into(),
            source: Some(source.into()),
        }
    }

    /// A configuration problem with no error under it.
    pub(crate) fn config(reason: impl Into<String>) -> Self {
        ProviderError::Config {
            reason: reason.into(),
            source: None,
        }
    }
}

fn attempts_note(attempts: u32) -> String {
    if attempts > 1 {
        format!(" ({attempts} attempts)")
    } else {
        String::new()
    }
}

/// `error` and every error under it, joined by `": "`: the one-line form for logs,
/// retry notices and messages. A cause whose text the line already holds is skipped
/// (HTTP clients often repeat their cause).
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_exceeded_answers_of_known_servers_are_recognised() {
        let llama = r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":2300,"n_ctx":2048}}"#;
        let vllm = r#"{"object":"error","message":"This model's maximum context length is 2048 tokens. However, you requested 2300 tokens in the messages, Please reduce the length of the messages.","type":"BadRequestError","code":400}"#;
        let openai = r#"{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
        for body in [llama, vllm, openai] {
            assert!(is_context_exceeded_answer(400, body), "{body}");
        }
        assert!(is_context_exceeded_answer(500, llama));
        assert!(is_context_exceeded_answer(
            400,
            "prompt is longer than the context"
        ));
        assert!(!is_context_exceeded_answer(
            500,
            "context deadline exceeded?"
        ));
        assert!(!is_context_exceeded_answer(400, "invalid model"));
        assert!(!is_context_exceeded_answer(429, openai));
        let status = ProviderError::Status {
            url: "u".into(),
            status: 400,
            message: "the request exceeds the available context size".into(),
        };
        assert!(status.is_context_exceeded());
        let wrapped = ProviderError::RetriesExhausted {
            attempts: 2,
            last: Box::new(status),
        };
        assert!(wrapped.is_context_exceeded());
        assert!(!ProviderError::Cancelled.is_context_exceeded());
    }
}
