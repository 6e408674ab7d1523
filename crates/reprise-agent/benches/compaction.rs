//! Compaction's two promises, measured.
//!
//! 1. The request is bounded by the window, not by the history: sessions of 100,
//!    1,000 and 10,000 turns (each a question, a tool call, a 2 KB result and an
//!    answer) run against a provider that answers at once and summarises in one
//!    line, with a window of 8,192 tokens. Printed per size: the messages in the
//!    history, the compactions made, and the largest request body the client
//!    serialized (`OpenAiProvider::request_body`), in bytes and in estimated tokens,
//!    next to the window.
//! 2. Loading and resuming does not get dearer with compactions: two session files
//!    of about 100 MB, one without compactions and one with a compaction entry every
//!    50 turns, are each opened by `Agent::build` (load, repair, model view) three
//!    times; printed: the best time of each, their ratio, and the messages each
//!    view sends.
//!
//! `cargo bench -p reprise-agent --bench compaction`
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed test or bench run

use std::io::{BufWriter, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use reprise_agent::tokens::estimate_request;
use reprise_agent::{Agent, Tool, tool};
use reprise_provider::{
    ChatRequest, Completion, OpenAiConfig, OpenAiProvider, Provider, ProviderError, StreamEvent,
};
use reprise_session::{
    Compaction, Durability, Entry, FileSessionStore, MemoryStore, Message, Role, SessionStore,
    ToolCall,
};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

const WINDOW: u32 = 8_192;
const SIZES: [usize; 3] = [100, 1_000, 10_000];
const FILE_BYTES: usize = 100 * 1024 * 1024;
const COMPACT_EVERY: usize = 50;

/// Answers at once: a tool call for a question, an answer for a result, one line
/// for a summary request. Serializes each request as the real client does.
struct Quick {
    client: OpenAiProvider,
    /// The largest request: (body bytes, estimated tokens).
    largest: Mutex<(usize, u64)>,
}

#[async_trait]
impl Provider for Quick {
    async fn complete(
        &self,
        request: &ChatRequest,
        _events: Option<&UnboundedSender<StreamEvent>>,
        _cancel: &CancellationToken,
    ) -> Result<Completion, ProviderError> {
        let body = self.client.request_body(request)?;
        {
            let mut largest = self.largest.lock().unwrap();
            if body.len() > largest.0 {
                *largest = (body.len(), estimate_request(request));
            }
        }
        let last = request.messages.last().unwrap();
        let message = if request.tools.is_empty() {
            Message::assistant("The person asked about many files; each held a list.")
        } else if last.role == Role::Tool {
            Message::assistant("The file holds a list.")
        } else {
            Message::assistant_tool_calls(
                None,
                vec![ToolCall::function(
                    format!("call_{}", request.messages.len()),
                    "read_file",
                    r#"{"path":"notes.txt"}"#,
                )],
            )
        };
        Ok(Completion {
            message,
            finish_reason: Some("stop".into()),
            usage: None,
        })
    }

    fn model(&self) -> &str {
        "instant"
    }

    fn max_tokens(&self) -> Option<u32> {
        Some(1_024)
    }
}

#[derive(Deserialize, JsonSchema)]
struct ReadFile {
    /// The file.
    #[allow(dead_code)]
    path: String,
}

fn read_file() -> Arc<dyn Tool> {
    Arc::new(tool(
        "read_file",
        "Read a file",
        |_args: ReadFile, _| async move {
            Ok::<_, String>("a line of the file, of some length\n".repeat(58))
        },
    ))
}

fn provider() -> Arc<Quick> {
    Arc::new(Quick {
        client: OpenAiProvider::new(OpenAiConfig::new("instant")).unwrap(),
        largest: Mutex::new((0, 0)),
    })
}

async fn bounded_requests() {
    println!("request size after compaction (window {WINDOW} tokens):");
    println!(
        "{:>7} {:>9} {:>11} {:>15} {:>16}",
        "turns", "messages", "compactions", "largest body B", "largest est. tok"
    );
    for turns in SIZES {
        let provider = provider();
        let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
        let mut agent = Agent::builder(provider.clone())
            .system("You read files.")
            .tools([read_file()])
            .store(Arc::clone(&store))
            .session_id("bench")
            .context_window(WINDOW)
            .build()
            .await
            .unwrap();
        for turn in 0..turns {
            agent.run(format!("question {turn}")).await.unwrap();
        }
        let compactions = store
            .load(&reprise_session::SessionKey::session("bench").unwrap())
            .await
            .unwrap()
            .unwrap()
            .entries
            .iter()
            .filter(|entry| Compaction::from_entry(entry).is_some())
            .count();
        let (bytes, tokens) = *provider.largest.lock().unwrap();
        println!(
            "{turns:>7} {:>9} {compactions:>11} {bytes:>15} {tokens:>16}",
            agent.messages().len()
        );
    }
}

/// Writes a session file of about [`FILE_BYTES`]: turns of question, call, 2 KB
/// result and answer; with `compact`, a compaction entry every [`COMPACT_EVERY`]
/// turns, whose `through` is the answer before it.
fn write_session(path: &std::path::Path, compact: bool) -> usize {
    let mut out = BufWriter::new(std::fs::File::create(path).unwrap());
    let result = "a line of the file, of some length\n".repeat(58);
    let mut written = 0usize;
    let mut turn = 0usize;
    let mut line = |entry: &Entry, written: &mut usize| {
        let mut text = serde_json::to_vec(entry).unwrap();
        text.push(b'\n');
        out.write_all(&text).unwrap();
        *written += text.len();
    };
    while written < FILE_BYTES {
        let id = format!("call_{turn}");
        let answer = Entry::message(Message::assistant("The file holds a list."));
        for entry in [
            Entry::message(Message::user(format!("question {turn}"))),
            Entry::message(Message::assistant_tool_calls(
                None,
                vec![ToolCall::function(&id, "read_file", r#"{"path":"a"}"#)],
            )),
            Entry::message(Message::tool(&id, result.clone())),
            answer.clone(),
        ] {
            line(&entry, &mut written);
        }
        turn += 1;
        if compact && turn.is_multiple_of(COMPACT_EVERY) {
            let compaction = Compaction {
                summary: "The person asked about many files; each held a list.".into(),
                through: answer.uuid,
                tokens_before: 7_000,
                tokens_after: 300,
            };
            line(&compaction.to_entry(), &mut written);
        }
    }
    out.flush().unwrap();
    turn
}

async fn open_cost() {
    println!();
    println!("opening a ~100 MB session (Agent::build: load, repair, model view; best of 3):");
    let dir = tempfile::tempdir().unwrap();
    let mut best = Vec::new();
    for (name, compact) in [("plain", false), ("compacted", true)] {
        let turns = write_session(&dir.path().join(format!("{name}.jsonl")), compact);
        let size = std::fs::metadata(dir.path().join(format!("{name}.jsonl")))
            .unwrap()
            .len();
        let mut fastest = Duration::MAX;
        let mut sent = 0;
        for _ in 0..3 {
            let store = Arc::new(FileSessionStore::with_durability(
                dir.path(),
                Durability::Flush,
            ));
            let started = Instant::now();
            let agent = Agent::builder(provider())
                .system("You read files.")
                .tools([read_file()])
                .store(store as Arc<dyn SessionStore>)
                .session_id(name)
                .context_window(WINDOW)
                .build()
                .await
                .unwrap();
            fastest = fastest.min(started.elapsed());
            sent = agent.model_view().messages.len();
        }
        println!(
            "  {name:>9}: {:.1} MB, {turns} turns, {fastest:.2?}, {sent} messages in the view",
            size as f64 / 1e6
        );
        best.push(fastest);
    }
    println!(
        "  compacted / plain: {:.2}",
        best[1].as_secs_f64() / best[0].as_secs_f64()
    );
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    bounded_requests().await;
    open_cost().await;
}
