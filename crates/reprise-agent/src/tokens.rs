//! Token estimates, for the part of a request the server has not counted yet.
//!
//! The server's own count (`usage.prompt_tokens` of the last request) is the
//! reference; only messages added since are estimated. The estimate is the length
//! of a message's JSON form (what is sent) divided by [`BYTES_PER_TOKEN`], plus
//! [`MESSAGE_OVERHEAD`] for the role markers a chat template adds around it.

use reprise_provider::{ChatRequest, ToolSpec};
use reprise_session::Message;

/// Bytes of JSON per token the estimate assumes. Byte-pair tokenizers of current
/// models give 3 to 4.5 bytes per token on English prose and code; the smaller
/// figure makes the estimate err on the high side, which compacts a little early
/// rather than too late.
pub const BYTES_PER_TOKEN: u64 = 3;

/// Tokens added per message for the chat template's role markers.
pub const MESSAGE_OVERHEAD: u64 = 4;

/// The estimated tokens of a text.
pub fn estimate_text(text: &str) -> u64 {
    (text.len() as u64).div_ceil(BYTES_PER_TOKEN)
}

/// The estimated tokens of one message as it is sent.
pub fn estimate_message(message: &Message) -> u64 {
    json_len(message).div_ceil(BYTES_PER_TOKEN) + MESSAGE_OVERHEAD
}

/// The length of `value` as JSON, counted as it is written rather than kept: a
/// resumed session's whole history is estimated once.
fn json_len(value: &impl serde::Serialize) -> u64 {
    struct Counter(u64);
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len() as u64;
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    match serde_json::to_writer(&mut counter, value) {
        Ok(()) => counter.0,
        Err(_) => 0,
    }
}

/// The estimated tokens of messages.
pub fn estimate_messages(messages: &[Message]) -> u64 {
    messages.iter().map(estimate_message).sum()
}

/// The estimated tokens of the tool definitions offered with a request.
pub fn estimate_tools(tools: &[ToolSpec]) -> u64 {
    tools
        .iter()
        .map(json_len)
        .sum::<u64>()
        .div_ceil(BYTES_PER_TOKEN)
}

/// The estimated tokens of a whole request: its messages and its tools.
pub fn estimate_request(request: &ChatRequest) -> u64 {
    estimate_messages(&request.messages) + estimate_tools(&request.tools)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longer_messages_are_estimated_larger_and_overhead_counts_once_each() {
        let short = estimate_message(&Message::user("hi"));
        let long = estimate_message(&Message::user("hi ".repeat(300)));
        assert!(short >= MESSAGE_OVERHEAD);
        assert!(long > short + 250, "{long} vs {short}");
        let both = estimate_messages(&[Message::user("hi"), Message::user("hi")]);
        assert_eq!(both, 2 * short);
    }

    #[test]
    fn a_request_counts_its_tools() {
        let mut request = ChatRequest {
            messages: vec![Message::user("hi")],
            tools: Vec::new(),
            max_tokens: None,
        };
        let bare = estimate_request(&request);
        request.tools.push(ToolSpec {
            name: "read_file".into(),
            description: "Reads a file".into(),
            parameters: serde_json::json!({"type": "object"}),
        });
        assert!(estimate_request(&request) > bare);
    }
}
