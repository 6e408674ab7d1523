//! Integration tests of the importers: each converter's output entry by entry, and
//! every real transcript of the test data imported and resumed.
//!
//! One test binary for the crate; one module per area.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)] // a panic here is a failed test

mod conversions;
mod real_transcripts;
