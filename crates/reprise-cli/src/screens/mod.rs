//! The screens that show a chat: the full screen and the inline view ([`tui`]), and
//! the plain line mode ([`plain`]), with the redraw of a resumed conversation they
//! share.

pub mod plain;
pub mod redraw;
pub mod tui;
