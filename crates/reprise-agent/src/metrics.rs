//! The agent's metrics, recorded through the global OpenTelemetry meter (a no-op
//! until a program installs a meter provider): the GenAI conventions'
//! `gen_ai.client.token.usage` and `gen_ai.client.operation.duration`, and counts
//! of tool calls and sessions. Each carries the session id
//! (`gen_ai.conversation.id`), so that a backend can sum by session.

use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram};
use reprise_provider::Usage;

use crate::spans::provider_attribute;

struct Instruments {
    tokens: Histogram<u64>,
    duration: Histogram<f64>,
    tool_calls: Counter<u64>,
    sessions: Counter<u64>,
}

/// The buckets the conventions advise for each.
const TOKEN_BUCKETS: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];
const DURATION_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

/// Made on first use, from the meter provider installed by then.
fn instruments() -> &'static Instruments {
    static INSTRUMENTS: OnceLock<Instruments> = OnceLock::new();
    INSTRUMENTS.get_or_init(|| {
        let meter = opentelemetry::global::meter("reprise");
        Instruments {
            tokens: meter
                .u64_histogram("gen_ai.client.token.usage")
                .with_unit("{token}")
                .with_description("Number of input and output tokens used")
                .with_boundaries(TOKEN_BUCKETS.to_vec())
                .build(),
            duration: meter
                .f64_histogram("gen_ai.client.operation.duration")
                .with_unit("s")
                .with_description("GenAI operation duration")
                .with_boundaries(DURATION_BUCKETS.to_vec())
                .build(),
            tool_calls: meter
                .u64_counter("reprise.tool.calls")
                .with_unit("{call}")
                .with_description("Tool calls run, by tool and outcome")
                .build(),
            sessions: meter
                .u64_counter("reprise.sessions")
                .with_unit("{session}")
                .with_description("Sessions opened")
                .build(),
        }
    })
}

/// What every model call's measurements carry.
pub(crate) struct CallAttributes<'a> {
    pub session: &'a str,
    pub model: &'a str,
    pub provider: Option<&'a str>,
}

impl CallAttributes<'_> {
    fn base(&self) -> Vec<KeyValue> {
        let mut attributes = vec![
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.request.model", self.model.to_owned()),
            KeyValue::new("gen_ai.conversation.id", self.session.to_owned()),
        ];
        if let Some(provider) = self.provider {
            attributes.push(KeyValue::new(provider_attribute(), provider.to_owned()));
        }
        attributes
    }
}

/// One model call: how long it took, its error type when it failed, and the
/// tokens it used when the server said.
pub(crate) fn model_call(
    call: &CallAttributes<'_>,
    took: Duration,
    usage: Option<Usage>,
    error_type: Option<&'static str>,
) {
    let instruments = instruments();
    let mut attributes = call.base();
    if let Some(usage) = usage {
        for (kind, count) in [
            ("input", usage.prompt_tokens),
            ("output", usage.completion_tokens),
        ] {
            let mut with_type = attributes.clone();
            with_type.push(KeyValue::new("gen_ai.token.type", kind));
            instruments.tokens.record(count, &with_type);
        }
    }
    if let Some(error) = error_type {
        attributes.push(KeyValue::new("error.type", error));
    }
    instruments.duration.record(took.as_secs_f64(), &attributes);
}

/// One tool call with its outcome.
pub(crate) fn tool_call(session: &str, tool: &str, is_error: bool) {
    let mut attributes = vec![
        KeyValue::new("gen_ai.tool.name", tool.to_owned()),
        KeyValue::new("gen_ai.conversation.id", session.to_owned()),
    ];
    if is_error {
        attributes.push(KeyValue::new("error.type", "tool_error"));
    }
    instruments().tool_calls.add(1, &attributes);
}

/// A session opened by an agent.
pub(crate) fn session_opened(session: &str, agent: &str) {
    instruments().sessions.add(
        1,
        &[
            KeyValue::new("gen_ai.conversation.id", session.to_owned()),
            KeyValue::new("gen_ai.agent.name", agent.to_owned()),
        ],
    );
}
