//! The idempotency key of a tool call.

use uuid::Uuid;

/// The namespace of the keys (a UUIDv5 namespace of reprise's own).
const NAMESPACE: Uuid = Uuid::from_u128(0x5f0c_42a6_8d1e_4b7a_9c3f_2e61_d8a0_b417);

/// The idempotency key of a tool call: a UUID (version 5, in reprise's namespace) of
/// the session id, the uuid of the assistant entry that holds the call and the call
/// id, written in its hyphenated lowercase form.
///
/// It depends on nothing else, so every attempt of one call (a rerun after a crash
/// included) has the same key, and any two calls have different ones: a service that
/// de-duplicates requests by key does a call's work once.
///
/// ```
/// use reprise_agent::idempotency_key;
/// use uuid::Uuid;
///
/// let entry = Uuid::from_u128(7);
/// let key = idempotency_key("quest-1", entry, "call_1");
/// assert_eq!(key, idempotency_key("quest-1", entry, "call_1"));
/// assert_ne!(key, idempotency_key("quest-1", entry, "call_2"));
/// assert_eq!(key.len(), 36);
/// ```
pub fn idempotency_key(session_id: &str, entry: Uuid, call_id: &str) -> String {
    // Session ids hold no newline and a uuid has a fixed length, so the three parts
    // cannot run into each other.
    let mut name = Vec::with_capacity(session_id.len() + 38 + call_id.len());
    name.extend_from_slice(session_id.as_bytes());
    name.push(b'\n');
    name.extend_from_slice(entry.hyphenated().to_string().as_bytes());
    name.push(b'\n');
    name.extend_from_slice(call_id.as_bytes());
    Uuid::new_v5(&NAMESPACE, &name).hyphenated().to_string()
}
