//! A signal during the install (Ctrl-C, the terminal closed, a kill) ends it in
//! reprise's own words: the install's processes run in a group of their own, so
//! only reprise hears the terminal's Ctrl-C, and dropping the install kills them.

use std::future::Future;

use anyhow::{Context, Result};
use tokio::signal::unix::{SignalKind, signal};

/// The install was stopped by a signal; the process exits with `128 + signal`, as
/// the signal's default action would have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interrupted {
    signal: i32,
}

impl Interrupted {
    /// The exit code.
    pub fn exit_code(self) -> i32 {
        128 + self.signal
    }

    /// What stopped it, in words.
    pub fn signal_name(self) -> &'static str {
        match self.signal {
            libc_signal::SIGINT => "Ctrl-C",
            libc_signal::SIGHUP => "the terminal closed",
            _ => "terminated",
        }
    }
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the install of the local model was interrupted")
    }
}

impl std::error::Error for Interrupted {}

/// The numbers of the signals handled here (the same on every Unix).
mod libc_signal {
    pub const SIGHUP: i32 = 1;
    pub const SIGINT: i32 = 2;
    pub const SIGTERM: i32 = 15;
}

/// Runs `work` until it ends or SIGINT, SIGTERM or SIGHUP arrives; on a signal
/// `work` is dropped (which kills the processes it started) and the signal is
/// returned.
///
/// tokio keeps a signal's handler once installed: SIGTERM and SIGHUP would then be
/// ignored for the rest of the chat, so from here on they end the process as their
/// default action does. SIGINT is the chat's own (plain mode cancels a turn on it).
pub async fn unless_interrupted<T>(
    work: impl Future<Output = Result<T>>,
) -> Result<std::result::Result<T, Interrupted>> {
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot watch for Ctrl-C")?;
    let mut terminate = signal(SignalKind::terminate()).context("cannot watch for SIGTERM")?;
    let mut hangup = signal(SignalKind::hangup()).context("cannot watch for SIGHUP")?;
    let outcome = tokio::select! {
        result = work => Ok(result?),
        _ = interrupt.recv() => Err(Interrupted { signal: libc_signal::SIGINT }),
        _ = terminate.recv() => Err(Interrupted { signal: libc_signal::SIGTERM }),
        _ = hangup.recv() => Err(Interrupted { signal: libc_signal::SIGHUP }),
    };
    tokio::spawn(async move {
        let signal = tokio::select! {
            _ = terminate.recv() => libc_signal::SIGTERM,
            _ = hangup.recv() => libc_signal::SIGHUP,
        };
        std::process::exit(128 + signal);
    });
    Ok(outcome)
}
