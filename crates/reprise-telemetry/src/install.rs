//! Starting and stopping the exporters.

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{BatchSpanProcessor, SdkTracerProvider};
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::FilterFn;
use tracing_subscriber::registry::LookupSpan;

use crate::config::{Protocol, Resolved, TelemetryConfig};
use crate::drops::{DropWatch, Watched};
use crate::exporter::{Metrics, Spans};
use crate::warn_once::WarnOnce;

/// How long [`Telemetry::shutdown`] waits for a collector to take what is queued.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(3);

/// Why telemetry could not start.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The exporter refused its settings (an endpoint that is not a URL, a bad
    /// header).
    #[error("telemetry: cannot set up the OTLP {signal} exporter")]
    Exporter {
        /// `traces` or `metrics`.
        signal: &'static str,
        /// What the exporter said.
        #[source]
        source: opentelemetry_otlp::ExporterBuildError,
    },
    /// A header name or value of the configuration that HTTP cannot carry.
    #[error("telemetry: bad header {name:?}")]
    Header {
        /// The header's name.
        name: String,
    },
}

/// Running exporters. Dropping it without [`Telemetry::shutdown`] loses what is
/// still queued.
#[derive(Debug)]
pub struct Telemetry {
    tracer: Option<SdkTracerProvider>,
    meter: Option<SdkMeterProvider>,
}

impl Telemetry {
    /// Starts the exporters `config` and the `OTEL_*` variables ask for; `None` when
    /// they ask for none. Sets the global meter provider (the agent's metrics) and
    /// the W3C trace-context propagator (the `traceparent` of model requests).
    /// gRPC needs to be started inside a Tokio runtime.
    pub fn start(config: &TelemetryConfig) -> Result<Option<Telemetry>, TelemetryError> {
        let resolved = config.resolve(|name| std::env::var(name).ok());
        if !resolved.traces && !resolved.metrics {
            return Ok(None);
        }
        let resource = resource(&resolved);
        let warn = WarnOnce::default();
        let tracer = if resolved.traces {
            let watch = DropWatch::new(|name| std::env::var(name).ok(), warn.clone());
            let exporter = Spans {
                inner: span_exporter(&resolved)?,
                warn: warn.clone(),
                watch: watch.clone(),
            };
            let processor = Watched {
                inner: BatchSpanProcessor::builder(exporter).build(),
                watch,
            };
            Some(
                SdkTracerProvider::builder()
                    .with_span_processor(processor)
                    .with_resource(resource.clone())
                    .build(),
            )
        } else {
            None
        };
        let meter = if resolved.metrics {
            let exporter = Metrics {
                inner: metric_exporter(&resolved)?,
                warn,
            };
            let provider = SdkMeterProvider::builder()
                .with_reader(PeriodicReader::builder(exporter).build())
                .with_resource(resource)
                .build();
            opentelemetry::global::set_meter_provider(provider.clone());
            Some(provider)
        } else {
            None
        };
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        Ok(Some(Telemetry { tracer, meter }))
    }

    /// The `tracing` layer that turns reprise's spans into OpenTelemetry spans (and
    /// its events inside them into span events); `None` without traces. A host with
    /// a subscriber of its own adds it there; its own spans become the parents of
    /// the agent's.
    pub fn layer<S>(&self) -> Option<Box<dyn Layer<S> + Send + Sync + 'static>>
    where
        S: Subscriber + for<'span> LookupSpan<'span> + Send + Sync,
    {
        let tracer = self.tracer.as_ref()?.tracer("reprise");
        let layer = tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_threads(false)
            .with_location(false)
            // Debug events (a request being sent) are not worth a span event each.
            .with_filter(FilterFn::new(|meta| {
                meta.is_span() || *meta.level() <= tracing::Level::INFO
            }));
        Some(Box::new(layer))
    }

    /// Sends what is queued, waiting a few seconds at most for a slow collector,
    /// and stops the exporters.
    pub fn shutdown(self) {
        if let Some(tracer) = &self.tracer {
            let _ = tracer.shutdown_with_timeout(SHUTDOWN_WAIT);
        }
        if let Some(meter) = &self.meter {
            let _ = meter.shutdown_with_timeout(SHUTDOWN_WAIT);
        }
    }
}

fn resource(resolved: &Resolved) -> Resource {
    let builder = Resource::builder();
    match &resolved.service_name {
        Some(name) => builder.with_service_name(name.clone()).build(),
        None => builder.build(),
    }
}

fn headers(resolved: &Resolved) -> std::collections::HashMap<String, String> {
    resolved.headers.iter().cloned().collect()
}

/// The configured base address plus the signal's path (HTTP), as
/// `OTEL_EXPORTER_OTLP_ENDPOINT` is read.
fn http_endpoint(base: &str, path: &str) -> String {
    format!("{}/{path}", base.trim_end_matches('/'))
}

fn span_exporter(resolved: &Resolved) -> Result<opentelemetry_otlp::SpanExporter, TelemetryError> {
    let error = |source| TelemetryError::Exporter {
        signal: "traces",
        source,
    };
    match resolved.protocol {
        Protocol::HttpProtobuf => {
            let mut builder = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_headers(headers(resolved));
            if let Some(base) = &resolved.endpoint {
                builder = builder.with_endpoint(http_endpoint(base, "v1/traces"));
            }
            builder.build().map_err(error)
        }
        Protocol::Grpc => {
            let mut builder = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_metadata(metadata(resolved)?);
            if let Some(base) = &resolved.endpoint {
                builder = builder.with_endpoint(base.clone());
            }
            builder.build().map_err(error)
        }
    }
}

fn metric_exporter(
    resolved: &Resolved,
) -> Result<opentelemetry_otlp::MetricExporter, TelemetryError> {
    let error = |source| TelemetryError::Exporter {
        signal: "metrics",
        source,
    };
    match resolved.protocol {
        Protocol::HttpProtobuf => {
            let mut builder = opentelemetry_otlp::MetricExporter::builder()
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_headers(headers(resolved));
            if let Some(base) = &resolved.endpoint {
                builder = builder.with_endpoint(http_endpoint(base, "v1/metrics"));
            }
            builder.build().map_err(error)
        }
        Protocol::Grpc => {
            let mut builder = opentelemetry_otlp::MetricExporter::builder()
                .with_tonic()
                .with_metadata(metadata(resolved)?);
            if let Some(base) = &resolved.endpoint {
                builder = builder.with_endpoint(base.clone());
            }
            builder.build().map_err(error)
        }
    }
}

fn metadata(resolved: &Resolved) -> Result<tonic::metadata::MetadataMap, TelemetryError> {
    let mut map = tonic::metadata::MetadataMap::new();
    for (name, value) in &resolved.headers {
        let bad = || TelemetryError::Header { name: name.clone() };
        let key = tonic::metadata::MetadataKey::from_bytes(name.to_ascii_lowercase().as_bytes())
            .map_err(|_| bad())?;
        let value = value.parse().map_err(|_| bad())?;
        map.insert(key, value);
    }
    Ok(map)
}
