//! The `[telemetry]` table: OpenTelemetry export of the chat's traces and metrics.
//! The standard `OTEL_*` variables win over it.
//!
//! ```toml
//! [telemetry]
//! endpoint = "http://localhost:4318"  # the collector's OTLP address
//! protocol = "http/protobuf"          # or "grpc" (port 4317)
//! traces = true                       # unset: on when an endpoint is set
//! metrics = true                      # unset: on when an endpoint is set
//! service_name = "reprise"
//! capture_content = false             # prompts, replies, arguments, results (redacted)
//! headers = { "x-api-key" = "..." }   # sent with every export
//! ```

use std::collections::BTreeMap;

use reprise_telemetry::{Protocol, TelemetryConfig};
use serde::Deserialize;

/// `[telemetry]` as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryTable {
    /// The collector's base address.
    pub endpoint: Option<String>,
    /// `http/protobuf` or `grpc`.
    pub protocol: Option<String>,
    /// Whether traces are exported.
    pub traces: Option<bool>,
    /// Whether metrics are exported.
    pub metrics: Option<bool>,
    /// The resource's `service.name`.
    pub service_name: Option<String>,
    /// Whether spans carry the conversation's text.
    pub capture_content: Option<bool>,
    /// Headers of every export.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

impl TelemetryTable {
    /// The configuration, or what is wrong with the table, naming the key.
    pub fn config(&self) -> Result<TelemetryConfig, String> {
        let protocol =
            match &self.protocol {
                None => None,
                Some(text) => Some(Protocol::parse(text).ok_or_else(|| {
                    format!("protocol is {text:?}: \"http/protobuf\" or \"grpc\"")
                })?),
            };
        if let Some(endpoint) = &self.endpoint
            && !(endpoint.starts_with("http://") || endpoint.starts_with("https://"))
        {
            return Err(format!(
                "endpoint is {endpoint:?}: an http:// or https:// address"
            ));
        }
        Ok(TelemetryConfig {
            endpoint: self.endpoint.clone(),
            protocol,
            traces: self.traces,
            metrics: self.metrics,
            service_name: self.service_name.clone(),
            headers: self
                .headers
                .iter()
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect(),
            capture_content: self.capture_content.unwrap_or(false),
        })
    }
}
