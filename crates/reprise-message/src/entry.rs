//! Entry lines: one JSON object per line in a session file.

use jiff::Timestamp;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::fields::Fields;
use crate::message::Message;
use crate::usage::StoredUsage;

/// The entry field holding the server's token counts of the model call that produced
/// the entry (`{"prompt_tokens", "completion_tokens", "total_tokens"}`); beside the
/// message, never sent to a model.
pub const USAGE_FIELD: &str = "usage";

/// The entry field naming the model that made the entry (`"model": "qwen2.5:7b"`): the
/// model asked for by the call whose `usage` the entry records; beside the message,
/// never sent to a model.
pub const MODEL_FIELD: &str = "model";

/// One line of a session file: a message, or another kind of entry (`kind` set).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Unique per entry (UUIDv7 for entries written here). Appending an entry whose
    /// uuid the session already holds is a no-op.
    pub uuid: Uuid,
    /// When the entry was made: RFC 3339, UTC, milliseconds.
    #[serde(serialize_with = "ts_millis", deserialize_with = "ts_lenient")]
    pub ts: Timestamp,
    /// Set for entries that are not messages (`compaction`, `fork`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The message, for message entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// The server's token counts of the model call that made the entry
    /// ([`USAGE_FIELD`]).
    #[serde(
        default,
        deserialize_with = "present_usage",
        skip_serializing_if = "Option::is_none"
    )]
    pub usage: Option<StoredUsage>,
    /// Every other field, kept verbatim.
    #[serde(flatten)]
    pub extra: Fields,
}

impl Entry {
    /// A new message entry with a fresh UUIDv7 and the current time.
    pub fn message(message: Message) -> Self {
        Entry {
            uuid: Uuid::now_v7(),
            ts: now_millis(),
            kind: None,
            message: Some(message),
            usage: None,
            extra: Fields::new(),
        }
    }

    /// A new entry of another kind, with its fields in `extra`.
    pub fn other(kind: impl Into<String>, extra: Map<String, Value>) -> Self {
        Entry {
            uuid: Uuid::now_v7(),
            ts: now_millis(),
            kind: Some(kind.into()),
            message: None,
            usage: None,
            extra: Fields::from(extra),
        }
    }

    /// The message of a message entry (`kind` absent).
    pub fn as_message(&self) -> Option<&Message> {
        match self.kind {
            None => self.message.as_ref(),
            Some(_) => None,
        }
    }

    /// The uuid given to a bare-message line (the seed's reference format): derived from
    /// the session id and the 1-based line number, so it is the same at every load.
    pub fn bare_line_uuid(session_id: &str, line: usize) -> Uuid {
        Uuid::new_v5(
            &Uuid::NAMESPACE_URL,
            format!("reprise:{session_id}:{line}").as_bytes(),
        )
    }
}

/// The current time, truncated to milliseconds (what the file can hold).
pub fn now_millis() -> Timestamp {
    let now = Timestamp::now();
    Timestamp::from_millisecond(now.as_millisecond()).unwrap_or(now)
}

fn ts_millis<S: Serializer>(ts: &Timestamp, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&format_args!("{ts:.3}"))
}

/// A `usage` that is there, even `null`: kept, so that it is written back.
fn present_usage<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<StoredUsage>, D::Error> {
    StoredUsage::deserialize(deserializer).map(Some)
}

fn ts_lenient<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Timestamp, D::Error> {
    let text = String::deserialize(deserializer)?;
    text.parse::<Timestamp>().map_err(serde::de::Error::custom)
}
