//! Scripted replies: what the server sends back for one request.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};

/// One tool call a scripted completion makes.
#[derive(Clone, Debug, PartialEq)]
pub struct ScriptedCall {
    /// The call's id (`call_…` or anything else).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as a JSON text; streamed split into pieces.
    pub arguments: String,
}

impl ScriptedCall {
    /// A tool call with the given id, tool name and JSON arguments text.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        ScriptedCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

/// The assistant message a [`Reply::text`] or [`Reply::tool_calls`] reply produces,
/// streamed or not depending on the request's `stream` flag.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ScriptedCompletion {
    pub(crate) text: Option<String>,
    pub(crate) reasoning: Option<String>,
    pub(crate) calls: Vec<ScriptedCall>,
    pub(crate) usage: Option<(u64, u64)>,
    pub(crate) cached_tokens: Option<u64>,
    pub(crate) finish_reason: Option<String>,
}

/// How a reply's body is made.
#[derive(Clone, Debug)]
pub(crate) enum Body {
    /// A completion, shaped as SSE chunks or one JSON object by the request's `stream`.
    Completion(ScriptedCompletion),
    /// Explicit SSE `data:` payloads, each sent as one event.
    SseData(Vec<String>),
    /// Bytes sent as they are; SSE bodies are split into events at blank lines so
    /// that [`Reply::cut_after`] and [`Reply::stall_after`] work on them.
    Raw { bytes: Bytes, content_type: String },
    /// A JSON body (non-streaming answer, or an error object).
    Json(Value),
    /// A plain text body.
    Text(String),
}

/// What the server does for one request. Build one with the constructors, adjust it
/// with the `with_*` / fault methods, and queue it with
/// [`ScriptedServer::push`](crate::ScriptedServer::push).
///
/// A streamed body is a list of frames (one SSE event each, or the whole JSON body for
/// a non-streaming answer). The fault methods act on those frames.
#[derive(Clone, Debug)]
pub struct Reply {
    pub(crate) body: Body,
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) delay: Option<Duration>,
    pub(crate) chunk_chars: usize,
    pub(crate) done: bool,
    pub(crate) cut_after: Option<usize>,
    pub(crate) stall: Option<(usize, Duration)>,
}

impl Reply {
    fn with_body(body: Body) -> Self {
        Reply {
            body,
            status: 200,
            headers: Vec::new(),
            delay: None,
            chunk_chars: 4,
            done: true,
            cut_after: None,
            stall: None,
        }
    }

    fn completion_mut(&mut self) -> Option<&mut ScriptedCompletion> {
        match &mut self.body {
            Body::Completion(completion) => Some(completion),
            _ => None,
        }
    }

    /// An assistant text reply. Streamed as a role chunk, the text split into pieces
    /// of [`chunk_chars`](Reply::chunk_chars) characters, a chunk with
    /// `finish_reason: "stop"`, and `data: [DONE]`; or one JSON completion when the
    /// request had `stream: false`.
    pub fn text(text: impl Into<String>) -> Self {
        Self::with_body(Body::Completion(ScriptedCompletion {
            text: Some(text.into()),
            finish_reason: Some("stop".to_owned()),
            ..ScriptedCompletion::default()
        }))
    }

    /// An assistant reply made of tool calls (parallel when more than one), with
    /// `finish_reason: "tool_calls"`. Streamed like OpenAI does: per call, a first
    /// delta with index, id, type, name and `arguments: ""`, then the arguments in
    /// pieces; the finish reason on an empty delta.
    pub fn tool_calls(calls: impl IntoIterator<Item = ScriptedCall>) -> Self {
        Self::with_body(Body::Completion(ScriptedCompletion {
            calls: calls.into_iter().collect(),
            finish_reason: Some("tool_calls".to_owned()),
            ..ScriptedCompletion::default()
        }))
    }

    /// A reply with a single tool call.
    pub fn tool_call(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self::tool_calls([ScriptedCall::new(id, name, arguments)])
    }

    /// Explicit SSE events: each string is sent as `data: <string>\n\n`, followed by
    /// `data: [DONE]` unless [`without_done`](Reply::without_done) is used.
    pub fn sse(data: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self::with_body(Body::SseData(data.into_iter().map(Into::into).collect()))
    }

    /// Replays bytes verbatim as an `text/event-stream` body (for the captures in
    /// `testdata/sse/`). Nothing is added: no `[DONE]` unless the bytes hold one.
    pub fn raw_sse(bytes: impl Into<Bytes>) -> Self {
        Self::raw(bytes, "text/event-stream")
    }

    /// Sends bytes verbatim with the given content type.
    pub fn raw(bytes: impl Into<Bytes>, content_type: impl Into<String>) -> Self {
        let mut reply = Self::with_body(Body::Raw {
            bytes: bytes.into(),
            content_type: content_type.into(),
        });
        reply.done = false;
        reply
    }

    /// A JSON body with status 200 (a hand-made non-streaming answer).
    pub fn json(value: Value) -> Self {
        Self::with_body(Body::Json(value))
    }

    /// An OpenAI-style error: `status` with `{"error":{"message": message, …}}`.
    pub fn error(status: u16, message: impl Into<String>) -> Self {
        let mut reply = Self::with_body(Body::Json(json!({
            "error": {"message": message.into(), "type": "scripted_error", "code": status}
        })));
        reply.status = status;
        reply
    }

    /// Any status with a plain text body.
    pub fn status(status: u16, body: impl Into<String>) -> Self {
        let mut reply = Self::with_body(Body::Text(body.into()));
        reply.status = status;
        reply
    }

    /// A stream whose second event is JSON cut in the middle
    /// (`{"choices":[{"index":0,"delta":{"content":"Hel`), then `[DONE]`.
    pub fn malformed_chunk() -> Self {
        Self::sse([
            r#"{"id":"chatcmpl-bad","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
            r#"{"id":"chatcmpl-bad","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hel"#,
        ])
    }

    /// Adds assistant text to a tool-call reply (sent before the calls).
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        if let Some(completion) = self.completion_mut() {
            completion.text = Some(text.into());
        }
        self
    }

    /// Adds `reasoning_content` deltas (sent first) to a completion reply.
    pub fn with_reasoning(mut self, reasoning: impl Into<String>) -> Self {
        if let Some(completion) = self.completion_mut() {
            completion.reasoning = Some(reasoning.into());
        }
        self
    }

    /// Adds usage: streamed as a final chunk with `"choices": []`, or as the
    /// `usage` field of a non-streaming answer.
    pub fn with_usage(mut self, prompt_tokens: u64, completion_tokens: u64) -> Self {
        if let Some(completion) = self.completion_mut() {
            completion.usage = Some((prompt_tokens, completion_tokens));
        }
        self
    }

    /// Adds `prompt_tokens_details.cached_tokens` to the usage (as OpenAI and
    /// llama.cpp send it); with [`Reply::with_usage`].
    pub fn with_cached_tokens(mut self, cached_tokens: u64) -> Self {
        if let Some(completion) = self.completion_mut() {
            completion.cached_tokens = Some(cached_tokens);
        }
        self
    }

    /// Overrides the finish reason (`length`, …).
    pub fn with_finish_reason(mut self, reason: impl Into<String>) -> Self {
        if let Some(completion) = self.completion_mut() {
            completion.finish_reason = Some(reason.into());
        }
        self
    }

    /// Sets the size, in characters, of the text and argument pieces (default 4).
    pub fn chunk_chars(mut self, chars: usize) -> Self {
        self.chunk_chars = chars.max(1);
        self
    }

    /// Adds a response header, such as `Retry-After`.
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Omits the final `data: [DONE]` (as Ollama does): the stream just ends.
    pub fn without_done(mut self) -> Self {
        self.done = false;
        self
    }

    /// Waits this long before sending the status line (longer than the client's
    /// request timeout to provoke one).
    pub fn delayed(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }

    /// Sends the first `frames` frames whole, then half of the next frame's bytes,
    /// then aborts the connection (no terminating chunk): a stream cut mid-message.
    pub fn cut_after(mut self, frames: usize) -> Self {
        self.cut_after = Some(frames);
        self
    }

    /// Sends the first `frames` frames, then goes silent for `pause` before going on
    /// (longer than the client's idle timeout to provoke one).
    pub fn stall_after(mut self, frames: usize, pause: Duration) -> Self {
        self.stall = Some((frames, pause));
        self
    }
}
