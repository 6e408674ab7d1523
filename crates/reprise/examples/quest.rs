//! The Cave of Echoes quest from the Sessions pattern: day 1, day 2 on the same
//! session id (a new agent reads the log back), then a fork that tries another way.
//!
//! ```text
//! cargo run -p reprise --example quest -- --model llama3.1
//! OPENAI_API_KEY=sk-… cargo run -p reprise --example quest -- \
//!     --base-url https://api.openai.com/v1 --model gpt-4o-mini
//! ```
//!
//! The adventure log is `./sessions/quest-1.jsonl` (one message per line) with
//! `quest-1.meta.json`; the fork is `quest-2.jsonl`. Run it again and day 1 continues
//! the same log; `--fresh` deletes both sessions first.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed test or bench run

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use clap::Parser;
use reprise::prelude::*;
use reprise::session::SessionKey;
use tokio::sync::mpsc;

#[derive(Parser)]
#[command(about = "The Cave of Echoes quest: save as you go, resume, fork")]
struct Args {
    /// The OpenAI-compatible API root (Ollama, vLLM, LM Studio, OpenAI, a proxy…).
    #[arg(long, default_value = reprise::provider::DEFAULT_BASE_URL)]
    base_url: String,
    /// The model name.
    #[arg(long, default_value = "llama3.1")]
    model: String,
    /// Where the adventure logs live.
    #[arg(long, default_value = "./sessions")]
    dir: PathBuf,
    /// Delete quest-1 and quest-2 before starting.
    #[arg(long)]
    fresh: bool,
}

/// The town: who says what, and a shop with a purse. It lives in memory only: a
/// fork copies the history, not the world.
struct Town {
    gold: Mutex<u32>,
}

impl Town {
    fn talk(&self, npc: &str) -> Result<String, String> {
        let line = match npc.to_lowercase().as_str() {
            "elder" | "the elder" => {
                "The Cave of Echoes only opens to the Silver Key. The mayor keeps it; his daughter borrows it."
            }
            "guard" | "the guard" => {
                "Nobody goes in without a light. The cave eats torches, mind you."
            }
            "mayor" | "the mayor" => "The key? My daughter has it again. Ask her at the well.",
            "shopkeeper" | "the shopkeeper" => "Torches 5 gold, rope 3, a lantern 12.",
            other => return Err(format!("nobody called {other:?} lives in town")),
        };
        Ok(line.to_owned())
    }

    fn buy(&self, item: &str) -> Result<String, String> {
        let prices = BTreeMap::from([("torch", 5), ("rope", 3), ("lantern", 12)]);
        let item = item.to_lowercase();
        let Some(&price) = prices.get(item.trim_end_matches('s')) else {
            return Err(format!(
                "the shop sells only {:?}",
                prices.keys().collect::<Vec<_>>()
            ));
        };
        let mut gold = self
            .gold
            .lock()
            .map_err(|_| "the purse is lost".to_owned())?;
        if *gold < price {
            return Err(format!("{item} costs {price} gold; you have {}", *gold));
        }
        *gold -= price;
        Ok(format!(
            "Bought a {item} for {price} gold. {} gold left.",
            *gold
        ))
    }
}

#[derive(serde::Deserialize, JsonSchema)]
struct TalkTo {
    /// Who to talk to: elder, guard, mayor or shopkeeper.
    npc: String,
}

#[derive(serde::Deserialize, JsonSchema)]
struct Buy {
    /// What to buy: torch, rope or lantern.
    item: String,
}

fn town_tools(town: Arc<Town>) -> Vec<Arc<dyn Tool>> {
    // The town answers at once: each call's future is ready when it is made.
    let for_talk = town.clone();
    let talk_to = tool(
        "talk_to",
        "Talk to someone in town. Returns what they say.",
        move |args: TalkTo, _| std::future::ready(for_talk.talk(&args.npc)),
    );
    let buy = tool(
        "buy",
        "Buy an item at the shop. Returns the price and the gold left.",
        move |args: Buy, _| std::future::ready(town.buy(&args.item)),
    );
    vec![Arc::new(talk_to), Arc::new(buy)]
}

/// Runs one prompt, printing the answer as it streams and each tool call.
async fn play(agent: &mut Agent, prompt: &str) -> Result<(), AgentError> {
    println!("\n> {prompt}");
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let printer = tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            match event {
                AgentEvent::TextDelta { text, .. } => {
                    print!("{text}");
                    let _ = std::io::stdout().flush();
                }
                AgentEvent::ToolCallStarted {
                    name, arguments, ..
                } => {
                    println!("  [{name} {arguments}]");
                }
                AgentEvent::ToolCallFinished { output, .. } => {
                    let mark = if output.is_error { "error: " } else { "" };
                    println!("  → {mark}{}", output.content);
                }
                _ => {}
            }
        }
    });
    let result = agent
        .run_streaming(prompt, events_tx, CancellationToken::new())
        .await;
    let _ = printer.await;
    println!();
    result.map(|_| ())
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match quest(Args::parse()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn quest(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let mut config = OpenAiConfig::new(args.model).base_url(args.base_url);
    // The key comes from the environment, never from a flag that lands in shell history.
    if let Ok(key) = std::env::var("OPENAI_API_KEY") {
        config = config.api_key(key);
    }
    let provider: Arc<dyn Provider> = Arc::new(OpenAiProvider::new(config)?);
    let store = Arc::new(FileSessionStore::new(&args.dir));
    if args.fresh {
        for id in ["quest-1", "quest-2"] {
            store.delete(&SessionKey::session(id)?).await?;
        }
    }
    let town = Arc::new(Town {
        gold: Mutex::new(20),
    });
    let quest = |session_id: &str| {
        Agent::builder(provider.clone())
            .system("You are Astor, an adventurer. Use the town's tools; be brief.")
            .tools(town_tools(town.clone()))
            .store(store.clone())
            .session_id(session_id)
            .build()
    };

    // Day 1. Every message is saved as soon as it exists, so a crash loses nothing.
    let mut day1 = quest("quest-1").await?;
    play(
        &mut day1,
        "I need to get into the Cave of Echoes. Find out what it takes, and get what you can.",
    )
    .await?;
    day1.close().await?; // …the process ends; the log stays.

    // Day 2: a new agent on the same id reads the log back before answering.
    let mut day2 = quest("quest-1").await?;
    for warning in day2.load_warnings() {
        eprintln!("warning: {warning}");
    }
    println!(
        "\n(day 2: {} messages in the history)",
        day2.messages().len()
    );
    play(
        &mut day2,
        "I got the Silver Key from the mayor's daughter. What now?",
    )
    .await?;

    // A fork: a new session with a copy of every message. quest-1 stays as it was.
    let mut west = match day2.fork("quest-2").await {
        Ok(west) => west,
        Err(AgentError::Store(StoreError::AlreadyExists { session })) => {
            println!("\n{session} already exists from an earlier run; --fresh starts over.");
            return Ok(());
        }
        Err(error) => return Err(error.into()),
    };
    play(
        &mut west,
        "Suppose the key doesn't fit. Is there another way in?",
    )
    .await?;
    println!(
        "\nquest-1: {} messages, quest-2: {} messages, in {}",
        day2.messages().len(),
        west.messages().len(),
        args.dir.display()
    );
    day2.close().await?;
    west.close().await?;
    // The fork's copied data is synced in the background; closing the store waits for it.
    store.close().await?;
    Ok(())
}
