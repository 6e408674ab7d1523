//! Reading the chat-completions request bodies a server received.

use serde_json::Value;

/// The messages of a request body (none when it has no `messages` array).
pub fn request_messages(body: &Value) -> Vec<Value> {
    body["messages"].as_array().cloned().unwrap_or_default()
}

/// Every tool call of these messages, in order.
pub fn tool_calls_of(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .flat_map(|message| {
            message["tool_calls"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect()
}
