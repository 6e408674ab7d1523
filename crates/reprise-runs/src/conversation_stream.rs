//! A conversation handed over as it is read: [`RunCatalog::stream_conversation`]
//! returns one, and its messages come in small batches while the reading goes on
//! elsewhere (on the blocking pool, for run folders), so a long conversation goes
//! through in the memory of a few batches. A transcript's entries come the same
//! way ([`EntryStream`]).
//!
//! [`RunCatalog::stream_conversation`]: crate::RunCatalog::stream_conversation

use reprise_session::{Content, Entry, LoadWarning};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::catalog::CatalogError;
use crate::{Conversation, ConversationMessage};

/// How many messages a batch holds at most.
const BATCH_MESSAGES: usize = 256;

/// How many bytes of text a batch holds before it is sent (a message longer than
/// this is sent alone).
const BATCH_BYTES: usize = 256 * 1024;

/// How many batches wait for the reader of the stream before the reading waits.
const BATCHES_AHEAD: usize = 2;

/// The messages of a conversation, as they are read; then what was skipped or
/// repaired reading it ([`Batched::finish`]).
pub type ConversationStream = Batched<ConversationMessage>;

/// The entries of a transcript, as they are read; then what was skipped or
/// repaired reading it ([`Batched::finish`]).
pub type EntryStream = Batched<Entry>;

/// What is handed over in batches: how many bytes of text it holds, about.
pub trait Weighed {
    /// The bytes of text it holds, about.
    fn weight(&self) -> usize;
}

impl Weighed for ConversationMessage {
    fn weight(&self) -> usize {
        self.text.len()
    }
}

impl Weighed for Entry {
    fn weight(&self) -> usize {
        let Some(message) = self.as_message() else {
            return 256;
        };
        let text = match &message.content {
            Some(Content::Text(text)) => text.len(),
            _ => 256,
        };
        let calls: usize = message
            .calls()
            .iter()
            .map(|call| call.function.arguments.len())
            .sum();
        text + calls
    }
}

/// Things read elsewhere, handed over in batches as they are read; then what was
/// skipped or repaired reading them ([`Batched::finish`]).
pub struct Batched<T> {
    batches: Option<mpsc::Receiver<Vec<T>>>,
    batch: std::vec::IntoIter<T>,
    end: End,
}

/// How the reading ends.
enum End {
    /// The reading runs on the blocking pool.
    Reading(JoinHandle<Result<Vec<LoadWarning>, CatalogError>>),
    /// Everything was read before the stream was made.
    Read(Vec<LoadWarning>),
}

impl ConversationStream {
    /// A conversation read whole already.
    pub fn of(conversation: Conversation) -> Self {
        Batched::whole(conversation.messages, conversation.warnings)
    }
}

impl<T: Weighed + Send + 'static> Batched<T> {
    /// Things read whole already, with the warnings of their reading.
    pub fn whole(items: Vec<T>, warnings: Vec<LoadWarning>) -> Self {
        Batched {
            batches: None,
            batch: items.into_iter(),
            end: End::Read(warnings),
        }
    }

    /// Things read by `read` on the blocking pool, which hands each to the sink it
    /// is given and returns the warnings.
    pub fn read_blocking<F>(read: F) -> Self
    where
        F: FnOnce(&mut dyn FnMut(T)) -> Result<Vec<LoadWarning>, CatalogError> + Send + 'static,
    {
        let (sender, receiver) = mpsc::channel(BATCHES_AHEAD);
        let reading = tokio::task::spawn_blocking(move || {
            let mut batch = Vec::new();
            let mut bytes = 0;
            // Once the stream is dropped, the rest is read without being kept.
            let mut open = true;
            let warnings = read(&mut |message| {
                if !open {
                    return;
                }
                bytes += message.weight();
                batch.push(message);
                if batch.len() >= BATCH_MESSAGES || bytes >= BATCH_BYTES {
                    bytes = 0;
                    open = sender.blocking_send(std::mem::take(&mut batch)).is_ok();
                }
            })?;
            if open && !batch.is_empty() {
                let _ = sender.blocking_send(batch);
            }
            Ok(warnings)
        });
        Batched {
            batches: Some(receiver),
            batch: Vec::new().into_iter(),
            end: End::Reading(reading),
        }
    }

    /// The next one; `None` once all were read (or the reading failed: see
    /// [`Batched::finish`]).
    pub async fn next(&mut self) -> Option<T> {
        loop {
            if let Some(message) = self.batch.next() {
                return Some(message);
            }
            let batch = self.batches.as_mut()?.recv().await?;
            self.batch = batch.into_iter();
        }
    }

    /// What was skipped or repaired reading, once everything is taken; the error
    /// when reading failed.
    pub async fn finish(self) -> Result<Vec<LoadWarning>, CatalogError> {
        // The reading is not waited for while its batches are not taken.
        drop(self.batches);
        match self.end {
            End::Read(warnings) => Ok(warnings),
            End::Reading(reading) => reading.await.map_err(CatalogError::Interrupted)?,
        }
    }
}
