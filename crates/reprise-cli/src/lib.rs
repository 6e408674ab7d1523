//! The `reprise` terminal chat: its flags, its start-up, the screens that show a
//! conversation, and the run commands, which print.
//!
//! The binary is a thin `main` over this library so that the screens and the
//! commands can be tested without a terminal. The chat's logic below the screens
//! (the session driver, slash commands, forks, rewinds, resume, settings) is the
//! `reprise-chat` crate.
//!
//! Imports point down this list: [`entry`] and [`cli`] use [`commands`],
//! [`screens`] and [`local`], which use `reprise-chat` and [`display`]; [`export`]
//! is used by the `export` command; [`warnings`] shows the library crates'
//! `tracing` warnings.

pub mod cli;
pub mod commands;
pub mod display;
pub mod entry;
pub mod export;
pub mod local;
pub mod screens;
pub mod warnings;
