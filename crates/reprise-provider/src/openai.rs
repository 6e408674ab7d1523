//! The OpenAI-compatible chat-completions provider: request, retries, decoding.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use crate::accumulate::normalize_message;
use crate::body::{StreamedBody, streamed};
use crate::config::OpenAiConfig;
use crate::error::{ProviderError, TimeoutPhase, error_chain};
use crate::provider::{ChatRequest, Completion, Provider, StreamEvent, Usage};
use crate::retry::{backoff_delay, retry_after};
use crate::sse::decode_sse;
use crate::wire::{CompletionWire, OwnedRequestWire, RequestWire, error_message};

/// How one attempt failed, and what to do about it.
enum Failure {
    /// Retrying may help; `wait` is the server's `Retry-After`, if any.
    Retry {
        error: ProviderError,
        wait: Option<Duration>,
    },
    /// The server refused `stream_options`; send again without it.
    StreamOptionsRejected(ProviderError),
    /// The server refused `max_tokens` and asked for `max_completion_tokens`
    /// (OpenAI's reasoning models); send again with that name.
    MaxTokensRejected(ProviderError),
    /// The server closed the connection before it began to answer: send again at
    /// once, on a new connection (see [`closed_before_answer`]).
    Resend(ProviderError),
    /// Retrying cannot help.
    Fatal(ProviderError),
}

impl Failure {
    fn retry(error: ProviderError) -> Self {
        Failure::Retry { error, wait: None }
    }
}

/// A provider for any server that speaks OpenAI chat completions (OpenAI, Ollama,
/// vLLM, llama.cpp, LM Studio, OpenRouter, …).
pub struct OpenAiProvider {
    config: OpenAiConfig,
    url: String,
    /// Built with the first request: building one loads the system's certificates,
    /// which every start of the chat would otherwise pay before it shows anything.
    client: std::sync::OnceLock<reqwest::Client>,
    headers: HeaderMap,
    /// Set once a server rejected `stream_options`, so later calls leave it out.
    no_stream_options: AtomicBool,
    /// Set once a server asked for `max_completion_tokens` instead of `max_tokens`.
    max_completion_tokens: AtomicBool,
}

impl std::fmt::Debug for OpenAiProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiProvider")
            .field("config", &self.config)
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl OpenAiProvider {
    /// Builds the provider. Fails with [`ProviderError::Config`] on a base URL that is
    /// not `http(s)://…` or a header that is not valid in HTTP.
    pub fn new(config: OpenAiConfig) -> Result<Self, ProviderError> {
        let base = config.base_url.trim().trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ProviderError::config(format!(
                "the base URL must start with http:// or https://, got {:?}",
                config.base_url
            )));
        }
        let url = format!("{base}/chat/completions");
        reqwest::Url::parse(&url).map_err(|error| ProviderError::Config {
            reason: format!("bad base URL {base:?}"),
            source: Some(error.into()),
        })?;
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(key) = &config.api_key {
            let mut value = HeaderValue::from_str(&format!("Bearer {}", key.trim()))
                .map_err(|_| ProviderError::config("the API key is not a valid header value"))?;
            value.set_sensitive(true);
            headers.insert(header::AUTHORIZATION, value);
        }
        for (name, value) in &config.extra_headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| ProviderError::config(format!("bad header name {name:?}")))?;
            let mut value = HeaderValue::from_str(value)
                .map_err(|_| ProviderError::config(format!("bad value for header {name}")))?;
            value.set_sensitive(true);
            headers.append(name, value);
        }
        Ok(OpenAiProvider {
            config,
            url,
            client: std::sync::OnceLock::new(),
            headers,
            no_stream_options: AtomicBool::new(false),
            max_completion_tokens: AtomicBool::new(false),
        })
    }

    /// The HTTP client, built on first use.
    fn client(&self) -> Result<&reqwest::Client, ProviderError> {
        if let Some(client) = self.client.get() {
            return Ok(client);
        }
        let client = reqwest::Client::builder()
            .connect_timeout(self.config.connect_timeout)
            .build()
            .map_err(|error| ProviderError::Config {
                reason: "cannot build the HTTP client".to_owned(),
                source: Some(error.into()),
            })?;
        Ok(self.client.get_or_init(|| client))
    }

    /// The configuration in use.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// The full chat-completions URL requests go to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The JSON body sent for `request` (as the next attempt would send it).
    pub fn request_body(&self, request: &ChatRequest) -> Result<Vec<u8>, ProviderError> {
        let (include_usage, extra) = self.body_fields(request);
        let body = RequestWire::new(
            &self.config.model,
            request,
            self.config.stream,
            include_usage,
            &extra,
        );
        serde_json::to_vec(&body).map_err(|error| ProviderError::Config {
            reason: "cannot encode the request".to_owned(),
            source: Some(error.into()),
        })
    }

    /// Whether the body asks for usage, and the extra fields it carries.
    fn body_fields(&self, request: &ChatRequest) -> (bool, Map<String, Value>) {
        let include_usage = self.config.stream && !self.no_stream_options.load(Ordering::Relaxed);
        let mut extra = self
            .config
            .generation
            .body_fields(!request.tools.is_empty());
        if let Some(limit) = request.max_tokens {
            extra.insert("max_tokens".to_owned(), Value::from(limit));
        }
        if self.max_completion_tokens.load(Ordering::Relaxed)
            && let Some(limit) = extra.remove("max_tokens")
        {
            extra.insert("max_completion_tokens".to_owned(), limit);
        }
        extra.extend(
            self.config
                .extra_body
                .iter()
                .filter(|(name, _)| !crate::RESERVED_BODY_FIELDS.contains(&name.as_str()))
                .map(|(name, value)| (name.clone(), value.clone())),
        );
        (include_usage, extra)
    }

    /// The body of `request` as it is sent: the same bytes as
    /// [`request_body`](Self::request_body), encoded while they go out.
    fn streamed_body(&self, request: &ChatRequest) -> Result<StreamedBody, ProviderError> {
        let (include_usage, extra) = self.body_fields(request);
        streamed(OwnedRequestWire {
            model: self.config.model.clone(),
            request: request.clone(),
            stream: self.config.stream,
            include_usage,
            extra,
        })
        .map_err(|error| ProviderError::Config {
            reason: "cannot encode the request".to_owned(),
            source: Some(error.into()),
        })
    }

    async fn attempt(
        &self,
        request: &ChatRequest,
        events: Option<&UnboundedSender<StreamEvent>>,
    ) -> Result<Completion, Failure> {
        let asked_usage = self.config.stream && !self.no_stream_options.load(Ordering::Relaxed);
        let body = self.streamed_body(request).map_err(Failure::Fatal)?;
        let send = self
            .client()
            .map_err(Failure::Fatal)?
            .post(&self.url)
            .headers(self.headers.clone())
            .headers(crate::trace_context::headers())
            .header(header::CONTENT_LENGTH, body.length)
            .body(body.body)
            .send();
        let response = match tokio::time::timeout(self.config.request_timeout, send).await {
            Err(_) => return Err(Failure::Fatal(self.first_byte_timeout())),
            Ok(Err(error)) if closed_before_answer(&error) => {
                return Err(Failure::Resend(ProviderError::StreamCut {
                    reason: "the server closed the connection before answering".to_owned(),
                    source: Some(error),
                }));
            }
            Ok(Err(error)) => return Err(Failure::retry(self.send_error(error))),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if !status.is_success() {
            let wait = retry_after(response.headers());
            let text =
                match tokio::time::timeout(self.config.request_timeout, response.text()).await {
                    Ok(Ok(text)) => text,
                    _ => String::new(),
                };
            let code = status.as_u16();
            let exceeded = crate::error::is_context_exceeded_answer(code, &text);
            let mut message = error_message(&text);
            // OpenAI says it in the error's `code`, which the message leaves out.
            if exceeded && !crate::error::is_context_exceeded_answer(code, &message) {
                message.push_str(" (context_length_exceeded)");
            }
            let error = ProviderError::Status {
                url: self.url.clone(),
                status: code,
                message,
            };
            let lower = text.to_ascii_lowercase();
            return Err(
                // A request too large for the context is refused again however often
                // it is sent (some servers say so with a 5xx): the caller compacts.
                if exceeded {
                    Failure::Fatal(error)
                } else if matches!(code, 408 | 409 | 429) || status.is_server_error() {
                    Failure::Retry { error, wait }
                } else if code == 400 && asked_usage && lower.contains("stream_options") {
                    Failure::StreamOptionsRejected(error)
                } else if code == 400
                    && lower.contains("max_completion_tokens")
                    && !self.max_completion_tokens.load(Ordering::Relaxed)
                    && self.config.generation.max_tokens.is_some()
                {
                    Failure::MaxTokensRejected(error)
                } else {
                    Failure::Fatal(error)
                },
            );
        }
        let is_json = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("application/json"));
        if self.config.stream && !is_json {
            let bytes = idle_limited(
                response.bytes_stream(),
                self.config.request_timeout,
                self.config.stream_idle_timeout,
            );
            decode_sse(bytes, events)
                .await
                .map_err(classify_decode_error)
        } else {
            // Asked not to stream, or the server ignored `stream: true`.
            let body =
                match tokio::time::timeout(self.config.request_timeout, response.bytes()).await {
                    Err(_) => return Err(Failure::Fatal(self.first_byte_timeout())),
                    Ok(Err(error)) => return Err(Failure::retry(body_failed(error))),
                    Ok(Ok(body)) => body,
                };
            let completion = parse_completion(&body).map_err(classify_decode_error)?;
            emit_whole(&completion, events);
            Ok(completion)
        }
    }

    fn first_byte_timeout(&self) -> ProviderError {
        ProviderError::Timeout {
            after: self.config.request_timeout,
            phase: TimeoutPhase::FirstByte,
        }
    }

    fn send_error(&self, error: reqwest::Error) -> ProviderError {
        if error.is_timeout() {
            ProviderError::Timeout {
                after: self.config.connect_timeout,
                phase: TimeoutPhase::Connect,
            }
        } else {
            ProviderError::Connect {
                url: self.url.clone(),
                attempts: 1,
                source: error,
            }
        }
    }
}

/// Whether sending failed because the server closed the connection before any answer:
/// most often a kept-alive connection the server had already given up, reused before
/// its close arrived. llama.cpp's server closes the connection after every streamed
/// reply while still advertising keep-alive, so on a busy machine the next request can
/// go out on a connection that is closing. Sending again opens a new one.
/// Why an attempt is tried again, as a person is shown it: a server's message of
/// one short line, but of a longer one (an error page) only the status, since the
/// error that ends the retries shows it, and a page said at every attempt buries
/// everything else.
fn retry_reason(error: &ProviderError) -> String {
    match error {
        ProviderError::Status {
            url,
            status,
            message,
        } if message.contains('\n') || message.chars().count() > 120 => {
            format!("{url} answered {status}")
        }
        other => error_chain(other),
    }
}

fn closed_before_answer(error: &reqwest::Error) -> bool {
    if error.is_connect() || error.is_timeout() {
        return false;
    }
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if cause
            .downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_incomplete_message)
        {
            return true;
        }
        if cause.downcast_ref::<std::io::Error>().is_some_and(|io| {
            matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
                    | std::io::ErrorKind::BrokenPipe
            )
        }) {
            return true;
        }
        source = cause.source();
    }
    false
}

/// A cut or a garbled chunk may be a passing fault: try again. A stall is not
/// retried: the server may still be working on the request (see
/// [`OpenAiConfig::stream_idle_timeout`]).
fn classify_decode_error(error: ProviderError) -> Failure {
    match error {
        ProviderError::StreamCut { .. } | ProviderError::Malformed { .. } => Failure::retry(error),
        other => Failure::Fatal(other),
    }
}

/// The connection failed while the body was arriving.
fn body_failed(error: reqwest::Error) -> ProviderError {
    ProviderError::StreamCut {
        reason: "the connection failed while the body was arriving".to_owned(),
        source: Some(error),
    }
}

/// Turns the response body into pieces, failing with [`ProviderError::Timeout`]
/// when the first piece takes longer than `first` (some servers send the headers at
/// once and the first piece after reading the prompt) or a later one longer than
/// `idle`, and with [`ProviderError::StreamCut`] on a transport error. Ends after
/// the first failure.
fn idle_limited(
    stream: impl Stream<Item = reqwest::Result<Bytes>> + Send + 'static,
    first: Duration,
    idle: Duration,
) -> impl Stream<Item = Result<Bytes, ProviderError>> {
    futures::stream::unfold(Some((Box::pin(stream), true)), move |state| async move {
        let (mut stream, is_first) = state?;
        let (limit, phase) = if is_first {
            (first, TimeoutPhase::FirstByte)
        } else {
            (idle, TimeoutPhase::Idle)
        };
        match tokio::time::timeout(limit, stream.next()).await {
            Err(_) => Some((
                Err(ProviderError::Timeout {
                    after: limit,
                    phase,
                }),
                None,
            )),
            Ok(None) => None,
            Ok(Some(Ok(bytes))) => Some((Ok(bytes), Some((stream, false)))),
            Ok(Some(Err(error))) => Some((Err(body_failed(error)), None)),
        }
    })
}

/// Reads a non-streaming `chat.completion` body.
pub fn parse_completion(body: &[u8]) -> Result<Completion, ProviderError> {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(body)
        && value.get("choices").is_none()
        && value.get("error").is_some()
    {
        return Err(ProviderError::Malformed {
            what: format!(
                "the server answered with an error: {}",
                error_message(&String::from_utf8_lossy(body))
            ),
            source: None,
        });
    }
    let wire: CompletionWire = serde_json::from_slice(body).map_err(|error| {
        let shown: String = String::from_utf8_lossy(body).chars().take(200).collect();
        ProviderError::malformed(
            format!("the answer is not a chat completion: {shown}"),
            error,
        )
    })?;
    crate::trace_context::record_response(wire.id.as_deref(), wire.model.as_deref());
    let usage = wire.usage.map(Usage::from);
    let Some(choice) = wire.choices.into_iter().next() else {
        return Err(ProviderError::Malformed {
            what: "the answer has no choices".to_owned(),
            source: None,
        });
    };
    Ok(Completion {
        message: normalize_message(choice.message),
        finish_reason: choice.finish_reason,
        usage,
    })
}

/// Sends the events a streamed answer would have produced, for a whole answer.
fn emit_whole(completion: &Completion, events: Option<&UnboundedSender<StreamEvent>>) {
    let Some(events) = events else { return };
    if let Some(reasoning) = completion
        .message
        .extra
        .get("reasoning_content")
        .and_then(|value| value.as_str())
        .filter(|text| !text.is_empty())
    {
        let _ = events.send(StreamEvent::ReasoningDelta(reasoning.to_owned()));
    }
    let text = completion.message.text();
    if !text.is_empty() {
        let _ = events.send(StreamEvent::TextDelta(text));
    }
    for (index, call) in completion.message.calls().iter().enumerate() {
        let _ = events.send(StreamEvent::ToolCallStarted {
            index,
            id: call.id.clone(),
            name: call.function.name.clone(),
        });
    }
    if let Some(usage) = completion.usage {
        let _ = events.send(StreamEvent::Usage(usage));
    }
}

#[async_trait]
impl Provider for OpenAiProvider {
    async fn complete(
        &self,
        request: &ChatRequest,
        events: Option<&UnboundedSender<StreamEvent>>,
        cancel: &CancellationToken,
    ) -> Result<Completion, ProviderError> {
        let mut attempt: u32 = 1;
        let mut dropped_stream_options = false;
        let mut only_connect_failures = true;
        let mut renamed_max_tokens = false;
        let mut resent = false;
        // The last server error's status and message: the same 5xx twice in a row is
        // the server refusing this request (a history it cannot parse), not a fault
        // that passes.
        let mut last_server_error: Option<(u16, String)> = None;
        loop {
            if cancel.is_cancelled() {
                return Err(ProviderError::Cancelled);
            }
            tracing::debug!(url = %self.url, model = %self.config.model, attempt, "sending chat request");
            let outcome = tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(ProviderError::Cancelled),
                outcome = self.attempt(request, events) => outcome,
            };
            let (error, wait) = match outcome {
                Ok(completion) => return Ok(completion),
                Err(Failure::Fatal(error)) => return Err(error),
                Err(Failure::StreamOptionsRejected(error)) => {
                    if dropped_stream_options {
                        return Err(error);
                    }
                    tracing::info!(url = %self.url, "server rejected stream_options; sending without it from now on");
                    self.no_stream_options.store(true, Ordering::Relaxed);
                    dropped_stream_options = true;
                    continue;
                }
                Err(Failure::MaxTokensRejected(error)) => {
                    if renamed_max_tokens {
                        return Err(error);
                    }
                    tracing::info!(url = %self.url, "server asked for max_completion_tokens; sending that from now on");
                    self.max_completion_tokens.store(true, Ordering::Relaxed);
                    renamed_max_tokens = true;
                    continue;
                }
                Err(Failure::Resend(error)) if !resent => {
                    // Not counted as an attempt: no answer had begun.
                    tracing::debug!(url = %self.url, error = %error_chain(&error), "connection closed before the answer; sending again");
                    resent = true;
                    continue;
                }
                Err(Failure::Resend(error)) => (error, None),
                Err(Failure::Retry { error, wait }) => (error, wait),
            };
            if let ProviderError::Status {
                status, message, ..
            } = &error
                && *status >= 500
            {
                let seen = (*status, message.clone());
                if last_server_error.as_ref() == Some(&seen) {
                    return Err(ProviderError::RetriesExhausted {
                        attempts: attempt,
                        last: Box::new(error),
                    });
                }
                last_server_error = Some(seen);
            } else {
                last_server_error = None;
            }
            if !matches!(error, ProviderError::Connect { .. }) {
                only_connect_failures = false;
            }
            if attempt >= self.config.max_attempts {
                return Err(final_error(error, attempt, only_connect_failures));
            }
            let delay = match wait {
                Some(wait) => wait.min(self.config.max_retry_after),
                None => backoff_delay(attempt, self.config.backoff_base, self.config.backoff_max),
            };
            tracing::warn!(url = %self.url, attempt, error = %error_chain(&error), ?delay, "model call failed; retrying");
            if let Some(events) = events {
                let _ = events.send(StreamEvent::Retrying {
                    attempt: attempt + 1,
                    reason: retry_reason(&error),
                    delay,
                });
            }
            tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(ProviderError::Cancelled),
                () = tokio::time::sleep(delay) => {}
            }
            attempt += 1;
        }
    }

    fn model(&self) -> &str {
        &self.config.model
    }

    fn max_tokens(&self) -> Option<u32> {
        self.config
            .extra_body
            .get("max_tokens")
            .or_else(|| self.config.extra_body.get("max_completion_tokens"))
            .and_then(serde_json::Value::as_u64)
            .and_then(|limit| u32::try_from(limit).ok())
            .or(self.config.generation.max_tokens)
    }

    fn temperature(&self) -> Option<f64> {
        self.config
            .extra_body
            .get("temperature")
            .and_then(serde_json::Value::as_f64)
            .or(self.config.generation.temperature)
    }

    fn provider_name(&self) -> Option<&str> {
        Some("openai")
    }
}

/// The error returned once the attempts are used up: the connect error itself when
/// no attempt ever reached the server, the timeout itself when the last attempt
/// timed out, and [`ProviderError::RetriesExhausted`] around the last error otherwise.
fn final_error(error: ProviderError, attempts: u32, only_connect_failures: bool) -> ProviderError {
    match error {
        ProviderError::Connect { url, source, .. } if only_connect_failures => {
            ProviderError::Connect {
                url,
                attempts,
                source,
            }
        }
        last => ProviderError::RetriesExhausted {
            attempts,
            last: Box::new(last),
        },
    }
}
