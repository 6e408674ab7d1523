//! The integration tests of `reprise-session`, in one test binary: one module per
//! area.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed test or bench run

mod conformance;
mod conversation;
mod history;
mod io_errors;
mod links;
mod model_props;
mod processes;
mod redaction;
mod repair_props;
mod run_folders;
mod run_list_cache;
mod run_repairs;
mod session_log;
mod storage_files;
mod transcript;
