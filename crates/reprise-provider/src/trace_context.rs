//! The model call's place in a trace: the W3C `traceparent` of the current span
//! on each request (so that a proxy's or the server's spans join the trace), and
//! the response's id and model on the span (the agent's `chat` span declares them).

use opentelemetry::propagation::Injector;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tracing_opentelemetry::OpenTelemetrySpanExt;

struct Headers<'a>(&'a mut HeaderMap);

impl Injector for Headers<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

/// `traceparent` (and `tracestate`) of the current span, by the propagator the
/// program installed; empty outside a trace or without one.
pub(crate) fn headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    let context = tracing::Span::current().context();
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.inject_context(&context, &mut Headers(&mut headers));
    });
    headers
}

/// Tells the current span which response and model answered.
pub(crate) fn record_response(id: Option<&str>, model: Option<&str>) {
    let span = tracing::Span::current();
    if let Some(id) = id {
        span.record("gen_ai.response.id", id);
    }
    if let Some(model) = model {
        span.record("gen_ai.response.model", model);
    }
}
