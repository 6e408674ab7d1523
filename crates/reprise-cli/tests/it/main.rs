//! Integration tests of the reprise binary: plain and full-screen chats, run
//! commands, MCP tools, rendered screens.
//!
//! One test binary for the crate (each binary links the whole dependency tree);
//! one module per area.

mod full_screen;
mod limits;
mod mcp_chat;
mod plain_mode;
mod real_llama;
mod run_commands;
mod screens;
mod support;
