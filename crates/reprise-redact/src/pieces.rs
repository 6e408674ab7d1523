//! Redacting a text too long to hold twice: it arrives in pieces and leaves in
//! windows, each window cut where no secret crosses the cut.
//!
//! A window is redacted with the text after it in view, and a cut is kept only
//! when the text after it redacts alone as it did beside the window: then no match
//! crosses the cut, and no pattern that looks at its neighbours (a word boundary,
//! a key before a value, a mask that uncovers the next match) sees it. Line ends
//! are tried first, then points further back; a match longer than the 64 KiB of
//! context is the one thing a window can miss.

use std::borrow::Cow;

/// What a [`PieceRedactor`] redacts with: the redactor's whole-text redaction.
pub(crate) trait RedactText {
    /// `text` with every secret in it masked.
    fn redact_text<'a>(&self, text: &'a str) -> Cow<'a, str>;
}

/// The text held before a window is redacted and passed on.
const WINDOW: usize = 1 << 20;
/// The text looked at on each side of a cut.
const CONTEXT: usize = 64 << 10;
/// How many cuts further back are tried when a match crosses the first one.
const TRIES: usize = 4;

/// Redacts a long text given in pieces ([`Redactor::pieces`](crate::Redactor::pieces)),
/// holding at most about a window (1 MiB) and its context at a time.
pub struct PieceRedactor<'r> {
    redactor: &'r dyn RedactText,
    pending: String,
    window: usize,
    context: usize,
    /// The pending length at which the next window is tried.
    next_try: usize,
}

impl std::fmt::Debug for PieceRedactor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PieceRedactor")
            .field("pending", &self.pending.len())
            .finish()
    }
}

impl<'r> PieceRedactor<'r> {
    pub(crate) fn new(redactor: &'r dyn RedactText) -> Self {
        Self::with_sizes(redactor, WINDOW, CONTEXT)
    }

    /// A redactor with other window and context sizes (tests use small ones).
    pub(crate) fn with_sizes(redactor: &'r dyn RedactText, window: usize, context: usize) -> Self {
        let window = window.max(1);
        PieceRedactor {
            redactor,
            pending: String::new(),
            window,
            context: context.max(1),
            next_try: window + 2 * context.max(1),
        }
    }

    /// Adds `piece` to the text, passing to `emit` every window now redacted.
    pub fn push<E>(
        &mut self,
        piece: &str,
        emit: &mut impl FnMut(&str) -> Result<(), E>,
    ) -> Result<(), E> {
        self.pending.push_str(piece);
        while self.pending.len() >= self.next_try {
            if !self.emit_window(emit)? {
                break;
            }
        }
        Ok(())
    }

    /// Redacts what is left and passes it to `emit`.
    pub fn finish<E>(mut self, emit: &mut impl FnMut(&str) -> Result<(), E>) -> Result<(), E> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let rest = std::mem::take(&mut self.pending);
        emit(&self.redactor.redact_text(&rest))
    }

    /// Passes on the pending text up to a clean cut about a context before its end
    /// (a line end when there is one near), redacted with the text after the cut in
    /// view. Without a clean cut it waits for another window of text, and past four
    /// windows it cuts anyway, each side redacted on its own.
    fn emit_window<E>(&mut self, emit: &mut impl FnMut(&str) -> Result<(), E>) -> Result<bool, E> {
        let text = self.pending.as_str();
        let joint = self.redactor.redact_text(text);
        let target = text.floor_char_boundary(text.len() - self.context);
        let near = text.floor_char_boundary(target.saturating_sub(self.context));
        let line_end = text[near..target].rfind('\n').map(|at| near + at + 1);
        let further_back = (1..=TRIES).map(|step| {
            text.floor_char_boundary(target.saturating_sub(step * self.context / TRIES))
        });
        let clean = line_end
            .into_iter()
            .chain(std::iter::once(target))
            .chain(further_back)
            .filter(|&cut| cut > 0)
            .find_map(|cut| {
                let right = self.redactor.redact_text(&text[cut..]);
                let left = joint.len().checked_sub(right.len())?;
                (joint.is_char_boundary(left) && joint[left..] == *right).then_some((cut, left))
            });
        let cut = match clean {
            Some((cut, left)) => {
                emit(&joint[..left])?;
                cut
            }
            None if text.len() < 4 * (self.window + 2 * self.context) => {
                self.next_try = text.len() + self.window;
                return Ok(false);
            }
            None => {
                let cut = target.max(1);
                emit(&self.redactor.redact_text(&text[..cut]))?;
                cut
            }
        };
        self.pending.drain(..cut);
        self.next_try = self.window + 2 * self.context;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::PieceRedactor;
    use crate::{AssignmentScan, MASK, Redactor};

    /// Secrets and their surroundings, each shorter than the context the tests use.
    fn fragment() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z ]{0,40}",
            "[a-zA-Z0-9_+/=.-]{0,50}",
            Just("\n".to_owned()),
            Just("password=hunter22 ".to_owned()),
            Just("\"api_key\": \"Zk3x9QvR2mT8bLw4NcY7pH1s\"".to_owned()),
            Just("Authorization: Bearer abc123def456ghi789".to_owned()),
            Just("postgres://app:hunter22@db:5432/app".to_owned()),
            Just("ghp_16C7e42F292c6912E7710c838347Ae178B4a".to_owned()),
            Just("AKIAIOSFODNN7EXAMPLE".to_owned()),
            Just("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1\n-----END RSA PRIVATE KEY-----\n".to_owned()),
            Just("my-known-run-time-value".to_owned()),
            Just(MASK.to_owned()),
            Just("é日本".to_owned()),
        ]
    }

    fn text() -> impl Strategy<Value = String> {
        prop::collection::vec(fragment(), 0..60).prop_map(|parts| parts.concat())
    }

    /// `text` cut into pieces at the given fractions of its length (char boundaries).
    fn pieces(text: &str, cuts: &[f64]) -> Vec<String> {
        let mut at: Vec<usize> = cuts
            .iter()
            .map(|f| text.floor_char_boundary((f * text.len() as f64) as usize))
            .collect();
        at.push(text.len());
        at.sort_unstable();
        let mut start = 0;
        at.into_iter()
            .map(|end| {
                let piece = text[start..end].to_owned();
                start = end;
                piece
            })
            .collect()
    }

    fn redacted_in_pieces(redactor: &Redactor, parts: &[String], window: usize) -> String {
        let mut out = String::new();
        let mut emit = |text: &str| -> Result<(), ()> {
            out.push_str(text);
            Ok(())
        };
        let mut pieces = PieceRedactor::with_sizes(redactor, window, 160);
        for part in parts {
            pieces.push(part, &mut emit).unwrap();
        }
        pieces.finish(&mut emit).unwrap();
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

        #[test]
        fn pieces_redact_as_the_whole_text_does(
            text in text(),
            cuts in prop::collection::vec(0.0..1.0f64, 0..8),
            window in 1usize..800,
        ) {
            let redactor = Redactor::new().with_secret("my-known-run-time-value");
            let parts = pieces(&text, &cuts);
            let whole = redactor.redact(&text).into_owned();
            prop_assert_eq!(redacted_in_pieces(&redactor, &parts, window), whole);
        }

        #[test]
        fn a_value_the_scan_clears_is_never_masked_whole(
            key in prop_oneof![
                Just("content"), Just("command"), Just("password"), Just("api_token"),
                Just("license_key"), Just("path"), Just("key"), Just("public_key"),
            ],
            value in prop_oneof![
                "[a-zA-Z0-9_+/=.~-]{0,40}",
                "[a-z0-9 ]{0,30}",
                any::<String>(),
            ],
            cuts in prop::collection::vec(0.0..1.0f64, 0..4),
        ) {
            let mut scan = AssignmentScan::new(key);
            for part in pieces(&value, &cuts) {
                scan.push(&part);
            }
            if !scan.might_be_masked() {
                prop_assert!(!Redactor::masks_assigned(key, &value));
            }
        }
    }

    #[test]
    fn a_long_random_value_under_an_ordinary_name_must_be_judged_whole() {
        let mut scan = AssignmentScan::new("content");
        scan.push("Zk3x9QvR2mT8bL");
        scan.push("w4NcY7pH1s");
        assert!(scan.might_be_masked());
        scan.push(" and then words");
        assert!(scan.is_settled());
        assert!(!scan.might_be_masked());
    }
}
