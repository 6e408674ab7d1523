//! Integration tests of reprise-agent: the loop against a mock provider and, end to
//! end, against a scripted server.
//!
//! One test binary for the crate (each binary links the whole dependency tree);
//! one module per area.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed test or bench run

mod approvals;
mod before_changes;
mod compaction;
mod crash_resume;
mod crash_soak;
mod e2e_cut_off;
mod e2e_faults;
mod e2e_sessions;
mod e2e_subagents_tools;
mod loop_mock;
mod real_compaction;
mod real_llama;
mod service_api;
mod support;
