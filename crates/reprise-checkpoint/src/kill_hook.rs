//! A test-only hook that kills the process at a chosen step of a restore, so that
//! tests can cut a restore at every step, deterministically, through the binary.
//!
//! Compiled only with the `test-hooks` feature (the CLI's tests turn it on): with
//! `REPRISE_TEST_KILL_AT=N` in the environment, the process sends itself SIGKILL at
//! the N-th step (counting from 1: the journal written, the mark written, each
//! deletion, each file written under its temporary name, each rename, the sync,
//! `head` set, the mark removed, the journal removed). Without the feature
//! [`step`] does nothing.

/// The environment variable naming the step to be killed at.
#[cfg(feature = "test-hooks")]
const KILL_AT: &str = "REPRISE_TEST_KILL_AT";

/// One step of a restore done.
#[cfg(feature = "test-hooks")]
pub(crate) fn step() {
    use std::sync::atomic::{AtomicU64, Ordering};
    static DONE: AtomicU64 = AtomicU64::new(0);
    let Some(at) = std::env::var(KILL_AT)
        .ok()
        .and_then(|text| text.parse::<u64>().ok())
    else {
        return;
    };
    if DONE.fetch_add(1, Ordering::SeqCst) + 1 == at {
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    }
}

/// One step of a restore done (no hook in this build).
#[cfg(not(feature = "test-hooks"))]
#[inline(always)]
pub(crate) fn step() {}
