//! The peak resident memory of a child process, for the benches that print it.
//!
//! Sampled from `/proc/PID/status` (`VmHWM`) while the child runs, never
//! `ru_maxrss` from `wait4`: Linux carries into a child, at `exec`, the high-water
//! mark of the address space it replaced, the bench's own.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// The peak resident memory of process `pid` in KiB (0 once it has exited: a
/// zombie has no address space).
pub fn vm_hwm_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// A thread sampling a child's [`vm_hwm_kib`] every 2 ms until [`PeakWatch::finish`].
pub struct PeakWatch {
    sampler: JoinHandle<u64>,
    done: Arc<AtomicBool>,
}

impl PeakWatch {
    /// Starts sampling process `pid`.
    pub fn of(pid: u32) -> PeakWatch {
        let done = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&done);
        let sampler = std::thread::spawn(move || {
            let mut peak = 0;
            // VmHWM only grows while the process lives.
            while !stop.load(Ordering::Relaxed) {
                peak = peak.max(vm_hwm_kib(pid));
                std::thread::sleep(Duration::from_millis(2));
            }
            peak
        });
        PeakWatch { sampler, done }
    }

    /// Stops sampling (call once the child has ended, before it is reaped, to
    /// catch its last figure) and returns the peak seen, in KiB.
    pub fn finish(self) -> u64 {
        self.done.store(true, Ordering::Relaxed);
        self.sampler.join().unwrap_or(0)
    }
}
