//! The entry types with serde's derived `Deserialize`, as this crate read entries
//! before the decoders were written by hand: what the property tests hold serde's
//! decoder to (the same entries, the same errors) and what the storage benchmark
//! measures it against. Types and fields carry the real types' names, so that errors
//! read the same.

use jiff::Timestamp;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use uuid::Uuid;

/// [`crate::Entry`], derived.
#[derive(Debug, Deserialize)]
pub struct Entry {
    pub uuid: Uuid,
    #[serde(deserialize_with = "ts_lenient")]
    pub ts: Timestamp,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub message: Option<Message>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn ts_lenient<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Timestamp, D::Error> {
    let text = String::deserialize(deserializer)?;
    text.parse::<Timestamp>().map_err(serde::de::Error::custom)
}

/// [`crate::Message`], derived (the role as its text).
#[derive(Debug, Deserialize)]
pub struct Message {
    pub role: String,
    #[serde(default)]
    pub content: Option<Content>,
    #[serde(default)]
    pub tool_calls: Option<Vec<ToolCall>>,
    #[serde(default)]
    pub tool_call_id: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// [`crate::Content`], derived.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

/// [`crate::ContentPart`], derived.
#[derive(Debug, Deserialize)]
pub struct ContentPart {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// [`crate::ToolCall`], derived.
#[derive(Debug, Deserialize)]
pub struct ToolCall {
    #[serde(default)]
    pub id: String,
    #[serde(rename = "type", default = "function_kind")]
    pub kind: String,
    pub function: FunctionCall,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn function_kind() -> String {
    "function".to_owned()
}

/// [`crate::FunctionCall`], derived.
#[derive(Debug, Deserialize)]
pub struct FunctionCall {
    #[serde(default)]
    pub name: String,
    #[serde(default, deserialize_with = "arguments_as_text")]
    pub arguments: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn arguments_as_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::String(text) => text,
        Value::Null => String::new(),
        other => other.to_string(),
    })
}
