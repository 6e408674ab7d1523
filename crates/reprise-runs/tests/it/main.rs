//! The integration tests of `reprise-runs`, in one test binary: one module per area.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed test or bench run

mod catalog_conformance;
mod conversation;
mod history;
mod io_errors;
mod links;
mod list_cache_file;
mod processes;
mod redaction;
mod run_files;
mod run_folders;
mod run_list_cache;
mod run_repairs;
mod session_log;
mod store_conformance;
mod transcript;
