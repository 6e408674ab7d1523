//! Entry lines of every shape serde's decoder accepts or refuses, for the property
//! tests that hold the decoders equal: any key order, unknown fields at every level,
//! whitespace between tokens, duplicate and escaped keys, every type for every field,
//! odd strings, truncated lines.

use proptest::option::weighted;
use proptest::prelude::*;
use proptest::sample::Index;

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
            proptest::collection::vec((key(&["a", "b", "c"]), inner), 0..3).prop_map(Json::Object),
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

/// One line, without its `\\n`.
pub(super) fn line() -> impl Strategy<Value = Vec<u8>> {
    (entry(), whitespace()).prop_map(|(entry, ws)| {
        let mut out = Vec::new();
        out.extend_from_slice(ws[0].as_bytes());
        render(&entry, &ws, &mut 0, &mut out);
        out.extend_from_slice(ws[ws.len() - 1].as_bytes());
        out
    })
}
