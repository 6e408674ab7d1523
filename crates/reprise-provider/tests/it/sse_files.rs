//! The real captures in `testdata/sse/` decode into the right message, however their
//! bytes are split.

use std::path::PathBuf;

use crate::support::decode_pieces;
use futures::executor::block_on;
use futures::stream;
use proptest::prelude::*;
use reprise_provider::{Completion, ProviderError, StreamEvent, Usage, decode_sse};
use serde_json::{Value, json};
use tokio::sync::mpsc;

fn sse_dir() -> PathBuf {
    reprise_testkit::testdata("sse")
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(sse_dir().join(name)).unwrap()
}

const OPENAI: &str = "openai_gpt-4o-2024-08-06_parallel-tool-calls_split-args_usage-chunk.sse";
const VLLM: &str = "vllm_llama-3.1-8b-instruct_tool-call_usage-every-chunk.sse";
/// Scripted in Ollama's shape: whole calls, `content:""` beside them, no usage, no `[DONE]`.
const WHOLE_CALLS: &str = "scripted_parallel-tool-calls_whole_no-usage_no-done.sse";
const LLAMACPP: &str = "llamacpp_b7010_gpt-oss-20b_reasoning-content_tool-call.sse";

/// What each capture must decode into.
struct Expected {
    calls: Vec<(&'static str, &'static str, Value)>,
    reasoning: Option<&'static str>,
    usage: Option<Usage>,
}

fn expected(name: &str) -> Expected {
    match name {
        OPENAI => Expected {
            calls: vec![
                (
                    "call_JMW1whyEaYG438VE1OIflxA2",
                    "GetWeatherArgs",
                    json!({"city": "Edinburgh", "country": "GB", "units": "c"}),
                ),
                (
                    "call_DNYTawLBoN8fj3KN6qU9N1Ou",
                    "get_stock_price",
                    json!({"ticker": "AAPL", "exchange": "NASDAQ"}),
                ),
            ],
            reasoning: None,
            usage: Some(Usage {
                prompt_tokens: 149,
                completion_tokens: 60,
                total_tokens: 209,
                cached_tokens: None,
            }),
        },
        VLLM => Expected {
            calls: vec![(
                "chatcmpl-tool-b3b307239370432d9910d4b79b4dbbaa",
                "searchGoogle",
                json!({"query": "latest news on ai"}),
            )],
            reasoning: None,
            usage: Some(Usage {
                prompt_tokens: 226,
                completion_tokens: 20,
                total_tokens: 246,
                cached_tokens: None,
            }),
        },
        WHOLE_CALLS => Expected {
            calls: vec![
                ("call_whole0001", "run_command", json!({"command": "pwd"})),
                ("call_whole0002", "run_command", json!({"command": "ls -a"})),
            ],
            reasoning: None,
            usage: None,
        },
        LLAMACPP => Expected {
            calls: vec![(
                "g2KOIWzn722hzEaZQmNVP4roUPEiYafL",
                "weather",
                json!({"location": "Florence, Italy"}),
            )],
            reasoning: Some(
                "User wants weather in Florence, Italy. We can use the weather function.",
            ),
            usage: Some(Usage {
                prompt_tokens: 139,
                completion_tokens: 41,
                total_tokens: 180,
                cached_tokens: None,
            }),
        },
        other => panic!("no expectation written for {other}"),
    }
}

fn check(name: &str, completion: &Completion) {
    let want = expected(name);
    let message = &completion.message;
    assert_eq!(message.role.as_str(), "assistant", "{name}");
    assert_eq!(
        message.content, None,
        "{name}: tool-call replies carry no text"
    );
    assert_eq!(
        completion.finish_reason.as_deref(),
        Some("tool_calls"),
        "{name}"
    );
    let calls = message.calls();
    assert_eq!(calls.len(), want.calls.len(), "{name}");
    for (call, (id, tool, arguments)) in calls.iter().zip(&want.calls) {
        assert_eq!(call.id, *id, "{name}");
        assert_eq!(call.kind, "function", "{name}");
        assert_eq!(call.function.name, *tool, "{name}");
        let parsed: Value =
            serde_json::from_str(&call.function.arguments).unwrap_or_else(|error| {
                panic!("{name}: arguments {:?}: {error}", call.function.arguments)
            });
        assert_eq!(parsed, *arguments, "{name}");
    }
    assert_eq!(
        message
            .extra
            .get("reasoning_content")
            .and_then(Value::as_str),
        want.reasoning,
        "{name}"
    );
    assert_eq!(completion.usage, want.usage, "{name}");
}

fn all_files() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(sse_dir())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        // The captures of the tests' own llama.cpp server have their expectations in
        // `llama_captures`.
        .filter(|name| name.ends_with(".sse") && !name.starts_with("llamacpp-gemma3-270m_"))
        .collect();
    names.sort();
    names
}

#[test]
fn every_capture_has_an_expectation_and_decodes_whole() {
    let names = all_files();
    assert_eq!(
        names.len(),
        4,
        "a new capture needs an expectation here: {names:?}"
    );
    for name in names {
        let completion = decode_pieces(vec![read(&name)]).unwrap();
        check(&name, &completion);
    }
}

/// One byte at a time puts a boundary at every position of every file at once; this
/// adds every two-piece split of the smallest capture (a split anywhere, then one
/// large piece), which is a different buffering path. Doing it for every file costs
/// tens of seconds in a debug build for little more.
#[test]
fn smallest_capture_decodes_when_split_at_every_single_point() {
    for name in [WHOLE_CALLS] {
        let bytes = read(name);
        for at in 0..=bytes.len() {
            let completion = decode_pieces(vec![bytes[..at].to_vec(), bytes[at..].to_vec()])
                .unwrap_or_else(|error| panic!("{name} split at {at}: {error}"));
            check(name, &completion);
        }
    }
}

#[test]
fn every_capture_decodes_one_byte_at_a_time() {
    for name in all_files() {
        let pieces = read(&name).into_iter().map(|byte| vec![byte]).collect();
        check(&name, &decode_pieces(pieces).unwrap());
    }
}

#[test]
fn events_follow_the_stream() {
    let (sender, mut receiver) = mpsc::unbounded_channel();
    let bytes = read(LLAMACPP);
    let completion = block_on(decode_sse(
        stream::iter([Ok::<_, ProviderError>(bytes)]),
        Some(&sender),
    ))
    .unwrap();
    drop(sender);
    let mut reasoning = String::new();
    let mut started = Vec::new();
    let mut usage = Vec::new();
    while let Ok(event) = receiver.try_recv() {
        match event {
            StreamEvent::ReasoningDelta(piece) => reasoning.push_str(&piece),
            StreamEvent::ToolCallStarted { index, id, name } => started.push((index, id, name)),
            StreamEvent::Usage(reported) => usage.push(reported),
            StreamEvent::TextDelta(text) => panic!("no text in this capture, got {text:?}"),
            StreamEvent::Retrying { .. } => panic!("no retry without HTTP"),
        }
    }
    assert_eq!(reasoning, expected(LLAMACPP).reasoning.unwrap());
    assert_eq!(
        started,
        vec![(
            0,
            "g2KOIWzn722hzEaZQmNVP4roUPEiYafL".to_owned(),
            "weather".to_owned()
        )]
    );
    assert_eq!(
        usage,
        vec![completion.usage.unwrap()],
        "usage is reported once, at the end"
    );

    let (sender, mut receiver) = mpsc::unbounded_channel();
    block_on(decode_sse(
        stream::iter([Ok::<_, ProviderError>(read(OPENAI))]),
        Some(&sender),
    ))
    .unwrap();
    drop(sender);
    let mut names = Vec::new();
    while let Ok(event) = receiver.try_recv() {
        if let StreamEvent::ToolCallStarted { index, name, .. } = event {
            names.push((index, name));
        }
    }
    assert_eq!(
        names,
        vec![
            (0, "GetWeatherArgs".to_owned()),
            (1, "get_stock_price".to_owned())
        ]
    );
}

#[test]
fn a_capture_cut_before_its_finish_reason_is_an_error_not_a_message() {
    for name in all_files() {
        let bytes = read(&name);
        let text = String::from_utf8(bytes.clone()).unwrap();
        let finish = text.find("\"finish_reason\":\"tool_calls\"").unwrap();
        // Everything up to the event holding the finish reason, then a clean end.
        let event_start = text[..finish].rfind("data: ").unwrap();
        let error = decode_pieces(vec![bytes[..event_start].to_vec()]).unwrap_err();
        assert!(
            matches!(error, ProviderError::StreamCut { .. }),
            "{name}: {error}"
        );
        // The same cut as a transport failure.
        let error = block_on(decode_sse(
            stream::iter(vec![
                Ok(bytes[..event_start + 10].to_vec()),
                Err(ProviderError::StreamCut {
                    reason: "connection reset".to_owned(),
                    source: None,
                }),
            ]),
            None,
        ))
        .unwrap_err();
        assert!(
            matches!(error, ProviderError::StreamCut { .. }),
            "{name}: {error}"
        );
    }
}

#[test]
fn whole_calls_stream_without_done_is_complete_because_it_has_a_finish_reason() {
    let bytes = read(WHOLE_CALLS);
    assert!(!String::from_utf8_lossy(&bytes).contains("[DONE]"));
    check(WHOLE_CALLS, &decode_pieces(vec![bytes]).unwrap());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn captures_decode_however_the_bytes_are_split(
        file in 0usize..4,
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..40),
    ) {
        let name = all_files()[file].clone();
        let bytes = read(&name);
        let mut points: Vec<usize> = cuts.iter().map(|index| index.index(bytes.len() + 1)).collect();
        points.sort_unstable();
        points.dedup();
        let mut pieces = Vec::new();
        let mut start = 0;
        for point in points {
            pieces.push(bytes[start..point].to_vec());
            start = point;
        }
        pieces.push(bytes[start..].to_vec());
        let completion = decode_pieces(pieces).map_err(|error| TestCaseError::fail(error.to_string()))?;
        check(&name, &completion);
    }
}
