//! Lenient chat-completions wire types.
//!
//! Real servers disagree on details (`type` missing, `content: null`, `arguments`
//! absent, usage on every chunk, vendor fields), so everything is optional, unknown
//! fields are ignored or kept, and a value of an unexpected type is dropped rather
//! than failing the whole chunk.

use reprise_message::Message;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::provider::{ChatRequest, ToolSpec, Usage};

/// A string field that may also arrive as `null`, a number or an object: strings are
/// kept, objects and arrays are re-encoded as JSON text, `null` becomes `None`.
fn lenient_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::Null => None,
        Value::String(text) => Some(text),
        Value::Array(parts) => {
            // Content given as typed parts: keep the text of the text parts.
            let text: String = parts
                .iter()
                .filter_map(|part| part.get("text").and_then(Value::as_str))
                .collect();
            Some(text)
        }
        other => Some(other.to_string()),
    })
}

/// A number that may be missing or of the wrong type.
fn lenient_u64<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    Ok(Value::deserialize(deserializer)?.as_u64().unwrap_or(0))
}

/// An optional index that may arrive as a number or be missing.
fn lenient_index<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<usize>, D::Error> {
    Ok(Value::deserialize(deserializer)?
        .as_u64()
        .and_then(|index| usize::try_from(index).ok()))
}

/// Token usage as servers report it.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct UsageWire {
    /// Tokens in the request.
    #[serde(default, deserialize_with = "lenient_u64")]
    pub prompt_tokens: u64,
    /// Tokens generated.
    #[serde(default, deserialize_with = "lenient_u64")]
    pub completion_tokens: u64,
    /// Both; computed when missing.
    #[serde(default, deserialize_with = "lenient_u64")]
    pub total_tokens: u64,
    /// `{"cached_tokens": N}`: how many request tokens the server read from its
    /// prompt cache (OpenAI, llama.cpp); anything else there is ignored.
    #[serde(default)]
    pub prompt_tokens_details: Option<Value>,
}

impl From<UsageWire> for Usage {
    fn from(wire: UsageWire) -> Self {
        let total = if wire.total_tokens == 0 {
            wire.prompt_tokens + wire.completion_tokens
        } else {
            wire.total_tokens
        };
        Usage {
            prompt_tokens: wire.prompt_tokens,
            completion_tokens: wire.completion_tokens,
            total_tokens: total,
            cached_tokens: wire
                .prompt_tokens_details
                .as_ref()
                .and_then(|details| details.get("cached_tokens"))
                .and_then(Value::as_u64),
        }
    }
}

/// The function part of a tool-call delta.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct FunctionDeltaWire {
    /// The tool's name (usually only in the first delta of a call).
    #[serde(default, deserialize_with = "lenient_text")]
    pub name: Option<String>,
    /// A piece of the arguments text (absent in vLLM's first delta).
    #[serde(default, deserialize_with = "lenient_text")]
    pub arguments: Option<String>,
}

/// One tool-call delta.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ToolCallDeltaWire {
    /// Which call this piece belongs to.
    #[serde(default, deserialize_with = "lenient_index")]
    pub index: Option<usize>,
    /// The call's id (usually only in the first delta).
    #[serde(default, deserialize_with = "lenient_text")]
    pub id: Option<String>,
    /// `function`, or missing.
    #[serde(rename = "type", default, deserialize_with = "lenient_text")]
    pub kind: Option<String>,
    /// The function part.
    #[serde(default)]
    pub function: Option<FunctionDeltaWire>,
}

/// The `delta` of a streamed choice.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct DeltaWire {
    /// `assistant`, usually only in the first chunk.
    #[serde(default, deserialize_with = "lenient_text")]
    pub role: Option<String>,
    /// A piece of text; `null` or `""` in many chunks.
    #[serde(default, deserialize_with = "lenient_text")]
    pub content: Option<String>,
    /// A piece of reasoning (llama.cpp, vLLM, DeepSeek).
    #[serde(default, deserialize_with = "lenient_text")]
    pub reasoning_content: Option<String>,
    /// Tool-call pieces.
    #[serde(default)]
    pub tool_calls: Option<Vec<ToolCallDeltaWire>>,
}

/// One streamed choice.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ChoiceDeltaWire {
    /// The choice index; only choice 0 is used.
    #[serde(default, deserialize_with = "lenient_index")]
    pub index: Option<usize>,
    /// What changed.
    #[serde(default)]
    pub delta: Option<DeltaWire>,
    /// Set on the last chunk of the choice.
    #[serde(default, deserialize_with = "lenient_text")]
    pub finish_reason: Option<String>,
}

/// An error object some servers send inside a stream or body.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ErrorWire {
    /// The message.
    #[serde(default, deserialize_with = "lenient_text")]
    pub message: Option<String>,
}

/// One `chat.completion.chunk`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ChunkWire {
    /// The response's id (the same on every chunk).
    #[serde(default, deserialize_with = "lenient_text")]
    pub id: Option<String>,
    /// The model that answered (the same on every chunk).
    #[serde(default, deserialize_with = "lenient_text")]
    pub model: Option<String>,
    /// The choices; empty in a final usage chunk.
    #[serde(default)]
    pub choices: Vec<ChoiceDeltaWire>,
    /// Usage, on the last chunk or (vLLM) on every chunk.
    #[serde(default)]
    pub usage: Option<UsageWire>,
    /// An error reported in the middle of a stream.
    #[serde(default)]
    pub error: Option<ErrorWire>,
}

/// One choice of a non-streaming answer.
#[derive(Clone, Debug, Deserialize)]
pub struct ChoiceWire {
    /// The assistant message, read with the session's lenient message type.
    pub message: Message,
    /// Why the model stopped.
    #[serde(default, deserialize_with = "lenient_text")]
    pub finish_reason: Option<String>,
}

/// A non-streaming `chat.completion`.
#[derive(Clone, Debug, Deserialize)]
pub struct CompletionWire {
    /// The response's id.
    #[serde(default, deserialize_with = "lenient_text")]
    pub id: Option<String>,
    /// The model that answered.
    #[serde(default, deserialize_with = "lenient_text")]
    pub model: Option<String>,
    /// The choices; the first is used.
    #[serde(default)]
    pub choices: Vec<ChoiceWire>,
    /// Usage, when reported.
    #[serde(default)]
    pub usage: Option<UsageWire>,
}

/// A tool as the request offers it.
#[derive(Clone, Debug, Serialize)]
pub struct ToolWire<'a> {
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The function.
    pub function: &'a ToolSpec,
}

/// `stream_options` of a streaming request.
#[derive(Clone, Debug, Serialize)]
pub struct StreamOptionsWire {
    /// Ask for a final usage chunk.
    pub include_usage: bool,
}

/// The top-level fields of a request body that the request itself writes
/// ([`RequestWire`]): extra body fields by these names are left out, since they
/// would replace the model, the conversation or the tools sent.
pub const RESERVED_BODY_FIELDS: [&str; 5] =
    ["model", "messages", "tools", "stream", "stream_options"];

/// A chat-completions request body.
#[derive(Clone, Debug, Serialize)]
pub struct RequestWire<'a> {
    /// The model.
    pub model: &'a str,
    /// The conversation, as the session serializes it.
    pub messages: &'a [Message],
    /// The tools offered; omitted when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolWire<'a>>,
    /// Whether to stream.
    pub stream: bool,
    /// Asks for usage in streaming mode; omitted for servers that reject it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptionsWire>,
    /// Extra body fields, merged at the top level.
    #[serde(flatten)]
    pub extra: &'a Map<String, Value>,
}

impl<'a> RequestWire<'a> {
    /// The body of `request` for `model`, with `extra` fields at the top level and
    /// `stream_options` when streaming asks for usage.
    pub fn new(
        model: &'a str,
        request: &'a ChatRequest,
        stream: bool,
        include_usage: bool,
        extra: &'a Map<String, Value>,
    ) -> Self {
        RequestWire {
            model,
            messages: &request.messages,
            tools: request
                .tools
                .iter()
                .map(|tool| ToolWire {
                    kind: "function",
                    function: tool,
                })
                .collect(),
            stream,
            stream_options: include_usage.then_some(StreamOptionsWire {
                include_usage: true,
            }),
            extra,
        }
    }
}

/// A request body that owns what it is made of, for a thread that encodes it
/// while it is sent. Serializes as [`RequestWire`].
#[derive(Clone, Debug)]
pub struct OwnedRequestWire {
    /// The model.
    pub model: String,
    /// The request.
    pub request: ChatRequest,
    /// Whether to stream.
    pub stream: bool,
    /// Whether to ask for usage in streaming mode.
    pub include_usage: bool,
    /// Extra body fields, merged at the top level.
    pub extra: Map<String, Value>,
}

impl Serialize for OwnedRequestWire {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        RequestWire::new(
            &self.model,
            &self.request,
            self.stream,
            self.include_usage,
            &self.extra,
        )
        .serialize(serializer)
    }
}

/// The server's error message from an error body: `{"error":{"message":…}}`,
/// `{"error":"…"}`, `{"message":…}`, or the body's text (an HTML page without its
/// markup), cut to a few lines.
pub fn error_message(body: &str) -> String {
    let from_json = serde_json::from_str::<Value>(body).ok().and_then(|value| {
        let error = value.get("error").unwrap_or(&value);
        match error {
            Value::String(text) => Some(text.clone()),
            other => other
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned),
        }
    });
    match from_json {
        Some(message) => message,
        None => {
            // An HTML page (a proxy's, a web server's) or a text dump: a few lines
            // of its text, not its markup.
            let text = crate::error_page::page_text(body);
            if text.is_empty() {
                "(empty body)".to_owned()
            } else {
                text
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserved_fields_are_those_a_request_writes() {
        let tool = ToolSpec {
            name: "t".to_owned(),
            description: String::new(),
            parameters: serde_json::json!({}),
        };
        let body = RequestWire {
            model: "m",
            messages: &[],
            tools: vec![ToolWire {
                kind: "function",
                function: &tool,
            }],
            stream: true,
            stream_options: Some(StreamOptionsWire {
                include_usage: true,
            }),
            extra: &Map::new(),
        };
        let value = serde_json::to_value(&body).unwrap();
        let written: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(written, RESERVED_BODY_FIELDS);
    }

    #[test]
    fn chunk_tolerates_nulls_missing_fields_and_odd_types() {
        let chunk: ChunkWire = serde_json::from_str(
            r#"{"choices":[{"delta":{"content":null,"tool_calls":[{"index":0,"function":{"name":"f"}}]},"finish_reason":null,"logprobs":null}],"usage":{"prompt_tokens":3,"timings":{"x":1}},"extra":true}"#,
        )
        .unwrap();
        let delta = chunk.choices[0].delta.as_ref().unwrap();
        assert_eq!(delta.content, None);
        let call = &delta.tool_calls.as_ref().unwrap()[0];
        assert_eq!(call.index, Some(0));
        assert_eq!(call.function.as_ref().unwrap().arguments, None);
        let usage = Usage::from(chunk.usage.unwrap());
        assert_eq!(usage.total_tokens, 3);
    }

    #[test]
    fn object_arguments_are_reencoded() {
        let call: ToolCallDeltaWire =
            serde_json::from_str(r#"{"index":0,"function":{"name":"f","arguments":{"a":1}}}"#)
                .unwrap();
        assert_eq!(
            call.function.unwrap().arguments.as_deref(),
            Some(r#"{"a":1}"#)
        );
    }

    #[test]
    fn error_message_reads_openai_shape_plain_shape_and_text() {
        assert_eq!(
            error_message(r#"{"error":{"message":"bad key","type":"x"}}"#),
            "bad key"
        );
        assert_eq!(
            error_message(r#"{"error":"model not found"}"#),
            "model not found"
        );
        assert_eq!(error_message(r#"{"message":"nope"}"#), "nope");
        assert_eq!(error_message(" upstream down \n"), "upstream down");
        assert_eq!(error_message(""), "(empty body)");
    }
}
