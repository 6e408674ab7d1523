//! Secret redaction for reprise: a table of known key formats, plus the exact values
//! of secrets known at run time (the API key in use, `*_KEY`/`*_TOKEN`/… variables).
//!
//! Everything reprise writes about tool calls passes through a [`Redactor`] first.
//!
//! ```
//! use reprise_redact::{Redactor, MASK};
//!
//! let redactor = Redactor::new().with_secret("my-run-time-api-key");
//! let out = redactor.redact("password=hunter22 key=my-run-time-api-key");
//! assert_eq!(out, format!("password={MASK} key={MASK}"));
//! ```
//!
//! Guarantees: only the secret part of a match is masked (`password=`, `Bearer `,
//! `user:` in a URL stay); text without secrets is returned borrowed and unchanged;
//! redacting twice gives the same text as redacting once; no input makes it panic.

mod engine;
mod env;
mod patterns;
mod pieces;
mod prefixes;
mod value;

use std::borrow::Cow;
use std::fmt;

use regex::Regex;
use serde_json::Value;

pub use pieces::PieceRedactor;
pub use value::AssignmentScan;

/// What a secret is replaced with.
pub const MASK: &str = "[REDACTED]";

/// The most passes [`Redactor::redact`] makes: a pass can uncover a match that an
/// earlier one hid (a known value inside an assignment), and passes stop as soon as
/// one changes nothing.
const MAX_PASSES: usize = 4;

/// The names of the built-in patterns (`github_token`, `url_credentials`,
/// `secret_assignment`, …), for documentation and diagnostics.
pub fn pattern_names() -> impl Iterator<Item = &'static str> {
    patterns::PATTERNS.iter().map(|p| p.name)
}

/// Compiles the built-in pattern table now. It is otherwise compiled by the first
/// [`Redactor::redact`], which then takes tens of milliseconds: a program that
/// will soon redact can call this on another thread while it does other work.
/// (The set that scans long texts in one pass is compiled by the first long text.)
pub fn prepare() {
    std::sync::LazyLock::force(&engine::COMPILED);
}

/// Replaces secrets in text. Cheap to clone and share.
#[derive(Clone, Default)]
pub struct Redactor {
    /// Exact values to mask, longest first.
    known: Vec<String>,
    /// `known` as one alternation (leftmost match, longest value first).
    known_regex: Option<Regex>,
}

impl fmt::Debug for Redactor {
    // Never print the known values themselves: a Debug line can end up in a log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field("known_values", &self.known.len())
            .field("patterns", &patterns::PATTERNS.len())
            .finish()
    }
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
        if value.chars().count() >= env::MIN_SECRET_LEN
            && !MASK.contains(value.as_str())
            && !value.contains(MASK)
            && !self.known.contains(&value)
        {
            self.known.push(value);
            self.rebuild_known();
        }
        self
    }

    /// Also redacts the values of environment variables whose names end in `KEY`,
    /// `TOKEN`, `SECRET` or `PASSWORD` (case-insensitive). Values shorter than 8
    /// characters, flag words (`true`, `off`, …), plain numbers and file paths are
    /// ignored.
    pub fn with_env_secrets(self) -> Self {
        let vars = std::env::vars_os().filter_map(|(name, value)| {
            Some((name.into_string().ok()?, value.into_string().ok()?))
        });
        env::secret_values(vars)
            .into_iter()
            .fold(self, |redactor, value| redactor.with_secret(value))
    }

    /// How many exact values this redactor masks.
    pub fn known_secret_count(&self) -> usize {
        self.known.len()
    }

    fn rebuild_known(&mut self) {
        // Longest first, so that a value containing another is masked whole.
        self.known
            .sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        let alternation = self
            .known
            .iter()
            .map(|v| regex::escape(v))
            .collect::<Vec<_>>()
            .join("|");
        // A failure (size limit) leaves `known_regex` empty: `replace_known` then
        // falls back to plain string replacement.
        self.known_regex = Regex::new(&alternation).ok();
    }

    /// The text with every secret replaced by [`MASK`].
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let Some(compiled) = engine::COMPILED.as_ref() else {
            // The table failed to compile (ruled out by the tests): fail closed.
            return if text.is_empty() {
                Cow::Borrowed(text)
            } else {
                Cow::Owned(MASK.to_owned())
            };
        };
        let mut out = Cow::Borrowed(text);
        for _ in 0..MAX_PASSES {
            let mut changed = false;
            if let Some(replaced) = self.replace_known(&out) {
                out = Cow::Owned(replaced);
                changed = true;
            }
            let spans = engine::secret_spans(compiled, &out);
            if !spans.is_empty() {
                out = Cow::Owned(engine::apply(&out, &spans));
                changed = true;
            }
            if !changed {
                break;
            }
        }
        out
    }

    /// Replaces known values; `None` when none occurs.
    fn replace_known(&self, text: &str) -> Option<String> {
        if self.known.is_empty() {
            return None;
        }
        match &self.known_regex {
            Some(regex) => match regex.replace_all(text, MASK) {
                Cow::Borrowed(_) => None,
                Cow::Owned(replaced) => Some(replaced),
            },
            None => {
                let mut out: Option<String> = None;
                for value in &self.known {
                    let current = out.as_deref().unwrap_or(text);
                    if current.contains(value.as_str()) {
                        out = Some(current.replace(value.as_str(), MASK));
                    }
                }
                out
            }
        }
    }

    /// Redacts a text too long to hold twice, given in pieces: see [`PieceRedactor`].
    /// What it passes on is what [`redact`](Redactor::redact) gives for the whole
    /// text, unless one match is longer than the 64 KiB looked at around each cut.
    pub fn pieces(&self) -> PieceRedactor<'_> {
        PieceRedactor::new(self)
    }

    /// Whether [`redact_json`](Redactor::redact_json) masks whole a string `value`
    /// stored under `key` (`"password": "…"`).
    pub fn masks_assigned(key: &str, value: &str) -> bool {
        value != MASK && value::accept_assignment(key, value, false, "")
    }

    /// Redacts a JSON value in place: every string inside it, at any depth. A string
    /// stored under a secret-looking key (`"password"`, `"api_key"`, `"token"`, …) is
    /// masked whole unless it is a placeholder, since once parsed the key and the
    /// value are no longer side by side in one text. Object keys themselves are kept.
    pub fn redact_json(&self, value: &mut Value) {
        match value {
            Value::String(text) => {
                if let Cow::Owned(redacted) = self.redact(text) {
                    *text = redacted;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.redact_json(item)),
            Value::Object(map) => {
                for (key, item) in map.iter_mut() {
                    if let Value::String(text) = item
                        && Redactor::masks_assigned(key, text)
                    {
                        *text = MASK.to_owned();
                    } else {
                        self.redact_json(item);
                    }
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
}

impl pieces::RedactText for Redactor {
    fn redact_text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        self.redact(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn known_values_are_masked_longest_first() {
        let r = Redactor::new()
            .with_secret("abcdefgh")
            .with_secret("abcdefgh-longer-value");
        assert_eq!(r.redact("x abcdefgh-longer-value y"), format!("x {MASK} y"));
        assert_eq!(r.redact("x abcdefgh y"), format!("x {MASK} y"));
    }

    #[test]
    fn short_values_and_mask_fragments_are_not_known_secrets() {
        let r = Redactor::new().with_secret("short").with_secret("REDACTED");
        assert_eq!(r.known_secret_count(), 0);
        assert_eq!(r.redact("short REDACTED"), "short REDACTED");
    }

    #[test]
    fn text_without_secrets_is_borrowed() {
        let r = Redactor::new();
        assert!(matches!(r.redact("just some text"), Cow::Borrowed(_)));
    }

    #[test]
    fn only_the_secret_part_is_masked() {
        let r = Redactor::new();
        assert_eq!(r.redact("password=hunter22"), format!("password={MASK}"));
        assert_eq!(
            r.redact("postgres://app:hunter22@db:5432/app"),
            format!("postgres://app:{MASK}@db:5432/app")
        );
        assert_eq!(
            r.redact("Authorization: Bearer abc123def456"),
            format!("Authorization: Bearer {MASK}")
        );
    }

    #[test]
    fn pem_blocks_spanning_lines_are_masked() {
        let text = "key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\nAAAAAAAABAAAAMwAAAAtzc2gtZW\n-----END OPENSSH PRIVATE KEY-----\ndone";
        let out = r_redact(text);
        assert!(!out.contains("b3BlbnNzaC1rZXktdjE"));
        assert!(!out.contains("AAAAAAAABAAAAMwAAAAtzc2gtZW"));
        assert!(out.starts_with("key:\n-----BEGIN OPENSSH PRIVATE KEY-----"));
        assert!(out.ends_with("-----END OPENSSH PRIVATE KEY-----\ndone"));
    }

    #[test]
    fn an_aws_secret_key_after_its_key_id_on_the_line_is_masked() {
        let key = "Zk3/9xQvR2mT+8bLw4NcY7pH1sJd6fGa0eUoKiVn";
        assert_eq!(key.len(), 40);
        for (text, shown) in [
            (
                format!("creds: AKIAJ3X7QW2ZK5N8RT4Y {key}"),
                format!("creds: {MASK} {MASK}"),
            ),
            (
                format!("AKIAJ3X7QW2ZK5N8RT4Y:{key}\nnext line"),
                format!("{MASK}:{MASK}\nnext line"),
            ),
            (
                format!("id AKIAJ3X7QW2ZK5N8RT4Y and the secret is \"{key}\"."),
                format!("id {MASK} and the secret is \"{MASK}\"."),
            ),
        ] {
            assert_eq!(r_redact(&text), shown);
        }
        // Not a secret key: a commit hash, a longer string, one on the next line
        // with no name (only the id is masked).
        for (text, shown) in [
            (
                "AKIAJ3X7QW2ZK5N8RT4Y at 0123456789abcdef0123456789abcdef01234567".to_owned(),
                format!("{MASK} at 0123456789abcdef0123456789abcdef01234567"),
            ),
            (
                format!("AKIAJ3X7QW2ZK5N8RT4Y {key}Zk3"),
                format!("{MASK} {key}Zk3"),
            ),
            (
                format!("AKIAJ3X7QW2ZK5N8RT4Y\n{key}"),
                format!("{MASK}\n{key}"),
            ),
        ] {
            assert_eq!(r_redact(&text), shown);
        }
    }

    fn r_redact(text: &str) -> String {
        Redactor::new().redact(text).into_owned()
    }

    #[test]
    fn benign_text_is_left_alone() {
        for text in [
            "api_key = <YOUR_API_KEY>",
            "token: ${TOKEN}",
            "password = $DB_PASSWORD",
            "OPENAI_API_KEY=xxxxxxxxxxxx",
            "let password = form.password;",
            "fn login(user: &str, password: &str)",
            "def connect(password: str, token: Optional[str] = None):",
            "\"max_tokens\": 1024, \"token_type\": \"bearer\"",
            "s3.amazonaws.com",
            "==========================",
            "//////////////////////////",
            "See https://docs.example.com/auth for the token format.",
        ] {
            assert_eq!(r_redact(text), text, "touched benign text");
        }
    }

    #[test]
    fn pattern_names_cover_the_required_formats() {
        let names: Vec<_> = pattern_names().collect();
        for required in [
            "aws_access_key_id",
            "google_api_key",
            "github_token",
            "github_fine_grained_pat",
            "gitlab_token",
            "slack_token",
            "stripe_secret_key",
            "huggingface_token",
            "anthropic_api_key",
            "openai_api_key",
            "groq_api_key",
            "xai_api_key",
            "replicate_api_token",
            "jwt",
            "pem_private_key",
            "url_credentials",
            "secret_assignment",
            "bearer_token",
        ] {
            assert!(names.contains(&required), "missing pattern {required}");
        }
    }

    #[test]
    fn debug_does_not_print_known_values() {
        let r = Redactor::new().with_secret("super-secret-value");
        assert!(!format!("{r:?}").contains("super-secret-value"));
    }

    #[test]
    fn redact_json_masks_strings_and_secret_fields() {
        let r = Redactor::new().with_secret("run-time-api-key");
        let mut value = json!({
            "command": "curl -H 'Authorization: Bearer abc123def456' https://x",
            "password": "hunter2",
            "api_key": "run-time-api-key",
            "token": "${TOKEN}",
            "nested": [{"secret": "open sesame"}, "ghp_0123456789abcdefghijABCDEFGHIJ012345"],
            "max_tokens": 100,
            "name": "reprise",
        });
        r.redact_json(&mut value);
        assert_eq!(
            value,
            json!({
                "command": format!("curl -H 'Authorization: Bearer {MASK}' https://x"),
                "password": MASK,
                "api_key": MASK,
                "token": "${TOKEN}",
                "nested": [{"secret": MASK}, MASK],
                "max_tokens": 100,
                "name": "reprise",
            })
        );
    }
}
