//! OpenTelemetry export of the agent's traces and metrics, by the GenAI semantic
//! conventions (`reprise-telemetry`), turned on by a program without environment
//! variables. The standard `OTEL_*` variables still apply and win.
//!
//! [`init`](crate::telemetry::init) is for a program without a `tracing` subscriber
//! of its own; one with a subscriber starts
//! [`Telemetry::start`](crate::telemetry::Telemetry::start) and adds
//! [`Telemetry::layer`](crate::telemetry::Telemetry::layer) to it, and
//! the agent's spans become children of the span current when a run starts.

use std::sync::Arc;

use tracing_subscriber::layer::SubscriberExt;

#[doc(inline)]
pub use reprise_telemetry::{Protocol, Telemetry, TelemetryConfig, TelemetryError};

/// Starts the exporters `config` (and the `OTEL_*` variables) ask for, installs
/// a `tracing` subscriber that sends the agent's spans to them (unless the
/// program installed one already), and, with `capture_content`, puts the
/// conversation's text on spans after the redactor of transcripts (with the
/// process's secret variables) went over it. `None` when nothing is asked for.
/// Call it inside a Tokio runtime, before the first agent is built, and call
/// [`Telemetry::shutdown`] before the program ends, so that what is queued is sent.
pub fn init(config: &TelemetryConfig) -> Result<Option<Telemetry>, TelemetryError> {
    let Some(telemetry) = Telemetry::start(config)? else {
        return Ok(None);
    };
    if let Some(layer) = telemetry.layer() {
        let subscriber = tracing_subscriber::registry().with(layer);
        // A subscriber the program installed first is kept.
        let _ = tracing::subscriber::set_global_default(subscriber);
    }
    if config.capture_content {
        let redactor = reprise_redact::Redactor::new().with_env_secrets();
        reprise_agent::capture_content(Some(Arc::new(move |text: &str| {
            redactor.redact(text).into_owned()
        })));
    }
    Ok(Some(telemetry))
}
