//! Turning a hang into a failure: work that should take a moment, run on a thread
//! of its own and given a generous limit. Never a timed assertion: the limit only
//! separates "ends" from "does not end in any useful time" (an input that makes an
//! algorithm quadratic, a read that blocks forever).

use std::time::Duration;

/// How long [`ends_within_a_minute`] waits.
pub const A_MINUTE: Duration = Duration::from_secs(60);

/// Runs `work` on a thread of its own and returns what it returned; panics when it
/// has not ended after [`A_MINUTE`] (the thread is left to finish on its own).
pub fn ends_within_a_minute<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, result) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(work()));
    match result.recv_timeout(A_MINUTE) {
        Ok(value) => value,
        Err(_) => panic!("still running after {A_MINUTE:?}"),
    }
}
