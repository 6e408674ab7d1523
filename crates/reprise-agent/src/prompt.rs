//! `Prompt`: what a run sends, and the id it is stored under.

use reprise_session::{Entry, Message};
use uuid::Uuid;

/// A user message for [`Agent::run`](crate::Agent::run), with the id its entry is
/// stored under.
///
/// Text converts into a prompt with a fresh id. A prompt given an id of the caller's
/// (the id of the request that carries it) makes the run idempotent: the session
/// holds that prompt once, however many times the run is tried.
///
/// ```
/// use reprise_agent::Prompt;
/// use uuid::Uuid;
///
/// let request_id = Uuid::from_u128(42);
/// let prompt = Prompt::new("Where is the key?").with_id(request_id);
/// assert_eq!(prompt.id(), request_id);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Prompt {
    entry: Entry,
}

impl Prompt {
    /// A text prompt with a fresh id.
    pub fn new(text: impl Into<String>) -> Self {
        Prompt::message(Message::user(text))
    }

    /// Any user message (multi-part content) with a fresh id.
    pub fn message(message: Message) -> Self {
        Prompt {
            entry: Entry::message(message),
        }
    }

    /// Stores the prompt under `id` (its entry's uuid): a run with an id the session
    /// holds already does not store or send the prompt again.
    pub fn with_id(mut self, id: Uuid) -> Self {
        self.entry.uuid = id;
        self
    }

    /// The id the prompt is stored under.
    pub fn id(&self) -> Uuid {
        self.entry.uuid
    }

    pub(crate) fn into_entry(self) -> Entry {
        self.entry
    }
}

impl From<&str> for Prompt {
    fn from(text: &str) -> Self {
        Prompt::new(text)
    }
}

impl From<String> for Prompt {
    fn from(text: String) -> Self {
        Prompt::new(text)
    }
}

impl From<&String> for Prompt {
    fn from(text: &String) -> Self {
        Prompt::new(text.as_str())
    }
}

impl From<Message> for Prompt {
    fn from(message: Message) -> Self {
        Prompt::message(message)
    }
}
