//! Entries that name a list of tool calls (`{"kind": …, "calls": [...]}`): start
//! records and approval records are written and read through these.

use reprise_message::Entry;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// An entry of `kind` naming `calls`.
pub(crate) fn call_list_entry<T: Serialize>(kind: &str, calls: &[T]) -> Entry {
    let mut fields = Map::new();
    fields.insert(
        "calls".to_owned(),
        serde_json::to_value(calls).unwrap_or_else(|_| Value::Array(Vec::new())),
    );
    Entry::other(kind, fields)
}

/// The calls an entry of `kind` names; empty for other entries. A call that cannot
/// be read (a damaged or foreign record) is left out.
pub(crate) fn listed_calls<T: DeserializeOwned>(entry: &Entry, kind: &str) -> Vec<T> {
    if entry.kind.as_deref() != Some(kind) {
        return Vec::new();
    }
    let Some(Value::Array(calls)) = entry.extra.get("calls") else {
        return Vec::new();
    };
    calls
        .iter()
        .filter_map(|call| serde_json::from_value(call.clone()).ok())
        .collect()
}
