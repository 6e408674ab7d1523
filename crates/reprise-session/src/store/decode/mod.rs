//! Reading entry lines: two decoders that return the same entries.
//!
//! FIGURES
//!
//! How they are kept equal: the property tests below hold serde's decoder to the
//! derived twin of the types ([`derived`]): on lines of every shape ([`lines`]) it
//! returns the same entry, or refuses the line with the same error. The tests in
//! [`fast`] hold the fast decoder to serde's: the same entry, or none only when serde
//! refuses the line too (and the fast decoder takes every line serde accepts).

use std::sync::atomic::{AtomicBool, Ordering};

use crate::entry::Entry;

#[cfg(test)]
mod derived;
mod fast;
#[cfg(test)]
mod lines;

pub(crate) use fast::EntryDecoder;

/// Whether lines are decoded by serde alone (the fast decoder skipped).
static SERDE_ONLY: AtomicBool = AtomicBool::new(false);

/// Decodes entry lines with serde's decoder alone (`true`), or with the fast decoder
/// first (`false`, the default), for the rest of the process: the storage benchmark
/// compares the two in one run.
pub fn decode_with_serde_only(serde_only: bool) {
    SERDE_ONLY.store(serde_only, Ordering::Relaxed);
}

impl EntryDecoder {
    /// The fast decoder's [`EntryDecoder::decode_line`], unless the process decodes
    /// with serde alone.
    pub(crate) fn decode_line_if_fast(
        &mut self,
        bytes: &[u8],
        start: usize,
    ) -> Option<(Entry, usize)> {
        if SERDE_ONLY.load(Ordering::Relaxed) {
            return None;
        }
        self.decode_line(bytes, start)
    }
}

#[cfg(test)]
mod tests {
    //! serde's decoder against the derived twin: what the hand-written impls replaced.
    use proptest::prelude::*;
    use proptest::sample::Index;
    use serde_json::Value;

    use super::derived;
    use super::lines::line;
    use crate::entry::Entry;
    use crate::message::{Content, ContentPart, FunctionCall, Message, Role, ToolCall};

    fn entry(derived: derived::Entry) -> Entry {
        Entry {
            uuid: derived.uuid,
            ts: derived.ts,
            kind: derived.kind,
            message: derived.message.map(message),
            extra: derived.extra,
        }
    }

    fn message(derived: derived::Message) -> Message {
        Message {
            role: Role::from(derived.role.as_str()),
            content: derived.content.map(|content| match content {
                derived::Content::Text(text) => Content::Text(text),
                derived::Content::Parts(parts) => Content::Parts(
                    parts
                        .into_iter()
                        .map(|part| ContentPart {
                            kind: part.kind,
                            text: part.text,
                            extra: part.extra,
                        })
                        .collect(),
                ),
            }),
            tool_calls: derived.tool_calls.map(|calls| {
                calls
                    .into_iter()
                    .map(|call| ToolCall {
                        id: call.id,
                        kind: call.kind,
                        function: FunctionCall {
                            name: call.function.name,
                            arguments: call.function.arguments,
                            extra: call.function.extra,
                        },
                        extra: call.extra,
                    })
                    .collect()
            }),
            tool_call_id: derived.tool_call_id,
            extra: derived.extra,
        }
    }

    /// serde's decoder and the derived twin on one line: the same entry, or the same
    /// error (message and position). Returns what serde's decoder said.
    fn check(line: &[u8]) -> Result<Result<Entry, String>, TestCaseError> {
        let ours = serde_json::from_slice::<Entry>(line).map_err(|error| error.to_string());
        let derived = serde_json::from_slice::<derived::Entry>(line)
            .map(entry)
            .map_err(|error| error.to_string());
        prop_assert_eq!(&ours, &derived, "{}", String::from_utf8_lossy(line));
        // Read from a JSON value, as bare-message lines are: the same again.
        if let Ok(Value::Object(object)) = serde_json::from_slice::<Value>(line) {
            let value = Value::Object(object.clone());
            let ours = serde_json::from_value::<Entry>(value.clone()).map_err(|e| e.to_string());
            let derived = serde_json::from_value::<derived::Entry>(value)
                .map(entry)
                .map_err(|e| e.to_string());
            prop_assert_eq!(ours, derived);
            if let Some(inner) = object.get("message") {
                let ours =
                    serde_json::from_value::<Message>(inner.clone()).map_err(|e| e.to_string());
                let derived = serde_json::from_value::<derived::Message>(inner.clone())
                    .map(message)
                    .map_err(|e| e.to_string());
                prop_assert_eq!(ours, derived);
            }
        }
        Ok(ours)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(600))]

        /// Any line, of any shape: serde's decoder returns the derived decoder's entry,
        /// or its error, word for word and at the same position.
        #[test]
        fn serde_decoder_equals_the_derived_one_on_any_line(line in line()) {
            let _ = check(&line)?;
        }

        /// Lines cut anywhere: the same again.
        #[test]
        fn serde_decoder_equals_the_derived_one_on_truncated_lines(
            line in line(),
            cut in any::<Index>(),
        ) {
            let _ = check(&line[..cut.index(line.len() + 1)])?;
        }
    }

    /// Lines each refused for one reason, a known field's value of the wrong type
    /// included: the same error as the derived decoder's, and the expected one.
    #[test]
    fn serde_decoder_refuses_lines_as_the_derived_one_does() {
        let head =
            r#""uuid":"0193c0de-0000-7000-8000-000000000001","ts":"2026-11-30T09:38:04.123Z""#;
        let cases = [
            (
                format!("{{{head},\"message\":{{\"role\":\"user\",\"content\":5}}}}"),
                "untagged enum Content",
            ),
            (
                format!("{{{head},\"message\":{{\"role\":\"user\",\"content\":{{\"a\":1}}}}}}"),
                "untagged enum Content",
            ),
            (
                format!(
                    "{{{head},\"message\":{{\"role\":\"user\",\"content\":[{{\"type\":5}},{{\"type\":\"text\"}}]}}}}"
                ),
                "untagged enum Content",
            ),
            (
                format!(
                    "{{{head},\"message\":{{\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"type\":\"text\"}}]}}}}"
                ),
                "untagged enum Content",
            ),
            (
                format!("{{{head},\"message\":{{\"role\":\"user\",\"content\":[1,2e999]}}}}"),
                "number out of range",
            ),
            (
                format!("{{{head},\"uuid\":\"0193c0de-0000-7000-8000-000000000002\"}}"),
                "duplicate field `uuid`",
            ),
            (
                format!("{{{head},\"message\":{{\"content\":\"x\"}}}}"),
                "missing field `role`",
            ),
            (
                format!(
                    "{{{head},\"message\":{{\"role\":\"assistant\",\"tool_calls\":[{{\"id\":\"c\"}}]}}}}"
                ),
                "missing field `function`",
            ),
            (
                format!("{{{head},\"message\":{{\"role\":\"assistant\",\"tool_calls\":5}}}}"),
                "expected a sequence",
            ),
            (
                format!("{{{head},\"message\":[1]}}"),
                "expected struct Message",
            ),
            (format!("{{{head},\"kind\":1}}"), "expected a string"),
            (
                r#"{"uuid":"0193c0de-0000-7000-8000-000000000001","ts":"yesterday" }"#.to_owned(),
                "failed to parse",
            ),
            (
                r#"{"ts":"2026-11-30T09:38:04.123Z"}"#.to_owned(),
                "missing field `uuid`",
            ),
            ("[1,2]".to_owned(), "expected struct Entry"),
        ];
        for (line, reason) in cases {
            let error = check(line.as_bytes()).unwrap().expect_err(&line);
            assert!(error.contains(reason), "{line}: {error}");
        }
    }
}
