//! A crash soak: a process running an agent (tools with effects, an idempotent one,
//! a read-only one, over a folder store) is SIGKILLed at random moments, again and
//! again, and each time a new process opens the session and goes on. After every
//! run: the tool with effects never ran twice for one call unless the approver said
//! "again"; every call closed as "interrupted" had started; the model always got a
//! history a server accepts; every answer a process saw is in the session.
//!
//! The suite runs a few kills; `cargo bench -p reprise-agent --bench crash_soak`
//! runs many (`REPRISE_SOAK_KILLS`, default 300). The child is this same program,
//! started with `REPRISE_SOAK_DIR` set.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use reprise_agent::{Agent, Approval, ToolApprover, ToolInvocation, idempotency_key, tool};
use reprise_provider::{ChatRequest, Completion, Provider, ProviderError, StreamEvent};
use reprise_session::{
    AfterCrash, Entry, FileSessionStore, Message, Role, SessionKey, SessionStore, ToolCall,
    inspect, was_started,
};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

/// The variable that makes the program a child working in that folder.
pub const SOAK_DIR: &str = "REPRISE_SOAK_DIR";
/// `1`: the child's approver says "again" to every run-again question.
pub const SOAK_AGAIN: &str = "REPRISE_SOAK_AGAIN";
/// How many turns the child takes the session to (default [`TURNS`]).
pub const SOAK_TURNS: &str = "REPRISE_SOAK_TURNS";
/// How many turns a soak's session holds when done, by default.
pub const TURNS: usize = 40;
const SESSION: &str = "soak";

/// A number from the clock: the soak's randomness (no seed to keep).
fn jitter(below: u64) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    u64::from(nanos / 1000) % below.max(1)
}

/// Appends one line with one `write`: a kill never tears it.
fn log_line(path: &Path, line: &str) {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    file.write_all(format!("{line}\n").as_bytes()).unwrap();
}

/// The model: calls the three tools for each prompt, then answers.
struct SoakModel {
    refused: PathBuf,
}

#[async_trait]
impl Provider for SoakModel {
    async fn complete(
        &self,
        request: &ChatRequest,
        _events: Option<&UnboundedSender<StreamEvent>>,
        _cancel: &CancellationToken,
    ) -> Result<Completion, ProviderError> {
        let body = serde_json::json!({"messages": request.messages});
        if let Err(problem) = reprise_testkit::check_tool_call_pairing(&body) {
            log_line(&self.refused, &problem);
            panic!("a server would refuse this history: {problem}");
        }
        let last = request.messages.last().unwrap();
        let turn = request
            .messages
            .iter()
            .filter(|m| m.role == Role::User)
            .count();
        let message = if last.role == Role::User {
            let args = format!(r#"{{"turn":{turn}}}"#);
            Message::assistant_tool_calls(
                None,
                ["pay", "refund", "look"]
                    .iter()
                    .enumerate()
                    .map(|(i, name)| ToolCall::function(format!("c{i}"), *name, args.clone()))
                    .collect(),
            )
        } else {
            Message::assistant(format!("done turn {turn}"))
        };
        Ok(Completion {
            message,
            finish_reason: Some("stop".to_owned()),
            usage: None,
        })
    }

    fn model(&self) -> &str {
        "soak"
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Turn {
    #[allow(dead_code)]
    turn: usize,
}

/// Allows every call; answers the run-again question as `SOAK_AGAIN` says, and
/// writes each "again" down first.
struct SoakApprover {
    log: PathBuf,
    again: bool,
}

#[async_trait]
impl ToolApprover for SoakApprover {
    async fn approve(&self, _: &ToolInvocation) -> Approval {
        tokio::time::sleep(Duration::from_millis(jitter(3))).await;
        Approval::Allow
    }

    async fn run_again(&self, call: &ToolInvocation) -> bool {
        if self.again {
            log_line(
                &self.log,
                &format!("again {}", call.context.idempotency_key),
            );
        }
        self.again
    }
}

/// The child: opens the session, finishes a cut turn, runs turns until there are
/// [`TURNS`], writing each answer it got to `acks`.
pub async fn child(dir: &Path) {
    let total = std::env::var(SOAK_TURNS)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(TURNS);
    let log = dir.join("runs.log");
    let store: Arc<dyn SessionStore> = Arc::new(FileSessionStore::new(dir.join("sessions")));
    let counting = |name: &'static str| {
        let log = log.clone();
        tool(name, "Counts.", move |_: Turn, call| {
            let log = log.clone();
            async move {
                log_line(&log, &format!("run {name} {}", call.idempotency_key));
                tokio::time::sleep(Duration::from_millis(jitter(8))).await;
                Ok::<_, String>(format!("{name} done"))
            }
        })
    };
    let mut agent = Agent::builder(Arc::new(SoakModel {
        refused: dir.join("refused"),
    }))
    .store(store)
    .session_id(SESSION)
    .tool(counting("pay"))
    .tool(counting("refund").idempotent())
    .tool(counting("look").read_only())
    .approver(Arc::new(SoakApprover {
        log: log.clone(),
        again: std::env::var(SOAK_AGAIN).as_deref() == Ok("1"),
    }))
    .build()
    .await
    .unwrap();
    let acks = dir.join("acks");
    if let Some(answer) = agent
        .resume_turn(None, CancellationToken::new())
        .await
        .unwrap()
    {
        log_line(&acks, &answer);
    }
    // A prompt, or tool results, cut before the model answered them are answered
    // first.
    if agent
        .messages()
        .last()
        .is_some_and(|m| m.role == Role::User || m.role == Role::Tool)
    {
        let answer = agent.answer_pending().await.unwrap();
        log_line(&acks, &answer);
    }
    loop {
        let turns = agent
            .messages()
            .iter()
            .filter(|m| m.role == Role::User)
            .count();
        if turns >= total {
            break;
        }
        let answer = agent.run(format!("turn {}", turns + 1)).await.unwrap();
        log_line(&acks, &answer);
    }
    agent.close().await.unwrap();
}

/// Runs the soak in `dir` with `kills` kills of children that take the session to
/// `turns` turns; panics on the first broken rule. Returns how many children were
/// killed before they were done.
pub async fn soak(program: &Path, args: &[&str], dir: &Path, kills: usize, turns: usize) -> usize {
    let spawn = |again: bool| {
        let mut command = tokio::process::Command::new(program);
        command
            .args(args)
            .env(SOAK_DIR, dir)
            .env(SOAK_TURNS, turns.to_string())
            .env(SOAK_AGAIN, if again { "1" } else { "0" })
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        command.spawn().unwrap()
    };
    let mut killed = 0;
    for round in 0..kills {
        let mut child = spawn(round % 3 == 0);
        // Some kills fall in the start-up, most in the middle of turns.
        tokio::time::sleep(Duration::from_millis(5 + jitter(60))).await;
        let _ = child.start_kill();
        let status = child.wait().await.unwrap();
        if status.success() {
            // The session was already complete.
            break;
        }
        killed += 1;
        check(dir, None).await;
    }
    let child = spawn(false);
    let out = child.wait_with_output().await.unwrap();
    assert!(
        out.status.success(),
        "the last child failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    check(dir, Some(turns)).await;
    killed
}

/// The rules, on what the killed processes left (`finished`: the session is
/// complete, with this many turns).
async fn check(dir: &Path, finished: Option<usize>) {
    assert!(
        !dir.join("refused").exists(),
        "{}",
        std::fs::read_to_string(dir.join("refused")).unwrap_or_default()
    );
    let log = std::fs::read_to_string(dir.join("runs.log")).unwrap_or_default();
    let mut runs: HashMap<(&str, &str), usize> = HashMap::new();
    let mut agains: HashMap<&str, usize> = HashMap::new();
    for line in log.lines() {
        let mut words = line.split(' ');
        match (words.next(), words.next(), words.next()) {
            (Some("run"), Some(name), Some(key)) => *runs.entry((name, key)).or_default() += 1,
            (Some("again"), Some(key), None) => *agains.entry(key).or_default() += 1,
            _ => panic!("bad log line {line:?}"),
        }
    }
    for (&(name, key), &count) in &runs {
        if name == "pay" {
            let allowed = 1 + agains.get(key).copied().unwrap_or(0);
            assert!(
                count <= allowed,
                "pay ran {count} times for {key} ({allowed} allowed)"
            );
        }
    }
    let store = FileSessionStore::new(dir.join("sessions"));
    let Some(loaded) = store
        .load(&SessionKey::session(SESSION).unwrap())
        .await
        .unwrap()
    else {
        return;
    };
    let entries: Vec<Entry> = loaded.entries;
    let report = inspect(&entries);
    assert!(report.duplicate_results.is_empty() && report.orphan_results.is_empty());
    for (at, entry) in entries.iter().enumerate() {
        let Some(message) = entry.as_message() else {
            continue;
        };
        if message.role != Role::Tool {
            continue;
        }
        let id = message.tool_call_id.as_deref().unwrap();
        // A result written away from its call names the entry holding it.
        let answers = entry
            .extra
            .get(reprise_session::ANSWERS_ENTRY)
            .and_then(|uuid| uuid.as_str());
        let Some(reply) = entries[..at].iter().rev().find(|e| match answers {
            Some(uuid) => e.uuid.to_string() == uuid,
            None => e
                .as_message()
                .is_some_and(|m| m.calls().iter().any(|c| c.id == id)),
        }) else {
            continue;
        };
        let call = reply
            .as_message()
            .unwrap()
            .calls()
            .iter()
            .find(|c| c.id == id)
            .unwrap();
        let key = idempotency_key(SESSION, reply.uuid, id);
        let ran = runs
            .get(&(call.function.name.as_str(), key.as_str()))
            .copied()
            .unwrap_or(0);
        match AfterCrash::of_entry(entry) {
            // Closed as "may have run": it had started (a never-started call is
            // never closed so).
            Some(AfterCrash::Interrupted) => {
                assert!(
                    was_started(&entries, reply.uuid, id),
                    "{id} closed unstarted"
                );
            }
            // A result that says it ran: it did.
            _ => assert!(
                ran >= 1,
                "{} {key} has a result but never ran",
                call.function.name
            ),
        }
    }
    if let Some(turns) = finished {
        let marks: Vec<AfterCrash> = entries.iter().filter_map(AfterCrash::of_entry).collect();
        let count = |mark| marks.iter().filter(|m| **m == mark).count();
        eprintln!(
            "soak: {} tool runs, {} run-again answers; after a crash: {} re-asked, {} ran \
             again (read-only), {} ran again, {} interrupted",
            runs.values().sum::<usize>(),
            agains.values().sum::<usize>(),
            count(AfterCrash::Reasked),
            count(AfterCrash::RanAgainReadOnly),
            count(AfterCrash::RanAgain),
            count(AfterCrash::Interrupted),
        );
        assert!(report.dangling.is_empty(), "{:?}", report.dangling);
        let answers: Vec<String> = entries
            .iter()
            .filter_map(Entry::as_message)
            .filter(|m| m.role == Role::Assistant && m.calls().is_empty())
            .map(Message::text)
            .collect();
        let acks = std::fs::read_to_string(dir.join("acks")).unwrap_or_default();
        for ack in acks.lines() {
            assert!(
                answers.iter().any(|a| a == ack),
                "{ack} was acknowledged and lost"
            );
        }
        assert_eq!(answers.len(), turns);
    }
}

/// The child's entry in the test binary: does nothing unless started as a child.
#[test]
fn soak_child() {
    let Some(dir) = std::env::var_os(SOAK_DIR) else {
        return;
    };
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(child(Path::new(&dir)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_few_kills_never_run_a_call_with_effects_twice_and_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let program = std::env::current_exe().unwrap();
    soak(
        &program,
        &["--exact", "crash_soak::soak_child", "--test-threads=1"],
        dir.path(),
        8,
        TURNS,
    )
    .await;
}
