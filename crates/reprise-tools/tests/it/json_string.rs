//! `write_file`'s content unescaped piece by piece: an escape cut between two
//! pieces decodes as when whole, and bad JSON text is refused, before any file is
//! touched, naming where.

use reprise_testkit::assert_contains;
use reprise_tools::EscapeError;
use reprise_tools::json_string::{PIECE, Unescaper, unescape_to, unescaped_len};
use reprise_tools::write_file_tool;

use crate::support::{Folders, call};

/// A body with every kind of escape, a surrogate pair and raw multi-byte text.
const BODY: &str = r#"a\"b\\c\/d\be\ff\ng\rh\ti\u00e9j\u20ACk\uD83D\uDE00l é😀"#;
const TEXT: &str = "a\"b\\c/d\u{8}e\u{c}f\ng\rh\ti\u{e9}j\u{20ac}k\u{1f600}l é😀";

/// `body` fed in the pieces that cutting it at `cuts` makes.
fn decoded_in_pieces(body: &[u8], cuts: &[usize]) -> Result<Vec<u8>, EscapeError> {
    let mut decoder = Unescaper::new();
    let mut text = Vec::new();
    let mut start = 0;
    for &cut in cuts.iter().chain([body.len()].iter()) {
        decoder.push(&body[start..cut], &mut text)?;
        start = cut;
    }
    decoder.finish()?;
    Ok(text)
}

#[test]
fn every_escape_decodes_the_same_wherever_the_pieces_are_cut() {
    let body = BODY.as_bytes();
    assert_eq!(decoded_in_pieces(body, &[]).unwrap(), TEXT.as_bytes());
    for first in 0..=body.len() {
        assert_eq!(
            decoded_in_pieces(body, &[first]).unwrap(),
            TEXT.as_bytes(),
            "cut at {first}"
        );
        for second in first..=body.len() {
            assert_eq!(
                decoded_in_pieces(body, &[first, second]).unwrap(),
                TEXT.as_bytes(),
                "cut at {first} and {second}"
            );
        }
    }
    // One byte at a time.
    let every: Vec<usize> = (1..body.len()).collect();
    assert_eq!(decoded_in_pieces(body, &every).unwrap(), TEXT.as_bytes());
    assert_eq!(unescaped_len(BODY).unwrap(), TEXT.len() as u64);
}

#[test]
fn bad_json_text_is_refused_wherever_the_pieces_are_cut() {
    let cases = [
        (
            r"ab\qc",
            EscapeError::InvalidEscape {
                escape: b'q',
                at: 2,
            },
        ),
        (r"ab\u12G4", EscapeError::BadHex { at: 2 }),
        (
            r"x\uD83Dy",
            EscapeError::LoneSurrogate {
                unit: 0xD83D,
                at: 1,
            },
        ),
        (
            r"x\uD83D\n",
            EscapeError::LoneSurrogate {
                unit: 0xD83D,
                at: 1,
            },
        ),
        (
            r"x\uD83D\u0041",
            EscapeError::LoneSurrogate {
                unit: 0xD83D,
                at: 1,
            },
        ),
        (
            r"x\uDE00",
            EscapeError::LoneSurrogate {
                unit: 0xDE00,
                at: 1,
            },
        ),
        (
            r"x\uD83D",
            EscapeError::LoneSurrogate {
                unit: 0xD83D,
                at: 1,
            },
        ),
        ("a\nb", EscapeError::Control { code: b'\n', at: 1 }),
        ("a\"b", EscapeError::Quote { at: 1 }),
        (r"ab\", EscapeError::Unfinished { at: 2 }),
        (r"ab\u00", EscapeError::Unfinished { at: 2 }),
    ];
    for (body, expected) in cases {
        let bytes = body.as_bytes();
        for cut in 0..=bytes.len() {
            assert_eq!(
                decoded_in_pieces(bytes, &[cut]),
                Err(expected.clone()),
                "{body:?} cut at {cut}"
            );
        }
    }
    assert_eq!(
        EscapeError::InvalidEscape {
            escape: b'q',
            at: 2
        }
        .to_string(),
        r"invalid escape \q at byte 2"
    );
    assert_eq!(
        EscapeError::InvalidEscape {
            escape: 0x1b,
            at: 7
        }
        .to_string(),
        r"invalid escape \(byte 0x1B) at byte 7"
    );
}

#[test]
fn a_long_body_is_written_in_pieces_with_escapes_across_their_seams() {
    // An escape begins at each of the 12 bytes before a seam, so that every one is
    // cut somewhere.
    for before in 1..=12 {
        let body = format!("{}{BODY}{}", "x".repeat(PIECE - before), "y".repeat(PIECE));
        let mut text = Vec::new();
        let written = unescape_to(&body, &mut text).unwrap();
        let expected = format!("{}{TEXT}{}", "x".repeat(PIECE - before), "y".repeat(PIECE));
        assert!(
            text == expected.as_bytes(),
            "escape {before} bytes before the seam"
        );
        assert_eq!(written, expected.len() as u64);
    }
}

#[tokio::test]
async fn write_file_writes_escapes_across_the_seams_and_refuses_bad_ones() {
    let folders = Folders::new();
    let write = write_file_tool(folders.workspace());
    let content = format!("{}😀\\\n{}", "x".repeat(PIECE - 5), "y".repeat(PIECE));
    // serde_json writes 😀 raw; the pair is escaped by hand to cross the seam.
    let arguments = serde_json::json!({ "path": "big.txt", "content": content })
        .to_string()
        .replace('😀', r"\uD83D\uDE00");
    let output = call(&write, &arguments).await;
    assert_eq!(
        output.content,
        format!("created big.txt ({} bytes)", content.len())
    );
    assert_eq!(
        std::fs::read_to_string(folders.path("work/big.txt")).unwrap(),
        content
    );
    let refused = [
        (
            format!(
                r#"{{"path":"big.txt","content":"{}\q"}}"#,
                "x".repeat(PIECE)
            ),
            "invalid escape".to_owned(),
        ),
        (
            format!(
                r#"{{"path":"big.txt","content":"{}\uD83Dz"}}"#,
                "x".repeat(PIECE - 3)
            ),
            format!(r"content: lone surrogate \uD83D at byte {}", PIECE - 3),
        ),
        (
            r#"{"path":"big.txt","content":"a\uDE00"}"#.to_owned(),
            r"content: lone surrogate \uDE00 at byte 1".to_owned(),
        ),
        (
            r#"{"path":"big.txt","content":42}"#.to_owned(),
            "content must be a string".to_owned(),
        ),
        (
            r#"{"path":"big.txt"}"#.to_owned(),
            "missing field `content`".to_owned(),
        ),
    ];
    for (arguments, words) in refused {
        let output = call(&write, &arguments).await;
        assert!(output.is_error, "{}", output.content);
        assert_contains!(output.content, "invalid arguments for write_file");
        assert_contains!(output.content, words);
    }
    assert_eq!(
        std::fs::read_to_string(folders.path("work/big.txt")).unwrap(),
        content,
        "a refused write leaves the file as it was"
    );
    let names: Vec<_> = std::fs::read_dir(folders.path("work"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert!(
        !names
            .iter()
            .any(|name| name.to_string_lossy().ends_with(".tmp")),
        "no temporary file is left: {names:?}"
    );
}
