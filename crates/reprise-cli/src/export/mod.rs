//! A run as people read it outside reprise: Markdown, one HTML file, or JSON.
//!
//! The renderers share [`RunView`] ([`reprise_chat::view::export`]): the run's
//! items as a reader sees them.

pub mod highlight;
pub mod html;
pub mod markdown;
pub mod usage_html;

pub use reprise_chat::view::export::*;
