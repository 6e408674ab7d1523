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
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
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
                    // Borrowed when it has no escapes (it never has): no allocation.
                    let raw = map.next_value::<&'de RawValue>()?.get();
                    let parsed = match raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
                        Some(text) if !text.contains('\\') => text.parse(),
                        _ => serde_json::from_str::<String>(raw)
                            .map_err(de::Error::custom)?
                            .parse(),
                    };
                    ts = Some(parsed.map_err(de::Error::custom)?);
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
                Some("role") if role.is_none() => role = Some(map.next_value::<FastRole>()?.0),
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

/// A role, matched without allocating for the four known ones.
struct FastRole(Role);

impl<'de> Deserialize<'de> for FastRole {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(RoleVisitor)
    }
}

struct RoleVisitor;

impl<'de> Visitor<'de> for RoleVisitor {
    type Value = FastRole;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a role name")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<FastRole, E> {
        Ok(FastRole(Role::from(v)))
    }
}

/// How many of the 8 bytes of `word` come before the first backslash (8 when none).
fn plain_run(word: &[u8]) -> usize {
    let mut lanes = [0u8; 8];
    lanes.copy_from_slice(word);
    // A byte of `x` is zero where `word` holds a backslash; the classic zero-byte test
    // marks the lowest such byte exactly (false marks only appear above a true one).
    let x = u64::from_le_bytes(lanes) ^ 0x5c5c_5c5c_5c5c_5c5c;
    let marks = x.wrapping_sub(0x0101_0101_0101_0101) & !x & 0x8080_8080_8080_8080;
    (marks.trailing_zeros() / 8) as usize
}

/// `content`: a string, an array of parts, or null.
///
/// Taken as the raw JSON text first (serde_json checks it without building anything),
/// so that a string is unescaped once into a `String` of the right size instead of
/// going through serde_json's growing scratch buffer and a copy.
struct FastContent(Option<Content>);

impl<'de> Deserialize<'de> for FastContent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = <&'de RawValue>::deserialize(d)?.get();
        match raw.as_bytes().first() {
            Some(b'"') => Ok(FastContent(Some(Content::Text(unescape(raw)?)))),
            Some(b'n') => Ok(FastContent(None)),
            Some(b'[') => serde_json::from_str::<Vec<ContentPart>>(raw)
                .map(|parts| FastContent(Some(Content::Parts(parts))))
                .map_err(de::Error::custom),
            _ => Err(de::Error::custom(
                "content is not a string, an array or null",
            )),
        }
    }
}

/// The text of `raw`, a JSON string literal that serde_json has checked (valid UTF-8,
/// valid escapes, no control characters). The short escapes are decoded here; a
/// string with a `\u` escape is left to serde_json, whose rules for surrogates then
/// apply unchanged.
fn unescape<E: de::Error>(raw: &str) -> Result<String, E> {
    let body = raw
        .strip_prefix('"')
        .and_then(|rest| rest.strip_suffix('"'))
        .ok_or_else(|| E::custom("not a JSON string"))?;
    if memchr::memchr(b'\\', body.as_bytes()).is_none() {
        return Ok(body.to_owned());
    }
    // One pass into a buffer of the final size: escapes come every few bytes in code
    // and logs, where copying the runs between them with memcpy calls would cost more
    // than the bytes.
    let bytes = body.as_bytes();
    let mut out = vec![0u8; bytes.len()];
    let mut written = 0;
    let mut at = 0;
    while at < bytes.len() {
        // Eight bytes at a time up to the next backslash: copying the whole word is
        // safe (`written <= at`, so it fits) and the part past the backslash is
        // overwritten next.
        if let Some(word) = bytes.get(at..at + 8) {
            out[written..written + 8].copy_from_slice(word);
            let run = plain_run(word);
            written += run;
            at += run;
            if run == 8 {
                continue;
            }
        } else if bytes[at] != b'\\' {
            out[written] = bytes[at];
            written += 1;
            at += 1;
            continue;
        }
        out[written] = match bytes.get(at + 1) {
            Some(b'"') => b'"',
            Some(b'\\') => b'\\',
            Some(b'/') => b'/',
            Some(b'b') => 0x08,
            Some(b'f') => 0x0c,
            Some(b'n') => b'\n',
            Some(b'r') => b'\r',
            Some(b't') => b'\t',
            _ => return serde_json::from_str::<String>(raw).map_err(E::custom),
        };
        written += 1;
        at += 2;
    }
    out.truncate(written);
    // Only ASCII escapes were replaced by ASCII bytes, so the text stays valid UTF-8;
    // checking it again is cheap and keeps this free of `unsafe`.
    String::from_utf8(out).map_err(E::custom)
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
                    let raw = map.next_value::<&'de RawValue>()?.get();
                    arguments = Some(match raw.as_bytes().first() {
                        Some(b'"') => unescape(raw)?,
                        Some(b'n') => String::new(),
                        _ => serde_json::from_str::<Value>(raw)
                            .map_err(de::Error::custom)?
                            .to_string(),
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

#[cfg(test)]
mod props {
    use proptest::prelude::*;

    use super::*;

    /// Pieces of a JSON string body: plain text, every short escape, `\u` escapes
    /// (pairs, lone surrogates, bad hex), raw control characters and bad escapes.
    fn piece() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z {}();:,.]{0,12}",
            "\\PC{0,4}",
            Just(r#"\""#.to_owned()),
            Just(r"\\".to_owned()),
            Just(r"\/".to_owned()),
            Just(r"\b".to_owned()),
            Just(r"\f".to_owned()),
            Just(r"\n".to_owned()),
            Just(r"\r".to_owned()),
            Just(r"\t".to_owned()),
            Just(r"\u00e9".to_owned()),
            Just(r"\ud83c\udf89".to_owned()),
            Just(r"\ud800".to_owned()),
            Just(r"\udc00x".to_owned()),
            Just(r"\u12".to_owned()),
            Just(r"\x".to_owned()),
            Just("\t".to_owned()),
            Just("\u{1}".to_owned()),
            Just("é🎉".to_owned()),
        ]
    }

    fn body() -> impl Strategy<Value = String> {
        proptest::collection::vec(piece(), 0..12).prop_map(|pieces| pieces.concat())
    }

    proptest! {
        /// Lines with arbitrary string bodies in every field the fast decoder reads
        /// itself: it yields the derived decoder's entry, or nothing (and then the
        /// derived decoder is used); never a different entry.
        #[test]
        fn fast_decoder_equals_the_derived_one_on_any_strings(
            content in body(),
            arguments in body(),
            ts_tail in prop_oneof![Just(String::new()), Just(r"\u0000".to_owned())],
            shape in 0..4u8,
        ) {
            let message = match shape {
                0 => format!(r#"{{"role":"user","content":"{content}"}}"#),
                1 => format!(
                    r#"{{"role":"assistant","content":"{content}","tool_calls":[{{"id":"c","type":"function","function":{{"name":"f","arguments":"{arguments}"}}}}]}}"#
                ),
                2 => format!(r#"{{"role":"tool","tool_call_id":"c","content":"{content}"}}"#),
                _ => format!(r#"{{"role":"x","content":[{{"type":"text","text":"{content}"}}]}}"#),
            };
            let line = format!(
                r#"{{"uuid":"0193c0de-0000-7000-8000-000000000001","ts":"2026-11-30T09:38:04.123Z{ts_tail}","message":{message}}}"#
            );
            let slow = serde_json::from_str::<Entry>(&line).ok();
            let fast = decode_entry(line.as_bytes());
            if fast.is_some() {
                prop_assert_eq!(&fast, &slow, "{}", line);
            }
            // Whatever serde_json reads as a string, the fast path reads too.
            if slow.is_some() {
                prop_assert!(fast.is_some(), "{}", line);
            }
        }

        /// Entries this crate writes, with any text, round-trip through the fast path.
        #[test]
        fn written_entries_round_trip_through_the_fast_decoder(
            text in "\\PC*|[\\x00-\\x7f]*",
            arguments in "\\PC*",
        ) {
            for entry in [
                Entry::message(Message::user(text.clone())),
                Entry::message(Message::assistant_tool_calls(
                    Some(text.clone()),
                    vec![ToolCall::function("c1", "f", arguments.clone())],
                )),
                Entry::message(Message::tool("c1", text.clone())),
            ] {
                let line = serde_json::to_vec(&entry).unwrap();
                prop_assert_eq!(decode_entry(&line), Some(entry));
            }
        }
    }
}
