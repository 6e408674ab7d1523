//! How long a turn has worked, for a screen's "working Ns".

use std::time::{Duration, Instant};

/// How long a turn has worked: the time the step gate waits for the person is
/// left out, so the elapsed time shown stands still meanwhile.
pub struct TurnClock {
    started: Instant,
    asking_since: Option<Instant>,
}

impl TurnClock {
    /// A clock started at `now`.
    pub fn start(now: Instant) -> TurnClock {
        TurnClock {
            started: now,
            asking_since: None,
        }
    }

    /// How long the turn has worked, as of `now`.
    pub fn worked(&self, now: Instant) -> Duration {
        self.asking_since
            .unwrap_or(now)
            .saturating_duration_since(self.started)
    }

    /// The gate asks: the clock stops.
    pub fn pause(&mut self, now: Instant) {
        self.asking_since.get_or_insert(now);
    }

    /// The person answered (or stopped the turn): the clock goes on from where it
    /// stopped.
    pub fn resume(&mut self, now: Instant) {
        if let Some(since) = self.asking_since.take() {
            self.started += now.saturating_duration_since(since);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_stands_still_while_the_gate_asks() {
        let start = Instant::now();
        let mut clock = TurnClock::start(start);
        let at = |secs| start + Duration::from_secs(secs);
        assert_eq!(clock.worked(at(3)), Duration::from_secs(3));
        clock.pause(at(3));
        assert_eq!(clock.worked(at(60)), Duration::from_secs(3));
        clock.resume(at(60));
        assert_eq!(clock.worked(at(62)), Duration::from_secs(5));
    }
}
