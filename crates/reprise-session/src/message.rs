//! Lenient OpenAI chat-completions messages.
//!
//! Real servers and other tools write fields and values that strict client types
//! reject, so every type here keeps what it does not understand in `extra` and
//! writes it back unchanged.

use std::fmt;

use serde::de::{DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

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
        deserializer.deserialize_str(RoleVisitor)
    }
}

/// Reads a role from the string's text, allocating only for roles outside the four.
struct RoleVisitor;

impl Visitor<'_> for RoleVisitor {
    type Value = Role;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a string")
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Role, E> {
        Ok(Role::from(text))
    }
}

/// A message's content: plain text or an array of typed parts.
#[derive(Clone, Debug, PartialEq, Serialize)]
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
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ContentPart {
    /// The part's type, such as `text` or `image_url`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The text of a `text` part.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Every other field, kept verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A tool call made by the assistant.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolCall {
    /// The id the tool result must answer with `tool_call_id`.
    pub id: String,
    /// Always `function` today; some servers omit it.
    #[serde(rename = "type")]
    pub kind: String,
    /// The function called.
    pub function: FunctionCall,
    /// Every other field, kept verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn function_kind() -> String {
    "function".to_owned()
}

impl ToolCall {
    /// A function tool call.
    pub fn function(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        ToolCall {
            id: id.into(),
            kind: function_kind(),
            function: FunctionCall {
                name: name.into(),
                arguments: arguments.into(),
                extra: Map::new(),
            },
            extra: Map::new(),
        }
    }
}

/// The function part of a tool call.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FunctionCall {
    /// The tool's name.
    pub name: String,
    /// The arguments as a JSON text. Servers that send an object get it re-encoded.
    pub arguments: String,
    /// Every other field, kept verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An OpenAI chat-completions message, as sent or received.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its content; `None` is written as `null` (an assistant message with only tool calls).
    pub content: Option<Content>,
    /// Tool calls made by an assistant message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// The call a tool message answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Every other field (`name`, `reasoning_content`, vendor fields), kept verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Message {
    fn with(role: Role, content: Option<Content>) -> Self {
        Message {
            role,
            content,
            tool_calls: None,
            tool_call_id: None,
            extra: Map::new(),
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

// Reading. Written by hand rather than derived: the derived impls of types with
// `#[serde(flatten)]` and of an untagged enum buffer every value into an intermediate
// tree and decode it a second time, which cost more than half the load time of a
// transcript (mostly long strings). These read each value once, straight into its
// field, match keys without allocating and keep unknown fields in `extra`. They accept
// exactly what the derived impls accepted, and refuse the rest with the same errors
// (the tests below hold them to a derived twin of each type).

/// A key of an object whose known fields are `F`: one of them, or any other key.
pub(crate) enum Key<F> {
    /// A known field.
    Known(F),
    /// Any other key, kept for `extra`.
    Other(String),
}

/// Reads an object key: `known` names the field a key stands for, if any. Known keys
/// are matched on the decoded text without allocating.
pub(crate) struct KeySeed<F>(pub(crate) fn(&str) -> Option<F>);

impl<'de, F> DeserializeSeed<'de> for KeySeed<F> {
    type Value = Key<F>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Key<F>, D::Error> {
        deserializer.deserialize_identifier(self)
    }
}

impl<F> Visitor<'_> for KeySeed<F> {
    type Value = Key<F>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("field identifier")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Key<F>, E> {
        Ok(match (self.0)(key) {
            Some(field) => Key::Known(field),
            None => Key::Other(key.to_owned()),
        })
    }

    fn visit_string<E: serde::de::Error>(self, key: String) -> Result<Key<F>, E> {
        Ok(match (self.0)(&key) {
            Some(field) => Key::Known(field),
            None => Key::Other(key),
        })
    }
}

/// Stores a known field's value, refusing a second one as the derived impls do.
pub(crate) fn set_once<T, E: serde::de::Error>(
    slot: &mut Option<T>,
    name: &'static str,
    value: impl FnOnce() -> Result<T, E>,
) -> Result<(), E> {
    if slot.is_some() {
        return Err(E::duplicate_field(name));
    }
    *slot = Some(value()?);
    Ok(())
}

/// The error the derived untagged `Content` gave for anything but text or parts.
const CONTENT_MISMATCH: &str = "data did not match any variant of untagged enum Content";

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // The error is raised here, once the value is read, where the derived impl
        // raised it: that keeps its position in the line the same.
        deserializer
            .deserialize_any(ContentVisitor)?
            .ok_or_else(|| D::Error::custom(CONTENT_MISMATCH))
    }
}

/// Reads a content value: text, parts, or (`None`) anything else, read to its end.
struct ContentVisitor;

impl<'de> Visitor<'de> for ContentVisitor {
    type Value = Option<Content>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a string or an array of content parts")
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Self::Value, E> {
        Ok(Some(Content::Text(text.to_owned())))
    }

    fn visit_string<E: serde::de::Error>(self, text: String) -> Result<Self::Value, E> {
        Ok(Some(Content::Text(text)))
    }

    fn visit_bytes<E: serde::de::Error>(self, bytes: &[u8]) -> Result<Self::Value, E> {
        Ok(std::str::from_utf8(bytes)
            .ok()
            .map(|text| Content::Text(text.to_owned())))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut parts = Vec::new();
        let mut matched = true;
        // After a part that is not one, the rest is still read: a syntax error
        // further on is reported as before.
        while let Some(part) = seq.next_element_seed(PartSeed)? {
            match part {
                Some(part) if matched => parts.push(part),
                _ => matched = false,
            }
        }
        Ok(matched.then_some(Content::Parts(parts)))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        skip_map(map).map(|()| None)
    }

    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        Value::deserialize(deserializer).map(|_| None)
    }
}

/// Reads the rest of an object that is not what was expected, checking it as fully
/// as reading it into a value would (numbers in range, strings well formed).
fn skip_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<String, Value>()?.is_some() {}
    Ok(())
}

/// Reads the rest of an array that is not what was expected, as [`skip_map`] does.
fn skip_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<Value>()?.is_some() {}
    Ok(())
}

/// Reads one element of a parts array: a part, or (`None`) anything that is not one,
/// read to its end. Never fails but on bad syntax, so that a mismatch anywhere in
/// the array gives the untagged error, as with the derived impl.
struct PartSeed;

/// The known fields of a content part.
enum PartField {
    Type,
    Text,
}

fn part_field(key: &str) -> Option<PartField> {
    match key {
        "type" => Some(PartField::Type),
        "text" => Some(PartField::Text),
        _ => None,
    }
}

impl<'de> DeserializeSeed<'de> for PartSeed {
    type Value = Option<ContentPart>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for PartSeed {
    type Value = Option<ContentPart>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("struct ContentPart")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        // Parts are rare: each value is read as a JSON value, then checked.
        let mut kind = None;
        let mut text = None;
        let mut extra = Map::new();
        let mut matched = true;
        while let Some(key) = map.next_key_seed(KeySeed(part_field))? {
            match key {
                Key::Known(PartField::Type) => match map.next_value::<Value>()? {
                    Value::String(value) if kind.is_none() => kind = Some(value),
                    _ => matched = false,
                },
                Key::Known(PartField::Text) => match map.next_value::<Value>()? {
                    Value::String(value) if text.is_none() => text = Some(Some(value)),
                    Value::Null if text.is_none() => text = Some(None),
                    _ => matched = false,
                },
                Key::Other(key) => {
                    let value = map.next_value::<Value>()?;
                    extra.insert(key, value);
                }
            }
        }
        Ok(matched.then(|| ContentPart {
            kind: kind.unwrap_or_default(),
            text: text.flatten(),
            extra,
        }))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        skip_seq(seq).map(|()| None)
    }

    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_bytes<E: serde::de::Error>(self, _: &[u8]) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        Value::deserialize(deserializer).map(|_| None)
    }
}

impl<'de> Deserialize<'de> for ContentPart {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ContentPartVisitor)
    }
}

/// Reads a content part on its own (inside a message, [`PartSeed`] reads parts).
struct ContentPartVisitor;

impl<'de> Visitor<'de> for ContentPartVisitor {
    type Value = ContentPart;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("struct ContentPart")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ContentPart, A::Error> {
        let mut kind = None;
        let mut text = None;
        let mut extra = Map::new();
        while let Some(key) = map.next_key_seed(KeySeed(part_field))? {
            match key {
                Key::Known(PartField::Type) => set_once(&mut kind, "type", || map.next_value())?,
                Key::Known(PartField::Text) => set_once(&mut text, "text", || map.next_value())?,
                Key::Other(key) => {
                    let value = map.next_value::<Value>()?;
                    extra.insert(key, value);
                }
            }
        }
        Ok(ContentPart {
            kind: kind.unwrap_or_default(),
            text: text.flatten(),
            extra,
        })
    }
}

/// The known fields of a message.
enum MessageField {
    Role,
    Content,
    ToolCalls,
    ToolCallId,
}

fn message_field(key: &str) -> Option<MessageField> {
    match key {
        "role" => Some(MessageField::Role),
        "content" => Some(MessageField::Content),
        "tool_calls" => Some(MessageField::ToolCalls),
        "tool_call_id" => Some(MessageField::ToolCallId),
        _ => None,
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(MessageVisitor)
    }
}

struct MessageVisitor;

impl<'de> Visitor<'de> for MessageVisitor {
    type Value = Message;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("struct Message")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Message, A::Error> {
        let mut role = None;
        let mut content = None;
        let mut tool_calls = None;
        let mut tool_call_id = None;
        let mut extra = Map::new();
        while let Some(key) = map.next_key_seed(KeySeed(message_field))? {
            match key {
                Key::Known(MessageField::Role) => set_once(&mut role, "role", || map.next_value())?,
                Key::Known(MessageField::Content) => {
                    set_once(&mut content, "content", || map.next_value())?
                }
                Key::Known(MessageField::ToolCalls) => {
                    set_once(&mut tool_calls, "tool_calls", || {
                        map.next_value::<Option<ToolCalls>>()
                    })?
                }
                Key::Known(MessageField::ToolCallId) => {
                    set_once(&mut tool_call_id, "tool_call_id", || map.next_value())?
                }
                Key::Other(key) => {
                    let value = map.next_value::<Value>()?;
                    extra.insert(key, value);
                }
            }
        }
        Ok(Message {
            role: role.ok_or_else(|| A::Error::missing_field("role"))?,
            content: content.flatten(),
            tool_calls: tool_calls.flatten().map(|calls| calls.0),
            tool_call_id: tool_call_id.flatten(),
            extra,
        })
    }
}

/// A message's tool calls, sized for the usual single call (a `Vec` read by serde
/// starts at room for four).
struct ToolCalls(Vec<ToolCall>);

impl<'de> Deserialize<'de> for ToolCalls {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(ToolCallsVisitor)
    }
}

struct ToolCallsVisitor;

impl<'de> Visitor<'de> for ToolCallsVisitor {
    type Value = ToolCalls;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a sequence")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ToolCalls, A::Error> {
        let Some(first) = seq.next_element::<ToolCall>()? else {
            return Ok(ToolCalls(Vec::new()));
        };
        let mut calls = vec![first];
        while let Some(call) = seq.next_element()? {
            calls.push(call);
        }
        Ok(ToolCalls(calls))
    }
}

/// The known fields of a tool call.
enum ToolCallField {
    Id,
    Type,
    Function,
}

fn tool_call_field(key: &str) -> Option<ToolCallField> {
    match key {
        "id" => Some(ToolCallField::Id),
        "type" => Some(ToolCallField::Type),
        "function" => Some(ToolCallField::Function),
        _ => None,
    }
}

impl<'de> Deserialize<'de> for ToolCall {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ToolCallVisitor)
    }
}

struct ToolCallVisitor;

impl<'de> Visitor<'de> for ToolCallVisitor {
    type Value = ToolCall;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("struct ToolCall")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ToolCall, A::Error> {
        let mut id = None;
        let mut kind = None;
        let mut function = None;
        let mut extra = Map::new();
        while let Some(key) = map.next_key_seed(KeySeed(tool_call_field))? {
            match key {
                Key::Known(ToolCallField::Id) => set_once(&mut id, "id", || map.next_value())?,
                Key::Known(ToolCallField::Type) => {
                    set_once(&mut kind, "type", || map.next_value())?
                }
                Key::Known(ToolCallField::Function) => {
                    set_once(&mut function, "function", || map.next_value())?
                }
                Key::Other(key) => {
                    let value = map.next_value::<Value>()?;
                    extra.insert(key, value);
                }
            }
        }
        Ok(ToolCall {
            id: id.unwrap_or_default(),
            kind: kind.unwrap_or_else(function_kind),
            function: function.ok_or_else(|| A::Error::missing_field("function"))?,
            extra,
        })
    }
}

/// The known fields of a function call.
enum FunctionField {
    Name,
    Arguments,
}

fn function_field(key: &str) -> Option<FunctionField> {
    match key {
        "name" => Some(FunctionField::Name),
        "arguments" => Some(FunctionField::Arguments),
        _ => None,
    }
}

impl<'de> Deserialize<'de> for FunctionCall {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(FunctionCallVisitor)
    }
}

struct FunctionCallVisitor;

impl<'de> Visitor<'de> for FunctionCallVisitor {
    type Value = FunctionCall;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("struct FunctionCall")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<FunctionCall, A::Error> {
        let mut name = None;
        let mut arguments = None;
        let mut extra = Map::new();
        while let Some(key) = map.next_key_seed(KeySeed(function_field))? {
            match key {
                Key::Known(FunctionField::Name) => {
                    set_once(&mut name, "name", || map.next_value())?
                }
                Key::Known(FunctionField::Arguments) => {
                    set_once(&mut arguments, "arguments", || {
                        map.next_value::<Arguments>().map(|arguments| arguments.0)
                    })?
                }
                Key::Other(key) => {
                    let value = map.next_value::<Value>()?;
                    extra.insert(key, value);
                }
            }
        }
        Ok(FunctionCall {
            name: name.unwrap_or_default(),
            arguments: arguments.unwrap_or_default(),
            extra,
        })
    }
}

/// A function call's arguments as JSON text: text stays text, `null` is empty, and
/// anything else (servers that send an object) is re-encoded.
struct Arguments(String);

impl<'de> Deserialize<'de> for Arguments {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Arguments(match Value::deserialize(deserializer)? {
            Value::String(text) => text,
            Value::Null => String::new(),
            other => other.to_string(),
        }))
    }
}
