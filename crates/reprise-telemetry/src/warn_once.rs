//! The one warning of a [`crate::Telemetry`]: a collector that is down, or too slow
//! to take what is queued, is said once, whatever goes wrong after.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Shared by the exporters and the span queue's watch of one [`crate::Telemetry`].
#[derive(Clone, Debug, Default)]
pub(crate) struct WarnOnce(Arc<AtomicBool>);

impl WarnOnce {
    /// Says `message` if nothing was said before.
    pub(crate) fn say(&self, message: impl FnOnce() -> String) {
        if !self.0.swap(true, Ordering::Relaxed) {
            tracing::warn!(target: "reprise_telemetry", "{}", message());
        }
    }

    /// Whether the warning was given.
    #[cfg(test)]
    pub(crate) fn said(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}
