//! The `reprise` terminal chat: run folders, resume, fork, and the screens that show
//! a conversation.
//!
//! The binary is a thin `main` over this library so that the screens, the settings and
//! the chat driver can be tested without a terminal.
//!
//! Imports point down this list: [`entry`] and [`cli`] use [`commands`] and
//! [`screens`], which use [`chat`], which uses [`config`], [`runs`] and
//! [`display`]; [`export`] is used by the `export` command.

pub mod chat;
pub mod cli;
pub mod commands;
pub mod config;
pub mod display;
pub mod entry;
pub mod export;
pub mod local;
pub mod runs;
pub mod screens;
