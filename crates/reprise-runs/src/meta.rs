//! `session.json`: what a run folder holds, kept small so that listing thousands of
//! runs never reads a conversation.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The file name of a run's metadata.
pub const SESSION_JSON: &str = "session.json";

/// The contents of `session.json`, and the listing fields the run store keeps beside
/// them in memory.
///
/// The file holds what does not change with every message: the session, its
/// subagents' transcripts, where it was forked or imported from, and the person's
/// first message. `updatedAt`, `lastMessage` and `messageCount` change with every
/// append, so they live in `.summary.json` and are never written here (the file is
/// replaced only when a subagent is registered, so they would go stale); they are
/// still read from files written by earlier versions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionJson {
    /// The session kept in this run folder.
    pub session_id: String,
    /// Each subagent's name and its transcript's path, relative to the run folder.
    #[serde(default)]
    pub subagents: BTreeMap<String, String>,
    /// When the conversation was last appended to (never written to the file).
    #[serde(default, skip_serializing)]
    pub updated_at: Option<Timestamp>,
    /// The person's last message, trimmed to a few hundred characters (never written
    /// to the file).
    #[serde(default, skip_serializing)]
    pub last_message: Option<String>,
    /// The person's first message (trimmed like `last_message`): what a run without a
    /// title is shown as. Missing in runs written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_message: Option<String>,
    /// How many message entries the main conversation holds (never written to the
    /// file).
    #[serde(default, skip_serializing)]
    pub message_count: u64,
    /// Where this run's session was forked from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<reprise_session::ForkOrigin>,
    /// Every other field, kept verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
