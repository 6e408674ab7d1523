//! Tests of the PostgreSQL session store on a real server (see `support`).

mod conformance;
mod failures;
mod listing;
mod processes;
mod support;
