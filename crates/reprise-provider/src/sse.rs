//! From a stream of bytes to a completion: SSE framing, then the accumulator.
//!
//! Independent of HTTP and of any runtime, so tests can feed it bytes split at any
//! point (`futures::executor::block_on(decode_sse(stream::iter(pieces), None))`).

use std::convert::Infallible;

use eventsource_stream::{EventStreamError, Eventsource};
use futures::{Stream, StreamExt};
use tokio::sync::mpsc::UnboundedSender;

use crate::accumulate::Accumulator;
use crate::error::ProviderError;
use crate::provider::{Completion, StreamEvent};
use crate::wire::error_message;

/// Reads a chat-completions SSE body and returns the complete message.
///
/// `bytes` yields the body in pieces of any size; a transport failure is given as an
/// `Err` item (the HTTP layer maps idle timeouts and dropped connections to
/// [`ProviderError::Timeout`] and [`ProviderError::StreamCut`]). Events go to
/// `events` as chunks arrive.
///
/// The response is complete when `data: [DONE]` or a `finish_reason` arrived. A
/// stream that ends (or fails) before that is an error, never a message; a stream
/// that fails after a `finish_reason` is accepted, since the message was whole (only
/// a trailing usage chunk can be missing).
pub async fn decode_sse<S, B>(
    bytes: S,
    events: Option<&UnboundedSender<StreamEvent>>,
) -> Result<Completion, ProviderError>
where
    S: Stream<Item = Result<B, ProviderError>>,
    B: AsRef<[u8]>,
{
    let mut accumulator = Accumulator::new();
    let emit = |produced: Vec<StreamEvent>| {
        if let Some(events) = events {
            for event in produced {
                // A UI that went away must not stop the call.
                let _ = events.send(event);
            }
        }
    };
    let sse = bytes.eventsource();
    futures::pin_mut!(sse);
    while let Some(item) = sse.next().await {
        let event = match item {
            Ok(event) => event,
            Err(EventStreamError::Transport(error)) => {
                if accumulator.saw_finish() || accumulator.saw_done() {
                    tracing::debug!(%error, "stream failed after the finish reason; keeping the message");
                    break;
                }
                return Err(error);
            }
            Err(EventStreamError::Utf8(error)) => {
                return Err(ProviderError::malformed("the stream is not UTF-8", error));
            }
            Err(EventStreamError::Parser(error)) => {
                return Err(ProviderError::malformed(
                    "not an event stream",
                    EventStreamError::<Infallible>::Parser(error),
                ));
            }
        };
        match event.event.as_str() {
            "message" => {}
            "error" => {
                return Err(ProviderError::cut(format!(
                    "the server reported an error mid-stream: {}",
                    error_message(&event.data)
                )));
            }
            // Keep-alives and vendor events carry no part of the message.
            _ => continue,
        }
        let produced = accumulator.push_data(&event.data)?;
        emit(produced);
        if accumulator.saw_done() {
            break;
        }
    }
    let (completion, produced) = accumulator.finish()?;
    emit(produced);
    Ok(completion)
}
