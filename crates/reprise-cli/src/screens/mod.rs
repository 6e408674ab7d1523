//! The screens that show a chat: the full screen and the inline view ([`tui`]), and
//! the plain line mode ([`plain`]). Both fold the agent's events into the view
//! model of [`reprise_chat::view::live`].

pub mod plain;
pub mod tui;
