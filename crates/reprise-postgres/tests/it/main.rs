//! Tests of the PostgreSQL session store on a real server (see `support`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed test or bench run

mod batches;
mod catalog;
mod conformance;
mod connections;
mod failures;
mod listing;
mod migrations;
mod processes;
mod schemas;
mod support;
mod text;
