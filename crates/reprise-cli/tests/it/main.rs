//! Integration tests of the reprise binary: plain and full-screen chats, run
//! commands, MCP tools, rendered screens.
//!
//! One test binary for the crate (each binary links the whole dependency tree);
//! one module per area.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed test or bench run

mod builtin_tools;
mod chat_soak;
mod compaction;
mod crash_resume;
mod damaged_runs;
mod database;
mod docs;
mod export;
mod failing_disk;
mod fork_checkpoints;
mod fs_errors;
mod full_screen;
mod history;
mod import;
mod limits;
mod linked_files;
mod local_model;
mod mcp_chat;
mod not_files;
mod plain_mode;
mod real_llama;
mod redaction;
mod rewind;
mod rewind_chat;
mod rewind_kills;
mod run_commands;
mod run_leftovers;
mod screens;
mod subagents;
mod support;
mod terminal_escapes;
