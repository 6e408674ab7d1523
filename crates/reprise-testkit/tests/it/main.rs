//! Integration tests of reprise-testkit: the scripted server seen from an HTTP
//! client, the fixture finders and `assert_contains!`.
//!
//! One test binary for the crate (each binary links the whole dependency tree);
//! one module per area.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed test or bench run

mod server;
mod support;
