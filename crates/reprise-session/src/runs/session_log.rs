//! `session.log`: what the terminal showed, as plain text.
//!
//! Terminal output is full of escape sequences (colours, cursor moves, window titles,
//! hyperlinks). [`EscapeStripper`] removes them, keeping its state between writes so
//! that a sequence split across two chunks of output is still removed whole.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::fs::{io_err, open_private_append};
use crate::runs::error::RunError;
use crate::runs::folder::SESSION_LOG;

/// Removes ANSI/VT escape sequences and control characters from text.
///
/// Removed: CSI sequences (`ESC [ … final`, and the 8-bit `U+009B`), OSC strings
/// (`ESC ] … BEL` or `… ESC \`, and `U+009D`), DCS/SOS/PM/APC strings (`ESC P`, `ESC X`,
/// `ESC ^`, `ESC _`, ended by `ESC \`), two- and three-character escapes (`ESC 7`,
/// `ESC =`, `ESC ( B`, `ESC # 8`), other C1 controls, and C0 controls other than
/// newline and tab (`\r` is dropped, so `\r\n` becomes `\n`; BEL and backspace go).
#[derive(Clone, Debug, Default)]
pub struct EscapeStripper {
    state: State,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum State {
    #[default]
    Ground,
    /// After ESC.
    Escape,
    /// After ESC and intermediate bytes (`ESC (`, `ESC #`).
    EscapeIntermediate,
    /// Inside a CSI sequence, before its final byte.
    Csi,
    /// Inside an OSC/DCS/SOS/PM/APC string.
    Text,
    /// After ESC inside such a string: `\` ends it.
    TextEscape,
}

const ESC: char = '\u{1b}';
const BEL: char = '\u{07}';
const CSI_8BIT: char = '\u{9b}';
const ST_8BIT: char = '\u{9c}';
const OSC_8BIT: char = '\u{9d}';

impl EscapeStripper {
    /// A stripper in its initial state.
    pub fn new() -> Self {
        EscapeStripper::default()
    }

    /// The visible text of `chunk`. A sequence left open at the end of the chunk is
    /// continued by the next call.
    pub fn strip(&mut self, chunk: &str) -> String {
        let mut out = String::with_capacity(chunk.len());
        for c in chunk.chars() {
            self.feed(c, &mut out);
        }
        out
    }

    fn feed(&mut self, c: char, out: &mut String) {
        self.state = match self.state {
            State::Ground => match c {
                ESC => State::Escape,
                CSI_8BIT => State::Csi,
                OSC_8BIT | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => State::Text,
                '\n' | '\t' => {
                    out.push(c);
                    State::Ground
                }
                c if is_control(c) => State::Ground,
                c => {
                    out.push(c);
                    State::Ground
                }
            },
            State::Escape => match c {
                '[' => State::Csi,
                ']' | 'P' | 'X' | '^' | '_' => State::Text,
                ESC => State::Escape,
                '\u{20}'..='\u{2f}' => State::EscapeIntermediate,
                // A final byte ends a two-character escape; anything else aborts it.
                _ => State::Ground,
            },
            State::EscapeIntermediate => match c {
                '\u{20}'..='\u{2f}' => State::EscapeIntermediate,
                ESC => State::Escape,
                _ => State::Ground,
            },
            State::Csi => match c {
                '\u{40}'..='\u{7e}' => State::Ground,
                ESC => State::Escape,
                // Parameters, intermediates and controls embedded in the sequence.
                '\u{20}'..='\u{3f}' => State::Csi,
                c if is_control(c) => State::Csi,
                // Not part of any sequence: the sequence was malformed; keep the text.
                c => {
                    out.push(c);
                    State::Ground
                }
            },
            State::Text => match c {
                BEL | ST_8BIT => State::Ground,
                ESC => State::TextEscape,
                _ => State::Text,
            },
            State::TextEscape => match c {
                '\\' => State::Ground,
                // ESC inside a string ends it and starts a new sequence.
                c => {
                    self.state = State::Escape;
                    self.feed(c, out);
                    return;
                }
            },
        };
    }
}

fn is_control(c: char) -> bool {
    c < '\u{20}' || ('\u{7f}'..='\u{9f}').contains(&c)
}

/// `text` without escape sequences (see [`EscapeStripper`]).
pub fn strip_escapes(text: &str) -> String {
    EscapeStripper::new().strip(text)
}

/// Appends what the terminal showed to a run's `session.log` (0600), escape sequences
/// stripped.
#[derive(Debug)]
pub struct SessionLog {
    file: File,
    path: PathBuf,
    stripper: EscapeStripper,
}

impl SessionLog {
    /// Opens `run_dir/session.log` for appending, creating it if missing.
    pub fn open(run_dir: &Path) -> Result<SessionLog, RunError> {
        let path = run_dir.join(SESSION_LOG);
        let file = open_private_append(crate::fs::run_file_root(&path), &path)?;
        Ok(SessionLog {
            file,
            path,
            stripper: EscapeStripper::new(),
        })
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `text` (as the terminal received it) without its escape sequences, in
    /// one write. Not synced: the log is a record for people, not state to resume.
    pub fn write(&mut self, text: &str) -> Result<(), RunError> {
        let plain = self.stripper.strip(text);
        if plain.is_empty() {
            return Ok(());
        }
        append_raw(&self.file, &self.path, plain.as_bytes())
    }

    /// Appends `line` and a newline.
    pub fn write_line(&mut self, line: &str) -> Result<(), RunError> {
        let mut plain = self.stripper.strip(line);
        plain.push('\n');
        append_raw(&self.file, &self.path, plain.as_bytes())
    }

    /// Makes what was written durable.
    pub fn sync(&self) -> Result<(), RunError> {
        self.file.sync_data().map_err(io_err("sync", &self.path))?;
        Ok(())
    }
}

fn append_raw(file: &File, path: &Path, bytes: &[u8]) -> Result<(), RunError> {
    use std::io::Write;
    let mut handle = file;
    handle.write_all(bytes).map_err(io_err("write", path))?;
    Ok(())
}
