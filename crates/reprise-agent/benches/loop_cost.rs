//! The loop's own cost per turn, against a provider that answers at once.
//!
//! One turn = `Agent::run(prompt)` with one model call: the prompt appended durably,
//! the request handed to the provider, which serializes the body exactly as the
//! OpenAI-compatible client does (`OpenAiProvider::request_body`) and returns a canned
//! answer, and the answer appended durably. Nothing is waited for (no network, no
//! tools), so what is measured is the loop's own cost, durable appends included.
//!
//! It is compared, turn by turn, with the time the provider spent just serializing
//! that turn's request body (measured inside the same turn). Printed per history
//! size: medians of the turn, of the serialization, their ratio, and the turn minus
//! the serialization, and one store append alone; with `fdatasync` on every append
//! (the default), with `Durability::Flush` (one `write`, no sync), and with a
//! `MemoryStore` to show the loop without the disk.
//!
//! Then a turn that hands a task to a subagent (in a run folder, as the chat keeps
//! it) against a turn that does not: its extra cost in bare `fdatasync`s, against
//! the messages it adds.
//!
//! And turns with tool calls, in run folders too: a read-only call, a call with
//! effects (its start is recorded first), and two of each in parallel (one start
//! record for both), against a turn without calls.
//!
//! `cargo bench -p reprise-agent --bench loop_cost` (`-- subagent` or `-- tools` for
//! those parts alone; with `LOOP_COST_MARKERS=1` it also writes a line before and
//! after the measured turns, so that `strace -f -e trace=write,fdatasync,fsync` of
//! the bench binary counts the syncs between them exactly).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed test or bench run

use std::hint::black_box;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use reprise_agent::{Agent, Subagent, tool};
use reprise_provider::{
    ChatRequest, Completion, OpenAiConfig, OpenAiProvider, Provider, ProviderError, StreamEvent,
};
use reprise_session::{
    Durability, Entry, FileSessionStore, MemoryStore, Message, Role, SessionKey, SessionStore,
    ToolCall,
};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

const SIZES: [usize; 4] = [10, 100, 1_000, 2_000];
const TURNS: usize = 40;

/// Serializes the request like the real client, then answers at once.
struct InstantProvider {
    client: OpenAiProvider,
    /// (serialization time, body bytes) of each call.
    calls: Mutex<Vec<(Duration, usize)>>,
}

#[async_trait]
impl Provider for InstantProvider {
    async fn complete(
        &self,
        request: &ChatRequest,
        _events: Option<&UnboundedSender<StreamEvent>>,
        _cancel: &CancellationToken,
    ) -> Result<Completion, ProviderError> {
        let started = Instant::now();
        let body = self.client.request_body(request)?;
        let spent = started.elapsed();
        let len = black_box(body).len();
        self.calls.lock().unwrap().push((spent, len));
        Ok(Completion {
            message: Message::assistant("The east door, then left at the echo."),
            finish_reason: Some("stop".into()),
            usage: None,
        })
    }

    fn model(&self) -> &str {
        "instant"
    }
}

/// About 1 KB per message on average: a quest's mix of prompts, tool calls, tool
/// results and answers.
fn history(len: usize) -> Vec<Entry> {
    let words = |n: usize, seed: usize| -> String {
        (0..n)
            .map(|i| {
                [
                    "cave", "echo", "torch", "silver", "key", "guard", "elder", "rope",
                ][(i + seed) % 8]
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    (0..len)
        .map(|i| {
            let message = match i % 4 {
                0 => Message::user(words(110, i)),
                1 => Message::assistant_tool_calls(
                    Some(words(20, i)),
                    vec![ToolCall::function(
                        format!("call_{i}"),
                        "talk_to",
                        format!("{{\"npc\":\"{}\"}}", words(30, i)),
                    )],
                ),
                2 => Message::tool(format!("call_{}", i - 1), words(260, i)),
                _ => Message::assistant(words(160, i)),
            };
            Entry::message(message)
        })
        .collect()
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort_unstable();
    values[values.len() / 2]
}

struct Figures {
    body_bytes: usize,
    /// One store append of a short message, alone.
    append: Duration,
    turn: Duration,
    serialize: Duration,
}

async fn measure(store: Arc<dyn SessionStore>, size: usize) -> Figures {
    let id = format!("bench-{size}");
    let key = SessionKey::session(&id).unwrap();
    store
        .append(&SessionKey::session(&id).unwrap(), &history(size))
        .await
        .unwrap();
    let provider = Arc::new(InstantProvider {
        client: OpenAiProvider::new(OpenAiConfig::new("bench-model")).unwrap(),
        calls: Mutex::new(Vec::new()),
    });
    let mut agent = Agent::builder(provider.clone())
        .system("You are Astor, an adventurer.")
        .store(store.clone())
        .session_id(id)
        .build()
        .await
        .unwrap();
    // Warm-up: allocator, page cache, the file's first growth.
    for _ in 0..3 {
        agent.run("Which way now?").await.unwrap();
    }
    provider.calls.lock().unwrap().clear();
    let mut turns = Vec::with_capacity(TURNS);
    for _ in 0..TURNS {
        let started = Instant::now();
        black_box(agent.run("Which way now?").await.unwrap());
        turns.push(started.elapsed());
    }
    let calls = provider.calls.lock().unwrap().clone();
    drop(agent);
    // Appends alone, under the writer lock as the agent makes them.
    let _lock = store.lock(key.session_id()).await.unwrap();
    let mut appends = Vec::with_capacity(TURNS);
    for _ in 0..TURNS {
        let entry = Entry::message(Message::user("Which way now?"));
        let started = Instant::now();
        store.append(&key, &[entry]).await.unwrap();
        appends.push(started.elapsed());
    }
    Figures {
        body_bytes: calls[calls.len() / 2].1,
        append: median(appends),
        turn: median(turns),
        serialize: median(calls.iter().map(|(spent, _)| *spent).collect()),
    }
}

/// With `delegate`, the main agent hands every prompt to the scout, the scout
/// answers at once, and the main agent answers with that; without, the main agent
/// answers at once.
struct DelegatingProvider {
    delegate: bool,
}

const SCOUT_SYSTEM: &str = "You are a scout.";

#[async_trait]
impl Provider for DelegatingProvider {
    async fn complete(
        &self,
        request: &ChatRequest,
        _events: Option<&UnboundedSender<StreamEvent>>,
        _cancel: &CancellationToken,
    ) -> Result<Completion, ProviderError> {
        let scout = request.messages[0].text() == SCOUT_SYSTEM;
        let last = request.messages.last().map(|m| m.role.clone());
        let message = match (scout, last) {
            (true, _) => Message::assistant("The east door."),
            (false, Some(Role::User)) if self.delegate => Message::assistant_tool_calls(
                None,
                vec![ToolCall::function(
                    "call_1",
                    "scout",
                    r#"{"task":"which way?"}"#,
                )],
            ),
            (false, _) => Message::assistant("The scout says: the east door."),
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
}

/// Median turn time in a fresh run folder, delegating or not; with the first
/// delegating turn's (it registers the subagent in `session.json`).
async fn run_folder_turns(dir: &std::path::Path, delegate: bool) -> (Duration, Duration) {
    let run = reprise_runs::create_run_folder(dir).unwrap();
    let store: Arc<dyn SessionStore> = Arc::new(reprise_runs::create_run_store(&run.dir));
    let mut builder = Agent::builder(Arc::new(DelegatingProvider { delegate }))
        .system("You are Astor, an adventurer.")
        .store(store)
        .session_id("bench-subagent");
    if delegate {
        builder = builder.subagent(Subagent::new("scout", "Scouts.", SCOUT_SYSTEM));
    }
    let mut agent = builder.build().await.unwrap();
    let prompt = if delegate { "Which way now?" } else { "Hi." };
    let label = if delegate { "delegating" } else { "plain" };
    timed_turns(&mut agent, label, prompt).await
}

/// Runs one turn, then [`TURNS`] measured ones (between markers when
/// `LOOP_COST_MARKERS` is set); their median and the first turn's time.
async fn timed_turns(agent: &mut Agent, label: &str, prompt: &str) -> (Duration, Duration) {
    let markers = std::env::var_os("LOOP_COST_MARKERS").is_some();
    if markers {
        println!("MARK {label} first");
    }
    let started = Instant::now();
    black_box(agent.run(prompt).await.unwrap());
    let first = started.elapsed();
    if markers {
        println!("MARK {label} start");
    }
    let mut turns = Vec::with_capacity(TURNS);
    for _ in 0..TURNS {
        let started = Instant::now();
        black_box(agent.run(prompt).await.unwrap());
        turns.push(started.elapsed());
    }
    if markers {
        println!("MARK {label} end");
    }
    (median(turns), first)
}

/// Asks for `calls` (tool names, parallel when more than one) on every prompt,
/// then answers their results; answers at once when there are none.
struct CallingProvider {
    calls: &'static [&'static str],
}

#[async_trait]
impl Provider for CallingProvider {
    async fn complete(
        &self,
        request: &ChatRequest,
        _events: Option<&UnboundedSender<StreamEvent>>,
        _cancel: &CancellationToken,
    ) -> Result<Completion, ProviderError> {
        let asked = request.messages.last().map(|m| m.role.clone()) == Some(Role::User);
        let message = if asked && !self.calls.is_empty() {
            Message::assistant_tool_calls(
                None,
                self.calls
                    .iter()
                    .enumerate()
                    .map(|(i, name)| ToolCall::function(format!("call_{i}"), *name, "{}"))
                    .collect(),
            )
        } else {
            Message::assistant("The east door.")
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
}

/// The turns with tool calls: (label, the calls, messages per turn, syncs per
/// turn expected: one per message, plus one start record when a call has effects).
const TOOL_TURNS: [(&str, &[&str], usize, usize); 5] = [
    ("no call", &[], 2, 2),
    ("a read-only call", &["look"], 4, 4),
    ("a call with effects", &["pay"], 4, 5),
    ("2 parallel read-only calls", &["look", "look"], 5, 5),
    ("2 parallel calls with effects", &["pay", "pay"], 5, 6),
];

/// Turns with tool calls against a turn without, in run folders. The variants take
/// turns in blocks, in an order that rotates each round, so that a burst of disk
/// noise falls on all of them alike.
async fn tool_figures(dir: &std::path::Path, sync: Duration) {
    const ROUNDS: usize = 8;
    let in_syncs = |d: Duration| d.as_secs_f64() / sync.as_secs_f64();
    let markers = std::env::var_os("LOOP_COST_MARKERS").is_some();
    let mut agents = Vec::new();
    for (label, calls, _, _) in TOOL_TURNS {
        let run = reprise_runs::create_run_folder(&dir.join("tools")).unwrap();
        let store: Arc<dyn SessionStore> = Arc::new(reprise_runs::create_run_store(&run.dir));
        let look = tool("look", "Looks.", |_: serde_json::Value, _| async {
            Ok::<_, String>("A door.")
        })
        .read_only();
        let pay = tool("pay", "Pays.", |_: serde_json::Value, _| async {
            Ok::<_, String>("Paid.")
        });
        let mut agent = Agent::builder(Arc::new(CallingProvider { calls }))
            .system("You are Astor, an adventurer.")
            .store(store)
            .session_id("bench-tools")
            .tool(look)
            .tool(pay)
            .build()
            .await
            .unwrap();
        // The first turn creates the transcript: not measured.
        agent.run("Which way now?").await.unwrap();
        agents.push((label, agent, Vec::with_capacity(TURNS)));
    }
    for round in 0..ROUNDS {
        for at in 0..agents.len() {
            let (label, agent, turns) = &mut agents[(at + round) % TOOL_TURNS.len()];
            if markers {
                println!("MARK {label} start");
            }
            for _ in 0..TURNS / ROUNDS {
                let started = Instant::now();
                black_box(agent.run("Which way now?").await.unwrap());
                turns.push(started.elapsed());
            }
            if markers {
                println!("MARK {label} end");
            }
        }
    }
    println!(
        "\ntool calls, run folder (fdatasync on every append), {TURNS} turns each in \
         {ROUNDS} rotating rounds, medians (tools that answer at once):"
    );
    let base = in_syncs(median(agents[0].2.clone()));
    for ((label, _, turns), (_, _, messages, syncs)) in agents.into_iter().zip(TOOL_TURNS) {
        let turn = median(turns);
        println!(
            "  {label:<30} {messages} msgs, {syncs} syncs expected: {:>9.1} µs = {:.2} bare \
             syncs ({:+.2} against no call)",
            micros(turn),
            in_syncs(turn),
            in_syncs(turn) - base,
        );
    }
}

/// A delegating turn against a plain one, in run folders.
async fn subagent_figures(dir: &std::path::Path, sync: Duration) {
    // A plain turn appends 2 messages (prompt, answer); a delegating turn 6: the
    // main agent's 4 (prompt, call, result, answer) and the subagent's 2 (task,
    // answer). Each append is one write + fdatasync.
    let subagent_dir = dir.join("runs");
    let (plain, _) = run_folder_turns(&subagent_dir, false).await;
    let (delegating, first) = run_folder_turns(&subagent_dir, true).await;
    let in_syncs = |d: Duration| d.as_secs_f64() / sync.as_secs_f64();
    println!("\nsubagent call, run folder (fdatasync on every append), {TURNS} turns, medians:");
    println!(
        "  plain turn (2 messages):                      {:>9.1} µs = {:.2} bare syncs",
        micros(plain),
        in_syncs(plain)
    );
    println!(
        "  delegating turn (4 main + 2 subagent msgs):   {:>9.1} µs = {:.2} bare syncs",
        micros(delegating),
        in_syncs(delegating)
    );
    println!(
        "  first delegating turn (registers the subagent): {:>7.1} µs = {:.2} bare syncs",
        micros(first),
        in_syncs(first)
    );
    println!(
        "  the call's extra cost: {:.2} bare syncs for 4 more messages (2 of them the \
             subagent's): {:.2} per added message",
        in_syncs(delegating.saturating_sub(plain)),
        in_syncs(delegating.saturating_sub(plain)) / 4.0
    );
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

fn print_table(title: &str, rows: &[(usize, Figures)]) {
    println!("\n{title}");
    println!(
        "{:>8} {:>11} {:>11} {:>13} {:>7} {:>17} {:>11}",
        "history", "body bytes", "turn µs", "serialize µs", "ratio", "turn - ser. µs", "append µs"
    );
    for (size, figures) in rows {
        println!(
            "{:>8} {:>11} {:>11.1} {:>13.1} {:>6.2}x {:>17.1} {:>11.1}",
            size,
            figures.body_bytes,
            micros(figures.turn),
            micros(figures.serialize),
            figures.turn.as_secs_f64() / figures.serialize.as_secs_f64(),
            micros(figures.turn.saturating_sub(figures.serialize)),
            micros(figures.append),
        );
    }
}

/// What one bare `write` + `fdatasync` of a 1 KB line costs on this disk: a turn
/// makes two of them (the prompt and the answer).
fn bare_sync_cost(dir: &std::path::Path) -> Duration {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("baseline.jsonl"))
        .unwrap();
    let line = vec![b'x'; 1023]
        .into_iter()
        .chain([b'\n'])
        .collect::<Vec<u8>>();
    let mut samples = Vec::new();
    for _ in 0..50 {
        let started = Instant::now();
        file.write_all(&line).unwrap();
        file.sync_data().unwrap();
        samples.push(started.elapsed());
    }
    median(samples)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    runtime.block_on(async {
        let sync = bare_sync_cost(dir.path());
        println!("loop_cost: {TURNS} turns per size, medians; one model call per turn");
        println!(
            "bare write + fdatasync of 1 KB on this disk: {:.1} µs (a turn does 2)",
            micros(sync)
        );
        if std::env::args().any(|arg| arg == "subagent") {
            subagent_figures(dir.path(), sync).await;
            return;
        }
        if std::env::args().any(|arg| arg == "tools") {
            tool_figures(dir.path(), sync).await;
            return;
        }

        let mut disk = Vec::new();
        for size in SIZES {
            let store: Arc<dyn SessionStore> = Arc::new(FileSessionStore::new(dir.path()));
            disk.push((size, measure(store, size).await));
        }
        print_table("FileSessionStore (fdatasync on every append):", &disk);

        let mut flushed = Vec::new();
        for size in SIZES {
            let store: Arc<dyn SessionStore> = Arc::new(FileSessionStore::with_durability(
                dir.path().join("flush"),
                Durability::Flush,
            ));
            flushed.push((size, measure(store, size).await));
        }
        print_table(
            "FileSessionStore, Durability::Flush (one write per append, no fdatasync):",
            &flushed,
        );

        let mut memory = Vec::new();
        for size in SIZES {
            let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
            memory.push((size, measure(store, size).await));
        }
        print_table("MemoryStore (the loop without the disk):", &memory);

        subagent_figures(dir.path(), sync).await;
        tool_figures(dir.path(), sync).await;

        let (small, large) = (&disk[1].1, &disk[2].1);
        println!(
            "\ngrowth 100 -> 1000 messages: turn x{:.2}, serialize x{:.2}, body x{:.2}",
            large.turn.as_secs_f64() / small.turn.as_secs_f64(),
            large.serialize.as_secs_f64() / small.serialize.as_secs_f64(),
            large.body_bytes as f64 / small.body_bytes as f64,
        );
    });
}
