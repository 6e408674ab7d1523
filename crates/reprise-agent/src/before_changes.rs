//! The hook told before tool calls that may change things start: how a caller
//! records the state of what they may change (the chat: a checkpoint of the working
//! folder) in the same durable entry that records their start.

use futures::future::BoxFuture;

/// Told once before the allowed calls of a reply start when any of them may change
/// things (a tool whose [`ToolEffects`](crate::ToolEffects) are not `ReadOnly`, or a
/// subagent offered such a tool). What it returns is recorded in the calls' start
/// record, as its `checkpoint` field, so the state and the start cost one append.
pub trait BeforeChanges: Send + Sync {
    /// Records the state the calls may change and returns its id; `None` when
    /// nothing was recorded (the hook says why itself: the calls run anyway).
    fn before_changes(&self) -> BoxFuture<'_, Option<String>>;
}
