//! `reprise usage`: a runs folder made by the chat against the scripted server
//! (replies with usage and cached tokens, a subagent, a compaction, a rewind, a
//! fork) and an imported Claude Code session with a subagent; the totals checked
//! against the replies' usage read from the JSONL files here, independently.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use reprise_testkit::{Reply, ScriptedServer, assert_contains, testdata};
use serde_json::Value;

use crate::subagents::{SCOUT, write_config};
use crate::support::{Sandbox, jsonl};

/// Prices: two for the chat's model (the later one in the future, so never
/// applied), two for the imported session's (the later one from the day after it).
const PRICES: &str = "\n[[prices]]\nmodel = \"test-model\"\nfrom = 2000-01-01\n\
input = 1.0\noutput = 2.0\ncached = 0.5\n\n\
[[prices]]\nmodel = \"test-model\"\nfrom = \"2999-01-01\"\ninput = 100.0\noutput = 100.0\n\n\
[[prices]]\nmodel = \"claude-opus-4-7\"\nfrom = 2026-04-01\ninput = 3.0\noutput = 15.0\ncached = 0.3\n\n\
[[prices]]\nmodel = \"claude-opus-4-7\"\nfrom = 2026-04-19\ninput = 50.0\noutput = 50.0\n";

/// What each model costs in [`PRICES`] on the day of the replies: (input, output,
/// cached) per million.
fn price_of(model: &str) -> Option<(f64, f64, f64)> {
    match model {
        "test-model" => Some((1.0, 2.0, 0.5)),
        "claude-opus-4-7" => Some((3.0, 15.0, 0.3)),
        _ => None,
    }
}

/// One model call as the files record it.
#[derive(Clone, Debug)]
pub(crate) struct Recorded {
    pub(crate) day: String,
    pub(crate) model: String,
    input: u64,
    output: u64,
    cached: u64,
}

/// Sums as `reprise usage --json` prints them.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Sums {
    input: u64,
    output: u64,
    cached: u64,
    calls: u64,
}

impl Sums {
    pub(crate) fn add(&mut self, call: &Recorded) {
        self.input += call.input;
        self.output += call.output;
        self.cached += call.cached;
        self.calls += 1;
    }

    pub(crate) fn of_json(value: &Value) -> Sums {
        Sums {
            input: value["inputTokens"].as_u64().unwrap(),
            output: value["outputTokens"].as_u64().unwrap(),
            cached: value["cachedTokens"].as_u64().unwrap(),
            calls: value["calls"].as_u64().unwrap(),
        }
    }
}

/// Every entry of every transcript of the runs folder, each uuid once (a fork holds
/// copies of its source's entries), oldest run first.
fn every_entry(runs_dir: &Path) -> Vec<Value> {
    let mut runs: Vec<_> = std::fs::read_dir(runs_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("conversation.jsonl").exists())
        .collect();
    runs.sort();
    let mut seen = HashSet::new();
    let mut entries = Vec::new();
    for run in runs {
        let mut files = vec![run.join("conversation.jsonl")];
        if let Ok(subagents) = std::fs::read_dir(run.join("subagents")) {
            let mut more: Vec<_> = subagents.map(|e| e.unwrap().path()).collect();
            more.sort();
            files.extend(more);
        }
        for file in files {
            for entry in jsonl(&file) {
                if seen.insert(entry["uuid"].as_str().unwrap().to_owned()) {
                    entries.push(entry);
                }
            }
        }
    }
    entries
}

/// The model calls the entries record: replies and compactions with `usage`.
pub(crate) fn recorded_calls(entries: &[Value]) -> Vec<Recorded> {
    entries
        .iter()
        .filter(|e| e["message"]["role"] == "assistant" || e["kind"] == "compaction")
        .filter(|e| e["usage"]["prompt_tokens"].is_u64())
        .map(|e| Recorded {
            day: e["ts"].as_str().unwrap()[..10].to_owned(),
            model: e["model"].as_str().unwrap_or("(unknown)").to_owned(),
            input: e["usage"]["prompt_tokens"].as_u64().unwrap(),
            output: e["usage"]["completion_tokens"].as_u64().unwrap(),
            cached: e["usage"]["prompt_tokens_details"]["cached_tokens"]
                .as_u64()
                .unwrap_or(0),
        })
        .collect()
}

pub(crate) fn tool_calls(entries: &[Value]) -> u64 {
    entries
        .iter()
        .filter(|e| e["message"]["role"] == "assistant")
        .filter_map(|e| e["message"]["tool_calls"].as_array())
        .map(|calls| calls.len() as u64)
        .sum()
}

fn cost(call: &Recorded) -> Option<f64> {
    let (input, output, cached) = price_of(&call.model)?;
    let fresh = (call.input - call.cached) as f64;
    Some((fresh * input + call.cached as f64 * cached + call.output as f64 * output) / 1e6)
}

/// A `~/.claude`-like folder holding the session that has a subagent.
fn claude_home(root: &Path) -> std::path::PathBuf {
    let home = root.join("dot-claude");
    let session = "ef958aa1-0e93-49f0-bb71-150f63befcd1";
    let project = home.join("projects").join("-experiments");
    let subagents = project.join(session).join("subagents");
    std::fs::create_dir_all(&subagents).unwrap();
    std::fs::copy(
        testdata("claude_code/cc-2.1.114_ef958aa1_main_with_subagents.jsonl"),
        project.join(format!("{session}.jsonl")),
    )
    .unwrap();
    std::fs::copy(
        testdata("claude_code/cc-2.1.114_ef958aa1_subagent_agent-a52886dc180afb356.jsonl"),
        subagents.join("agent-a52886dc180afb356.jsonl"),
    )
    .unwrap();
    home
}

async fn usage_json(sandbox: &Sandbox, args: &[&str]) -> Value {
    let mut all = vec!["usage", "--json"];
    all.extend_from_slice(args);
    let out = sandbox.run(&all, "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

/// The replies the chat of [`ledger_sandbox`] gets, with usage: a delegation to the
/// scout (its two replies), the answer, a question, a summary, a question.
pub(crate) fn scripted_replies() -> Vec<Reply> {
    vec![
        Reply::tool_call("p1", "scout", r#"{"task":"list the folder"}"#)
            .with_usage(100, 10)
            .with_cached_tokens(40),
        Reply::tool_call("s1", "list_dir", r#"{"path":"."}"#).with_usage(50, 5),
        Reply::text("The folder holds notes.txt.").with_usage(60, 6),
        Reply::text("The scout found notes.txt.")
            .with_usage(120, 12)
            .with_cached_tokens(100),
        Reply::text("Paris.").with_usage(130, 8),
        // The summary of /compact.
        Reply::text("They asked what is here and the capital of France.").with_usage(200, 30),
        Reply::text("Rome.").with_usage(90, 3),
    ]
}

/// What [`scripted_replies`] are asked.
pub(crate) const SCRIPTED_INPUT: &str = "what is here?\ncapital of France?\n/compact\nand Italy?\n";

/// The chat's runs (a subagent, a compaction, a rewind, a run continued, a fork)
/// and an imported Claude Code session.
async fn ledger_sandbox() -> Sandbox {
    let sandbox = Sandbox::new();
    write_config(&sandbox, &format!("{SCOUT}{PRICES}"));
    std::fs::write(sandbox.path().join("notes.txt"), "buy milk\n").unwrap();
    let server = ScriptedServer::start().await;
    server.push_all(scripted_replies());
    let out = sandbox
        .chat(&server.base_url(), &["--yes"], SCRIPTED_INPUT)
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stderr, "(compacted ");
    // The rewind hides the last two questions and their answers from the model;
    // they were paid for all the same.
    let out = sandbox
        .run(
            &[
                "rewind",
                "last",
                "--to",
                "2",
                "--conversation-only",
                "--yes",
            ],
            "",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    server.push(Reply::text("Madrid.").with_usage(70, 2));
    let out = sandbox
        .chat(&server.base_url(), &["--yes", "-c"], "and Spain?\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(server.remaining(), 0);
    let out = sandbox.run(&["fork", "last"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let home = claude_home(sandbox.path());
    let out = sandbox.run(&["import", home.to_str().unwrap()], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    sandbox
}

#[tokio::test]
async fn usage_totals_are_the_sum_of_every_recorded_reply_once() {
    let sandbox = ledger_sandbox().await;
    let entries = every_entry(&sandbox.runs_dir());
    let calls = recorded_calls(&entries);
    // What the chat wrote: every reply's counts, the cached tokens as sent, and the
    // model; the subagent's and the summary's calls too.
    let chat: Vec<_> = calls.iter().filter(|c| c.model == "test-model").collect();
    assert_eq!(chat.len(), 8, "{chat:?}");
    assert_eq!(chat.iter().map(|c| c.input).sum::<u64>(), 820);
    assert_eq!(chat.iter().map(|c| c.cached).sum::<u64>(), 140);
    let imported: Vec<_> = calls
        .iter()
        .filter(|c| c.model == "claude-opus-4-7")
        .collect();
    assert!(imported.len() > 10, "{imported:?}");
    assert_eq!(calls.len(), chat.len() + imported.len());
    // The fork's copies are in the files twice, and counted once.
    let forked = sandbox.conversations().len();
    assert_eq!(forked, 3, "two chat runs (one a fork) and the import");

    let report = usage_json(&sandbox, &["--by", "model"]).await;
    let mut expected = Sums::default();
    calls.iter().for_each(|c| expected.add(c));
    assert_eq!(Sums::of_json(&report["total"]), expected);
    assert_eq!(report["total"]["toolCalls"], tool_calls(&entries));
    let expected_cost: f64 = calls.iter().filter_map(cost).sum();
    let shown = report["total"]["cost"].as_f64().unwrap();
    assert!(
        (shown - expected_cost).abs() < 1e-9,
        "{shown} {expected_cost}"
    );
    assert_eq!(report["total"]["unpricedCalls"], 0);

    // By model: each row is that model's calls.
    let mut by_model: BTreeMap<String, Sums> = BTreeMap::new();
    calls
        .iter()
        .for_each(|c| by_model.entry(c.model.clone()).or_default().add(c));
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), by_model.len());
    for row in rows {
        let key = row["key"].as_str().unwrap();
        assert_eq!(Sums::of_json(row), by_model[key], "{key}");
    }

    // By day, in UTC (the tests' TZ).
    let report = usage_json(&sandbox, &[]).await;
    assert_eq!(report["by"], "day");
    assert_eq!(report["timeZone"], "UTC");
    let mut by_day: BTreeMap<String, Sums> = BTreeMap::new();
    calls
        .iter()
        .for_each(|c| by_day.entry(c.day.clone()).or_default().add(c));
    let keys: Vec<_> = report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["key"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(keys, by_day.keys().cloned().collect::<Vec<_>>());
    for row in report["rows"].as_array().unwrap() {
        assert_eq!(Sums::of_json(row), by_day[row["key"].as_str().unwrap()]);
    }

    // --since and --until: the imported session's day alone, then the chat's days.
    let report = usage_json(&sandbox, &["--until", "2026-04-18"]).await;
    let mut old = Sums::default();
    imported.iter().for_each(|c| old.add(c));
    assert_eq!(Sums::of_json(&report["total"]), old);
    let report = usage_json(&sandbox, &["--since", "2026-04-19", "--by", "run"]).await;
    let mut new = Sums::default();
    chat.iter().for_each(|c| new.add(c));
    assert_eq!(Sums::of_json(&report["total"]), new);
    // The fork's run holds only its own reply: none, it was made after the last one.
    assert_eq!(report["rows"].as_array().unwrap().len(), 1, "{report}");
    let report = usage_json(
        &sandbox,
        &["--since", "2026-04-19", "--until", "2026-04-19"],
    )
    .await;
    assert_eq!(report["total"]["calls"], 0);

    // By tool: the calls of each tool.
    let report = usage_json(&sandbox, &["--by", "tool", "--since", "2026-04-19"]).await;
    let tools: Vec<_> = report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row["key"].as_str().unwrap(),
                row["toolCalls"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(tools, [("list_dir", 1), ("scout", 1)]);
}

#[tokio::test]
async fn usage_table_shows_bars_and_costs_and_the_page_has_its_chart() {
    let sandbox = ledger_sandbox().await;
    let out = sandbox.run(&["usage", "--by", "model"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    insta::assert_snapshot!(out.stdout);
    let page = sandbox.path().join("usage.html");
    let out = sandbox
        .run(
            &["usage", "--by", "run", "--html", page.to_str().unwrap()],
            "",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let html = std::fs::read_to_string(&page).unwrap();
    assert_contains!(html, "<svg class=\"chart\"");
    assert_contains!(html, "default-src 'none'");
    // One bar per run with calls: the chat's run and the import (the fork has none).
    assert_eq!(html.matches("<rect ").count(), 2, "{html}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&page).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

#[tokio::test]
async fn calls_without_a_price_cost_nothing_and_are_counted_in_a_note() {
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start_with([Reply::text("Hi.").with_usage(1_000, 234)]).await;
    let out = sandbox.chat(&server.base_url(), &[], "hello\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let out = sandbox.run(&["usage"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "—");
    assert_contains!(
        out.stderr,
        "note: 1,234 tokens of 1 model calls had no price (— and * mark them); prices go in [[prices]] in the config file"
    );
    let report = usage_json(&sandbox, &[]).await;
    assert_eq!(report["total"]["cost"], Value::Null);
    assert_eq!(report["total"]["unpricedTokens"], 1_234);
}

#[tokio::test]
async fn a_bad_price_table_is_refused_naming_the_file_and_the_key() {
    let sandbox = Sandbox::new();
    let config = sandbox.path().join("xdg/reprise/config.toml");
    let cases = [
        (
            "[[prices]]\nmodel = \"m\"\ninput = -1.0\noutput = 1.0\n",
            ":1: [prices]: input of m is -1: a price is a number of at least 0",
        ),
        (
            "[[prices]]\nmodel = \"m\"\ninput = \"cheap\"\noutput = 1.0\n",
            ":3:9: input: ",
        ),
        (
            "[[prices]]\nmodel = \"m\"\nfrom = \"soon\"\ninput = 1.0\noutput = 1.0\n",
            ":1: [prices]: from is \"soon\": a day as 2026-01-01",
        ),
        (
            "[[prices]]\nmodel = \"m\"\ninput = 1.0\noutput = 1.0\n\n\
             [[prices]]\nmodel = \"m\"\ninput = 2.0\noutput = 1.0\n",
            ":6: [prices]: m has a price from",
        ),
        (
            "[[prices]]\nmodel = \"m\"\ninput = 1.0\noutput = 1.0\ncahced = 1.0\n",
            "cahced",
        ),
    ];
    for (text, expected) in cases {
        write_config(&sandbox, text);
        let out = sandbox.run(&["usage"], "").await;
        assert_ne!(out.status, 0, "{text}");
        assert_contains!(out.stderr, &format!("{}", config.display()));
        assert_contains!(out.stderr, expected);
    }
    write_config(&sandbox, "");
    let out = sandbox
        .run(
            &["usage", "--since", "2026-12-01", "--until", "2026-11-01"],
            "",
        )
        .await;
    assert_contains!(out.stderr, "--since 2026-12-01 is after --until 2026-11-01");
    let out = sandbox.run(&["usage", "--since", "last week"], "").await;
    assert_contains!(out.stderr, "is not a day: write it as 2026-11-30");
}
