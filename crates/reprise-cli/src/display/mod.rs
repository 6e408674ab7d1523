//! How text reaches the terminal: the one printer that makes untrusted text safe to
//! show, and the short texts every screen and command words the same way.

pub mod error_text;
pub mod terminal;
pub mod text;
