//! What the person typed: the one judgement behind a run's listed first and last
//! message (`reprise runs`, the picker, their caches and the database's listing) and
//! behind the person's items of the view model that `reprise show`, the exports and
//! the screens draw, so that a listing never names as the last message one that
//! `show` leaves out, or the other way round.

use reprise_session::{Content, Entry, Message, Role};

use crate::command_expansion::is_command_expansion;

/// A message in the person's name (role `user`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PersonMessage<'a> {
    /// The message.
    pub message: &'a Message,
    /// Written by the program for a slash command in the person's name, not typed
    /// ([`is_command_expansion`]).
    pub expansion: bool,
}

impl<'a> PersonMessage<'a> {
    /// The person's message that `entry` holds, if it holds one.
    pub fn of(entry: &'a Entry) -> Option<PersonMessage<'a>> {
        let message = entry.as_message()?;
        (message.role == Role::User).then(|| PersonMessage {
            message,
            expansion: is_command_expansion(entry),
        })
    }

    /// Whether the person typed it: not a slash command's expansion, and with text
    /// (not an image alone, nor blanks). Copies no text.
    pub fn is_typed(&self) -> bool {
        !self.expansion && holds_text(self.message)
    }

    /// Its text, when the person typed it ([`PersonMessage::is_typed`]).
    pub fn typed_text(&self) -> Option<String> {
        self.is_typed().then(|| self.message.text())
    }
}

/// Whether `entry` shows as a message where a conversation is read (`reprise show`,
/// `read_conversation`, the screens' redraw): a message the person typed
/// ([`PersonMessage::is_typed`]), or a reply with text. Copies no text.
pub fn shows_as_message(entry: &Entry) -> bool {
    match PersonMessage::of(entry) {
        Some(person) => person.is_typed(),
        None => {
            entry
                .as_message()
                .is_some_and(|message| message.role == Role::Assistant && holds_text(message))
                && !is_command_expansion(entry)
        }
    }
}

/// Whether `message` holds text other than blanks (its [`Message::text`] is not
/// blank), found without copying it.
fn holds_text(message: &Message) -> bool {
    match &message.content {
        None => false,
        Some(Content::Text(text)) => !text.trim().is_empty(),
        Some(Content::Parts(parts)) => parts
            .iter()
            .filter_map(|part| part.text.as_deref())
            .any(|text| !text.trim().is_empty()),
    }
}

/// The text of the message the person typed that `entry` holds
/// ([`PersonMessage::typed_text`]), if it holds one.
pub fn typed_text(entry: &Entry) -> Option<String> {
    PersonMessage::of(entry)?.typed_text()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mark_command_expansion;

    #[test]
    fn only_a_user_message_with_text_that_no_command_wrote_is_typed() {
        assert_eq!(
            typed_text(&Entry::message(Message::user("hi"))).as_deref(),
            Some("hi")
        );
        let mut expansion = Entry::message(Message::user("expanded"));
        mark_command_expansion(&mut expansion);
        assert_eq!(typed_text(&expansion), None);
        assert!(PersonMessage::of(&expansion).is_some_and(|person| person.expansion));
        assert_eq!(typed_text(&Entry::message(Message::user(" \n"))), None);
        assert_eq!(typed_text(&Entry::message(Message::assistant("hi"))), None);
        assert_eq!(typed_text(&Entry::message(Message::tool("c1", "hi"))), None);
        assert!(shows_as_message(&Entry::message(Message::assistant("hi"))));
        assert!(!shows_as_message(&Entry::message(Message::assistant(" "))));
        assert!(!shows_as_message(&expansion));
    }
}
