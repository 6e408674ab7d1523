//! The `reprise` terminal chat: run folders, resume, fork, and the screens that show
//! a conversation.
//!
//! The binary is a thin `main` over this library so that the screens, the settings and
//! the chat driver can be tested without a terminal.

pub mod approval;
pub mod chat;
pub mod cli;
pub mod config;
pub mod context_window;
pub mod driver;
pub mod duration;
pub mod entry;
pub mod error_text;
pub mod export;
pub mod export_cmd;
pub mod history_cmds;
pub mod import_cmd;
pub mod mcp_cmds;
pub mod plain;
pub mod redraw;
pub mod run_cmds;
pub mod run_source;
pub mod server_error;
pub mod subagents;
pub mod terminal_text;
pub mod tools;
pub mod tui;
