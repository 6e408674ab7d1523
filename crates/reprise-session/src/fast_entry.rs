//! A faster decoder for entry lines, producing exactly what `Entry`'s derived
//! `Deserialize` produces.
//!
//! The derived impls use `#[serde(flatten)]` (to keep unknown fields) and an untagged
//! `Content`, both of which make serde buffer every value into an intermediate tree
//! and decode it a second time; for transcripts that are mostly long strings this
//! halves the load speed. These visitors walk each object once, routing known fields
//! to their types and unknown ones into `extra`. Anything unusual (a duplicate
//! field, a type mismatch) makes the caller fall back to the derived decoder, so the
//! two can only differ in speed.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::entry::Entry;
use crate::message::{Content, ContentPart, FunctionCall, Message, Role, ToolCall};

/// Decodes one entry line; `None` when the fast path does not apply (the caller then
/// uses `serde_json::from_slice::<Entry>`).
pub(crate) fn decode_entry(line: &[u8]) -> Option<Entry> {
    let mut de = serde_json::Deserializer::from_slice(line);
    let entry = FastEntry::deserialize(&mut de).ok()?.0;
    de.end().ok()?;
    Some(entry)
}

/// A field name: borrowed when the input allows it.
struct Key(std::borrow::Cow<'static, str>, Option<&'static str>);

/// Deserializes an object key, matching it against `known` without allocating.
struct KeySeed(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Key;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Key;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
        match self.0.iter().find(|known| **known == v) {
            Some(known) => Ok(Key(std::borrow::Cow::Borrowed(known), Some(known))),
            None => Ok(Key(std::borrow::Cow::Owned(v.to_owned()), None)),
        }
    }
}

fn dup<E: de::Error>(field: &'static str) -> E {
    E::duplicate_field(field)
}

struct FastEntry(Entry);

impl<'de> Deserialize<'de> for FastEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(EntryVisitor).map(FastEntry)
    }
}

struct EntryVisitor;

const ENTRY_FIELDS: &[&str] = &["uuid", "ts", "kind", "message"];

impl<'de> Visitor<'de> for EntryVisitor {
    type Value = Entry;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an entry object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entry, A::Error> {
        let mut uuid: Option<Uuid> = None;
        let mut ts = None;
        let mut kind: Option<Option<String>> = None;
        let mut message: Option<Option<FastMessage>> = None;
        let mut extra = Map::new();
        while let Some(Key(name, known)) = map.next_key_seed(KeySeed(ENTRY_FIELDS))? {
            match known {
                Some("uuid") if uuid.is_none() => uuid = Some(map.next_value()?),
                Some("ts") if ts.is_none() => {
                    let text: String = map.next_value()?;
                    ts = Some(text.parse().map_err(de::Error::custom)?);
                }
                Some("kind") if kind.is_none() => kind = Some(map.next_value()?),
                Some("message") if message.is_none() => message = Some(map.next_value()?),
                Some(field) => return Err(dup(field)),
                None => {
                    extra.insert(name.into_owned(), map.next_value::<Value>()?);
                }
            }
        }
        Ok(Entry {
            uuid: uuid.ok_or_else(|| de::Error::missing_field("uuid"))?,
            ts: ts.ok_or_else(|| de::Error::missing_field("ts"))?,
            kind: kind.flatten(),
            message: message.flatten().map(|m| m.0),
            extra,
        })
    }
}

struct FastMessage(Message);

impl<'de> Deserialize<'de> for FastMessage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(MessageVisitor).map(FastMessage)
    }
}

struct MessageVisitor;

const MESSAGE_FIELDS: &[&str] = &["role", "content", "tool_calls", "tool_call_id"];

impl<'de> Visitor<'de> for MessageVisitor {
    type Value = Message;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a message object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Message, A::Error> {
        let mut role: Option<Role> = None;
        let mut content: Option<Option<Content>> = None;
        let mut tool_calls: Option<Option<Vec<FastToolCall>>> = None;
        let mut tool_call_id: Option<Option<String>> = None;
        let mut extra = Map::new();
        while let Some(Key(name, known)) = map.next_key_seed(KeySeed(MESSAGE_FIELDS))? {
            match known {
                Some("role") if role.is_none() => role = Some(map.next_value()?),
                Some("content") if content.is_none() => {
                    content = Some(map.next_value::<FastContent>()?.0)
                }
                Some("tool_calls") if tool_calls.is_none() => tool_calls = Some(map.next_value()?),
                Some("tool_call_id") if tool_call_id.is_none() => {
                    tool_call_id = Some(map.next_value()?)
                }
                Some(field) => return Err(dup(field)),
                None => {
                    extra.insert(name.into_owned(), map.next_value::<Value>()?);
                }
            }
        }
        Ok(Message {
            role: role.ok_or_else(|| de::Error::missing_field("role"))?,
            content: content.flatten(),
            tool_calls: tool_calls
                .flatten()
                .map(|calls| calls.into_iter().map(|call| call.0).collect()),
            tool_call_id: tool_call_id.flatten(),
            extra,
        })
    }
}

/// `content`: a string, an array of parts, or null.
struct FastContent(Option<Content>);

impl<'de> Deserialize<'de> for FastContent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ContentVisitor)
    }
}

struct ContentVisitor;

impl<'de> Visitor<'de> for ContentVisitor {
    type Value = FastContent;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string, an array of parts, or null")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<FastContent, E> {
        Ok(FastContent(Some(Content::Text(v.to_owned()))))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<FastContent, E> {
        Ok(FastContent(Some(Content::Text(v))))
    }
    fn visit_unit<E: de::Error>(self) -> Result<FastContent, E> {
        Ok(FastContent(None))
    }
    fn visit_none<E: de::Error>(self) -> Result<FastContent, E> {
        Ok(FastContent(None))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<FastContent, A::Error> {
        let mut parts = Vec::new();
        while let Some(part) = seq.next_element::<ContentPart>()? {
            parts.push(part);
        }
        Ok(FastContent(Some(Content::Parts(parts))))
    }
}

struct FastToolCall(ToolCall);

impl<'de> Deserialize<'de> for FastToolCall {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ToolCallVisitor).map(FastToolCall)
    }
}

struct ToolCallVisitor;

const TOOL_CALL_FIELDS: &[&str] = &["id", "type", "function"];

impl<'de> Visitor<'de> for ToolCallVisitor {
    type Value = ToolCall;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a tool call object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ToolCall, A::Error> {
        let mut id: Option<String> = None;
        let mut kind: Option<String> = None;
        let mut function: Option<FunctionCall> = None;
        let mut extra = Map::new();
        while let Some(Key(name, known)) = map.next_key_seed(KeySeed(TOOL_CALL_FIELDS))? {
            match known {
                Some("id") if id.is_none() => id = Some(map.next_value()?),
                Some("type") if kind.is_none() => kind = Some(map.next_value()?),
                Some("function") if function.is_none() => {
                    function = Some(map.next_value::<FastFunction>()?.0)
                }
                Some(field) => return Err(dup(field)),
                None => {
                    extra.insert(name.into_owned(), map.next_value::<Value>()?);
                }
            }
        }
        Ok(ToolCall {
            id: id.unwrap_or_default(),
            kind: kind.unwrap_or_else(|| "function".to_owned()),
            function: function.ok_or_else(|| de::Error::missing_field("function"))?,
            extra,
        })
    }
}

struct FastFunction(FunctionCall);

impl<'de> Deserialize<'de> for FastFunction {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(FunctionVisitor).map(FastFunction)
    }
}

struct FunctionVisitor;

const FUNCTION_FIELDS: &[&str] = &["name", "arguments"];

impl<'de> Visitor<'de> for FunctionVisitor {
    type Value = FunctionCall;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a function object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<FunctionCall, A::Error> {
        let mut name: Option<String> = None;
        let mut arguments: Option<String> = None;
        let mut extra = Map::new();
        while let Some(Key(key, known)) = map.next_key_seed(KeySeed(FUNCTION_FIELDS))? {
            match known {
                Some("name") if name.is_none() => name = Some(map.next_value()?),
                Some("arguments") if arguments.is_none() => {
                    // Same as the derived decoder: text stays text, null is empty,
                    // anything else is re-encoded as JSON text.
                    arguments = Some(match map.next_value::<Value>()? {
                        Value::String(text) => text,
                        Value::Null => String::new(),
                        other => other.to_string(),
                    });
                }
                Some(field) => return Err(dup(field)),
                None => {
                    extra.insert(key.into_owned(), map.next_value::<Value>()?);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn same(line: &str) {
        let slow = serde_json::from_str::<Entry>(line).ok();
        let fast = decode_entry(line.as_bytes());
        if let Some(fast) = &fast {
            assert_eq!(Some(fast), slow.as_ref(), "fast decode differs for {line}");
        }
    }

    #[test]
    fn fast_decoder_matches_the_derived_one() {
        let cases = [
            r#"{"uuid":"0193c0de-0000-7000-8000-000000000001","ts":"2026-11-30T09:38:04.123Z","message":{"role":"user","content":"hi"}}"#,
            r#"{"ts":"2026-11-30T09:38:04Z","uuid":"0193c0de-0000-7000-8000-000000000001","x":1,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":{"a":1}},"index":0}],"reasoning":"r"}}"#,
            r#"{"uuid":"0193c0de-0000-7000-8000-000000000001","ts":"2026-11-30T09:38:04.123Z","kind":"compaction","summary":"s"}"#,
            r#"{"uuid":"0193c0de-0000-7000-8000-000000000001","ts":"2026-11-30T09:38:04.123Z","kind":null,"message":{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"a\nb"},{"type":"image_url","image_url":{"url":"u"}}]}}"#,
            r#"{"uuid":"0193c0de-0000-7000-8000-000000000001","ts":"2026-11-30T09:38:04.123Z","message":{"role":"assistant","tool_calls":[{"function":{"name":"f"}}]}}"#,
            r#"{"uuid":"0193c0de-0000-7000-8000-000000000001","ts":"2026-11-30T09:38:04.123Z","message":null}"#,
            r#"{"uuid":"0193c0de-0000-7000-8000-000000000001","ts":"2026-11-30T09:38:04.123Z","message":{"role":"user","content":"\u00e9\"q\""},"m\u00e9ta":[1]}"#,
            r#"{"uuid":"0193c0de-0000-7000-8000-000000000001","uuid":"0193c0de-0000-7000-8000-000000000002","ts":"2026-11-30T09:38:04.123Z"}"#,
            r#"{"uuid":"nope","ts":"2026-11-30T09:38:04.123Z"}"#,
            r#"{"ts":"2026-11-30T09:38:04.123Z"}"#,
            r#"{"uuid":"0193c0de-0000-7000-8000-000000000001","ts":"2026-11-30T09:38:04.123Z"} x"#,
            r#"[1,2]"#,
        ];
        for line in cases {
            same(line);
        }
        assert!(decode_entry(cases[0].as_bytes()).is_some());
        assert!(decode_entry(cases[1].as_bytes()).is_some());
        assert!(decode_entry(cases[8].as_bytes()).is_none());
        assert!(decode_entry(cases[10].as_bytes()).is_none());
    }
}

#[cfg(test)]
mod written_entries {
    use super::*;

    #[test]
    fn entries_this_crate_writes_take_the_fast_path() {
        let entries = [
            Entry::message(Message::user("a \"quoted\"\nline ünï 🎉")),
            Entry::message(Message::assistant_tool_calls(
                Some("reading".into()),
                vec![ToolCall::function("c1", "read_file", "{\"path\":\"x\"}")],
            )),
            Entry::message(Message::assistant_tool_calls(None, vec![])),
            Entry::message(Message::tool("c1", "fn main() {\n\t\"x\"\n}")),
            Entry::other("compaction", Map::new()),
        ];
        for entry in entries {
            let line = serde_json::to_vec(&entry).unwrap();
            assert_eq!(
                decode_entry(&line).as_ref(),
                Some(&entry),
                "{}",
                String::from_utf8_lossy(&line)
            );
        }
    }
}
