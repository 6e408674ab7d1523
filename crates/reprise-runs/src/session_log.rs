//! `session.log`: what the terminal showed, as plain text, secrets redacted.
//!
//! Terminal output is full of escape sequences (colours, cursor moves, window titles,
//! hyperlinks). [`EscapeStripper`] removes them, keeping its state between writes so
//! that a sequence split across two chunks of output is still removed whole.
//!
//! Everything written then passes a [`Redactor`] before it reaches the file. The unit
//! redacted is a block, not a single line: a streamed reply is held until it is
//! complete (the next line written, [`SessionLog::flush`], or the log dropped) and
//! redacted whole, because some secrets span lines (a PEM private key is recognisable
//! only from its `BEGIN` line to its `END` line; each body line alone looks like any
//! base64). A block larger than [`MAX_PENDING`] is written up to its last line end.

use std::fs::File;
use std::path::{Path, PathBuf};

use reprise_redact::Redactor;

use crate::error::RunError;
use crate::folder::SESSION_LOG;
use crate::fs::open_private_append;
use reprise_session::fs::io_err;

/// Removes ANSI/VT escape sequences and control characters from text, with the
/// `vte` parser of terminal emulators.
///
/// Removed: CSI sequences (`ESC [ … final`, and the 8-bit `U+009B`), OSC strings
/// (`ESC ] … BEL` or `… ESC \`, and `U+009D`), DCS/SOS/PM/APC strings (`ESC P`, `ESC X`,
/// `ESC ^`, `ESC _`, ended by `ESC \`), two- and three-character escapes (`ESC 7`,
/// `ESC =`, `ESC ( B`, `ESC # 8`), other C1 controls, and C0 controls other than
/// newline and tab (`\r` is dropped, so `\r\n` becomes `\n`; BEL and backspace go).
#[derive(Default)]
pub struct EscapeStripper {
    parser: vte::Parser,
}

impl std::fmt::Debug for EscapeStripper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EscapeStripper").finish_non_exhaustive()
    }
}

/// What the parser reports as shown: printed characters, newlines and tabs.
struct VisibleText<'a>(&'a mut String);

impl vte::Perform for VisibleText<'_> {
    fn print(&mut self, c: char) {
        self.0.push(c);
    }

    fn execute(&mut self, byte: u8) {
        if matches!(byte, b'\n' | b'\t') {
            self.0.push(char::from(byte));
        }
    }
}

/// The 7-bit form of an 8-bit C1 control that opens or ends a sequence: `vte` reads
/// those only as bytes, and text here is UTF-8, where they are two bytes each.
fn seven_bit(c: char) -> Option<&'static [u8]> {
    Some(match c {
        '\u{90}' => b"\x1bP",
        '\u{98}' => b"\x1bX",
        '\u{9b}' => b"\x1b[",
        '\u{9c}' => b"\x1b\\",
        '\u{9d}' => b"\x1b]",
        '\u{9e}' => b"\x1b^",
        '\u{9f}' => b"\x1b_",
        _ => return None,
    })
}

impl EscapeStripper {
    /// A stripper in its initial state.
    pub fn new() -> Self {
        EscapeStripper::default()
    }

    /// The visible text of `chunk`. A sequence left open at the end of the chunk is
    /// continued by the next call.
    pub fn strip(&mut self, chunk: &str) -> String {
        let mut out = String::with_capacity(chunk.len());
        let mut visible = VisibleText(&mut out);
        let mut from = 0;
        for (at, c) in chunk.char_indices() {
            if let Some(bytes) = seven_bit(c) {
                self.parser
                    .advance(&mut visible, &chunk.as_bytes()[from..at]);
                self.parser.advance(&mut visible, bytes);
                from = at + c.len_utf8();
            }
        }
        self.parser.advance(&mut visible, &chunk.as_bytes()[from..]);
        out
    }
}

/// `text` without escape sequences (see [`EscapeStripper`]).
pub fn strip_escapes(text: &str) -> String {
    EscapeStripper::new().strip(text)
}

/// The most text held back before it is redacted and written: a streamed reply longer
/// than this is written in parts, each ending at a line end.
pub const MAX_PENDING: usize = 1024 * 1024;

/// Appends what the terminal showed to a run's `session.log` (0600), escape sequences
/// stripped and secrets redacted.
#[derive(Debug)]
pub struct SessionLog {
    file: File,
    path: PathBuf,
    stripper: EscapeStripper,
    redactor: Redactor,
    /// Text written with [`SessionLog::write`] and not yet redacted and appended.
    pending: String,
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
            redactor: Redactor::new(),
            pending: String::new(),
        })
    }

    /// Redacts with `redactor` (by default, the built-in patterns only: give the one
    /// that knows the run's exact secret values, such as the API key).
    pub fn with_redactor(mut self, redactor: Redactor) -> SessionLog {
        self.redactor = redactor;
        self
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Adds `text` (as the terminal received it, such as a piece of a streamed reply)
    /// to the block being written, without its escape sequences. The block reaches the
    /// file, redacted, with the next [`write_line`](SessionLog::write_line) or
    /// [`flush`](SessionLog::flush). Not synced: the log is a record for people, not
    /// state to resume.
    pub fn write(&mut self, text: &str) -> Result<(), RunError> {
        let plain = self.stripper.strip(text);
        self.pending.push_str(&plain);
        if self.pending.len() > MAX_PENDING
            && let Some(end) = self.pending.rfind('\n')
        {
            let rest = self.pending.split_off(end + 1);
            let block = std::mem::replace(&mut self.pending, rest);
            self.append_redacted(&block)?;
        }
        Ok(())
    }

    /// Writes the pending block, then `line` (redacted as a whole, so it may span
    /// lines) and a newline.
    pub fn write_line(&mut self, line: &str) -> Result<(), RunError> {
        self.flush()?;
        let mut plain = self.stripper.strip(line);
        plain.push('\n');
        self.append_redacted(&plain)
    }

    /// Redacts the pending block and appends it.
    pub fn flush(&mut self) -> Result<(), RunError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let block = std::mem::take(&mut self.pending);
        self.append_redacted(&block)
    }

    /// Appends `text` redacted. Its line ends are kept out of the redaction: a
    /// pattern that runs to the end of the text (a private key without its `END`
    /// line) would otherwise take them, and glue the next line to this one.
    fn append_redacted(&self, text: &str) -> Result<(), RunError> {
        let body = text.trim_end_matches('\n');
        let mut out = self.redactor.redact(body).into_owned();
        out.push_str(&text[body.len()..]);
        append_raw(&self.file, &self.path, out.as_bytes())
    }

    /// Writes the pending block and makes what was written durable.
    pub fn sync(&mut self) -> Result<(), RunError> {
        self.flush()?;
        self.file.sync_data().map_err(io_err("sync", &self.path))?;
        Ok(())
    }
}

impl Drop for SessionLog {
    fn drop(&mut self) {
        // A reply cut off (a cancelled turn, an error) is still recorded.
        if let Err(error) = self.flush() {
            tracing::debug!(path = %self.path.display(), %error, "session.log not flushed");
        }
    }
}

fn append_raw(file: &File, path: &Path, bytes: &[u8]) -> Result<(), RunError> {
    use std::io::Write;
    let mut handle = file;
    handle.write_all(bytes).map_err(io_err("write", path))?;
    Ok(())
}
