//! `session.json`: what a run folder holds, kept small so that listing thousands of
//! runs never reads a conversation.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The file name of a run's metadata.
pub const SESSION_JSON: &str = "session.json";

/// The contents of `session.json`.
///
/// `sessionId` and `subagents` are what SPEC names; the other fields are written by the
/// run store at turn boundaries (a user message, or an assistant message without tool
/// calls) so that `list_runs` needs nothing else: `messageCount` and `updatedAt` are as
/// of the last turn boundary.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionJson {
    /// The session kept in this run folder.
    pub session_id: String,
    /// Each subagent's name and its transcript's path, relative to the run folder.
    #[serde(default)]
    pub subagents: BTreeMap<String, String>,
    /// When the conversation was last appended to, as of the last turn boundary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<Timestamp>,
    /// The person's last message (trimmed to a few hundred characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_message: Option<String>,
    /// The person's first message (trimmed like `last_message`): what a run without a
    /// title is shown as. Missing in runs written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_message: Option<String>,
    /// How many message entries the main conversation holds.
    #[serde(default)]
    pub message_count: u64,
    /// Where this run's session was forked from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<crate::store::session_store::ForkOrigin>,
    /// Every other field, kept verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
