//! Integration tests of reprise-provider: stream captures, and HTTP against a
//! scripted server.
//!
//! One test binary for the crate (each binary links the whole dependency tree);
//! one module per area.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed test or bench run

mod http;
mod llama_captures;
mod real_llama;
mod sse_files;
mod support;
