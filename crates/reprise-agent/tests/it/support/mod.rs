//! A hand-written provider for loop tests that need exact control over timing
//! (cancellation mid-stream) and no HTTP.

pub mod http;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use reprise_provider::{ChatRequest, Completion, Provider, ProviderError, StreamEvent};
use reprise_session::{Message, ToolCall};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

/// One scripted answer.
pub enum Step {
    /// Stream the text as deltas, then return the message.
    Answer(Message),
    /// Fail with this error.
    Fail(ProviderError),
    /// Stream these deltas, then wait until cancelled.
    StreamThenHang(Vec<String>),
}

/// Answers from a script and keeps every request, each checked with the tool-call
/// pairing rule as a server would.
#[derive(Clone, Default)]
pub struct MockProvider {
    steps: Arc<Mutex<VecDeque<Step>>>,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl MockProvider {
    pub fn new(steps: impl IntoIterator<Item = Step>) -> Arc<Self> {
        Arc::new(MockProvider {
            steps: Arc::new(Mutex::new(steps.into_iter().collect())),
            requests: Arc::default(),
        })
    }

    pub fn push(&self, step: Step) {
        self.steps.lock().unwrap().push_back(step);
    }

    /// Every request body received, as a server would have seen it.
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }
}

/// The request body an OpenAI-compatible client would send.
pub fn body_of(request: &ChatRequest) -> Value {
    json!({
        "model": "mock",
        "messages": request.messages,
        "tools": request.tools.iter().map(|tool| json!({
            "type": "function",
            "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
        })).collect::<Vec<_>>(),
    })
}

#[async_trait]
impl Provider for MockProvider {
    async fn complete(
        &self,
        request: &ChatRequest,
        events: Option<&UnboundedSender<StreamEvent>>,
        cancel: &CancellationToken,
    ) -> Result<Completion, ProviderError> {
        let body = body_of(request);
        if let Err(problem) = reprise_testkit::check_tool_call_pairing(&body) {
            panic!("a server would refuse this request: {problem}\n{body:#}");
        }
        self.requests.lock().unwrap().push(body);
        let step = self
            .steps
            .lock()
            .unwrap()
            .pop_front()
            .expect("the script has no answer left");
        match step {
            Step::Answer(message) => {
                if let Some(events) = events {
                    let text = message.text();
                    if !text.is_empty() {
                        events.send(StreamEvent::TextDelta(text)).unwrap();
                    }
                }
                let finish = if message.calls().is_empty() {
                    "stop"
                } else {
                    "tool_calls"
                };
                Ok(Completion {
                    message,
                    finish_reason: Some(finish.to_owned()),
                    usage: None,
                })
            }
            Step::Fail(error) => Err(error),
            Step::StreamThenHang(deltas) => {
                if let Some(events) = events {
                    for delta in deltas {
                        events.send(StreamEvent::TextDelta(delta)).unwrap();
                    }
                }
                cancel.cancelled().await;
                Err(ProviderError::Cancelled)
            }
        }
    }

    fn model(&self) -> &str {
        "mock"
    }
}

pub fn answer(text: &str) -> Step {
    Step::Answer(Message::assistant(text))
}

pub fn calls(calls: &[(&str, &str, &str)]) -> Step {
    Step::Answer(Message::assistant_tool_calls(
        None,
        calls
            .iter()
            .map(|(id, name, arguments)| ToolCall::function(*id, *name, *arguments))
            .collect(),
    ))
}

/// The roles of a history, for compact assertions.
pub fn roles(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .map(|message| message.role.as_str().to_owned())
        .collect()
}

/// The messages of a request body.
pub fn request_messages(body: &Value) -> Vec<Value> {
    body["messages"].as_array().cloned().unwrap_or_default()
}

/// A token that is cancelled as soon as `started` is notified (a tool began its work).
pub fn cancel_once_notified(started: Arc<tokio::sync::Notify>) -> CancellationToken {
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        started.notified().await;
        canceller.cancel();
    });
    cancel
}
