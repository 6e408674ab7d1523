//! Generation settings: how long a reply may be and how it is sampled.

use serde_json::{Map, Value};

/// The `max_tokens` sent when nothing says otherwise: long enough for a real answer
/// or a tool call with a file's content, short enough that a model that loops stops
/// within minutes even on a CPU.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The request fields that shape a reply. A field that is `None` is not sent, so the
/// server's own default applies.
#[derive(Clone, Debug, PartialEq)]
pub struct Generation {
    /// The most tokens one reply may have (`max_tokens`). A reply that reaches it
    /// ends with `finish_reason: "length"`.
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    pub top_p: Option<f64>,
    /// A fixed seed, for repeatable replies where the server supports it.
    pub seed: Option<i64>,
    /// `"auto"`, `"none"`, `"required"`, or an object naming a function. Sent only
    /// with requests that offer tools (servers refuse it otherwise).
    pub tool_choice: Option<Value>,
    /// Whether the model may call several tools in one reply. Sent only with
    /// requests that offer tools.
    pub parallel_tool_calls: Option<bool>,
}

impl Default for Generation {
    /// [`DEFAULT_MAX_TOKENS`], everything else left to the server.
    fn default() -> Self {
        Generation {
            max_tokens: Some(DEFAULT_MAX_TOKENS),
            temperature: None,
            top_p: None,
            seed: None,
            tool_choice: None,
            parallel_tool_calls: None,
        }
    }
}

impl Generation {
    /// The body fields for a request; `with_tools` says whether it offers tools.
    pub fn body_fields(&self, with_tools: bool) -> Map<String, Value> {
        let mut fields = Map::new();
        let mut put = |name: &str, value: Option<Value>| {
            if let Some(value) = value {
                fields.insert(name.to_owned(), value);
            }
        };
        put("max_tokens", self.max_tokens.map(Value::from));
        put("temperature", self.temperature.map(Value::from));
        put("top_p", self.top_p.map(Value::from));
        put("seed", self.seed.map(Value::from));
        if with_tools {
            put("tool_choice", self.tool_choice.clone());
            put(
                "parallel_tool_calls",
                self.parallel_tool_calls.map(Value::from),
            );
        }
        fields
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_set_fields_are_sent_and_tool_fields_only_with_tools() {
        let generation = Generation {
            max_tokens: Some(100),
            temperature: Some(0.5),
            top_p: None,
            seed: Some(7),
            tool_choice: Some(json!("required")),
            parallel_tool_calls: Some(false),
        };
        let with = Value::Object(generation.body_fields(true));
        assert_eq!(
            with,
            json!({"max_tokens": 100, "temperature": 0.5, "seed": 7,
                   "tool_choice": "required", "parallel_tool_calls": false})
        );
        let without = Value::Object(generation.body_fields(false));
        assert_eq!(
            without,
            json!({"max_tokens": 100, "temperature": 0.5, "seed": 7})
        );
        assert_eq!(
            Value::Object(Generation::default().body_fields(true)),
            json!({"max_tokens": DEFAULT_MAX_TOKENS})
        );
    }
}
