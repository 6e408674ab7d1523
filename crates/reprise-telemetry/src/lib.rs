//! OpenTelemetry for reprise: the agent's `tracing` spans (named and attributed by
//! the OpenTelemetry GenAI semantic conventions) and its metrics, exported over OTLP.
//!
//! The library crates record with `tracing` and the OpenTelemetry API only; nothing
//! leaves the process until a program installs exporters with [`Telemetry::start`].
//! [`TelemetryConfig`] says where to send, from a program's own settings and the
//! standard `OTEL_*` environment variables. Export runs on a thread of its own with
//! a bounded queue: a collector that is down or slow costs a turn nothing, and
//! what is queued is sent when [`Telemetry::shutdown`] runs.

mod config;
mod drops;
mod exporter;
mod install;
mod warn_once;

pub use config::{Protocol, TelemetryConfig};
pub use install::{Telemetry, TelemetryError};
