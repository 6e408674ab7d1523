//! A kill soak of the plain chat: `reprise` without a terminal, its gate allowing
//! the tools of the counting MCP server (`charge` has effects, `deploy` is
//! idempotent, `lookup` reads only), a scripted model that calls all three for
//! each prompt. The chat is SIGKILLed at random moments around its calls, again and
//! again, and each time `--continue` goes on. After every kill: `charge` never ran
//! twice for one call; every call the conversation answers as done ran, a call
//! that never started exactly once; every call closed as "may have run" had
//! started; the model server never got a history it would refuse; every answer a
//! killed chat showed before it went on is in the conversation.
//!
//! The suite runs a few kills; `cargo bench -p reprise-cli --bench chat_soak` runs
//! many (`REPRISE_SOAK_KILLS`, default 300).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use reprise_testkit::{Reply, ScriptedCall, ScriptedServer, mcp_counting_server};
use serde_json::Value;
use tokio::io::AsyncWriteExt;

/// How many prompts a soak's conversation holds when done.
pub const TURNS: usize = 12;
/// The server's name in the config: its tools are `count__<tool>`.
const SERVER: &str = "count";
/// Where a kill fell, from what the conversation and the tools' log held then.
pub const MOMENTS: [&str; 6] = [
    "before the start record",
    "between the start record and the tool's start",
    "during the tool",
    "after the tool returned, before its result",
    "after a result",
    "elsewhere (start-up, a prompt, a model call)",
];

/// A number from the clock: the soak's randomness (no seed to keep).
fn jitter(below: u64) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    u64::from(nanos / 1000) % below.max(1)
}

/// The scripted model: a prompt gets a call of each tool (parallel, each sleeping
/// a little), results get a text answer; every reply is told from the others by a
/// number.
fn answer(body: &Value, replies: &AtomicUsize) -> Reply {
    let n = replies.fetch_add(1, Ordering::SeqCst);
    let last = body["messages"]
        .as_array()
        .and_then(|messages| messages.last())
        .map(|message| message["role"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_default();
    if last != "user" {
        return Reply::text(format!("done {n}"));
    }
    Reply::tool_calls(["charge", "deploy", "lookup"].iter().map(|tool| {
        ScriptedCall::new(
            format!("c{n}_{tool}"),
            format!("{SERVER}__{tool}"),
            format!(r#"{{"item":"r{n}","sleep_ms":{}}}"#, jitter(40)),
        )
    }))
}

/// A soak's folder: the chat's working folder (its config and runs) and the
/// tools' log.
pub struct Soak {
    pub dir: PathBuf,
    pub server: ScriptedServer,
    /// How many kills fell at each of [`MOMENTS`].
    pub moments: [usize; 6],
    acks: Vec<String>,
}

impl Soak {
    /// A soak in `dir` (created), its config written, its model server started.
    pub async fn new(dir: &Path) -> Soak {
        std::fs::create_dir_all(dir.join("xdg/reprise")).unwrap();
        let config = format!(
            "[mcp.servers.{SERVER}]\ncommand = \"node\"\nargs = [{:?}, {:?}]\n\n[gate]\nallow = [\"{SERVER}__*\"]\n",
            mcp_counting_server().display().to_string(),
            dir.join("tools.log").display().to_string(),
        );
        std::fs::write(dir.join("xdg/reprise/config.toml"), config).unwrap();
        let server = ScriptedServer::start().await;
        let replies = Arc::new(AtomicUsize::new(0));
        server.answer_with(move |body| answer(body, &replies));
        Soak {
            dir: dir.to_path_buf(),
            server,
            moments: [0; 6],
            acks: Vec::new(),
        }
    }

    fn conversation(&self) -> Option<PathBuf> {
        let runs = std::fs::read_dir(self.dir.join(".run")).ok()?;
        runs.filter_map(Result::ok)
            .map(|entry| entry.path().join("conversation.jsonl"))
            .find(|path| path.exists())
    }

    fn entries(&self) -> Vec<Value> {
        self.conversation()
            .map(|path| lines(&path))
            .unwrap_or_default()
    }

    /// The chat, continuing the conversation when there is one, given the prompts
    /// the conversation still needs.
    fn spawn(&self) -> tokio::process::Child {
        let base_url = self.server.base_url();
        let mut args = vec!["--plain", "--base-url", &base_url, "--model", "test-model"];
        if self.conversation().is_some() {
            args.push("--continue");
        }
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_reprise"))
            .args(&args)
            .current_dir(&self.dir)
            .env("XDG_CONFIG_HOME", self.dir.join("xdg"))
            .env("TZ", "UTC")
            .env_remove("REPRISE_BASE_URL")
            .env_remove("REPRISE_MODEL")
            .env_remove("REPRISE_RUNS_DIR")
            .env_remove("REPRISE_CONFIG")
            .env_remove("REPRISE_DATABASE_URL")
            .env_remove("OPENAI_API_KEY")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let prompts = self.prompts_left();
        let mut stdin = child.stdin.take().unwrap();
        tokio::spawn(async move {
            let text: String = (0..prompts).map(|i| format!("prompt {i}\n")).collect();
            // A chat killed before it read everything closes the pipe.
            let _ = stdin.write_all(text.as_bytes()).await;
        });
        child
    }

    fn prompts_left(&self) -> usize {
        let prompts = self
            .entries()
            .iter()
            .filter(|entry| entry["message"]["role"] == "user")
            .count();
        TURNS.saturating_sub(prompts)
    }

    /// One chat, killed at a random moment after it first writes to the
    /// conversation; whether it was killed (it may finish first).
    pub async fn kill_one(&mut self) -> bool {
        let written = self.conversation().map(|path| size(&path)).unwrap_or(0);
        let mut child = self.spawn();
        let stdout = child.stdout.take().unwrap();
        let shown = tokio::spawn(async move {
            let mut text = String::new();
            let mut stdout = stdout;
            let _ = tokio::io::AsyncReadExt::read_to_string(&mut stdout, &mut text).await;
            text
        });
        // Aimed at one of the moments around the calls (the last aim: a random
        // delay); a chat that reaches its end first is not killed.
        let aim = jitter(MOMENTS.len() as u64) as usize;
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut wrote_at = None;
        loop {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the chat did not end in a minute"
            );
            let wrote = self.conversation().map(|path| size(&path)).unwrap_or(0) > written;
            if wrote && wrote_at.is_none() {
                wrote_at = Some(Instant::now() + Duration::from_millis(jitter(150)));
            }
            let now = match wrote_at {
                Some(at) if aim == MOMENTS.len() - 1 => Instant::now() >= at,
                Some(_) => self.moment() == aim,
                None => false,
            };
            if now {
                let _ = child.start_kill();
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let status = child.wait().await.unwrap();
        let shown = shown.await.unwrap();
        let killed = !status.success();
        if killed {
            self.moments[self.moment()] += 1;
            // An answer the chat went on from was recorded before it went on: the
            // last one shown may not be.
            let mut answers = answers_shown(&shown);
            answers.pop();
            self.acks.extend(answers);
        } else {
            self.acks.extend(answers_shown(&shown));
        }
        self.check(false);
        killed
    }

    /// Where the last kill fell.
    fn moment(&self) -> usize {
        let entries = self.entries();
        let Some(last) = entries.last() else {
            return 5;
        };
        if last["kind"] == "toolStart" {
            let runs = tool_log(&self.dir);
            let keys: Vec<&str> = last["calls"]
                .as_array()
                .unwrap()
                .iter()
                .map(|call| call["idempotencyKey"].as_str().unwrap())
                .collect();
            let started = keys.iter().any(|key| runs.starts.contains_key(*key));
            let ended = keys.iter().all(|key| runs.ends.contains_key(*key));
            return match (started, ended) {
                (false, _) => 1,
                (true, false) => 2,
                (true, true) => 3,
            };
        }
        match last["message"]["role"].as_str() {
            Some("assistant") if last["message"]["tool_calls"].is_array() => 0,
            Some("tool") => 4,
            _ => 5,
        }
    }

    /// The rules; `finished`: the conversation is complete.
    pub fn check(&self, finished: bool) {
        self.server.assert_tool_call_pairing();
        let runs = tool_log(&self.dir);
        for (key, &count) in &runs.starts {
            let tool = &runs.tools[key];
            if tool == "charge" {
                assert!(count <= 1, "charge ran {count} times for the key {key}");
            }
        }
        let entries = self.entries();
        let mut started: HashMap<String, String> = HashMap::new();
        for entry in &entries {
            if entry["kind"] == "toolStart" {
                for call in entry["calls"].as_array().unwrap() {
                    let id = call["toolCallId"].as_str().unwrap().to_owned();
                    started.insert(id, call["idempotencyKey"].as_str().unwrap().to_owned());
                }
            }
        }
        let items = calls_by_id(&entries);
        for entry in &entries {
            if entry["message"]["role"] != "tool" {
                continue;
            }
            let id = entry["message"]["tool_call_id"].as_str().unwrap();
            let text = entry["message"]["content"].as_str().unwrap_or_default();
            let Some((tool, item)) = items.get(id) else {
                panic!("a result for no call: {entry}");
            };
            let ran = runs.by_item.get(&(tool.clone(), item.clone())).copied();
            let mark = entry["afterCrash"].as_str();
            if mark == Some("interrupted") {
                assert!(
                    started.contains_key(id),
                    "{id} closed as interrupted unstarted"
                );
                continue;
            }
            assert_eq!(
                text,
                format!("{tool} {item}: done"),
                "{id} ({mark:?}) did not run: {entry}"
            );
            match tool.as_str() {
                "charge" => assert_eq!(ran, Some(1), "charge {item} ran {ran:?} times"),
                _ => assert!(ran.is_some(), "{tool} {item} never ran"),
            }
            if mark == Some("reasked") && tool == "charge" {
                assert_eq!(
                    ran,
                    Some(1),
                    "charge {item}, never started, ran {ran:?} times"
                );
            }
        }
        if finished {
            let answers: Vec<&str> = entries
                .iter()
                .filter(|entry| {
                    entry["message"]["role"] == "assistant"
                        && !entry["message"]["tool_calls"].is_array()
                })
                .filter_map(|entry| entry["message"]["content"].as_str())
                .collect();
            for ack in &self.acks {
                assert!(answers.contains(&ack.as_str()), "{ack} was shown and lost");
            }
            let prompts = entries
                .iter()
                .filter(|entry| entry["message"]["role"] == "user")
                .count();
            assert_eq!(prompts, TURNS);
            let last = entries
                .iter()
                .rev()
                .find(|entry| entry["message"].is_object())
                .unwrap();
            assert_eq!(last["message"]["role"], "assistant", "{last}");
        }
    }

    /// Kills `kills` chats (fewer when the conversation is complete first), then
    /// finishes the conversation and checks it; returns how many were killed.
    pub async fn run(&mut self, kills: usize) -> usize {
        let mut killed = 0;
        while killed < kills && self.prompts_left() > 0 {
            if self.kill_one().await {
                killed += 1;
            }
        }
        let child = self.spawn();
        let out = child.wait_with_output().await.unwrap();
        assert!(
            out.status.success(),
            "the last chat failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.acks
            .extend(answers_shown(&String::from_utf8_lossy(&out.stdout)));
        self.check(true);
        killed
    }
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        // A line cut by the kill is not read.
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// The answers a chat printed, in order.
fn answers_shown(stdout: &str) -> Vec<String> {
    stdout
        .split(|c: char| !(c.is_alphanumeric() || c == ' '))
        .flat_map(|piece| piece.match_indices("done ").map(|(at, _)| &piece[at..]))
        .filter_map(|text| {
            let digits: String = text["done ".len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            (!digits.is_empty()).then(|| format!("done {digits}"))
        })
        .collect()
}

/// What the tools' log says: starts and ends per key, and starts per item.
struct ToolLog {
    starts: HashMap<String, usize>,
    ends: HashMap<String, usize>,
    tools: HashMap<String, String>,
    by_item: HashMap<(String, String), usize>,
}

fn tool_log(dir: &Path) -> ToolLog {
    let mut log = ToolLog {
        starts: HashMap::new(),
        ends: HashMap::new(),
        tools: HashMap::new(),
        by_item: HashMap::new(),
    };
    for line in lines(&dir.join("tools.log")) {
        let key = line["key"]
            .as_str()
            .unwrap_or_else(|| panic!("a call without its key: {line}"))
            .to_owned();
        let tool = line["tool"].as_str().unwrap().to_owned();
        if line["phase"] == "end" {
            *log.ends.entry(key).or_default() += 1;
            continue;
        }
        let item = line["arguments"]["item"].as_str().unwrap().to_owned();
        *log.starts.entry(key.clone()).or_default() += 1;
        *log.by_item.entry((tool.clone(), item)).or_default() += 1;
        log.tools.insert(key, tool);
    }
    log
}

/// Each call's tool (without the server's prefix) and item, by call id.
fn calls_by_id(entries: &[Value]) -> HashMap<String, (String, String)> {
    let mut calls = HashMap::new();
    for entry in entries {
        let Some(list) = entry["message"]["tool_calls"].as_array() else {
            continue;
        };
        for call in list {
            let name = call["function"]["name"].as_str().unwrap();
            let tool = name.trim_start_matches(&format!("{SERVER}__")).to_owned();
            let arguments: Value =
                serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
            let item = arguments["item"].as_str().unwrap_or_default().to_owned();
            calls.insert(call["id"].as_str().unwrap().to_owned(), (tool, item));
        }
    }
    calls
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_few_kills_of_the_plain_chat_never_charge_twice_and_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut soak = Soak::new(dir.path()).await;
    let killed = soak.run(6).await;
    assert!(killed >= 1, "no chat was killed");
    for (moment, count) in MOMENTS.iter().zip(soak.moments) {
        eprintln!("{count} kills {moment}");
    }
}
