//! Helpers for tests against the scripted OpenAI-compatible server.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use reprise_agent::{Tool, tool};
use reprise_provider::{OpenAiConfig, OpenAiProvider, Provider};
use reprise_testkit::ScriptedServer;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

/// A provider pointed at the scripted server, with short backoffs and one attempt
/// unless a test asks for retries.
pub fn provider_for(server: &ScriptedServer, attempts: u32) -> Arc<dyn Provider> {
    let config = OpenAiConfig::new("test-model")
        .base_url(server.base_url())
        .api_key("sk-test")
        .max_attempts(attempts)
        .backoff_base(Duration::from_millis(5))
        .stream_idle_timeout(Duration::from_millis(500))
        .request_timeout(Duration::from_secs(5));
    Arc::new(OpenAiProvider::new(config).expect("provider config"))
}

#[derive(Deserialize, JsonSchema)]
pub struct TalkTo {
    /// Who to talk to.
    pub npc: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct Buy {
    /// What to buy.
    pub item: String,
}

pub fn talk_to() -> Arc<dyn Tool> {
    Arc::new(tool(
        "talk_to",
        "Talk to someone in town. Returns what they say.",
        |args: TalkTo, _| async move {
            match args.npc.as_str() {
                "elder" => Ok(String::from("The cave opens to the Silver Key.")),
                "guard" => Ok(String::from("No torch, no entry.")),
                other => Err(format!("nobody called {other} lives here")),
            }
        },
    ))
}

pub fn buy() -> Arc<dyn Tool> {
    Arc::new(tool(
        "buy",
        "Buy an item at the shop. Returns the price and the gold left.",
        |args: Buy, _| async move { Ok::<_, String>(format!("{}: 5 gold, 15 left", args.item)) },
    ))
}

pub use reprise_testkit::request_messages as messages_of;

/// Every line of a JSONL file, each of which must be complete JSON.
pub fn jsonl_lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "{} ends with a torn line",
        path.display()
    );
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("bad line {line:?}: {e}")))
        .collect()
}

/// The roles of the messages in a session file.
pub fn file_roles(path: &Path) -> Vec<String> {
    jsonl_lines(path)
        .iter()
        // Entries of other kinds (start records) are not messages.
        .filter(|entry| entry.get("kind").is_none())
        .map(|entry| entry["message"]["role"].as_str().unwrap_or("?").to_owned())
        .collect()
}
