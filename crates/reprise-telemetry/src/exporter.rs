//! Exporters that say once that the collector cannot be reached: every failed
//! export after the first is dropped silently, so a collector that is down
//! fills no screen or log.

use std::time::Duration;

use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::Temporality;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

use crate::drops::DropWatch;
use crate::warn_once::WarnOnce;

fn check(warn: &WarnOnce, result: OTelSdkResult, what: &str) -> OTelSdkResult {
    if let Err(error) = &result {
        warn.say(|| {
            format!(
                "telemetry: the {what} could not be sent to the collector ({error}); \
                 what it cannot take is dropped"
            )
        });
    }
    result
}

/// A span exporter whose first failure is reported.
#[derive(Debug)]
pub(crate) struct Spans<E> {
    pub inner: E,
    pub warn: WarnOnce,
    pub watch: DropWatch,
}

impl<E: SpanExporter> SpanExporter for Spans<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.watch.exported(batch.len());
        let result = self.inner.export(batch).await;
        check(&self.warn, result, "spans")
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// A metric exporter whose first failure is reported.
#[derive(Debug)]
pub(crate) struct Metrics<E> {
    pub inner: E,
    pub warn: WarnOnce,
}

impl<E: PushMetricExporter> PushMetricExporter for Metrics<E> {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        let result = self.inner.export(metrics).await;
        check(&self.warn, result, "metrics")
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}
