//! An OTLP/HTTP receiver in the test's process: it takes the protobuf bodies an
//! exporter posts to `/v1/traces` and `/v1/metrics` and keeps them, decoded, so a
//! test can read back what a program exported (Phoenix keeps no metrics).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
/// The OTLP messages, for a test to read what it got.
pub use opentelemetry_proto as proto;
pub use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
pub use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::Metric;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

#[derive(Default)]
struct Received {
    traces: Vec<ExportTraceServiceRequest>,
    metrics: Vec<ExportMetricsServiceRequest>,
}

/// A running receiver; it stops with the test's runtime.
pub struct OtlpReceiver {
    address: String,
    received: Arc<Mutex<Received>>,
}

impl OtlpReceiver {
    /// Listens on a free port of `127.0.0.1`.
    pub async fn start() -> std::io::Result<OtlpReceiver> {
        let received = Arc::new(Mutex::new(Received::default()));
        let app = Router::new()
            .route("/v1/traces", post(traces))
            .route("/v1/metrics", post(metrics))
            .with_state(received.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = format!("http://{}", listener.local_addr()?);
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(OtlpReceiver { address, received })
    }

    /// The base address (`http://127.0.0.1:PORT`), as `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// takes it.
    pub fn endpoint(&self) -> String {
        self.address.clone()
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Span> {
        let received = self.received.lock().unwrap_or_else(|e| e.into_inner());
        received
            .traces
            .iter()
            .flat_map(|request| &request.resource_spans)
            .flat_map(|resource| &resource.scope_spans)
            .flat_map(|scope| scope.spans.iter().cloned())
            .collect()
    }

    /// Every metric received so far, in the order received (a cumulative metric
    /// exported twice is here twice).
    pub fn metrics(&self) -> Vec<Metric> {
        let received = self.received.lock().unwrap_or_else(|e| e.into_inner());
        received
            .metrics
            .iter()
            .flat_map(|request| &request.resource_metrics)
            .flat_map(|resource| &resource.scope_metrics)
            .flat_map(|scope| scope.metrics.iter().cloned())
            .collect()
    }

    /// The spans once at least `count` have come, or what came within `wait`.
    pub async fn wait_for_spans(&self, count: usize, wait: Duration) -> Vec<Span> {
        let start = Instant::now();
        loop {
            let spans = self.spans();
            if spans.len() >= count || start.elapsed() > wait {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

async fn traces(State(received): State<Arc<Mutex<Received>>>, body: Bytes) -> StatusCode {
    match ExportTraceServiceRequest::decode(body) {
        Ok(request) => {
            let mut received = received.lock().unwrap_or_else(|e| e.into_inner());
            received.traces.push(request);
            StatusCode::OK
        }
        Err(_) => StatusCode::BAD_REQUEST,
    }
}

async fn metrics(State(received): State<Arc<Mutex<Received>>>, body: Bytes) -> StatusCode {
    match ExportMetricsServiceRequest::decode(body) {
        Ok(request) => {
            let mut received = received.lock().unwrap_or_else(|e| e.into_inner());
            received.metrics.push(request);
            StatusCode::OK
        }
        Err(_) => StatusCode::BAD_REQUEST,
    }
}

/// An attribute's value as text (`""` when absent): strings as they are, numbers
/// and booleans written out.
pub fn attribute(attributes: &[KeyValue], key: &str) -> String {
    attributes
        .iter()
        .find(|pair| pair.key == key)
        .and_then(|pair| pair.value.as_ref())
        .map(text)
        .unwrap_or_default()
}

fn text(value: &AnyValue) -> String {
    match &value.value {
        Some(any_value::Value::StringValue(text)) => text.clone(),
        Some(any_value::Value::IntValue(number)) => number.to_string(),
        Some(any_value::Value::DoubleValue(number)) => number.to_string(),
        Some(any_value::Value::BoolValue(flag)) => flag.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}
