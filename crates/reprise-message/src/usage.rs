//! The token counts stored on an entry (`usage`).

use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// The three counts reprise writes for a model call, in the order it writes them.
const COUNT_KEYS: [&str; 3] = ["prompt_tokens", "completion_tokens", "total_tokens"];

/// Token counts of one model call (or the sum of several).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TokenCounts {
    /// Tokens in the request.
    pub prompt_tokens: u64,
    /// Tokens generated.
    pub completion_tokens: u64,
    /// Both.
    pub total_tokens: u64,
}

/// An entry's `usage` field, kept as it was read.
///
/// What reprise writes, `{"prompt_tokens":…,"completion_tokens":…,"total_tokens":…}`
/// with those three integers in that order, is held as numbers: a chat-written
/// session has one per reply, and as a JSON map it took ten times the memory. Any
/// other value (more keys, another order, other types) is kept verbatim.
#[derive(Clone, Debug, PartialEq)]
pub enum StoredUsage {
    /// The three counts, written back exactly as read.
    Counts(TokenCounts),
    /// Any other value.
    Other(Box<Value>),
}

impl StoredUsage {
    /// The field for `counts`, with the server's cached prompt tokens where it
    /// reported them, stored as a server sends them
    /// (`prompt_tokens_details.cached_tokens`), so that every reader finds them alike.
    pub fn with_cached(counts: TokenCounts, cached: Option<u64>) -> StoredUsage {
        match cached {
            None => counts.into(),
            Some(cached) => StoredUsage::from(serde_json::json!({
                "prompt_tokens": counts.prompt_tokens,
                "completion_tokens": counts.completion_tokens,
                "total_tokens": counts.total_tokens,
                "prompt_tokens_details": {"cached_tokens": cached},
            })),
        }
    }

    /// The counts it holds: all three, read from an object that holds them as
    /// unsigned integers whatever else it holds; `None` otherwise.
    pub fn counts(&self) -> Option<TokenCounts> {
        match self {
            StoredUsage::Counts(counts) => Some(*counts),
            StoredUsage::Other(value) => {
                let object = value.as_object()?;
                let count = |key: &str| object.get(key)?.as_u64();
                Some(TokenCounts {
                    prompt_tokens: count(COUNT_KEYS[0])?,
                    completion_tokens: count(COUNT_KEYS[1])?,
                    total_tokens: count(COUNT_KEYS[2])?,
                })
            }
        }
    }

    /// The field as JSON.
    pub fn to_value(&self) -> Value {
        match self {
            StoredUsage::Counts(counts) => serde_json::json!({
                "prompt_tokens": counts.prompt_tokens,
                "completion_tokens": counts.completion_tokens,
                "total_tokens": counts.total_tokens,
            }),
            StoredUsage::Other(value) => (**value).clone(),
        }
    }
}

impl From<TokenCounts> for StoredUsage {
    fn from(counts: TokenCounts) -> StoredUsage {
        StoredUsage::Counts(counts)
    }
}

impl From<Value> for StoredUsage {
    /// Counts when `value` is exactly what reprise writes, else the value itself.
    fn from(value: Value) -> StoredUsage {
        match exact_counts(&value) {
            Some(counts) => StoredUsage::Counts(counts),
            None => StoredUsage::Other(Box::new(value)),
        }
    }
}

/// The counts of an object that is exactly the three keys, in order, with `u64`s.
fn exact_counts(value: &Value) -> Option<TokenCounts> {
    let object = value.as_object()?;
    if object.len() != COUNT_KEYS.len() || !object.keys().eq(COUNT_KEYS) {
        return None;
    }
    let mut numbers = object.values().map(Value::as_u64);
    Some(TokenCounts {
        prompt_tokens: numbers.next()??,
        completion_tokens: numbers.next()??,
        total_tokens: numbers.next()??,
    })
}

impl Serialize for StoredUsage {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            StoredUsage::Counts(counts) => {
                let mut map = serializer.serialize_map(Some(COUNT_KEYS.len()))?;
                map.serialize_entry(COUNT_KEYS[0], &counts.prompt_tokens)?;
                map.serialize_entry(COUNT_KEYS[1], &counts.completion_tokens)?;
                map.serialize_entry(COUNT_KEYS[2], &counts.total_tokens)?;
                map.end()
            }
            StoredUsage::Other(value) => value.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for StoredUsage {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<StoredUsage, D::Error> {
        // Rare on this path: the loader's fast decoder reads the usual shape itself.
        Value::deserialize(deserializer)
            .map(StoredUsage::from)
            .map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::{StoredUsage, TokenCounts};
    use serde_json::json;

    #[test]
    fn the_written_shape_is_held_as_numbers_and_written_back_the_same() {
        let text = r#"{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}"#;
        let usage: StoredUsage = serde_json::from_str(text).unwrap();
        let counts = TokenCounts {
            prompt_tokens: 7,
            completion_tokens: 3,
            total_tokens: 10,
        };
        assert_eq!(usage, StoredUsage::Counts(counts));
        assert_eq!(serde_json::to_string(&usage).unwrap(), text);
        assert_eq!(
            usage.to_value(),
            serde_json::from_str::<serde_json::Value>(text).unwrap()
        );
    }

    #[test]
    fn any_other_usage_is_kept_verbatim_and_still_counted_when_it_can_be() {
        for text in [
            r#"{"completion_tokens":3,"prompt_tokens":7,"total_tokens":10}"#,
            r#"{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10,"prompt_tokens_details":{"cached_tokens":2}}"#,
            r#"{"prompt_tokens":7,"completion_tokens":-3,"total_tokens":10}"#,
            r#"{"prompt_tokens":7.5,"completion_tokens":3,"total_tokens":10}"#,
            r#""many""#,
            "null",
        ] {
            let usage: StoredUsage = serde_json::from_str(text).unwrap();
            assert!(matches!(usage, StoredUsage::Other(_)), "{text}");
            assert_eq!(serde_json::to_string(&usage).unwrap(), text);
        }
        let reordered: StoredUsage = serde_json::from_value(
            json!({"total_tokens": 10, "prompt_tokens": 7, "completion_tokens": 3, "x": 1}),
        )
        .unwrap();
        assert_eq!(
            reordered.counts(),
            Some(TokenCounts {
                prompt_tokens: 7,
                completion_tokens: 3,
                total_tokens: 10
            })
        );
        let bad: StoredUsage = serde_json::from_value(json!({"prompt_tokens": "7"})).unwrap();
        assert_eq!(bad.counts(), None);
    }
}
