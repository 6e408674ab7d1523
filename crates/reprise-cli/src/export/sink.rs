//! Where an export goes as it is written: text held until a megabyte is there,
//! then written to the file as it is or to the terminal made safe.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

/// Text is written out once this much is held.
const FLUSH_AT: usize = 1 << 20;

/// Where an export goes: a file as it is, or the terminal made safe (as JSON when
/// `terminal_json`, else as text).
pub struct Sink<'o> {
    out: &'o mut dyn Write,
    terminal_json: Option<bool>,
    path: Option<&'o Path>,
    /// What is held, not written out yet.
    pub text: String,
}

impl<'o> Sink<'o> {
    /// Writes to `out`: `path` when it is a file, the terminal made safe (as JSON when
    /// `terminal_json` holds `true`) when it is none.
    pub fn new(
        out: &'o mut dyn Write,
        terminal_json: Option<bool>,
        path: Option<&'o Path>,
    ) -> Self {
        Sink {
            out,
            terminal_json,
            path,
            text: String::with_capacity(FLUSH_AT + FLUSH_AT / 4),
        }
    }

    /// Writes `text` out when it is long, and empties it. Text ending in a carriage
    /// return waits: with a line break after it, it is a line end the terminal
    /// sanitizer drops.
    pub fn flush_full(&mut self, text: &mut String) -> Result<()> {
        if text.len() >= FLUSH_AT && !text.ends_with('\r') {
            self.write(text)?;
            text.clear();
        }
        Ok(())
    }

    fn write(&mut self, text: &str) -> Result<()> {
        let shown = match self.terminal_json {
            Some(true) => crate::display::terminal::visible_json(text),
            Some(false) => crate::display::terminal::visible(text),
            None => std::borrow::Cow::Borrowed(text),
        };
        let written = self.out.write_all(shown.as_bytes());
        match self.path {
            Some(path) => written.with_context(|| format!("cannot write {}", path.display())),
            None => Ok(written?),
        }
    }

    /// Writes out what is held.
    pub fn finish(mut self) -> Result<()> {
        let text = std::mem::take(&mut self.text);
        self.write(&text)?;
        self.out.flush()?;
        Ok(())
    }
}
