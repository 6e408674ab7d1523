//! Integration tests of reprise-mcp against the reference MCP server.
//!
//! One test binary for the crate (each binary links the whole dependency tree);
//! one module per area.

mod everything;
mod failures;
mod gate;
mod support;
