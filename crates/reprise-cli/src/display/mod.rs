//! How text reaches the terminal: the one printer that makes untrusted text safe to
//! show.

pub mod terminal;
