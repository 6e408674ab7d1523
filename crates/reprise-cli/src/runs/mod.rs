//! Where the conversations are read from: run folders or a database, and the
//! subagents' past work kept beside a run.

pub mod catalog;
pub mod subagents;
