//! The fast decoder: reads an entry line in one pass, producing exactly what serde's
//! decoder for [`Entry`] produces (see the [module above](super) for why both exist).
//!
//! It matches the known keys as bytes, decodes each string in one pass (unescaping
//! 8 bytes at a time into a reused buffer, checking UTF-8 with SIMD) and allocates it
//! at its final size, reads the timestamps this crate writes without a general
//! parser, finds the line's end while decoding, and hands anything else (unknown
//! fields' values, content parts, non-string arguments) to serde_json. It gives up on
//! anything serde's decoder refuses (a duplicate field, a type mismatch, bad syntax or
//! escapes, invalid UTF-8) and on values nested too deep; the caller then falls back
//! to serde's decoder, so the two can only differ in speed. The property tests below
//! check that they never differ, and that this decoder takes every line of every
//! shape they generate that serde's decoder accepts.

use std::borrow::Cow;

use jiff::Timestamp;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::entry::{Entry, canonical_timestamp};
use crate::message::{Content, ContentPart, FunctionCall, Message, Role, ToolCall};

/// Decodes entry lines; keeps one buffer for unescaping between lines.
#[derive(Default)]
pub(crate) struct EntryDecoder {
    /// Unescaped text of the string being decoded.
    scratch: Vec<u8>,
}

impl EntryDecoder {
    /// Decodes the entry line that starts at `bytes[start]` and ends at the next
    /// `\n` (or the end of `bytes`): the entry and where the line ends. `None` when
    /// the fast path does not apply (the caller then finds the line's end and uses
    /// `serde_json::from_slice::<Entry>`). Finding the end while decoding saves a
    /// pass over the bytes.
    pub(crate) fn decode_line(&mut self, bytes: &[u8], start: usize) -> Option<(Entry, usize)> {
        let mut parser = Parser {
            bytes,
            start,
            pos: start,
            line_end: None,
            scratch: &mut self.scratch,
        };
        parser.skip_ws();
        let entry = parser.entry()?;
        parser.skip_ws();
        match bytes.get(parser.pos) {
            None | Some(b'\n') => Some((entry, parser.pos)),
            Some(_) => None,
        }
    }
}

/// [`EntryDecoder::decode_line`] of a whole line (no `\n` in it), with a fresh decoder.
#[cfg(test)]
pub(crate) fn decode_entry(line: &[u8]) -> Option<Entry> {
    EntryDecoder::default()
        .decode_line(line, 0)
        .and_then(|(entry, end)| (end == line.len()).then_some(entry))
}

/// Nesting (objects and arrays, the entry itself included) past which values are left
/// to serde's decoder: serde_json refuses 128 levels, and a value handed to it
/// here is counted from zero again.
const MAX_NESTING: usize = 100;

/// A JSON string's text: a slice of the line when it has no escapes, else the first
/// bytes of the scratch buffer. Not yet checked to be UTF-8.
enum Text<'a> {
    Raw(&'a [u8]),
    Unescaped(usize),
}

/// Reads one line of `bytes`, from `start`.
struct Parser<'a, 's> {
    bytes: &'a [u8],
    /// Where the line starts.
    start: usize,
    pos: usize,
    /// Where the line's `\n` is (or the end of `bytes`), once asked for.
    line_end: Option<usize>,
    scratch: &'s mut Vec<u8>,
}

/// Bytes that end a run of plain string text: `"`, `\` and the control characters
/// (which JSON forbids raw inside strings).
fn is_special(byte: u8) -> bool {
    byte == b'"' || byte == b'\\' || byte < 0x20
}

const ONES: u64 = 0x0101_0101_0101_0101;

/// A mask with the high bit set in the lowest byte of `word` that [`is_special`]
/// (and possibly in higher bytes: only the lowest set one is exact); 0 when none is.
fn special_mask(word: u64) -> u64 {
    // The zero-byte test `(x - 0x01..) & !x & 0x80..`, for `"`, `\` and bytes below
    // 0x20: a false mark needs a borrow, and borrows only start at a true mark, so
    // false marks only appear above the lowest true one.
    let quote = word ^ (ONES * u64::from(b'"'));
    let backslash = word ^ (ONES * u64::from(b'\\'));
    let control = word.wrapping_sub(ONES * 0x20) & !word;
    let quote = quote.wrapping_sub(ONES) & !quote;
    let backslash = backslash.wrapping_sub(ONES) & !backslash;
    (control | quote | backslash) & (ONES * 0x80)
}

/// The 8 bytes of `word` as a little-endian number (`word` has exactly 8).
fn load(word: &[u8]) -> u64 {
    let mut lanes = [0u8; 8];
    lanes.copy_from_slice(word);
    u64::from_le_bytes(lanes)
}

/// The index of the first special byte at or after `at`, or `bytes.len()`.
fn skip_plain(bytes: &[u8], mut at: usize) -> usize {
    while let Some(word) = bytes.get(at..at + 8) {
        let mask = special_mask(load(word));
        if mask != 0 {
            return at + (mask.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    while at < bytes.len() && !is_special(bytes[at]) {
        at += 1;
    }
    at
}

/// `bytes` as text, if they are UTF-8.
fn utf8(bytes: &[u8]) -> Result<&str, simdutf8::basic::Utf8Error> {
    simdutf8::basic::from_utf8(bytes)
}

/// In [`ESCAPES`]: the escape is invalid.
const INVALID: u8 = 0xff;
/// In [`ESCAPES`]: a `\u` escape.
const UNICODE: u8 = 0xfe;

/// What the byte after a backslash stands for: a table, not a `match`, because
/// escapes come every few bytes in code and logs and a jump table mispredicts.
const ESCAPES: [u8; 256] = {
    let mut table = [INVALID; 256];
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table[b'/' as usize] = b'/';
    table[b'b' as usize] = 0x08;
    table[b'f' as usize] = 0x0c;
    table[b'n' as usize] = b'\n';
    table[b'r' as usize] = b'\r';
    table[b't' as usize] = b'\t';
    table[b'u' as usize] = UNICODE;
    table
};

/// A key as text for an `extra` map; `None` when it is not UTF-8 (serde_json refuses
/// the line then).
fn key_text(key: Cow<'_, [u8]>) -> Option<String> {
    match key {
        Cow::Borrowed(raw) => utf8(raw).ok().map(str::to_owned),
        Cow::Owned(bytes) => String::from_utf8(bytes).ok(),
    }
}

/// Grows `scratch` (doubling) so that it holds 16 bytes past `out`.
fn make_room(scratch: &mut Vec<u8>, out: usize) {
    if scratch.len() < out + 16 {
        let len = (out + 16).max(scratch.len() * 2).max(1024);
        scratch.resize(len, 0);
    }
}

/// The value of four hex digits, as serde_json reads them.
fn hex4(digits: &[u8]) -> Option<u32> {
    let mut value = 0;
    for &digit in digits {
        value = value * 16 + char::from(digit).to_digit(16)?;
    }
    Some(value)
}

impl<'a> Parser<'a, '_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.pos += 1;
        Some(byte)
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.next()? == byte).then_some(())
    }

    /// Skips JSON whitespace: what serde_json skips, but `\n`, which ends the line.
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// Where the line's `\n` is, or the end of the bytes.
    fn line_end(&mut self) -> usize {
        *self.line_end.get_or_insert_with(|| {
            memchr::memchr(b'\n', &self.bytes[self.start..])
                .map_or(self.bytes.len(), |newline| self.start + newline)
        })
    }

    fn null(&mut self) -> Option<()> {
        if self.bytes.get(self.pos..self.pos + 4)? == b"null" {
            self.pos += 4;
            Some(())
        } else {
            None
        }
    }

    /// Reads a string, quotes included, validating and unescaping it as serde_json
    /// does (escapes, `\u` surrogate pairs, no raw control characters); UTF-8 is
    /// checked by the caller, on the unescaped text as serde_json does.
    fn text(&mut self) -> Option<Text<'a>> {
        self.eat(b'"')?;
        let bytes = self.bytes;
        let start = self.pos;
        let mut at = skip_plain(bytes, start);
        match bytes.get(at)? {
            b'"' => {
                self.pos = at + 1;
                return Some(Text::Raw(&bytes[start..at]));
            }
            b'\\' => {}
            _ => return None,
        }
        let scratch = &mut *self.scratch;
        let mut out = at - start;
        make_room(scratch, out);
        scratch[..out].copy_from_slice(&bytes[start..at]);
        loop {
            // `at` is at a special byte; `scratch` has room for a word past `out`.
            match bytes[at] {
                b'"' => {
                    self.pos = at + 1;
                    return Some(Text::Unescaped(out));
                }
                b'\\' => match ESCAPES[usize::from(*bytes.get(at + 1)?)] {
                    UNICODE => {
                        let (ch, len) = unicode_escape(&bytes[at..])?;
                        // `\uXXXX` is 6 bytes and becomes at most 3 (4 for a pair,
                        // which is 12), so this stays behind `at`.
                        out += ch.encode_utf8(&mut scratch[out..]).len();
                        at += len;
                    }
                    INVALID => return None,
                    short => {
                        scratch[out] = short;
                        out += 1;
                        at += 2;
                    }
                },
                _ => return None,
            }
            // Copy the plain run that follows a word at a time; what lands past the
            // run is overwritten next.
            loop {
                make_room(scratch, out);
                let Some(word) = bytes.get(at..at + 8) else {
                    while at < bytes.len() && !is_special(bytes[at]) {
                        scratch[out] = bytes[at];
                        out += 1;
                        at += 1;
                    }
                    if at == bytes.len() {
                        return None;
                    }
                    break;
                };
                scratch[out..out + 8].copy_from_slice(word);
                let mask = special_mask(load(word));
                if mask == 0 {
                    out += 8;
                    at += 8;
                } else {
                    let run = (mask.trailing_zeros() / 8) as usize;
                    out += run;
                    at += run;
                    break;
                }
            }
        }
    }

    /// The text of a string read by [`Parser::text`].
    fn as_str<'t>(&'t self, text: Text<'a>) -> Option<&'t str>
    where
        'a: 't,
    {
        match text {
            Text::Raw(raw) => utf8(raw).ok(),
            Text::Unescaped(len) => utf8(&self.scratch[..len]).ok(),
        }
    }

    /// A uuid string, in any of the forms `Uuid`'s `FromStr` reads.
    fn uuid(&mut self) -> Option<Uuid> {
        match self.text()? {
            // Only ASCII parses: no need to check UTF-8 first.
            Text::Raw(raw) => Uuid::try_parse_ascii(raw).ok(),
            text => Uuid::try_parse(self.as_str(text)?).ok(),
        }
    }

    /// A timestamp string, as `Timestamp`'s `FromStr` reads it.
    fn timestamp(&mut self) -> Option<Timestamp> {
        let text = self.text()?;
        if let Text::Raw(raw) = text
            && let Some(ts) = canonical_timestamp(raw)
        {
            return Some(ts);
        }
        self.as_str(text)?.parse().ok()
    }

    /// A string as owned text, allocated at its exact size.
    fn string(&mut self) -> Option<String> {
        self.with_str(str::to_owned)
    }

    /// Calls `f` with the text of a string.
    fn with_str<R>(&mut self, f: impl FnOnce(&str) -> R) -> Option<R> {
        let text = self.text()?;
        Some(f(self.as_str(text)?))
    }

    /// An object key, not yet checked to be UTF-8 (known keys are matched as bytes):
    /// borrowed from the line when it has no escapes.
    fn key(&mut self) -> Option<Cow<'a, [u8]>> {
        match self.text()? {
            Text::Raw(raw) => Some(Cow::Borrowed(raw)),
            Text::Unescaped(len) => Some(Cow::Owned(self.scratch[..len].to_vec())),
        }
    }

    /// `null` as `None`, a string as its text.
    fn optional_string(&mut self) -> Option<Option<String>> {
        if self.peek()? == b'n' {
            self.null()?;
            Some(None)
        } else {
            self.string().map(Some)
        }
    }

    /// Walks an object, calling `field` with each key once the parser is at its value
    /// (which `field` must consume).
    fn object(
        &mut self,
        mut field: impl FnMut(&mut Self, Cow<'a, [u8]>) -> Option<()>,
    ) -> Option<()> {
        self.eat(b'{')?;
        self.skip_ws();
        if self.peek()? == b'}' {
            self.pos += 1;
            return Some(());
        }
        loop {
            let key = self.key()?;
            self.skip_ws();
            self.eat(b':')?;
            self.skip_ws();
            field(self, key)?;
            self.skip_ws();
            match self.next()? {
                b',' => self.skip_ws(),
                b'}' => return Some(()),
                _ => return None,
            }
        }
    }

    /// A value decoded by serde_json (unknown fields, content parts); `depth` is how
    /// many objects and arrays enclose it.
    fn serde_value<T: DeserializeOwned>(&mut self, depth: usize) -> Option<T> {
        let end = self.line_end();
        let rest = &self.bytes[self.pos..end];
        let mut values = serde_json::Deserializer::from_slice(rest).into_iter::<T>();
        let value = values.next()?.ok()?;
        let used = values.byte_offset();
        // Every bracket counts as a level, even inside strings: an upper bound.
        let nesting = memchr::memchr2_iter(b'{', b'[', &rest[..used]).count();
        if depth + nesting >= MAX_NESTING {
            return None;
        }
        self.pos += used;
        Some(value)
    }

    fn entry(&mut self) -> Option<Entry> {
        let mut uuid = None;
        let mut ts = None;
        let mut kind = None;
        let mut message = None;
        let mut extra = Map::new();
        self.object(|p, key| {
            match &*key {
                b"uuid" if uuid.is_none() => uuid = Some(p.uuid()?),
                b"ts" if ts.is_none() => ts = Some(p.timestamp()?),
                b"kind" if kind.is_none() => kind = Some(p.optional_string()?),
                b"message" if message.is_none() => {
                    message = Some(if p.peek()? == b'n' {
                        p.null()?;
                        None
                    } else {
                        Some(p.message()?)
                    });
                }
                // A duplicate: serde's decoder refuses it.
                b"uuid" | b"ts" | b"kind" | b"message" => return None,
                _ => {
                    let value = p.serde_value(1)?;
                    extra.insert(key_text(key)?, value);
                }
            }
            Some(())
        })?;
        Some(Entry {
            uuid: uuid?,
            ts: ts?,
            kind: kind.flatten(),
            message: message.flatten(),
            extra,
        })
    }

    fn message(&mut self) -> Option<Message> {
        let mut role = None;
        let mut content = None;
        let mut tool_calls = None;
        let mut tool_call_id = None;
        let mut extra = Map::new();
        self.object(|p, key| {
            match &*key {
                b"role" if role.is_none() => role = Some(p.with_str(|text| Role::from(text))?),
                b"content" if content.is_none() => {
                    content = Some(match p.peek()? {
                        b'"' => Some(Content::Text(p.string()?)),
                        b'[' => Some(Content::Parts(p.serde_value::<Vec<ContentPart>>(2)?)),
                        _ => {
                            p.null()?;
                            None
                        }
                    });
                }
                b"tool_calls" if tool_calls.is_none() => {
                    tool_calls = Some(if p.peek()? == b'n' {
                        p.null()?;
                        None
                    } else {
                        Some(p.tool_calls()?)
                    });
                }
                b"tool_call_id" if tool_call_id.is_none() => {
                    tool_call_id = Some(p.optional_string()?)
                }
                b"role" | b"content" | b"tool_calls" | b"tool_call_id" => return None,
                _ => {
                    let value = p.serde_value(2)?;
                    extra.insert(key_text(key)?, value);
                }
            }
            Some(())
        })?;
        Some(Message {
            role: role?,
            content: content.flatten(),
            tool_calls: tool_calls.flatten(),
            tool_call_id: tool_call_id.flatten(),
            extra,
        })
    }

    fn tool_calls(&mut self) -> Option<Vec<ToolCall>> {
        self.eat(b'[')?;
        self.skip_ws();
        // Sized for the usual single call (a growing Vec would start at four).
        let mut calls = Vec::with_capacity(1);
        if self.peek()? == b']' {
            self.pos += 1;
            return Some(Vec::new());
        }
        loop {
            calls.push(self.tool_call()?);
            self.skip_ws();
            match self.next()? {
                b',' => self.skip_ws(),
                b']' => return Some(calls),
                _ => return None,
            }
        }
    }

    fn tool_call(&mut self) -> Option<ToolCall> {
        let mut id = None;
        let mut kind = None;
        let mut function = None;
        let mut extra = Map::new();
        self.object(|p, key| {
            match &*key {
                b"id" if id.is_none() => id = Some(p.string()?),
                b"type" if kind.is_none() => kind = Some(p.string()?),
                b"function" if function.is_none() => function = Some(p.function()?),
                b"id" | b"type" | b"function" => return None,
                _ => {
                    let value = p.serde_value(4)?;
                    extra.insert(key_text(key)?, value);
                }
            }
            Some(())
        })?;
        Some(ToolCall {
            id: id.unwrap_or_default(),
            kind: kind.unwrap_or_else(|| "function".to_owned()),
            function: function?,
            extra,
        })
    }

    fn function(&mut self) -> Option<FunctionCall> {
        let mut name = None;
        let mut arguments = None;
        let mut extra = Map::new();
        self.object(|p, key| {
            match &*key {
                b"name" if name.is_none() => name = Some(p.string()?),
                b"arguments" if arguments.is_none() => {
                    // As serde's decoder: text stays text, null is empty, anything
                    // else is re-encoded as JSON text.
                    arguments = Some(match p.peek()? {
                        b'"' => p.string()?,
                        b'n' => {
                            p.null()?;
                            String::new()
                        }
                        _ => p.serde_value::<Value>(5)?.to_string(),
                    });
                }
                b"name" | b"arguments" => return None,
                _ => {
                    let value = p.serde_value(5)?;
                    extra.insert(key_text(key)?, value);
                }
            }
            Some(())
        })?;
        Some(FunctionCall {
            name: name.unwrap_or_default(),
            arguments: arguments.unwrap_or_default(),
            extra,
        })
    }
}

/// Decodes the `\uXXXX` escape (or surrogate pair) at the start of `bytes` as
/// serde_json does for strings: a lone or reversed surrogate is an error. Returns the
/// character and the bytes used.
fn unicode_escape(bytes: &[u8]) -> Option<(char, usize)> {
    let high = hex4(bytes.get(2..6)?)?;
    if !(0xD800..=0xDFFF).contains(&high) {
        return Some((char::from_u32(high)?, 6));
    }
    if high >= 0xDC00 || bytes.get(6..8)? != b"\\u" {
        return None;
    }
    let low = hex4(bytes.get(8..12)?)?;
    if !(0xDC00..=0xDFFF).contains(&low) {
        return None;
    }
    let code = 0x1_0000 + ((high - 0xD800) << 10) + (low - 0xDC00);
    Some((char::from_u32(code)?, 12))
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
    fn fast_decoder_matches_the_serde_one() {
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
    pub(super) fn piece() -> impl Strategy<Value = String> {
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
        /// itself: it yields serde's entry, or nothing (and then serde's decoder is
        /// used); never a different entry.
        #[test]
        fn fast_decoder_equals_the_serde_one_on_any_strings(
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

        /// Entries this crate writes, with any text and any unknown fields, take the
        /// fast path (and decode as serde's decoder does: floats in `extra` are
        /// serde_json's to round, not exactly).
        #[test]
        fn written_entries_round_trip_through_the_fast_decoder(
            text in "\\PC*|[\\x00-\\x7f]*",
            arguments in "\\PC*",
            extra in proptest::collection::vec(("\\PC{0,6}", json_value()), 0..3),
        ) {
            let extra: Map<String, Value> = extra.into_iter().collect();
            let mut with_extra = Message::assistant(text.clone());
            with_extra.extra = extra.clone();
            let mut call = ToolCall::function("c1", "f", arguments.clone());
            call.extra = extra.clone();
            call.function.extra = extra.clone();
            let mut entry_extra = Entry::message(Message::user(text.clone()));
            entry_extra.extra = extra.clone();
            for entry in [
                Entry::message(Message::user(text.clone())),
                Entry::message(Message::system(text.clone())),
                Entry::message(Message::assistant(text.clone())),
                Entry::message(Message::assistant_tool_calls(
                    Some(text.clone()),
                    vec![ToolCall::function("c1", "f", arguments.clone())],
                )),
                Entry::message(Message::assistant_tool_calls(None, vec![call.clone(), call])),
                Entry::message(Message::tool("c1", text.clone())),
                Entry::message(with_extra),
                Entry::other(text.clone(), extra.clone()),
                entry_extra,
            ] {
                let line = serde_json::to_vec(&entry).unwrap();
                let serde = serde_json::from_slice::<Entry>(&line).unwrap();
                prop_assert_eq!(decode_entry(&line), Some(serde));
            }
        }
    }

    /// Any JSON value, as this crate would hold one in an `extra` map.
    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            "\\PC{0,8}|[\\x00-\\x7f]{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::vec(("\\PC{0,6}", inner), 0..4)
                    .prop_map(|fields| Value::Object(fields.into_iter().collect())),
            ]
        })
    }
}

#[cfg(test)]
mod shapes {
    //! The fast decoder against serde's on lines of every shape (see
    //! [`crate::store::decode::lines`]).
    use proptest::prelude::*;
    use proptest::sample::Index;

    use super::*;
    use crate::store::decode::lines::line;

    /// The fast decoder's answer, checked against serde's: the same entry, or none only
    /// when serde's decoder refuses the line too.
    fn check(line: &[u8]) -> Result<Option<Entry>, TestCaseError> {
        let slow = serde_json::from_slice::<Entry>(line).ok();
        let fast = decode_entry(line);
        let text = String::from_utf8_lossy(line);
        prop_assert_eq!(&fast, &slow, "{}", text);
        Ok(fast)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(600))]

        /// Any line, of any shape: the fast decoder returns exactly what serde's
        /// decoder returns (so it never needs the fallback for a line serde accepts).
        #[test]
        fn fast_decoder_equals_the_serde_one_on_any_line(line in line()) {
            check(&line)?;
        }

        /// Lines cut anywhere: no entry, or serde's.
        #[test]
        fn fast_decoder_equals_the_serde_one_on_truncated_lines(
            line in line(),
            cut in any::<Index>(),
        ) {
            check(&line[..cut.index(line.len() + 1)])?;
        }
    }

    /// The generator makes lines serde's decoder accepts, with every feature the
    /// fast decoder handles itself, often enough for the properties to mean something.
    #[test]
    fn generated_lines_are_often_entries() {
        use proptest::strategy::ValueTree;
        use proptest::test_runner::TestRunner;
        let mut runner = TestRunner::deterministic();
        let strategy = line();
        let (mut accepted, mut extra, mut parts, mut calls) = (0, 0, 0, 0);
        for _ in 0..2000 {
            let line = strategy.new_tree(&mut runner).unwrap().current();
            let Some(entry) = decode_entry(&line) else {
                continue;
            };
            accepted += 1;
            extra += usize::from(!entry.extra.is_empty());
            if let Some(message) = &entry.message {
                parts += usize::from(matches!(message.content, Some(Content::Parts(_))));
                calls += usize::from(!message.calls().is_empty());
            }
        }
        assert!(
            accepted >= 400 && extra >= 40 && parts >= 20 && calls >= 20,
            "of 2000 lines, {accepted} accepted: {extra} with unknown fields, \
             {parts} with content parts, {calls} with tool calls"
        );
    }
}
