//! Noticing the spans the SDK's batch processor drops when its queue is full: it
//! drops them without a word (its own note goes to internal logs this build turns
//! off), so spans handed to it are counted against spans handed to the exporter.
//! More waiting than the queue and one export batch can hold means some were
//! dropped; after shutdown every span still waiting was.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use opentelemetry::Context;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanProcessor};

use crate::warn_once::WarnOnce;

/// The batch processor's defaults, as the conventions' `OTEL_BSP_*` variables name them.
const QUEUE_DEFAULT: u64 = 2048;
const BATCH_DEFAULT: u64 = 512;

/// Spans in and out of the batch queue, shared by the processor's wrapper and the
/// exporter's.
#[derive(Clone, Debug)]
pub(crate) struct DropWatch(Arc<Counts>);

#[derive(Debug)]
struct Counts {
    ended: AtomicU64,
    exported: AtomicU64,
    /// How many may wait without any having been dropped.
    room: u64,
    warn: WarnOnce,
}

impl DropWatch {
    /// With the queue and batch sizes the processor reads from `env`; a drop is
    /// said through `warn`.
    pub(crate) fn new(env: impl Fn(&str) -> Option<String>, warn: WarnOnce) -> DropWatch {
        let size = |name: &str, default: u64| {
            env(name)
                .and_then(|value| value.trim().parse().ok())
                .unwrap_or(default)
        };
        DropWatch(Arc::new(Counts {
            ended: AtomicU64::new(0),
            exported: AtomicU64::new(0),
            room: size("OTEL_BSP_MAX_QUEUE_SIZE", QUEUE_DEFAULT)
                + size("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", BATCH_DEFAULT),
            warn,
        }))
    }

    /// Spans given to the exporter.
    pub(crate) fn exported(&self, count: usize) {
        self.0.exported.fetch_add(count as u64, Ordering::Relaxed);
    }

    fn waiting(&self) -> u64 {
        let exported = self.0.exported.load(Ordering::Relaxed);
        self.0
            .ended
            .load(Ordering::Relaxed)
            .saturating_sub(exported)
    }

    fn warn(&self, dropped: u64) {
        self.0.warn.say(|| {
            format!(
                "telemetry: the collector cannot keep up; {dropped} spans or more were \
                 dropped (the export queue was full)"
            )
        });
    }
}

/// A span processor that counts what it hands to the one it wraps.
#[derive(Debug)]
pub(crate) struct Watched<P> {
    pub inner: P,
    pub watch: DropWatch,
}

impl<P: SpanProcessor> SpanProcessor for Watched<P> {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        // The batch processor keeps only sampled spans.
        if span.span_context.is_sampled() {
            self.watch.0.ended.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.on_end(span);
        let waiting = self.watch.waiting();
        if waiting > self.watch.0.room {
            self.watch.warn(waiting - self.watch.0.room);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        let result = self.inner.shutdown_with_timeout(timeout);
        // What was not handed to the exporter by now was dropped (or the shutdown
        // timed out, which drops it too).
        let waiting = self.watch.waiting();
        if waiting > 0 {
            self.watch.warn(waiting);
        }
        result
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use opentelemetry::trace::{Tracer as _, TracerProvider as _};
    use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider};

    use super::*;

    /// An exporter as slow as a collector that barely answers.
    #[derive(Debug)]
    struct Slow {
        watch: DropWatch,
        pause: Duration,
    }

    impl opentelemetry_sdk::trace::SpanExporter for Slow {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            self.watch.exported(batch.len());
            std::thread::sleep(self.pause);
            Ok(())
        }
    }

    /// `spans` spans through a queue of 4 and batches of 2 to an exporter taking
    /// `pause` per batch; whether a drop was said.
    fn run(spans: usize, pause: Duration) -> bool {
        let warn = WarnOnce::default();
        let watch = DropWatch::new(
            |name| match name {
                "OTEL_BSP_MAX_QUEUE_SIZE" => Some("4".to_owned()),
                "OTEL_BSP_MAX_EXPORT_BATCH_SIZE" => Some("2".to_owned()),
                _ => None,
            },
            warn.clone(),
        );
        let exporter = Slow {
            watch: watch.clone(),
            pause,
        };
        let batch = BatchSpanProcessor::builder(exporter)
            .with_batch_config(
                BatchConfigBuilder::default()
                    .with_max_queue_size(4)
                    .with_max_export_batch_size(2)
                    .build(),
            )
            .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(Watched {
                inner: batch,
                watch: watch.clone(),
            })
            .build();
        let tracer = provider.tracer("test");
        for _ in 0..spans {
            drop(tracer.start("work"));
        }
        provider
            .shutdown_with_timeout(Duration::from_secs(10))
            .unwrap();
        warn.said()
    }

    #[test]
    fn spans_the_queue_cannot_hold_are_noticed() {
        assert!(run(200, Duration::from_millis(300)));
    }

    #[test]
    fn a_queue_that_keeps_up_drops_nothing() {
        assert!(!run(3, Duration::ZERO));
    }
}
