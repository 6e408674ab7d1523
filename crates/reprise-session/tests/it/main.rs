//! The integration tests of `reprise-session`, in one test binary: one module per
//! area.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed test or bench run

mod conformance;
mod model_props;
mod repair_props;
mod storage_files;
