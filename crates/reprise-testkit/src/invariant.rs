//! The tool-call pairing rule that OpenAI-compatible servers enforce on requests.

use std::collections::HashSet;

use serde_json::Value;

/// Checks the rule servers enforce on a chat-completions request body (or a bare
/// array of messages): every tool call of an assistant message is answered by
/// exactly one `tool` message (matching `tool_call_id`) before the next non-tool
/// message or the end of the list, no tool message answers a call that is not
/// pending (a missing call, or a second answer to the same call), and every call's
/// `arguments` is a JSON object.
///
/// Returns a description of the first violation.
///
/// ```
/// use serde_json::json;
/// let ok = json!({"messages": [
///     {"role": "user", "content": "hi"},
///     {"role": "assistant", "content": null, "tool_calls": [
///         {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
///     {"role": "tool", "tool_call_id": "a", "content": "done"},
///     {"role": "assistant", "content": "ok"},
/// ]});
/// assert!(reprise_testkit::check_tool_call_pairing(&ok).is_ok());
/// ```
pub fn check_tool_call_pairing(body: &Value) -> Result<(), String> {
    let messages = match body {
        Value::Array(messages) => messages,
        other => match other.get("messages").and_then(Value::as_array) {
            Some(messages) => messages,
            None => return Err("the body has no `messages` array".to_owned()),
        },
    };
    // Calls waiting for their answer, in the order they were made.
    let mut pending: Vec<String> = Vec::new();
    let mut asked_by = 0usize;
    for (index, message) in messages.iter().enumerate() {
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        if role == "tool" {
            let Some(id) = message.get("tool_call_id").and_then(Value::as_str) else {
                return Err(format!(
                    "message {index}: a tool message without tool_call_id"
                ));
            };
            match pending.iter().position(|waiting| waiting == id) {
                Some(at) => {
                    pending.remove(at);
                }
                None => {
                    return Err(format!(
                        "message {index}: tool result for call {id:?}, which no preceding assistant message is waiting on"
                    ));
                }
            }
            continue;
        }
        if !pending.is_empty() {
            return Err(format!(
                "message {index} ({role}) comes before the calls {pending:?} of message {asked_by} were answered"
            ));
        }
        if role == "assistant" {
            let calls = message
                .get("tool_calls")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            let mut seen = HashSet::new();
            for call in calls {
                let Some(id) = call.get("id").and_then(Value::as_str) else {
                    return Err(format!("message {index}: a tool call without an id"));
                };
                if !seen.insert(id.to_owned()) {
                    return Err(format!("message {index}: the call id {id:?} appears twice"));
                }
                // llama.cpp parses every replayed call's arguments and answers 500
                // when one is not JSON ("Failed to parse tool call arguments").
                let arguments = call
                    .pointer("/function/arguments")
                    .and_then(Value::as_str)
                    .unwrap_or("{}");
                if !matches!(
                    serde_json::from_str::<Value>(arguments),
                    Ok(Value::Object(_))
                ) {
                    return Err(format!(
                        "message {index}: the arguments of call {id:?} are not a JSON object: {arguments:?}"
                    ));
                }
                pending.push(id.to_owned());
            }
            asked_by = index;
        }
    }
    if pending.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the calls {pending:?} of message {asked_by} are never answered"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str) -> Value {
        json!({"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}})
    }

    fn assistant(ids: &[&str]) -> Value {
        json!({"role": "assistant", "content": null, "tool_calls": ids.iter().map(|id| call(id)).collect::<Vec<_>>()})
    }

    fn tool(id: &str) -> Value {
        json!({"role": "tool", "tool_call_id": id, "content": "r"})
    }

    fn user() -> Value {
        json!({"role": "user", "content": "u"})
    }

    #[test]
    fn parallel_calls_answered_in_any_order_pass() {
        let messages = json!([
            user(),
            assistant(&["a", "b"]),
            tool("b"),
            tool("a"),
            json!({"role":"assistant","content":"x"})
        ]);
        assert_eq!(check_tool_call_pairing(&messages), Ok(()));
    }

    #[test]
    fn unanswered_call_before_user_fails() {
        let messages = json!([user(), assistant(&["a", "b"]), tool("a"), user()]);
        let error = check_tool_call_pairing(&messages).unwrap_err();
        assert!(error.contains("\"b\""), "{error}");
    }

    #[test]
    fn unanswered_call_at_end_fails() {
        let messages = json!([user(), assistant(&["a"])]);
        assert!(
            check_tool_call_pairing(&messages)
                .unwrap_err()
                .contains("never answered")
        );
    }

    #[test]
    fn orphan_and_duplicate_tool_results_fail() {
        let orphan = json!([user(), tool("zzz")]);
        assert!(check_tool_call_pairing(&orphan).is_err());
        let twice = json!([user(), assistant(&["a"]), tool("a"), tool("a")]);
        assert!(check_tool_call_pairing(&twice).is_err());
    }

    #[test]
    fn arguments_that_are_not_a_json_object_fail() {
        let mut call = assistant(&["a"]);
        call["tool_calls"][0]["function"]["arguments"] = json!("{");
        let cut = json!([user(), call, tool("a")]);
        let error = check_tool_call_pairing(&cut).unwrap_err();
        assert!(error.contains("not a JSON object"), "{error}");
    }

    #[test]
    fn body_without_messages_fails() {
        assert!(check_tool_call_pairing(&json!({"model": "m"})).is_err());
    }
}
