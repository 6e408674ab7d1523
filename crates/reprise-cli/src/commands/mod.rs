//! The subcommands (`reprise runs`, `show`, `history` …), one module each: they work
//! on the runs and print for people and scripts.

pub mod export;
pub mod history;
pub mod import;
pub mod mcp;
pub mod rewind;
pub mod runs;
pub mod usage;
