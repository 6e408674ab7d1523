//! The body of a JSON string literal unescaped piece by piece, so that a large
//! `write_file` content goes to its file without a second whole copy in memory:
//! the decoder keeps, between pieces, an escape that a piece boundary cut.

use std::io::Write;

use reprise_provider::byte_count::ByteCounter;

use crate::error::{EscapeError, UnescapeError};

/// How many bytes of the literal are decoded at a time by [`unescape_to`]: the
/// most the decoded text held in memory at once.
pub const PIECE: usize = 64 * 1024;

/// Where the decoder is in the literal.
#[derive(Clone, Copy, Debug)]
enum State {
    /// In plain text.
    Text,
    /// After a backslash.
    Backslash,
    /// Inside `\uXXXX`: the digits read so far, their value, and the leading
    /// surrogate (with where its escape began) this one must complete, if any.
    Hex {
        digits: u8,
        value: u32,
        leading: Option<(u32, u64)>,
    },
    /// After a leading surrogate's escape: a `\` of its trailing one must follow.
    AfterLeading { leading: u32, at: u64 },
    /// After that `\`: a `u` must follow.
    AfterLeadingBackslash { leading: u32, at: u64 },
}

/// A decoder of one JSON string literal's body (without its quotes), fed in pieces
/// of any size: an escape may be cut anywhere between two pieces.
#[derive(Debug)]
pub struct Unescaper {
    state: State,
    /// The offset in the body of the next byte fed.
    offset: u64,
    /// Where the escape being read began.
    escape_at: u64,
}

impl Default for Unescaper {
    fn default() -> Self {
        Unescaper::new()
    }
}

impl Unescaper {
    /// A decoder at the start of a body.
    pub fn new() -> Self {
        Unescaper {
            state: State::Text,
            offset: 0,
            escape_at: 0,
        }
    }

    /// Decodes the next `piece` of the body, appending the text to `out`. The text
    /// is never longer than the piece. An escape cut at the piece's end is
    /// finished by the next piece.
    pub fn push(&mut self, piece: &[u8], out: &mut Vec<u8>) -> Result<(), EscapeError> {
        let mut index = 0;
        while index < piece.len() {
            let at = self.offset + index as u64;
            match self.state {
                State::Text => {
                    let rest = &piece[index..];
                    let run = rest
                        .iter()
                        .position(|&byte| byte == b'\\' || byte == b'"' || byte < 0x20)
                        .unwrap_or(rest.len());
                    out.extend_from_slice(&rest[..run]);
                    index += run;
                    let Some(&byte) = piece.get(index) else {
                        break;
                    };
                    let at = self.offset + index as u64;
                    match byte {
                        b'\\' => {
                            self.escape_at = at;
                            self.state = State::Backslash;
                        }
                        b'"' => return Err(EscapeError::Quote { at }),
                        code => return Err(EscapeError::Control { code, at }),
                    }
                }
                State::Backslash => {
                    let decoded = match piece[index] {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => {
                            self.state = State::Hex {
                                digits: 0,
                                value: 0,
                                leading: None,
                            };
                            index += 1;
                            continue;
                        }
                        escape => {
                            return Err(EscapeError::InvalidEscape {
                                escape,
                                at: self.escape_at,
                            });
                        }
                    };
                    out.push(decoded);
                    self.state = State::Text;
                }
                State::Hex {
                    digits,
                    value,
                    leading,
                } => {
                    let digit = char::from(piece[index])
                        .to_digit(16)
                        .ok_or(EscapeError::BadHex { at: self.escape_at })?;
                    let value = value << 4 | digit;
                    self.state = if digits < 3 {
                        State::Hex {
                            digits: digits + 1,
                            value,
                            leading,
                        }
                    } else {
                        self.unit(value, leading, out)?
                    };
                }
                State::AfterLeading { leading, at: began } => {
                    if piece[index] != b'\\' {
                        return Err(EscapeError::LoneSurrogate {
                            unit: leading,
                            at: began,
                        });
                    }
                    self.escape_at = at;
                    self.state = State::AfterLeadingBackslash { leading, at: began };
                }
                State::AfterLeadingBackslash { leading, at: began } => {
                    if piece[index] != b'u' {
                        return Err(EscapeError::LoneSurrogate {
                            unit: leading,
                            at: began,
                        });
                    }
                    self.state = State::Hex {
                        digits: 0,
                        value: 0,
                        leading: Some((leading, began)),
                    };
                }
            }
            index += 1;
        }
        self.offset += piece.len() as u64;
        Ok(())
    }

    /// Says whether the body ended where it may: not inside an escape.
    pub fn finish(self) -> Result<(), EscapeError> {
        match self.state {
            State::Text => Ok(()),
            State::AfterLeading { leading, at } | State::AfterLeadingBackslash { leading, at } => {
                Err(EscapeError::LoneSurrogate { unit: leading, at })
            }
            State::Backslash | State::Hex { .. } => {
                Err(EscapeError::Unfinished { at: self.escape_at })
            }
        }
    }

    /// The state after the UTF-16 unit `value` of a `\u` escape, its character
    /// appended to `out` once it is whole.
    fn unit(
        &self,
        value: u32,
        leading: Option<(u32, u64)>,
        out: &mut Vec<u8>,
    ) -> Result<State, EscapeError> {
        let code = match (leading, value) {
            (None, 0xD800..=0xDBFF) => {
                return Ok(State::AfterLeading {
                    leading: value,
                    at: self.escape_at,
                });
            }
            (None, 0xDC00..=0xDFFF) => {
                return Err(EscapeError::LoneSurrogate {
                    unit: value,
                    at: self.escape_at,
                });
            }
            (None, code) => code,
            (Some((leading, _)), 0xDC00..=0xDFFF) => {
                0x1_0000 + ((leading - 0xD800) << 10) + (value - 0xDC00)
            }
            (Some((leading, at)), _) => {
                return Err(EscapeError::LoneSurrogate { unit: leading, at });
            }
        };
        // Surrogates were handled above: every other value up to 0x10FFFF is a char.
        let character = char::from_u32(code).ok_or(EscapeError::LoneSurrogate {
            unit: code,
            at: self.escape_at,
        })?;
        out.extend_from_slice(character.encode_utf8(&mut [0; 4]).as_bytes());
        Ok(State::Text)
    }
}

/// Decodes the body `body` of a JSON string literal (without its quotes) to
/// `out`, [`PIECE`] bytes at a time; the number of bytes of text written.
pub fn unescape_to<W: Write + ?Sized>(body: &str, out: &mut W) -> Result<u64, UnescapeError> {
    let mut decoder = Unescaper::new();
    let mut text = Vec::with_capacity(PIECE);
    let mut written = 0;
    for piece in body.as_bytes().chunks(PIECE) {
        text.clear();
        decoder.push(piece, &mut text)?;
        out.write_all(&text)?;
        written += text.len() as u64;
    }
    decoder.finish()?;
    Ok(written)
}

/// The length of the text the body `body` of a JSON string literal decodes to,
/// checking it whole without keeping the text.
pub fn unescaped_len(body: &str) -> Result<u64, EscapeError> {
    let mut counter = ByteCounter::default();
    match unescape_to(body, &mut counter) {
        Ok(length) => Ok(length),
        Err(UnescapeError::Escape(error)) => Err(error),
        // The counter never fails.
        Err(UnescapeError::Write(_)) => Ok(counter.bytes),
    }
}
