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
mod file_limits;
mod fork_checkpoints;
mod fork_folders;
mod fs_errors;
mod full_screen;
mod hard_links;
mod held_run_folder;
mod history;
mod import;
mod limits;
mod linked_files;
mod local_candidates;
mod local_model;
mod mcp_chat;
mod not_files;
mod one_view;
mod plain_mode;
mod real_llama;
mod redaction;
mod restore_kills;
mod resume_view;
mod rewind;
mod rewind_chat;
mod rewind_kills;
mod run_commands;
mod run_leftovers;
mod sandbox_escapes;
mod screens;
mod subagents;
mod support;
mod telemetry;
mod terminal_escapes;
mod unreadable_files;
mod usage;
mod warnings;
