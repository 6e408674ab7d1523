//! Lenient OpenAI chat-completions messages.
//!
//! Real servers and other tools write fields and values that strict client types
//! reject, so every type here keeps what it does not understand in `extra` and
//! writes it back unchanged.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::arguments::Arguments;
use crate::fields::Fields;

/// Who wrote a message. Unknown roles (`developer`, vendor roles) are kept as text.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// Instructions for the model.
    System,
    /// The person.
    User,
    /// The model.
    Assistant,
    /// A tool's result, answering one tool call.
    Tool,
    /// Any other role, kept verbatim.
    Other(String),
}

impl Role {
    /// The wire name of the role.
    pub fn as_str(&self) -> &str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::Other(other) => other,
        }
    }
}

impl From<&str> for Role {
    fn from(value: &str) -> Self {
        match value {
            "system" => Role::System,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            other => Role::Other(other.to_owned()),
        }
    }
}

impl Serialize for Role {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Ok(Role::from(text.as_str()))
    }
}

/// A message's content: plain text or an array of typed parts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Typed parts (`{"type": "text", "text": …}`, images, …).
    Parts(Vec<ContentPart>),
}

impl Content {
    /// The text of the content: the string itself, or the `text` parts joined.
    pub fn text(&self) -> String {
        match self {
            Content::Text(text) => text.clone(),
            Content::Parts(parts) => parts
                .iter()
                .filter_map(|part| part.text.as_deref())
                .collect::<Vec<_>>()
                .join(""),
        }
    }
}

/// One part of an array content.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContentPart {
    /// The part's type, such as `text` or `image_url`.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// The text of a `text` part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Every other field, kept verbatim.
    #[serde(flatten)]
    pub extra: Fields,
}

/// A tool call made by the assistant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The id the tool result must answer with `tool_call_id`.
    #[serde(default)]
    pub id: String,
    /// Always `function` today; some servers omit it.
    #[serde(rename = "type", default = "function_kind")]
    pub kind: String,
    /// The function called.
    pub function: FunctionCall,
    /// Every other field, kept verbatim.
    #[serde(flatten)]
    pub extra: Fields,
}

fn function_kind() -> String {
    "function".to_owned()
}

impl ToolCall {
    /// A function tool call.
    pub fn function(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<Arguments>,
    ) -> Self {
        ToolCall {
            id: id.into(),
            kind: function_kind(),
            function: FunctionCall {
                name: name.into(),
                arguments: arguments.into(),
                extra: Fields::new(),
            },
            extra: Fields::new(),
        }
    }
}

/// The function part of a tool call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// The tool's name.
    #[serde(default)]
    pub name: String,
    /// The arguments as a JSON text. Servers that send an object get it re-encoded.
    #[serde(default)]
    pub arguments: Arguments,
    /// Every other field, kept verbatim.
    #[serde(flatten)]
    pub extra: Fields,
}

/// An OpenAI chat-completions message, as sent or received.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its content; `None` is written as `null` (an assistant message with only tool calls).
    #[serde(default)]
    pub content: Option<Content>,
    /// Tool calls made by an assistant message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// The call a tool message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Every other field (`name`, `reasoning_content`, vendor fields), kept verbatim.
    #[serde(flatten)]
    pub extra: Fields,
}

impl Message {
    fn with(role: Role, content: Option<Content>) -> Self {
        Message {
            role,
            content,
            tool_calls: None,
            tool_call_id: None,
            extra: Fields::new(),
        }
    }

    /// A system message.
    pub fn system(text: impl Into<String>) -> Self {
        Self::with(Role::System, Some(Content::Text(text.into())))
    }

    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Self::with(Role::User, Some(Content::Text(text.into())))
    }

    /// An assistant message with text only.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::with(Role::Assistant, Some(Content::Text(text.into())))
    }

    /// An assistant message with tool calls and optional text.
    pub fn assistant_tool_calls(text: Option<String>, calls: Vec<ToolCall>) -> Self {
        let mut message = Self::with(Role::Assistant, text.map(Content::Text));
        message.tool_calls = Some(calls);
        message
    }

    /// A tool result answering `call_id`.
    pub fn tool(call_id: impl Into<String>, text: impl Into<String>) -> Self {
        let mut message = Self::with(Role::Tool, Some(Content::Text(text.into())));
        message.tool_call_id = Some(call_id.into());
        message
    }

    /// The message's text (empty when it has none).
    pub fn text(&self) -> String {
        self.content.as_ref().map(Content::text).unwrap_or_default()
    }

    /// The tool calls of an assistant message (empty when there are none).
    pub fn calls(&self) -> &[ToolCall] {
        self.tool_calls.as_deref().unwrap_or(&[])
    }
}
