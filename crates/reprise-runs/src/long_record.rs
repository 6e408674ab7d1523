//! A transcript record whose arguments or result are too long to hold twice (a
//! `write_file` of 200 MB): written as it is read, never parsed into a JSON value.
//!
//! The line is the one the short path writes (the arguments parsed, every key and
//! string redacted, a string under a secret-looking key masked whole, encoded
//! compactly): the arguments are walked as borrowed raw JSON, and each long string
//! is unescaped, redacted and escaped again a piece at a time
//! ([`Redactor::pieces`]). A string that might be masked whole (a long
//! random-looking value, or one under a secret-looking key) is held whole to decide.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{self, Write};

use reprise_redact::{AssignmentScan, MASK, Redactor};
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

/// Arguments or results longer than this take the long path.
pub(crate) const LONG: usize = 1 << 20;

/// How much of an escaped string is unescaped at a time.
const PIECE: usize = 64 << 10;

#[cfg(not(test))]
fn piece_size() -> usize {
    PIECE
}

#[cfg(test)]
thread_local! {
    /// The tests cut strings into small pieces, to cross every kind of boundary.
    static TEST_PIECE: std::cell::Cell<usize> = const { std::cell::Cell::new(PIECE) };
}

#[cfg(test)]
fn piece_size() -> usize {
    TEST_PIECE.with(std::cell::Cell::get)
}

/// A JSON text as the long path walks it: strings kept escaped, borrowed.
#[derive(Debug)]
pub(crate) enum Node<'a> {
    Object(Vec<(String, Node<'a>)>),
    Array(Vec<Node<'a>>),
    /// The body of a string literal, between its quotes, still escaped.
    String(&'a str),
    /// A number, `true`, `false` or `null`.
    Scalar(Value),
}

/// What goes under a record's `arguments` or `content`.
#[derive(Debug)]
pub(crate) enum Body<'a> {
    /// Arguments that are JSON, written as JSON.
    Json(Node<'a>),
    /// Text written as one string (a result, or arguments that are not JSON).
    Text(&'a str),
}

impl<'a> Body<'a> {
    /// Arguments as the short path sees them: JSON when `serde_json` would parse
    /// them (every string's escapes checked too), otherwise text.
    pub(crate) fn of_arguments(arguments: &'a str) -> Body<'a> {
        match Node::parse_text(arguments) {
            Some(node) if node.strings_decode() => Body::Json(node),
            _ => Body::Text(arguments),
        }
    }

    /// Writes the body, redacted, as the value of `key`.
    pub(crate) fn write(
        &self,
        out: &mut dyn Write,
        redactor: &Redactor,
        key: &str,
    ) -> io::Result<()> {
        match self {
            Body::Json(node) => node.write(out, redactor, Some(key)),
            Body::Text(text) => write_string(out, redactor, Some(key), &Pieces::plain(text)),
        }
    }
}

impl<'a> Node<'a> {
    /// The JSON text `text` (whitespace around it allowed), or `None` when it is not
    /// one JSON value.
    fn parse_text(text: &'a str) -> Option<Node<'a>> {
        let raw: &'a RawValue = serde_json::from_str(text).ok()?;
        Node::parse(raw.get())
    }

    fn parse(raw: &'a str) -> Option<Node<'a>> {
        let raw = raw.trim_matches([' ', '\t', '\n', '\r']);
        Some(match raw.as_bytes().first()? {
            b'{' => {
                let ObjectEntries(entries) = serde_json::from_str(raw).ok()?;
                // As a parsed object keeps them: a repeated key keeps its first place
                // and its last value.
                let mut fields: Vec<(String, Node<'a>)> = Vec::with_capacity(entries.len());
                let mut places: HashMap<String, usize> = HashMap::new();
                for (key, value) in entries {
                    let node = Node::parse(value.get())?;
                    match places.get(&key) {
                        Some(&place) => fields[place].1 = node,
                        None => {
                            places.insert(key.clone(), fields.len());
                            fields.push((key, node));
                        }
                    }
                }
                Node::Object(fields)
            }
            b'[' => {
                let items: Vec<&'a RawValue> = serde_json::from_str(raw).ok()?;
                Node::Array(
                    items
                        .into_iter()
                        .map(|item| Node::parse(item.get()))
                        .collect::<Option<_>>()?,
                )
            }
            b'"' => Node::String(raw.get(1..raw.len().checked_sub(1)?)?),
            _ => Node::Scalar(serde_json::from_str(raw).ok()?),
        })
    }

    /// Whether every string in the value unescapes (a lone surrogate does not).
    fn strings_decode(&self) -> bool {
        match self {
            Node::Object(fields) => fields.iter().all(|(_, node)| node.strings_decode()),
            Node::Array(items) => items.iter().all(Node::strings_decode),
            Node::String(body) => Pieces::escaped(body).all(|piece| piece.is_ok()),
            Node::Scalar(_) => true,
        }
    }

    /// Writes the value redacted; `key` is the name a string value is stored under.
    fn write(&self, out: &mut dyn Write, redactor: &Redactor, key: Option<&str>) -> io::Result<()> {
        match self {
            Node::Object(fields) => {
                out.write_all(b"{")?;
                for (at, (name, node)) in fields.iter().enumerate() {
                    if at > 0 {
                        out.write_all(b",")?;
                    }
                    let name = redactor.redact(name);
                    serde_json::to_writer(&mut *out, name.as_ref())?;
                    out.write_all(b":")?;
                    node.write(out, redactor, Some(&name))?;
                }
                out.write_all(b"}")
            }
            Node::Array(items) => {
                out.write_all(b"[")?;
                for (at, node) in items.iter().enumerate() {
                    if at > 0 {
                        out.write_all(b",")?;
                    }
                    node.write(out, redactor, None)?;
                }
                out.write_all(b"]")
            }
            Node::String(body) => write_string(out, redactor, key, &Pieces::escaped(body)),
            Node::Scalar(value) => Ok(serde_json::to_writer(&mut *out, value)?),
        }
    }
}

/// A JSON object's members in their order, values kept raw.
struct ObjectEntries<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for ObjectEntries<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = ObjectEntries<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry::<String, &'de RawValue>()? {
                    entries.push(entry);
                }
                Ok(ObjectEntries(entries))
            }
        }
        deserializer.deserialize_map(Entries)
    }
}

/// A string's text, a piece at a time: plain, or unescaped from a string literal's
/// body (each piece ends between escapes, a surrogate pair kept whole).
#[derive(Clone)]
struct Pieces<'a> {
    rest: &'a str,
    escaped: bool,
    /// The piece being decoded, between quotes.
    literal: String,
}

impl<'a> Pieces<'a> {
    fn plain(text: &'a str) -> Self {
        Pieces {
            rest: text,
            escaped: false,
            literal: String::new(),
        }
    }

    fn escaped(body: &'a str) -> Self {
        Pieces {
            rest: body,
            escaped: true,
            literal: String::new(),
        }
    }

    /// The next piece, decoded (`Err` for a bad escape).
    fn next_piece(&mut self) -> Option<Result<Cow<'_, str>, serde_json::Error>> {
        if self.rest.is_empty() {
            return None;
        }
        let size = piece_size();
        let end = if self.escaped {
            escaped_piece_end(self.rest, size)
        } else {
            self.rest
                .floor_char_boundary(size.min(self.rest.len()))
                .max(
                    // A first character longer than the piece (never: PIECE is far larger).
                    self.rest.ceil_char_boundary(1),
                )
        };
        let (piece, rest) = self.rest.split_at(end);
        self.rest = rest;
        if !self.escaped || !piece.contains('\\') {
            if self.escaped && piece.bytes().any(|byte| byte < 0x20) {
                // What a parser refuses in a string: a raw control character.
                return Some(
                    serde_json::from_str::<String>(&format!("\"{piece}\"")).map(Cow::Owned),
                );
            }
            return Some(Ok(Cow::Borrowed(piece)));
        }
        self.literal.clear();
        self.literal.push('"');
        self.literal.push_str(piece);
        self.literal.push('"');
        Some(serde_json::from_str::<String>(&self.literal).map(Cow::Owned))
    }
}

impl Iterator for Pieces<'_> {
    type Item = Result<String, serde_json::Error>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_piece().map(|piece| piece.map(Cow::into_owned))
    }
}

/// Where the first piece of an escaped body ends: at most `size` bytes on, at a
/// character boundary outside every escape (a `\uD83D\uDE00` pair counts as one).
fn escaped_piece_end(body: &str, size: usize) -> usize {
    let bytes = body.as_bytes();
    if bytes.len() <= size {
        return bytes.len();
    }
    let mut at = 0;
    loop {
        match memchr::memchr(b'\\', &bytes[at..size]) {
            // At least one character, however small the piece.
            None => {
                return body
                    .floor_char_boundary(size)
                    .max(at)
                    .max(body.ceil_char_boundary(1));
            }
            Some(offset) => {
                let escape = at + offset;
                let end = (escape + escape_len(&bytes[escape..])).min(bytes.len());
                if end > size {
                    // The escape does not fit: end before it, or (the piece being one
                    // escape) after it.
                    return if escape > 0 { escape } else { end };
                }
                at = end;
            }
        }
    }
}

/// The length of the escape at the start of `bytes` (which starts with `\`).
fn escape_len(bytes: &[u8]) -> usize {
    if bytes.get(1) != Some(&b'u') {
        return 2;
    }
    let high = bytes
        .get(2..6)
        .and_then(|hex| std::str::from_utf8(hex).ok())
        .and_then(|hex| u16::from_str_radix(hex, 16).ok());
    match high {
        Some(0xD800..=0xDBFF) if bytes.get(6..8) == Some(b"\\u") => 12,
        _ => 6,
    }
}

/// Whether a string stored under `key` might be masked whole (then it is held
/// whole to decide).
fn might_be_masked(key: &str, pieces: &Pieces<'_>) -> io::Result<bool> {
    let mut scan = AssignmentScan::new(key);
    let mut walk = pieces.clone();
    while !scan.is_settled()
        && let Some(piece) = walk.next_piece()
    {
        scan.push(&piece.map_err(io::Error::other)?);
    }
    Ok(scan.might_be_masked())
}

/// Writes a record: `fields` as they are (already redacted), except `body_key`,
/// whose value is `body`, redacted as it is written.
pub(crate) fn write_record(
    out: &mut dyn Write,
    fields: &serde_json::Map<String, Value>,
    body_key: &str,
    body: &Body<'_>,
    redactor: &Redactor,
) -> io::Result<()> {
    out.write_all(b"{")?;
    for (at, (key, value)) in fields.iter().enumerate() {
        if at > 0 {
            out.write_all(b",")?;
        }
        serde_json::to_writer(&mut *out, key)?;
        out.write_all(b":")?;
        if key == body_key {
            body.write(out, redactor, key)?;
        } else {
            serde_json::to_writer(&mut *out, value)?;
        }
    }
    out.write_all(b"}")
}

/// Writes one string value redacted: masked whole when the short path would mask it
/// (only a string that might be is held whole to decide), otherwise redacted and
/// escaped a window at a time.
fn write_string(
    out: &mut dyn Write,
    redactor: &Redactor,
    key: Option<&str>,
    pieces: &Pieces<'_>,
) -> io::Result<()> {
    if let Some(key) = key
        && might_be_masked(key, pieces)?
    {
        let whole = pieces
            .clone()
            .collect::<Result<String, _>>()
            .map_err(io::Error::other)?;
        return if Redactor::masks_assigned(key, &whole) {
            serde_json::to_writer(&mut *out, MASK).map_err(io::Error::from)
        } else {
            serde_json::to_writer(&mut *out, redactor.redact(&whole).as_ref())
                .map_err(io::Error::from)
        };
    }
    out.write_all(b"\"")?;
    let mut emit = |text: &str| -> io::Result<()> {
        let quoted = serde_json::to_string(text)?;
        out.write_all(&quoted.as_bytes()[1..quoted.len() - 1])
    };
    let mut redacting = redactor.pieces();
    let mut walk = pieces.clone();
    while let Some(piece) = walk.next_piece() {
        redacting.push(&piece.map_err(io::Error::other)?, &mut emit)?;
    }
    redacting.finish(&mut emit)?;
    out.write_all(b"\"")
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Map, Value, json};

    use super::{Body, TEST_PIECE, write_record};
    use crate::value_redaction::redact_value;
    use reprise_redact::Redactor;

    /// The line the short path writes for `{"arguments": <parsed or text>}`.
    fn short(redactor: &Redactor, arguments: &str) -> String {
        let value = serde_json::from_str::<Value>(arguments)
            .unwrap_or_else(|_| Value::String(arguments.to_owned()));
        let mut object = Map::new();
        object.insert("arguments".into(), value);
        serde_json::to_string(&redact_value(redactor, Value::Object(object))).unwrap()
    }

    /// The same line from the long path, strings cut into pieces of `piece` bytes.
    fn long(redactor: &Redactor, arguments: &str, piece: usize) -> String {
        TEST_PIECE.with(|size| size.set(piece));
        let mut fields = Map::new();
        fields.insert("arguments".into(), Value::Null);
        let mut out = Vec::new();
        let body = Body::of_arguments(arguments);
        write_record(&mut out, &fields, "arguments", &body, redactor).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn text() -> impl Strategy<Value = String> {
        let fragment = prop_oneof![
            "[a-z ]{0,12}",
            Just("\n".to_owned()),
            Just("\"quoted\\".to_owned()),
            Just("\u{7}\t".to_owned()),
            Just("é日本😀".to_owned()),
            Just("password=hunter22".to_owned()),
            Just("ghp_16C7e42F292c6912E7710c838347Ae178B4a".to_owned()),
            Just("Zk3x9QvR2mT8bLw4NcY7pH1s".to_owned()),
        ];
        prop::collection::vec(fragment, 0..8).prop_map(|parts| parts.concat())
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            text().prop_map(Value::String),
            any::<i64>().prop_map(Value::from),
            (-1e6..1e6f64).prop_map(Value::from),
            any::<bool>().prop_map(Value::Bool),
            Just(Value::Null),
        ];
        leaf.prop_recursive(3, 24, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::vec(
                    (
                        prop_oneof![
                            Just("content".to_owned()),
                            Just("path".to_owned()),
                            Just("api_key".to_owned()),
                            Just("password".to_owned()),
                            Just("token=abc123def456".to_owned()),
                            "[a-z_]{1,8}",
                        ],
                        inner
                    ),
                    0..5
                )
                .prop_map(|fields| Value::Object(fields.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

        #[test]
        fn the_long_path_writes_the_short_paths_line(
            value in value(),
            pretty in any::<bool>(),
            piece in 1usize..40,
        ) {
            let redactor = Redactor::new().with_secret("Zk3x9QvR2mT8bLw4NcY7pH1s");
            let arguments = match pretty {
                true => serde_json::to_string_pretty(&value).unwrap(),
                false => serde_json::to_string(&value).unwrap(),
            };
            prop_assert_eq!(long(&redactor, &arguments, piece), short(&redactor, &arguments));
        }

        #[test]
        fn text_that_is_not_json_is_written_as_the_short_path_writes_it(
            arguments in prop_oneof![
                text(),
                text().prop_map(|text| format!("{{\"content\": \"{text}")),
            ],
            piece in 1usize..40,
        ) {
            let redactor = Redactor::new();
            prop_assert_eq!(long(&redactor, &arguments, piece), short(&redactor, &arguments));
        }
    }

    #[test]
    fn escapes_the_parser_takes_or_refuses_come_out_alike() {
        let redactor = Redactor::new();
        for arguments in [
            r#"{"content":"a\ud83d\ude00b\u00e9\n\"\\\/"}"#,
            r#"{"content":"lone \ud800 surrogate"}"#,
            r#"{"content":"lone \udc00 low"}"#,
            r#"{"content":"bad \x escape"}"#,
            "{\"content\":\"raw\u{1} control\"}",
            r#"{"a":"first","b":1,"a":"last"}"#,
            r#"{"n":1.0e2,"m":-0,"big":123456789012345678901234567890}"#,
            r#"  {"padded": true}  "#,
            r#"{"content":"x"} trailing"#,
            r#""just a string under arguments""#,
            r#""Zk3x9QvR2mT8bLw4NcY7pH1sAbC9""#,
            r#"{"password":"hunter22hunter22","content":"Zk3x9QvR2mT8bLw4NcY7pH1s"}"#,
        ] {
            for piece in [1, 2, 5, 6, 7, 11, 12, 13, 64] {
                assert_eq!(
                    long(&redactor, arguments, piece),
                    short(&redactor, arguments),
                    "{arguments} in pieces of {piece}"
                );
            }
        }
    }

    #[test]
    fn a_long_random_looking_value_is_masked_whole_as_the_short_path_masks_it() {
        let redactor = Redactor::new();
        let blob = "QUJD".repeat(5000) + "9z";
        let arguments = json!({"content": blob}).to_string();
        let line = long(&redactor, &arguments, 4096);
        assert_eq!(line, short(&redactor, &arguments));
        assert!(line.contains("[REDACTED]") && !line.contains("QUJD"));
    }
}
