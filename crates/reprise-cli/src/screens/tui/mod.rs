//! The full-screen (and inline) terminal chat.

pub mod app;
pub mod backend;
pub mod markdown;
pub mod render;
pub mod view;
pub mod wrap;
