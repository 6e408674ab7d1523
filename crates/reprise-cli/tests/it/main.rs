//! Integration tests of the reprise binary: plain and full-screen chats, run
//! commands, MCP tools, rendered screens.
//!
//! One test binary for the crate (each binary links the whole dependency tree);
//! one module per area.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed test or bench run

mod compaction;
mod damaged_runs;
mod database;
mod docs;
mod export;
mod fs_errors;
mod full_screen;
mod history;
mod import;
mod limits;
mod mcp_chat;
mod plain_mode;
mod real_llama;
mod redaction;
mod run_commands;
mod screens;
mod subagents;
mod support;
mod terminal_escapes;
