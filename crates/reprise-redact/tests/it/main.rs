//! Integration tests of reprise-redact: the secret corpus and properties.
//!
//! One test binary for the crate (each binary links the whole dependency tree);
//! one module per area.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed test or bench run

mod corpus;
mod properties;
