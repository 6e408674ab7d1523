//! The redaction of the person's newest message for listings, done on a thread of
//! the run store's own while the conversation's `fdatasync` waits for the disk.
//!
//! Why: every append of a user message puts its text, redacted, in `.summary.json`.
//! Redacting is CPU work (tens of microseconds for a kilobyte of text, more on a
//! busy machine) that added straight to the append's latency, on top of the
//! `fdatasync` it waited for anyway. Started after the write and before the sync, it
//! runs while the sync blocks; the append then takes the result, usually already
//! there. The summary is still written before the append returns, as before.

use std::sync::mpsc::{Receiver, Sender, SyncSender, channel, sync_channel};
use std::thread::JoinHandle;

use reprise_redact::Redactor;

/// Longest `lastMessage` (and `firstMessage`) kept for listings, in characters.
pub const LAST_MESSAGE_CHARS: usize = 300;

/// The person's message as listings keep it: trimmed, at most
/// [`LAST_MESSAGE_CHARS`] characters.
pub fn last_message_text(text: &str) -> String {
    text.trim().chars().take(LAST_MESSAGE_CHARS).collect()
}

/// One text to redact, and where its listing form goes.
struct Job {
    text: String,
    redactor: Redactor,
    done: SyncSender<String>,
}

/// The thread that redacts, started with the first job.
#[derive(Debug, Default)]
pub(crate) struct ListingRedaction {
    worker: Option<(Sender<Job>, JoinHandle<()>)>,
}

/// A redaction under way (or done, when no thread could be started).
pub(crate) enum Pending {
    /// On the thread; with the text and redactor, to do it in place should the
    /// thread be gone.
    Running(Receiver<String>, String, Redactor),
    /// Done in place.
    Ready(String),
}

/// `text` as listings keep it: redacted, then trimmed and cut.
fn listing_form(redactor: &Redactor, text: &str) -> String {
    last_message_text(&redactor.redact(text))
}

impl ListingRedaction {
    /// Starts redacting `text` for a listing.
    pub(crate) fn start(&mut self, text: String, redactor: &Redactor) -> Pending {
        if self.worker.is_none() {
            let (jobs, inbox) = channel::<Job>();
            let spawned = std::thread::Builder::new()
                .name("reprise-listing".to_owned())
                .spawn(move || {
                    for job in inbox {
                        let _ = job.done.send(listing_form(&job.redactor, &job.text));
                    }
                });
            match spawned {
                Ok(thread) => self.worker = Some((jobs, thread)),
                Err(_) => return Pending::Ready(listing_form(redactor, &text)),
            }
        }
        let Some((jobs, _)) = &self.worker else {
            return Pending::Ready(listing_form(redactor, &text));
        };
        let (done, result) = sync_channel(1);
        let job = Job {
            text: text.clone(),
            redactor: redactor.clone(),
            done,
        };
        match jobs.send(job) {
            Ok(()) => Pending::Running(result, text, redactor.clone()),
            Err(_) => Pending::Ready(listing_form(redactor, &text)),
        }
    }
}

impl Pending {
    /// The listing form of the text.
    pub(crate) fn wait(self) -> String {
        match self {
            Pending::Ready(text) => text,
            Pending::Running(result, text, redactor) => result
                .recv()
                .unwrap_or_else(|_| listing_form(&redactor, &text)),
        }
    }
}

impl Drop for ListingRedaction {
    fn drop(&mut self) {
        if let Some((jobs, thread)) = self.worker.take() {
            drop(jobs);
            let _ = thread.join();
        }
    }
}
