//! Integration tests of reprise-mcp against the reference MCP server.
//!
//! One test binary for the crate (each binary links the whole dependency tree);
//! one module per area.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed test or bench run

mod everything;
mod failures;
mod gate;
mod support;
