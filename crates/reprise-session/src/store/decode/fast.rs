//! The fast decoder: reads an entry line in one pass, producing exactly what `Entry`'s
//! derived `Deserialize` produces (the [module above](super) says why both exist).
//!
//! The derived impls use `#[serde(flatten)]` (to keep unknown fields) and an untagged
//! `Content`, and serde_json decodes each string escape by escape into a buffer that
//! starts empty for every line. This decoder walks the line once: it matches the known
//! keys as bytes, decodes each string in one pass (unescaping 8 bytes at a time into a
//! buffer kept between lines, checking UTF-8 with SIMD) and allocates it at its final
//! size, reads the timestamps reprise writes without a general parser, finds the
//! line's end while decoding, and hands anything else (unknown fields' values, content
//! parts, non-string arguments) to serde_json. It gives up on anything the derived
//! decoder refuses (a duplicate field, a type mismatch, bad syntax or escapes, invalid
//! UTF-8) and on values nested too deep; the caller then falls back to the derived
//! decoder, so the two can only differ in speed. The property tests below check that
//! they never differ, and that this decoder takes every line of every shape they
//! generate that the derived decoder accepts.

use std::borrow::Cow;

use jiff::Timestamp;
use reprise_message::{
    Content, ContentPart, Entry, FunctionCall, Message, Role, StoredUsage, TokenCounts, ToolCall,
};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use uuid::Uuid;

/// Decodes entry lines; keeps one buffer for unescaping between lines.
#[derive(Default)]
pub(crate) struct EntryDecoder {
    /// Unescaped text of the string being decoded.
    scratch: Vec<u8>,
    /// Whether an entry's `model` field, when a string, is checked and left out.
    lean: bool,
}

impl EntryDecoder {
    /// A decoder; with `lean`, one that leaves out each entry's `model` (see
    /// `read_view_beneath`).
    pub(crate) fn new(lean: bool) -> EntryDecoder {
        EntryDecoder {
            scratch: Vec::new(),
            lean,
        }
    }

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
            lean: self.lean,
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
/// to the derived decoder: serde_json refuses 128 levels, and a value handed to it
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
    /// See [`EntryDecoder::lean`].
    lean: bool,
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

/// Bytes tested at once for a special one before the words are looked at.
const BLOCK: usize = 32;

/// Whether a block holds a special byte: a loop of known length without an early
/// exit, which the compiler turns into a few vector instructions. Text of a few
/// hundred bytes went word by word at about 1.5 instructions a byte.
fn block_has_special(block: &[u8; BLOCK]) -> bool {
    // `|`, not `||`: a test that may stop early is not vectorized.
    block.iter().fold(false, |any, &byte| {
        any | (byte == b'"') | (byte == b'\\') | (byte < 0x20)
    })
}

/// The index of the first special byte at or after `at`, or `bytes.len()`.
fn skip_plain(bytes: &[u8], mut at: usize) -> usize {
    // Keys and most short values end within a word: looked at first.
    if let Some(word) = bytes.get(at..at + 8) {
        let mask = special_mask(load(word));
        if mask != 0 {
            return at + (mask.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    while let Some(block) = bytes.get(at..at + BLOCK) {
        let Ok(block) = <&[u8; BLOCK]>::try_from(block) else {
            break;
        };
        if block_has_special(block) {
            break;
        }
        at += BLOCK;
    }
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
/// A map of exactly `pairs` (a later duplicate key replaces the value, as serde's
/// decoder does). Built from the pairs rather than key by key: a map grown one key
/// at a time keeps room for more, and a loaded session holds one per entry with
/// `usage`, one per `usage`, and so on.
fn exact_map(pairs: Vec<(String, Value)>) -> Map<String, Value> {
    if pairs.is_empty() {
        return Map::new();
    }
    let mut map = Map::with_capacity(pairs.len());
    map.extend(pairs);
    map
}

/// the line then).
fn key_text(key: Cow<'_, [u8]>) -> Option<String> {
    match key {
        Cow::Borrowed(raw) => utf8(raw).ok().map(str::to_owned),
        Cow::Owned(bytes) => String::from_utf8(bytes).ok(),
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`, the form this crate writes, read without jiff's
/// general parser (which took a tenth of the decoding time); `None` for anything
/// else, which jiff then reads. Gives what jiff gives.
fn canonical_timestamp(text: &[u8]) -> Option<Timestamp> {
    let [
        y0,
        y1,
        y2,
        y3,
        b'-',
        m0,
        m1,
        b'-',
        d0,
        d1,
        b'T',
        h0,
        h1,
        b':',
        n0,
        n1,
        b':',
        s0,
        s1,
        b'.',
        f0,
        f1,
        f2,
        b'Z',
    ] = *text
    else {
        return None;
    };
    let number = |digits: &[u8]| {
        digits.iter().try_fold(0i64, |value, digit| {
            digit
                .is_ascii_digit()
                .then(|| value * 10 + i64::from(digit - b'0'))
        })
    };
    let year = number(&[y0, y1, y2, y3])?;
    let (month, day) = (number(&[m0, m1])?, number(&[d0, d1])?);
    let (hour, minute) = (number(&[h0, h1])?, number(&[n0, n1])?);
    let (second, millis) = (number(&[s0, s1])?, number(&[f0, f1, f2])?);
    // jiff reads a leap second (60) as 59: that and other oddities are left to it.
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    // Checks the day against the month's length.
    jiff::civil::Date::new(
        i16::try_from(year).ok()?,
        i8::try_from(month).ok()?,
        i8::try_from(day).ok()?,
    )
    .ok()?;
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second;
    Timestamp::new(seconds, i32::try_from(millis * 1_000_000).ok()?).ok()
}

/// Days from 1970-01-01 to a valid proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
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

    /// A value of an `extra` map (or non-string arguments), as serde_json builds it:
    /// strings, literals, integers, arrays and objects are read here, other numbers
    /// (fractions, exponents, integers past 64 bits) by serde_json. The fields a
    /// server adds (`usage` on every reply) are objects of integers: read by serde_json
    /// they made a chat-written session load 1.7x slower than one without them.
    /// `depth` is how many objects and arrays enclose the value.
    fn value(&mut self, depth: usize) -> Option<Value> {
        match self.peek()? {
            b'"' => self.string().map(Value::String),
            b'{' => {
                if depth + 1 >= MAX_NESTING {
                    return None;
                }
                let mut pairs = Vec::new();
                self.object(|p, key| {
                    let value = p.value(depth + 1)?;
                    pairs.push((key_text(key)?, value));
                    Some(())
                })?;
                Some(Value::Object(exact_map(pairs)))
            }
            b'[' => {
                if depth + 1 >= MAX_NESTING {
                    return None;
                }
                self.array(depth + 1).map(Value::Array)
            }
            b't' => self.literal(b"true", Value::Bool(true)),
            b'f' => self.literal(b"false", Value::Bool(false)),
            b'n' => self.literal(b"null", Value::Null),
            b'-' | b'0'..=b'9' => match self.integer() {
                Some(number) => Some(Value::Number(number)),
                None => self.serde_value(depth),
            },
            _ => None,
        }
    }

    /// The elements of an array at `depth`.
    fn array(&mut self, depth: usize) -> Option<Vec<Value>> {
        self.eat(b'[')?;
        self.skip_ws();
        let mut items = Vec::new();
        if self.peek()? == b']' {
            self.pos += 1;
            return Some(items);
        }
        loop {
            items.push(self.value(depth)?);
            self.skip_ws();
            match self.next()? {
                b',' => self.skip_ws(),
                b']' => return Some(items),
                _ => return None,
            }
        }
    }

    fn literal(&mut self, text: &[u8], value: Value) -> Option<Value> {
        if self.bytes.get(self.pos..self.pos + text.len())? == text {
            self.pos += text.len();
            Some(value)
        } else {
            None
        }
    }

    /// An integer that serde_json reads as one: `0` or digits not starting with `0`,
    /// after an optional `-`, with no fraction or exponent, that fits in a `u64`
    /// (an `i64` when negative). `None` (nothing consumed) for anything else, which
    /// serde_json then reads or refuses: `-0` and overflowing integers are floats to
    /// it, and `01` is an error.
    fn integer(&mut self) -> Option<serde_json::Number> {
        let bytes = self.bytes;
        let negative = self.peek()? == b'-';
        let first = self.pos + usize::from(negative);
        let mut at = first;
        let mut magnitude: u64 = 0;
        while let Some(digit @ b'0'..=b'9') = bytes.get(at).copied() {
            magnitude = magnitude
                .checked_mul(10)?
                .checked_add(u64::from(digit - b'0'))?;
            at += 1;
        }
        let digits = at - first;
        if digits == 0 || (digits > 1 && bytes[first] == b'0') {
            return None;
        }
        if let Some(b'.' | b'e' | b'E') = bytes.get(at) {
            return None;
        }
        let number = if negative {
            if magnitude == 0 {
                return None;
            }
            let value = match i64::try_from(magnitude) {
                Ok(positive) => -positive,
                Err(_) if magnitude == 1 << 63 => i64::MIN,
                Err(_) => return None,
            };
            serde_json::Number::from(value)
        } else {
            serde_json::Number::from(magnitude)
        };
        self.pos = at;
        Some(number)
    }

    fn entry(&mut self) -> Option<Entry> {
        let mut uuid = None;
        let mut ts = None;
        let mut kind = None;
        let mut message = None;
        let mut usage = None;
        let mut extra = Vec::new();
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
                b"usage" if usage.is_none() => usage = Some(p.usage()?),
                // A duplicate: the derived decoder refuses it.
                b"uuid" | b"ts" | b"kind" | b"message" | b"usage" => return None,
                // Read as serde's decoder reads it (valid text), and dropped.
                b"model" if p.lean && p.peek()? == b'"' => p.with_str(|_| ())?,
                _ => {
                    let value = p.value(1)?;
                    extra.push((key_text(key)?, value));
                }
            }
            Some(())
        })?;
        Some(Entry {
            uuid: uuid?,
            ts: ts?,
            kind: kind.flatten(),
            message: message.flatten(),
            usage,
            extra: exact_map(extra).into(),
        })
    }

    /// An entry's `usage`: the three counts reprise writes read as numbers without a
    /// map in between, anything else as a value.
    fn usage(&mut self) -> Option<StoredUsage> {
        let start = self.pos;
        if let Some(counts) = self.token_counts() {
            return Some(StoredUsage::Counts(counts));
        }
        self.pos = start;
        self.value(1).map(StoredUsage::from)
    }

    /// `{"prompt_tokens":…,"completion_tokens":…,"total_tokens":…}`, exactly those
    /// keys in that order with unsigned integers; `None` for anything else.
    fn token_counts(&mut self) -> Option<TokenCounts> {
        const KEYS: [&[u8]; 3] = [b"prompt_tokens", b"completion_tokens", b"total_tokens"];
        let mut numbers = [0u64; 3];
        let mut read = 0;
        self.object(|p, key| {
            if *KEYS.get(read)? != &*key {
                return None;
            }
            numbers[read] = p.integer()?.as_u64()?;
            read += 1;
            Some(())
        })?;
        let [prompt_tokens, completion_tokens, total_tokens] = numbers;
        (read == KEYS.len()).then_some(TokenCounts {
            prompt_tokens,
            completion_tokens,
            total_tokens,
        })
    }

    fn message(&mut self) -> Option<Message> {
        let mut role = None;
        let mut content = None;
        let mut tool_calls = None;
        let mut tool_call_id = None;
        let mut extra = Vec::new();
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
                    let value = p.value(2)?;
                    extra.push((key_text(key)?, value));
                }
            }
            Some(())
        })?;
        Some(Message {
            role: role?,
            content: content.flatten(),
            tool_calls: tool_calls.flatten(),
            tool_call_id: tool_call_id.flatten(),
            extra: exact_map(extra).into(),
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
        let mut extra = Vec::new();
        self.object(|p, key| {
            match &*key {
                b"id" if id.is_none() => id = Some(p.string()?),
                b"type" if kind.is_none() => kind = Some(p.string()?),
                b"function" if function.is_none() => function = Some(p.function()?),
                b"id" | b"type" | b"function" => return None,
                _ => {
                    let value = p.value(4)?;
                    extra.push((key_text(key)?, value));
                }
            }
            Some(())
        })?;
        Some(ToolCall {
            id: id.unwrap_or_default(),
            kind: kind.unwrap_or_else(|| "function".to_owned()),
            function: function?,
            extra: exact_map(extra).into(),
        })
    }

    fn function(&mut self) -> Option<FunctionCall> {
        let mut name = None;
        let mut arguments = None;
        let mut extra = Vec::new();
        self.object(|p, key| {
            match &*key {
                b"name" if name.is_none() => name = Some(p.string()?),
                b"arguments" if arguments.is_none() => {
                    // As the derived decoder: text stays text, null is empty, anything
                    // else is re-encoded as JSON text.
                    arguments = Some(match p.peek()? {
                        b'"' => p.string()?,
                        b'n' => {
                            p.null()?;
                            String::new()
                        }
                        _ => p.value(5)?.to_string(),
                    });
                }
                b"name" | b"arguments" => return None,
                _ => {
                    let value = p.value(5)?;
                    extra.push((key_text(key)?, value));
                }
            }
            Some(())
        })?;
        Some(FunctionCall {
            name: name.unwrap_or_default(),
            arguments: arguments.unwrap_or_default().into(),
            extra: exact_map(extra).into(),
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

    /// The `usage` the chat stores with every reply, with the details servers add.
    fn with_usage(mut entry: Entry) -> Entry {
        entry.usage = Some(StoredUsage::from(serde_json::json!({
            "prompt_tokens": 1234,
            "completion_tokens": 56,
            "total_tokens": 1290,
            "prompt_tokens_details": {"cached_tokens": 1024},
            "timings": {"predicted_per_second": 41.5, "cache_n": 0}
        })));
        entry
    }

    #[test]
    fn a_lean_decoder_leaves_out_the_model_and_nothing_else() {
        let mut entry = Entry::message(Message::assistant("a \"reply\" of a few words"));
        entry.usage = Some(StoredUsage::Counts(TokenCounts {
            prompt_tokens: 1200,
            completion_tokens: 75,
            total_tokens: 1275,
        }));
        entry
            .extra
            .insert("model".into(), Value::String("qwen2.5:7b".into()));
        entry.extra.insert("interrupted".into(), Value::Bool(true));
        let line = serde_json::to_vec(&entry).unwrap();
        let (full, _) = EntryDecoder::new(false).decode_line(&line, 0).unwrap();
        assert_eq!(full, entry);
        let (lean, end) = EntryDecoder::new(true).decode_line(&line, 0).unwrap();
        assert_eq!(end, line.len());
        let mut expected = entry.clone();
        expected.extra.shift_remove("model");
        assert_eq!(lean, expected);
        // A model that is not text is kept; one that is not valid text is refused.
        let odd = String::from_utf8(line.clone())
            .unwrap()
            .replace("\"qwen2.5:7b\"", "{\"name\":\"q\"}");
        let (kept, _) = EntryDecoder::new(true)
            .decode_line(odd.as_bytes(), 0)
            .unwrap();
        assert_eq!(
            kept.extra.get("model"),
            Some(&serde_json::json!({"name": "q"}))
        );
        let bad = String::from_utf8(line)
            .unwrap()
            .replace("qwen2.5:7b", "\\x");
        assert!(
            EntryDecoder::new(true)
                .decode_line(bad.as_bytes(), 0)
                .is_none()
        );
    }

    /// The fast path reads `usage` itself: a line whose every value it reads needs no
    /// help from serde_json (checked by a line in which serde_json would fail).
    #[test]
    fn integers_objects_and_literals_need_no_serde_json() {
        let mut parser_input = br#"{"a":[1,-2,0,18446744073709551615,-9223372036854775808],"b":{"c":true,"d":null,"e":"x"}}"#.to_vec();
        // A `\n` right after the value: serde_json is never asked to read further.
        parser_input.push(b'\n');
        let mut scratch = Vec::new();
        let mut parser = Parser {
            bytes: &parser_input,
            start: 0,
            pos: 0,
            line_end: Some(0),
            scratch: &mut scratch,
            lean: false,
        };
        let value = parser.value(1).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"a":[1,-2,0,18446744073709551615u64,-9223372036854775808i64],"b":{"c":true,"d":null,"e":"x"}})
        );
        assert_eq!(parser.pos, parser_input.len() - 1);
    }

    #[test]
    fn numbers_serde_json_reads_differently_are_left_to_it() {
        for (text, expected) in [
            ("-0", serde_json::json!(-0.0)),
            (
                "18446744073709551616",
                serde_json::json!(18446744073709551616.0),
            ),
            (
                "-9223372036854775809",
                serde_json::json!(-9223372036854775809.0),
            ),
            ("1.5", serde_json::json!(1.5)),
            ("2e3", serde_json::json!(2000.0)),
        ] {
            let line = format!("{text}}}");
            let mut scratch = Vec::new();
            let mut parser = Parser {
                bytes: line.as_bytes(),
                start: 0,
                pos: 0,
                line_end: None,
                scratch: &mut scratch,
                lean: false,
            };
            assert!(parser.integer().is_none(), "{text}");
            assert_eq!(parser.pos, 0);
            assert_eq!(parser.value(1), Some(expected), "{text}");
        }
        let mut scratch = Vec::new();
        let mut parser = Parser {
            bytes: b"01}",
            start: 0,
            pos: 0,
            line_end: None,
            scratch: &mut scratch,
            lean: false,
        };
        assert_eq!(
            parser.value(1),
            None,
            "a leading zero is an error to serde_json"
        );
    }

    /// The counts reprise writes are held as numbers, anything else as written, and
    /// the fast path agrees with the derived decoder on each.
    #[test]
    fn usage_is_read_as_numbers_when_it_is_what_reprise_writes() {
        let counts = reprise_message::TokenCounts {
            prompt_tokens: 7,
            completion_tokens: 3,
            total_tokens: 10,
        };
        let head = r#"{"uuid":"0193c0e3-0000-7000-8000-000000000001","ts":"2026-11-30T10:04:51.002Z","message":{"role":"assistant","content":"ok"},"usage":"#;
        for (usage, held_as_counts) in [
            (
                r#"{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}"#,
                true,
            ),
            (
                r#"{ "prompt_tokens" : 7 , "completion_tokens":3,"total_tokens":10 }"#,
                true,
            ),
            (
                r#"{"completion_tokens":3,"prompt_tokens":7,"total_tokens":10}"#,
                false,
            ),
            (r#"{"prompt_tokens":7,"completion_tokens":3}"#, false),
            (
                r#"{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10,"x":1}"#,
                false,
            ),
            (
                r#"{"prompt_tokens":7,"completion_tokens":-3,"total_tokens":10}"#,
                false,
            ),
            (
                r#"{"prompt_tokens":7.0,"completion_tokens":3,"total_tokens":10}"#,
                false,
            ),
            ("null", false),
            ("[1,2]", false),
        ] {
            let line = format!("{head}{usage}}}");
            let fast = decode_entry(line.as_bytes()).expect(&line);
            let derived: Entry = serde_json::from_str(&line).unwrap();
            assert_eq!(fast, derived, "{line}");
            assert_eq!(
                fast.usage == Some(StoredUsage::Counts(counts)),
                held_as_counts,
                "{line}"
            );
            assert!(fast.extra.is_empty(), "{line}");
            let written = serde_json::to_value(&fast).unwrap();
            let read = serde_json::from_str::<Value>(&line).unwrap();
            assert_eq!(written, read, "{line}");
        }
        let twice = format!(r#"{head}null,"usage":null}}"#);
        assert!(decode_entry(twice.as_bytes()).is_none());
        assert!(serde_json::from_str::<Entry>(&twice).is_err());
    }

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
            with_usage(Entry::message(Message::assistant("done"))),
            with_usage(Entry::message(Message::assistant_tool_calls(
                None,
                vec![ToolCall::function("c2", "list_dir", "{}")],
            ))),
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

        /// Entries this crate writes, with any text and any unknown fields, take the
        /// fast path (and decode as the derived decoder does: floats in `extra` are
        /// serde_json's to round, not exactly).
        #[test]
        fn written_entries_round_trip_through_the_fast_decoder(
            text in "\\PC*|[\\x00-\\x7f]*",
            arguments in "\\PC*",
            extra in proptest::collection::vec(("\\PC{0,6}", json_value()), 0..3),
        ) {
            let extra: Map<String, Value> = extra.into_iter().collect();
            let mut with_extra = Message::assistant(text.clone());
            with_extra.extra = extra.clone().into();
            let mut call = ToolCall::function("c1", "f", arguments.clone());
            call.extra = extra.clone().into();
            call.function.extra = extra.clone().into();
            let mut entry_extra = Entry::message(Message::user(text.clone()));
            entry_extra.extra = extra.clone().into();
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
                let derived = serde_json::from_slice::<Entry>(&line).unwrap();
                prop_assert_eq!(decode_entry(&line), Some(derived));
            }
        }
    }

    proptest! {
        /// The shortcut for timestamps in the form this crate writes reads what jiff
        /// reads, for any instant in jiff's range.
        #[test]
        fn canonical_timestamps_read_as_jiff_reads_them(
            millis in -377_705_116_800_000i64..253_402_300_799_999,
        ) {
            let ts = Timestamp::from_millisecond(millis).unwrap();
            let text = format!("{ts:.3}");
            if text.len() == 24 {
                prop_assert_eq!(canonical_timestamp(text.as_bytes()), Some(ts));
            }
            prop_assert_eq!(text.parse::<Timestamp>().ok(), Some(ts));
        }

        /// Any digits in that form (bad months, days, hours, leap seconds): the
        /// shortcut gives jiff's timestamp, or leaves the text to jiff.
        #[test]
        fn canonical_timestamp_shortcut_never_differs_from_jiff(
            digits in proptest::collection::vec(0u8..10, 17),
            high in proptest::collection::vec(0u8..4, 6),
        ) {
            let d = |i: usize| char::from(b'0' + digits[i]);
            let h = |i: usize| char::from(b'0' + high[i]);
            let text = format!(
                "{}{}{}{}-{}{}-{}{}T{}{}:{}{}:{}{}.{}{}{}Z",
                d(0), d(1), d(2), d(3), h(0).min('1'), d(4), h(1), d(5), h(2).min('2'), d(6),
                h(3).min('6'), d(7), h(4).min('6'), d(8), d(9), d(10), d(11)
            );
            if let Some(ts) = canonical_timestamp(text.as_bytes()) {
                prop_assert_eq!(Some(ts), text.parse::<Timestamp>().ok(), "{}", text);
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
    //! Lines of every shape the derived decoder accepts or refuses: any key order,
    //! unknown fields at every level, whitespace between tokens, duplicate and
    //! escaped keys, every type for every field, odd strings, truncated lines.
    use proptest::option::weighted;
    use proptest::prelude::*;
    use proptest::sample::Index;

    use super::*;

    /// A JSON text to render with generated whitespace.
    #[derive(Clone, Debug)]
    enum Json {
        /// A literal, number or string, as JSON text.
        Raw(Vec<u8>),
        /// Keys as JSON text (quotes included).
        Object(Vec<(Vec<u8>, Json)>),
        Array(Vec<Json>),
    }

    fn raw(text: &str) -> Json {
        Json::Raw(text.as_bytes().to_vec())
    }

    fn space(ws: &[&str], at: &mut usize, out: &mut Vec<u8>) {
        *at += 1;
        out.extend_from_slice(ws[*at % ws.len()].as_bytes());
    }

    fn render(json: &Json, ws: &[&str], at: &mut usize, out: &mut Vec<u8>) {
        match json {
            Json::Raw(text) => out.extend_from_slice(text),
            Json::Object(fields) => {
                out.push(b'{');
                for (i, (key, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    space(ws, at, out);
                    out.extend_from_slice(key);
                    space(ws, at, out);
                    out.push(b':');
                    space(ws, at, out);
                    render(value, ws, at, out);
                    space(ws, at, out);
                }
                out.push(b'}');
            }
            Json::Array(items) => {
                out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    space(ws, at, out);
                    render(item, ws, at, out);
                    space(ws, at, out);
                }
                out.push(b']');
            }
        }
    }

    /// Whitespace between tokens: mostly none, as written, sometimes any of JSON's
    /// but `\n` (which ends a line).
    fn whitespace() -> impl Strategy<Value = Vec<&'static str>> {
        prop_oneof![
            3 => Just(vec![""]),
            1 => proptest::collection::vec(
                prop::sample::select(vec!["", "", " ", "\t", "\r  ", "\r"]),
                1..6,
            ),
        ]
    }

    /// Pieces of a string body that serde_json accepts: text, every escape.
    fn good_piece() -> BoxedStrategy<Vec<u8>> {
        prop_oneof![
            4 => "[a-z {}();:,.]{0,12}".prop_map(String::into_bytes),
            2 => r#"[^"\\\p{C}]{0,4}"#.prop_map(String::into_bytes),
            1 => prop::sample::select(vec![
                r#"\""#, r"\\", r"\/", r"\b", r"\f", r"\n", r"\r", r"\t", r"\u00e9",
                r"\u0000", r"\u001F", r"\uD83D\uDE00", r"\ud83c\udf89", r"\uFFFF", r"\u0022",
                r"\u005C", "é🎉", "\u{7f}",
            ])
            .prop_map(|piece| piece.as_bytes().to_vec()),
        ]
        .boxed()
    }

    /// Pieces of a string body that serde_json refuses: bad escapes, lone or
    /// reversed surrogates, raw control characters, invalid UTF-8.
    fn bad_piece() -> BoxedStrategy<Vec<u8>> {
        prop::sample::select(vec![
            &b"\\ud800"[..],
            b"\\udc00x",
            b"\\uD83D\\n",
            b"\\uDE00\\uD83D",
            b"\\uD83D\\uD83D",
            b"\\u12",
            b"\\u00",
            b"\\uzzzz",
            b"\\x",
            b"\\",
            b"\t",
            b"\n",
            b"\x01",
            b"\x1f",
            b"\xff",
            b"\xc3",
            b"\xed\xa0\x80",
            b"\xf0\x9f\x8e",
            b"\xc0\xaf",
        ])
        .prop_map(<[u8]>::to_vec)
        .boxed()
    }

    /// A string serde_json accepts (mostly) or refuses (sometimes).
    fn string() -> BoxedStrategy<Json> {
        let good = proptest::collection::vec(good_piece(), 0..6);
        let bad = (good.clone(), bad_piece(), good.clone())
            .prop_map(|(before, bad, after)| [before.concat(), bad, after.concat()].concat());
        prop_oneof![
            12 => good.prop_map(|pieces| pieces.concat()),
            1 => bad,
        ]
        .prop_map(|body| Json::Raw([b"\"", &body[..], b"\""].concat()))
        .boxed()
    }

    /// A plain string, or one of a few chosen texts.
    fn text_or(choices: &'static [&'static str]) -> BoxedStrategy<Json> {
        prop_oneof![
            3 => prop::sample::select(choices).prop_map(|text| raw(&format!("\"{text}\""))),
            1 => string(),
        ]
        .boxed()
    }

    /// Any JSON value (for unknown fields and type mismatches).
    fn value() -> BoxedStrategy<Json> {
        let leaf = prop_oneof![
            prop::sample::select(vec![
                "0",
                "-1",
                "2.5",
                "1e3",
                "-0.0",
                "18446744073709551616",
                "true",
                "false",
                "null",
                "1e400",
                "01",
                "tru",
            ])
            .prop_map(raw),
            string(),
        ];
        leaf.prop_recursive(3, 12, 3, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..3).prop_map(Json::Array),
                proptest::collection::vec((key(&["a", "b", "c"]), inner), 0..3)
                    .prop_map(Json::Object),
            ]
        })
        .boxed()
    }

    /// A key: one of `names`, sometimes with an escaped first letter, or any string.
    fn key(names: &'static [&'static str]) -> BoxedStrategy<Vec<u8>> {
        let name = prop::sample::select(names);
        prop_oneof![
            12 => name.clone().prop_map(|name| format!("\"{name}\"").into_bytes()),
            1 => name.prop_map(|name| {
                let first = name.chars().next().unwrap_or('x');
                format!("\"\\u{:04x}{}\"", u32::from(first), &name[first.len_utf8()..])
                    .into_bytes()
            }),
            1 => string().prop_map(|json| match json {
                Json::Raw(text) => text,
                _ => b"\"\"".to_vec(),
            }),
        ]
        .boxed()
    }

    /// An object with `known` fields (each sometimes left out), a few unknown ones,
    /// sometimes a duplicated field, in any order.
    fn object(
        known: Vec<(&'static str, BoxedStrategy<Json>)>,
        unknown: &'static [&'static str],
    ) -> BoxedStrategy<Json> {
        let known: Vec<_> = known
            .into_iter()
            .map(|(name, value)| {
                // Required fields are left out less often.
                let present = if matches!(name, "uuid" | "ts" | "role" | "function") {
                    0.97
                } else {
                    0.7
                };
                weighted(present, (key(Box::leak(Box::new([name]))), value))
            })
            .collect();
        (
            known,
            proptest::collection::vec((key(unknown), value()), 0..2),
            weighted(0.05, any::<Index>()),
        )
            .prop_flat_map(|(known, unknown, duplicate)| {
                let mut fields: Vec<_> = known.into_iter().flatten().chain(unknown).collect();
                if let Some(index) = duplicate
                    && !fields.is_empty()
                {
                    let field = fields[index.index(fields.len())].clone();
                    fields.push(field);
                }
                Just(fields).prop_shuffle().prop_map(Json::Object)
            })
            .boxed()
    }

    /// Mostly `good`, sometimes any value (a type mismatch, or a string).
    fn either(good: BoxedStrategy<Json>, weight: u32) -> BoxedStrategy<Json> {
        prop_oneof![weight * 3 => good, 1 => value()].boxed()
    }

    fn function() -> BoxedStrategy<Json> {
        let arguments = prop_oneof![
            2 => string(),
            1 => Just(raw("null")),
            2 => value(),
        ];
        object(
            vec![
                ("name", either(text_or(&["read_file", "f"]), 6)),
                ("arguments", arguments.boxed()),
            ],
            &["name2", "index", "arguments "],
        )
    }

    fn tool_call() -> BoxedStrategy<Json> {
        object(
            vec![
                ("id", either(text_or(&["call_1", ""]), 6)),
                ("type", either(text_or(&["function"]), 6)),
                ("function", either(function(), 8)),
            ],
            &["index", "x"],
        )
    }

    fn part() -> BoxedStrategy<Json> {
        object(
            vec![
                ("type", either(text_or(&["text", "image_url"]), 6)),
                (
                    "text",
                    prop_oneof![4 => string(), 1 => Just(raw("null"))].boxed(),
                ),
            ],
            &["image_url", "cache_control"],
        )
    }

    fn message() -> BoxedStrategy<Json> {
        let content = prop_oneof![
            4 => string(),
            1 => Just(raw("null")),
            2 => proptest::collection::vec(either(part(), 8), 0..3).prop_map(Json::Array),
            1 => value(),
        ];
        let tool_calls = prop_oneof![
            4 => proptest::collection::vec(either(tool_call(), 10), 0..3).prop_map(Json::Array),
            1 => Just(raw("null")),
            1 => value(),
        ];
        object(
            vec![
                (
                    "role",
                    either(
                        text_or(&["user", "assistant", "tool", "system", "developer"]),
                        8,
                    ),
                ),
                ("content", content.boxed()),
                ("tool_calls", tool_calls.boxed()),
                (
                    "tool_call_id",
                    either(
                        prop_oneof![3 => string(), 1 => Just(raw("null"))].boxed(),
                        8,
                    ),
                ),
            ],
            &["name", "reasoning_content", "uuid"],
        )
    }

    fn entry() -> BoxedStrategy<Json> {
        let uuid = prop::sample::select(vec![
            "\"0193c0de-0000-7000-8000-000000000001\"",
            "\"0193c0de-0000-7000-8000-000000000002\"",
            "\"0193c0de000070008000000000000003\"",
            "\"{0193c0de-0000-7000-8000-000000000004}\"",
            "\"urn:uuid:0193c0de-0000-7000-8000-000000000005\"",
            "\"0193c0de-0000-7000-8000-00000000000\\u0036\"",
        ])
        .prop_map(raw);
        let ts = prop::sample::select(vec![
            "\"2026-11-30T09:38:04.123Z\"",
            "\"2026-11-30T09:38:04Z\"",
            "\"2026-11-30T09:38:04.123456789+01:00\"",
            "\"2026-11-30T09:38:04.123\\u005a\"",
            "\"2026-11-30 09:38:04Z\"",
        ])
        .prop_map(raw);
        object(
            vec![
                ("uuid", either(uuid.boxed(), 12)),
                ("ts", either(ts.boxed(), 12)),
                (
                    "kind",
                    prop_oneof![3 => Just(raw("null")), 2 => text_or(&["compaction"]), 1 => value()]
                        .boxed(),
                ),
                (
                    "message",
                    prop_oneof![8 => message(), 1 => Just(raw("null")), 1 => value()].boxed(),
                ),
            ],
            &["role", "summary", "meta"],
        )
    }

    fn line() -> impl Strategy<Value = Vec<u8>> {
        (entry(), whitespace()).prop_map(|(entry, ws)| {
            let mut out = Vec::new();
            out.extend_from_slice(ws[0].as_bytes());
            render(&entry, &ws, &mut 0, &mut out);
            out.extend_from_slice(ws[ws.len() - 1].as_bytes());
            out
        })
    }

    /// The fast decoder's answer, checked against the derived decoder's: the same
    /// entry, or none only when the derived decoder refuses the line too.
    fn check(line: &[u8]) -> Result<Option<Entry>, TestCaseError> {
        let slow = serde_json::from_slice::<Entry>(line).ok();
        let fast = decode_entry(line);
        let text = String::from_utf8_lossy(line);
        prop_assert_eq!(&fast, &slow, "{}", text);
        Ok(fast)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(600))]

        /// Any line, of any shape: the fast decoder returns exactly what the derived
        /// decoder returns (so it never needs the fallback for a line serde accepts).
        #[test]
        fn fast_decoder_equals_the_derived_one_on_any_line(line in line()) {
            check(&line)?;
        }

        /// Lines cut anywhere: no entry, or the derived decoder's.
        #[test]
        fn fast_decoder_equals_the_derived_one_on_truncated_lines(
            line in line(),
            cut in any::<Index>(),
        ) {
            check(&line[..cut.index(line.len() + 1)])?;
        }
    }

    /// The generator makes lines the derived decoder accepts, with every feature the
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
