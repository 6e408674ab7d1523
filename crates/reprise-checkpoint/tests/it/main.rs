//! The integration tests of reprise-checkpoint.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod fork;
mod kill;
mod links;
mod roundtrip;
mod scripted;
mod support;
