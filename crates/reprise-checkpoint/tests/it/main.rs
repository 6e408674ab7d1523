//! The integration tests of reprise-checkpoint.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod compressed;
mod fork;
mod kill;
mod links;
mod packs;
mod roundtrip;
mod scripted;
mod support;
mod unfinished;
