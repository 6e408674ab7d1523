//! The one sanitizer for text that reaches the terminal from outside reprise: the
//! model's replies, tool results, run folders on disk, server and OS error texts.
//!
//! A terminal obeys control characters and escape sequences in what it is sent: a
//! reply or a file can set the window title (OSC 0), clear the screen (`ESC[2J`),
//! hide a link behind other text (OSC 8), write the clipboard (OSC 52), or overwrite
//! what was printed (carriage return, backspace). So every C0 control other than
//! newline and tab, DEL, and every C1 control (`U+0080`–`U+009F`, which include the
//! 8-bit CSI `U+009B`) is shown as a visible escape instead: ESC becomes `\x1b`, so
//! `ESC [ 2 J` reads `\x1b[2J`; a carriage return reads `\r`; a C1 control reads
//! `\u{9b}`. A carriage return right before a newline (a CRLF line end) is dropped,
//! since it cannot hide anything.
//!
//! The Unicode bidirectional embedding, override and isolate controls (`U+202A`–`U+202E`,
//! `U+2066`–`U+2069`) are escaped the same way (`\u{202e}`): they reorder what the
//! terminal shows, so a command or a path could read differently from what it is.
//! Joiners and marks that text needs (the zero-width joiner of emoji, `U+200E`/`U+200F`)
//! are kept.
//!
//! `session.log` is different: it strips escape sequences instead
//! (`reprise_runs::EscapeStripper`), since it is a record of what was shown.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` must not reach the terminal as it is.
fn is_unsafe(c: char) -> bool {
    (c < '\u{20}' && c != '\n' && c != '\t')
        || ('\u{7f}'..='\u{9f}').contains(&c)
        || is_bidi_control(c)
}

/// The bidirectional embedding, override and isolate controls.
fn is_bidi_control(c: char) -> bool {
    ('\u{202a}'..='\u{202e}').contains(&c) || ('\u{2066}'..='\u{2069}').contains(&c)
}

/// Whether `c` is written as it is by serde but must not reach the terminal.
fn is_unsafe_in_json(c: char) -> bool {
    ('\u{7f}'..='\u{9f}').contains(&c) || is_bidi_control(c)
}

/// Where the first character `refused` refuses starts in `text`. A byte scan that
/// decodes a character only where a refused one can start (a C0 control when `c0`,
/// DEL, and the lead bytes of the C1 and bidirectional controls): `show` passes
/// whole conversations through here, and decoding every character took as long as
/// loading them.
fn first_unsafe(text: &str, refused: fn(char) -> bool, c0: bool) -> Option<usize> {
    // DEL; 0xC2 leads U+0080–U+00BF, 0xE2 leads U+2000–U+2FFF. Lead bytes and ASCII
    // are character boundaries.
    let candidate = |byte: u8| {
        (c0 && byte < 0x20 && byte != b'\n' && byte != b'\t')
            | (byte == 0x7f)
            | (byte == 0xc2)
            | (byte == 0xe2)
    };
    for (base, chunk) in chunks_with_candidates::<64>(text.as_bytes(), candidate) {
        for (offset, &byte) in chunk.iter().enumerate() {
            let at = base + offset;
            if candidate(byte) && text[at..].chars().next().is_some_and(refused) {
                return Some(at);
            }
        }
    }
    None
}

/// The chunks of `CHUNK` bytes of `bytes` that hold a byte `candidate` picks, each
/// with its offset. A chunk is tested without an early exit and of a known length,
/// so that the compiler tests it with a few vector instructions (the last, shorter
/// one byte by byte).
fn chunks_with_candidates<const CHUNK: usize>(
    bytes: &[u8],
    candidate: impl Fn(u8) -> bool,
) -> impl Iterator<Item = (usize, &[u8])> {
    bytes
        .chunks(CHUNK)
        .enumerate()
        .filter(move |(_, chunk)| match <&[u8; CHUNK]>::try_from(*chunk) {
            Ok(full) => full.iter().fold(false, |any, &byte| any | candidate(byte)),
            Err(_) => chunk.iter().any(|&byte| candidate(byte)),
        })
        .map(|(index, chunk)| (index * CHUNK, chunk))
}

/// `text` with every control character other than newline and tab shown as a
/// visible escape (see the module doc). Borrowed when there was nothing to escape.
pub fn visible(text: &str) -> Cow<'_, str> {
    let Some(start) = first_unsafe(text, is_unsafe, true) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len() + 16);
    out.push_str(&text[..start]);
    let mut chars = text[start..].chars().peekable();
    while let Some(c) = chars.next() {
        if !is_unsafe(c) {
            out.push(c);
            continue;
        }
        match c {
            '\r' if chars.peek() == Some(&'\n') => {}
            '\r' => out.push_str("\\r"),
            c if c < '\u{80}' => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
        }
    }
    Cow::Owned(out)
}

/// JSON text made safe for a terminal: serde already escapes C0 controls inside
/// strings; DEL, the C1 controls and the bidirectional controls, which it writes as
/// they are, become `\uXXXX` escapes too (they can only occur inside strings, so the
/// JSON means the same).
pub fn visible_json(json: &str) -> Cow<'_, str> {
    let Some(start) = first_unsafe(json, is_unsafe_in_json, false) else {
        return Cow::Borrowed(json);
    };
    let mut out = String::with_capacity(json.len() + 16);
    out.push_str(&json[..start]);
    for c in json[start..].chars() {
        if is_unsafe_in_json(c) {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Appends `text` to `out` as a JSON string literal, quotes included, made safe for
/// a terminal: the bytes serde_json would write, then passed through
/// [`visible_json`], in one pass. `show --json` writes whole conversations this
/// way; serde's escaper, which looks at every byte on its own, and a second scan
/// of its output took as long as loading the conversation.
pub fn push_json_string(out: &mut Vec<u8>, text: &str) {
    // Bytes that may need an escape: what JSON escapes, DEL, and the lead bytes
    // of the C1 and bidirectional controls (see `first_unsafe`).
    let candidate = |byte: u8| {
        (byte < 0x20)
            | (byte == b'"')
            | (byte == b'\\')
            | (byte == 0x7f)
            | (byte == 0xc2)
            | (byte == 0xe2)
    };
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = text.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    // The bytes from `written` on are not in `out` yet.
    let mut written = 0;
    for (base, chunk) in chunks_with_candidates::<32>(bytes, candidate) {
        for (offset, &byte) in chunk.iter().enumerate() {
            let at = base + offset;
            if at < written || !candidate(byte) {
                continue;
            }
            let short: &[u8] = match byte {
                b'"' => b"\\\"",
                b'\\' => b"\\\\",
                b'\n' => b"\\n",
                b'\r' => b"\\r",
                b'\t' => b"\\t",
                0x08 => b"\\b",
                0x0c => b"\\f",
                _ => b"",
            };
            let (code, len) = if !short.is_empty() {
                (None, 1)
            } else if byte < 0x80 {
                (Some(u32::from(byte)), 1)
            } else {
                match text[at..].chars().next() {
                    Some(c) if is_unsafe_in_json(c) => (Some(u32::from(c)), c.len_utf8()),
                    _ => continue,
                }
            };
            out.extend_from_slice(&bytes[written..at]);
            match code {
                None => out.extend_from_slice(short),
                Some(code) => {
                    // Every escaped character is below U+10000: one `\uXXXX`.
                    out.extend_from_slice(b"\\u");
                    for shift in [12, 8, 4, 0] {
                        out.push(HEX[((code >> shift) & 0xf) as usize]);
                    }
                }
            }
            written = at + len;
        }
    }
    out.extend_from_slice(&bytes[written..]);
    out.push(b'"');
}

/// Prints a line to stdout through [`visible`].
pub fn print_line(text: &str) {
    println!("{}", visible(text));
}

/// Prints a line to stderr through [`visible`].
pub fn eprint_line(text: &str) {
    eprintln!("{}", visible(text));
}

/// Writes JSON in one go (stdout is line-buffered: writing it value by value would
/// make a system call per line).
/// Strings from run folders may hold control characters: serde escapes C0 controls,
/// [`visible_json`] the rest.
pub fn write_json(
    out: &mut dyn std::io::Write,
    value: &impl serde::Serialize,
) -> anyhow::Result<()> {
    let mut bytes = Vec::new();
    serde_json::to_writer_pretty(&mut bytes, value)?;
    bytes.push(b'\n');
    // serde_json writes valid UTF-8.
    let text = String::from_utf8(bytes)?;
    out.write_all(visible_json(&text).as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_become_visible_escapes_and_text_stays() {
        assert_eq!(visible("plain\ttext\nnext"), "plain\ttext\nnext");
        assert!(matches!(visible("plain"), Cow::Borrowed(_)));
        assert_eq!(visible("\x1b[2Jgone"), "\\x1b[2Jgone");
        assert_eq!(visible("\x1b]0;owned\x07title"), "\\x1b]0;owned\\x07title");
        assert_eq!(visible("a\u{9b}31mred"), "a\\u{9b}31mred");
        assert_eq!(visible("secret\rshown"), "secret\\rshown");
        assert_eq!(visible("line\r\nnext"), "line\nnext");
        assert_eq!(visible("ab\x08c\x7f"), "ab\\x08c\\x7f");
        assert_eq!(visible("é日本 ✓"), "é日本 ✓");
        assert_eq!(
            visible("rm -rf \u{202e}txt.exe\u{202c} ok"),
            "rm -rf \\u{202e}txt.exe\\u{202c} ok"
        );
        assert_eq!(visible("a\u{2067}b\u{2069}"), "a\\u{2067}b\\u{2069}");
        // Emoji joiners and the directional marks of right-to-left text stay.
        assert_eq!(
            visible("👩\u{200d}💻 שלום\u{200f}"),
            "👩\u{200d}💻 שלום\u{200f}"
        );
    }

    #[test]
    fn the_byte_scan_finds_exactly_the_characters_refused() {
        // Every character up to U+3000 (all the refused ones and their neighbours,
        // in one-, two- and three-byte forms), alone and after other text.
        for code in 0..0x3000u32 {
            let Some(c) = char::from_u32(code) else {
                continue;
            };
            for text in [format!("{c}"), format!("é日{c}x"), format!("ab\n{c}")] {
                let naive = text
                    .char_indices()
                    .find(|&(_, c)| is_unsafe(c))
                    .map(|(at, _)| at);
                assert_eq!(first_unsafe(&text, is_unsafe, true), naive, "U+{code:04X}");
                let naive_json = text
                    .char_indices()
                    .find(|&(_, c)| is_unsafe_in_json(c))
                    .map(|(at, _)| at);
                assert_eq!(
                    first_unsafe(&text, is_unsafe_in_json, false),
                    naive_json,
                    "U+{code:04X}"
                );
            }
        }
    }

    #[test]
    fn a_json_string_is_what_serde_writes_made_visible() {
        // Every character up to U+3000 and a few above, alone, between others and
        // at each position around the scan's chunk boundary.
        let mut texts: Vec<String> = Vec::new();
        for code in (0..0x3000u32).chain([0xfeff, 0x1f389, 0x10ffff]) {
            let Some(c) = char::from_u32(code) else {
                continue;
            };
            texts.push(format!("{c}"));
            texts.push(format!("é\"日{c}x\\"));
        }
        for at in 28..36 {
            for c in ['\u{1b}', '\u{9b}', '\u{202e}', '"', 'é', '日', '🎉'] {
                texts.push(format!("{}{c}{}", "a".repeat(at), "b".repeat(40)));
            }
        }
        texts.push(String::new());
        for text in texts {
            let mut ours = Vec::new();
            push_json_string(&mut ours, &text);
            let serde = serde_json::to_string(&text).unwrap();
            assert_eq!(
                String::from_utf8(ours).unwrap(),
                visible_json(&serde),
                "{text:?}"
            );
        }
    }

    #[test]
    fn json_keeps_its_meaning_without_raw_c1_controls() {
        let value = serde_json::json!({"t": "x\u{9b}2J\u{1b}]52;c;aGk=\u{7}\u{202e}"});
        let text = serde_json::to_string(&value).unwrap();
        let safe = visible_json(&text);
        assert!(!safe.chars().any(is_unsafe), "{safe}");
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, value);
    }
}
