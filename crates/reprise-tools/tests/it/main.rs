//! The built-in tools against real files, real processes and the running kernel's
//! Landlock.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod command;
mod files;
mod json_string;
mod sandbox;
mod support;
