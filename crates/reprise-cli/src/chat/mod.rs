//! The chat, independent of any screen: the session of a run and its logs, which run
//! to start with, forks, the step gate's questions, and the slash commands with the
//! one dispatcher both screens use.

pub mod approval;
pub mod builtins;
pub mod checkpoints;
pub mod commands;
pub mod context_window;
pub mod events;
pub mod fork_checkpoints;
pub mod fork_files;
pub mod provider;
pub mod rewind;
pub mod rewind_steps;
pub mod server_error;
pub mod session;
pub mod start;
pub mod tool_settings;
