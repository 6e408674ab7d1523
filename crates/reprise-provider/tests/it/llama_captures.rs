//! Streams captured from llama.cpp's own server (the xllamacpp wheel) running Gemma 3
//! 270M with scripts/llama-chat-template.jinja: a text reply, a tool call, and tool
//! calls cut by `max_tokens` in the middle of their arguments. They decode into the
//! message the server meant, however their bytes are split.

use crate::support::decode_pieces;
use futures::executor::block_on;
use futures::stream;
use proptest::prelude::*;
use reprise_provider::{Completion, ProviderError, StreamEvent, Usage, decode_sse};
use tokio::sync::mpsc;

const TEXT: &str = "llamacpp-gemma3-270m_text_usage.sse";
const TOOL_CALL: &str = "llamacpp-gemma3-270m_tool-call_length_usage.sse";
const CUT_OPEN_BRACE: &str = "llamacpp-gemma3-270m_tool-call-cut-by-max-tokens_open-brace.sse";
const CUT_MID_KEY: &str = "llamacpp-gemma3-270m_tool-call-cut-by-max-tokens_mid-key.sse";
const ALL: [&str; 4] = [TEXT, TOOL_CALL, CUT_OPEN_BRACE, CUT_MID_KEY];

fn read(name: &str) -> Vec<u8> {
    let path = reprise_testkit::testdata("sse").join(name);
    std::fs::read(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// What a capture decodes into: text, calls as (id, name, raw arguments), usage.
struct Expected {
    text: &'static str,
    calls: Vec<(&'static str, &'static str, &'static str)>,
    usage: Usage,
}

fn expected(name: &str) -> Expected {
    match name {
        // A base model never ends its turn: the reply repeats the prompt until
        // max_tokens (12) stops it.
        TEXT => Expected {
            text: "Say hello in one short sentence. mendatang\nSay hello in",
            calls: vec![],
            usage: Usage {
                prompt_tokens: 16,
                completion_tokens: 12,
                total_tokens: 28,
                cached_tokens: Some(1),
            },
        },
        // A whole call, then tokens after `</tool_call>` that the server's parser
        // drops; the reply still ends with `length` (max_tokens 40).
        TOOL_CALL => Expected {
            text: "",
            calls: vec![(
                "LWGdkF6s415b6ZCGZxk9fIUKu4S5e0NC",
                "read_file",
                r#"{"path": "string"}"#,
            )],
            usage: Usage {
                prompt_tokens: 172,
                completion_tokens: 40,
                total_tokens: 212,
                cached_tokens: Some(167),
            },
        },
        // max_tokens 13: the server has seen the name and sends the call with the
        // arguments' first character only.
        CUT_OPEN_BRACE => Expected {
            text: "",
            calls: vec![("MCA0i0lu94r5VkAvri9UUtfkHVdpBgI8", "read_file", "{")],
            usage: Usage {
                prompt_tokens: 172,
                completion_tokens: 13,
                total_tokens: 185,
                cached_tokens: Some(167),
            },
        },
        // max_tokens 19: cut after the first key.
        CUT_MID_KEY => Expected {
            text: "",
            calls: vec![(
                "YpiJs4JykrJfkYDjwd7JACTFvJEkafXM",
                "read_file",
                r#"{"path":"#,
            )],
            usage: Usage {
                prompt_tokens: 172,
                completion_tokens: 19,
                total_tokens: 191,
                cached_tokens: Some(167),
            },
        },
        other => panic!("no expectation written for {other}"),
    }
}

fn check(name: &str, completion: &Completion) {
    let want = expected(name);
    let message = &completion.message;
    assert_eq!(message.role.as_str(), "assistant", "{name}");
    assert_eq!(message.text(), want.text, "{name}");
    // Every one of these replies was stopped by max_tokens, tool calls included.
    assert_eq!(
        completion.finish_reason.as_deref(),
        Some("length"),
        "{name}"
    );
    let calls: Vec<(&str, &str, &str)> = message
        .calls()
        .iter()
        .map(|call| {
            assert_eq!(call.kind, "function", "{name}");
            (
                call.id.as_str(),
                call.function.name.as_str(),
                call.function.arguments.as_str(),
            )
        })
        .collect();
    assert_eq!(calls, want.calls, "{name}");
    assert_eq!(completion.usage, Some(want.usage), "{name}");
}

#[test]
fn every_llamacpp_capture_decodes_whole() {
    for name in ALL {
        check(name, &decode_pieces(vec![read(name)]).unwrap());
    }
}

#[test]
fn every_llamacpp_capture_decodes_one_byte_at_a_time() {
    for name in ALL {
        let pieces = read(name).into_iter().map(|byte| vec![byte]).collect();
        check(name, &decode_pieces(pieces).unwrap());
    }
}

#[test]
fn llamacpp_ids_are_32_characters_of_letters_and_digits() {
    for name in [TOOL_CALL, CUT_OPEN_BRACE, CUT_MID_KEY] {
        let completion = decode_pieces(vec![read(name)]).unwrap();
        let id = &completion.message.calls()[0].id;
        assert_eq!(id.len(), 32, "{name}: {id}");
        assert!(
            id.chars().all(|c| c.is_ascii_alphanumeric()),
            "{name}: {id}"
        );
    }
}

#[test]
fn a_cut_tool_call_carries_arguments_that_are_not_json() {
    for name in [CUT_OPEN_BRACE, CUT_MID_KEY] {
        let completion = decode_pieces(vec![read(name)]).unwrap();
        let arguments = &completion.message.calls()[0].function.arguments;
        assert!(
            serde_json::from_str::<serde_json::Value>(arguments).is_err(),
            "{name}: {arguments:?}"
        );
    }
    // The whole call's arguments are a JSON object.
    let completion = decode_pieces(vec![read(TOOL_CALL)]).unwrap();
    let arguments: serde_json::Value =
        serde_json::from_str(&completion.message.calls()[0].function.arguments).unwrap();
    assert!(arguments.is_object());
}

#[test]
fn llamacpp_events_follow_the_stream() {
    let (sender, mut receiver) = mpsc::unbounded_channel();
    let completion = block_on(decode_sse(
        stream::iter([Ok::<_, ProviderError>(read(TEXT))]),
        Some(&sender),
    ))
    .unwrap();
    drop(sender);
    let mut text = String::new();
    let mut usage = Vec::new();
    while let Ok(event) = receiver.try_recv() {
        match event {
            StreamEvent::TextDelta(piece) => text.push_str(&piece),
            StreamEvent::Usage(reported) => usage.push(reported),
            other => panic!("a text reply sends no {other:?}"),
        }
    }
    assert_eq!(text, completion.message.text());
    assert_eq!(usage, vec![completion.usage.unwrap()]);

    let (sender, mut receiver) = mpsc::unbounded_channel();
    block_on(decode_sse(
        stream::iter([Ok::<_, ProviderError>(read(CUT_OPEN_BRACE))]),
        Some(&sender),
    ))
    .unwrap();
    drop(sender);
    let mut started = Vec::new();
    while let Ok(event) = receiver.try_recv() {
        match event {
            StreamEvent::ToolCallStarted { index, id, name } => started.push((index, id, name)),
            StreamEvent::Usage(_) => {}
            other => panic!("a cut tool call sends no {other:?}"),
        }
    }
    assert_eq!(
        started,
        vec![(
            0,
            "MCA0i0lu94r5VkAvri9UUtfkHVdpBgI8".to_owned(),
            "read_file".to_owned()
        )]
    );
}

#[test]
fn a_llamacpp_capture_cut_before_its_finish_reason_is_an_error() {
    for name in ALL {
        let bytes = read(name);
        let text = String::from_utf8(bytes.clone()).unwrap();
        let finish = text.find("\"finish_reason\":\"length\"").unwrap();
        let event_start = text[..finish].rfind("data: ").unwrap();
        let error = decode_pieces(vec![bytes[..event_start].to_vec()]).unwrap_err();
        assert!(
            matches!(error, ProviderError::StreamCut { .. }),
            "{name}: {error}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn llamacpp_captures_decode_however_the_bytes_are_split(
        file in 0usize..ALL.len(),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..40),
    ) {
        let name = ALL[file];
        let bytes = read(name);
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
        check(name, &completion);
    }
}
