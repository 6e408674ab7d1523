//! Text kept in `text` columns outside the entries' JSON lines (the listing's first
//! and last messages, titles, tags), spelled so that PostgreSQL takes every string.
//!
//! A `text` value cannot hold U+0000, which a message or a title may. Such a value
//! is kept with U+0000 written as [`ESCAPE`] followed by `0`, and [`ESCAPE`] itself
//! doubled; every other string is kept as it is. `ESCAPE` is a noncharacter (set
//! aside by Unicode for a program's internal use), so text written without this
//! spelling, by hand or by an earlier release, holds it only by accident: decoding
//! leaves an `ESCAPE` that is not followed by `0` or another `ESCAPE` as it is.
//!
//! The entries' JSON lines need none of this: JSON escapes U+0000 as `\u0000`, and the
//! lines are kept as `text`, verbatim, never as `jsonb` (which refuses `\u0000`).

use std::borrow::Cow;

/// The character that starts an escape.
const ESCAPE: char = '\u{FDD0}';

/// `text` as it is kept.
pub(crate) fn encode(text: &str) -> Cow<'_, str> {
    if !text.contains(['\0', ESCAPE]) {
        return Cow::Borrowed(text);
    }
    let mut kept = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\0' => {
                kept.push(ESCAPE);
                kept.push('0');
            }
            ESCAPE => {
                kept.push(ESCAPE);
                kept.push(ESCAPE);
            }
            other => kept.push(other),
        }
    }
    Cow::Owned(kept)
}

/// An optional text as it is kept.
pub(crate) fn encode_option(text: Option<&str>) -> Option<String> {
    text.map(|text| encode(text).into_owned())
}

/// The text that `kept` stands for.
pub(crate) fn decode(kept: String) -> String {
    if !kept.contains(ESCAPE) {
        return kept;
    }
    let mut text = String::with_capacity(kept.len());
    let mut chars = kept.chars().peekable();
    while let Some(c) = chars.next() {
        if c != ESCAPE {
            text.push(c);
            continue;
        }
        match chars.peek() {
            Some('0') => {
                chars.next();
                text.push('\0');
            }
            Some(&ESCAPE) => {
                chars.next();
                text.push(ESCAPE);
            }
            _ => text.push(ESCAPE),
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_and_the_escape_are_spelled_and_read_back() {
        assert_eq!(encode("plain"), Cow::Borrowed("plain"));
        assert_eq!(encode("a\0b"), "a\u{FDD0}0b");
        assert_eq!(encode("\u{FDD0}0"), "\u{FDD0}\u{FDD0}0");
        for text in ["a\0b", "\0", "\u{FDD0}", "\u{FDD0}0", "\0\u{FDD0}\0", ""] {
            assert_eq!(decode(encode(text).into_owned()), text);
            assert!(!encode(text).contains('\0'));
        }
        // A lone escape from text kept without this spelling reads as it is.
        assert_eq!(decode("x\u{FDD0}".to_owned()), "x\u{FDD0}");
        assert_eq!(decode("\u{FDD0}y".to_owned()), "\u{FDD0}y");
    }
}
