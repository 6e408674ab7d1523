//! The server's token counts, kept on the entries of the model calls they belong to,
//! so that a session's totals survive a restart: each assistant message carries the
//! `usage` of the call that produced it, and a compaction entry the summed `usage` of
//! its summary calls. The field is beside the message, never sent to a model, and so
//! is `model`, the model the call asked for, which the usage ledger prices by.

use reprise_provider::Usage;
use reprise_session::{Entry, MODEL_FIELD, StoredUsage, TokenCounts};
use serde_json::Value;

/// Records `usage` on `entry`, with the cached tokens where the server said how many
/// (`prompt_tokens_details.cached_tokens`, as OpenAI and llama.cpp send it), and the
/// `model` asked for.
pub(crate) fn set_usage(entry: &mut Entry, usage: Usage, model: &str) {
    let counts = TokenCounts {
        prompt_tokens: usage.prompt_tokens,
        completion_tokens: usage.completion_tokens,
        total_tokens: usage.total_tokens,
    };
    entry.usage = Some(StoredUsage::with_cached(counts, usage.cached_tokens));
    if !model.is_empty() {
        entry
            .extra
            .insert(MODEL_FIELD.to_owned(), Value::String(model.to_owned()));
    }
}

/// The token counts recorded on `entry`, if any (a malformed field counts as none).
pub fn usage_of(entry: &Entry) -> Option<Usage> {
    let usage = entry.usage.as_ref()?;
    let counts = usage.counts()?;
    let cached_tokens = match usage {
        StoredUsage::Counts(_) => None,
        StoredUsage::Other(value) => value
            .get("prompt_tokens_details")
            .and_then(|details| details.get("cached_tokens"))
            .and_then(Value::as_u64),
    };
    Some(Usage {
        prompt_tokens: counts.prompt_tokens,
        completion_tokens: counts.completion_tokens,
        total_tokens: counts.total_tokens,
        cached_tokens,
    })
}

/// Adds `more` to `total`.
pub(crate) fn add_usage(total: &mut Usage, more: Usage) {
    total.prompt_tokens = total.prompt_tokens.saturating_add(more.prompt_tokens);
    total.completion_tokens = total
        .completion_tokens
        .saturating_add(more.completion_tokens);
    total.total_tokens = total.total_tokens.saturating_add(more.total_tokens);
    total.cached_tokens = match (total.cached_tokens, more.cached_tokens) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
    };
}

/// The sum of the token counts recorded on `entries`; `None` when none has any.
pub fn usage_totals<'a>(entries: impl IntoIterator<Item = &'a Entry>) -> Option<Usage> {
    let mut totals: Option<Usage> = None;
    for usage in entries.into_iter().filter_map(usage_of) {
        add_usage(totals.get_or_insert_with(Usage::default), usage);
    }
    totals
}

/// The field of a compaction entry holding the summed counts of every entry recorded
/// before it in the same transcript (`null`: none had any).
pub const USAGE_BEFORE_FIELD: &str = "usage_before";

/// `usage` as [`USAGE_BEFORE_FIELD`] holds it.
pub(crate) fn usage_value(usage: Option<Usage>) -> Value {
    let Some(usage) = usage else {
        return Value::Null;
    };
    let mut fields = serde_json::Map::new();
    fields.insert("prompt_tokens".to_owned(), usage.prompt_tokens.into());
    fields.insert(
        "completion_tokens".to_owned(),
        usage.completion_tokens.into(),
    );
    fields.insert("total_tokens".to_owned(), usage.total_tokens.into());
    if let Some(cached) = usage.cached_tokens {
        fields.insert("cached_tokens".to_owned(), cached.into());
    }
    Value::Object(fields)
}

/// The counts [`USAGE_BEFORE_FIELD`] holds: `None` when it is absent or malformed,
/// `Some(None)` when it says no entry before had any.
fn usage_from_value(value: &Value) -> Option<Option<Usage>> {
    if value.is_null() {
        return Some(None);
    }
    let count = |name: &str| value.get(name).and_then(Value::as_u64);
    Some(Some(Usage {
        prompt_tokens: count("prompt_tokens")?,
        completion_tokens: count("completion_tokens")?,
        total_tokens: count("total_tokens")?,
        cached_tokens: count("cached_tokens"),
    }))
}

/// The counts recorded before the first of `entries`, read from the latest
/// compaction's `through` on: the latest compaction no rewind hides records those of
/// every entry before it ([`USAGE_BEFORE_FIELD`]), and those of the entries read
/// before it are taken out. `None` when it does not say.
pub(crate) fn usage_before_view(entries: &[Entry]) -> Option<Option<Usage>> {
    let hidden = reprise_session::rewound(entries);
    let at = entries.iter().zip(&hidden).rposition(|(entry, hidden)| {
        !*hidden && entry.kind.as_deref() == Some(reprise_session::COMPACTION_KIND)
    })?;
    let recorded = usage_from_value(entries[at].extra.get(USAGE_BEFORE_FIELD)?)?;
    let read = usage_totals(&entries[..at]);
    Some(match (recorded, read) {
        (recorded, None) => recorded,
        // The field says fewer than the entries read hold: not to be believed.
        (None, Some(_)) => return None,
        (Some(recorded), Some(read)) => Some(Usage {
            prompt_tokens: recorded.prompt_tokens.checked_sub(read.prompt_tokens)?,
            completion_tokens: recorded
                .completion_tokens
                .checked_sub(read.completion_tokens)?,
            total_tokens: recorded.total_tokens.checked_sub(read.total_tokens)?,
            cached_tokens: match (recorded.cached_tokens, read.cached_tokens) {
                (cached, None) => cached,
                (Some(cached), Some(read)) => Some(cached.checked_sub(read)?),
                (None, Some(_)) => return None,
            },
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use reprise_session::Message;

    fn counted(prompt: u64, completion: u64) -> Entry {
        let mut entry = Entry::message(Message::assistant("ok"));
        set_usage(
            &mut entry,
            Usage {
                prompt_tokens: prompt,
                completion_tokens: completion,
                total_tokens: prompt + completion,
                cached_tokens: None,
            },
            "",
        );
        entry
    }

    #[test]
    fn totals_add_every_counted_entry_and_skip_the_rest() {
        let mut malformed = Entry::message(Message::assistant("odd"));
        malformed.usage = Some(serde_json::json!("many").into());
        let entries = [
            counted(100, 20),
            Entry::message(Message::user("hi")),
            malformed,
            counted(150, 5),
        ];
        let totals = usage_totals(&entries).unwrap();
        assert_eq!(
            (
                totals.prompt_tokens,
                totals.completion_tokens,
                totals.total_tokens
            ),
            (250, 25, 275)
        );
        assert_eq!(usage_totals(&entries[1..3]), None);
    }

    #[test]
    fn the_field_survives_the_entry_codec() {
        let entry = counted(7, 3);
        let line = serde_json::to_string(&entry).unwrap();
        assert!(
            line.contains(r#""usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}"#),
            "{line}"
        );
        let back: Entry = serde_json::from_str(&line).unwrap();
        assert_eq!(usage_of(&back), usage_of(&entry));
    }

    #[test]
    fn cached_tokens_and_the_model_are_kept_beside_the_counts() {
        let mut entry = Entry::message(Message::assistant("ok"));
        let usage = Usage {
            prompt_tokens: 172,
            completion_tokens: 40,
            total_tokens: 212,
            cached_tokens: Some(167),
        };
        set_usage(&mut entry, usage, "gemma3");
        let line = serde_json::to_string(&entry).unwrap();
        assert!(
            line.contains(r#""usage":{"prompt_tokens":172,"completion_tokens":40,"total_tokens":212,"prompt_tokens_details":{"cached_tokens":167}}"#),
            "{line}"
        );
        assert!(line.contains(r#""model":"gemma3""#), "{line}");
        let back: Entry = serde_json::from_str(&line).unwrap();
        assert_eq!(usage_of(&back), Some(usage));
    }
}
