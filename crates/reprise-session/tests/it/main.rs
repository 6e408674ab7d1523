//! The integration tests of `reprise-session`, in one test binary: one module per
//! area.

mod conformance;
mod conversation;
mod history;
mod io_errors;
mod model_props;
mod processes;
mod redaction;
mod repair_props;
mod run_folders;
mod run_list_cache;
mod session_log;
mod storage_files;
mod transcript;
