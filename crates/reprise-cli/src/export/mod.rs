//! A run as people read it outside reprise, written out: the formats are
//! [`reprise_export`]'s; here is what streams them to a file or the terminal.

pub mod json;
pub mod sink;

pub use reprise_export::*;
