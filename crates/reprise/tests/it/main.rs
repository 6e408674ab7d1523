//! Integration tests of the facade crate's examples.
//!
//! One test binary for the crate; one module per area.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed test

mod approvals;
mod close;
mod service;
mod workers;
