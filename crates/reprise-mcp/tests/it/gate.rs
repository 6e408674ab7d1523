//! The step gate: policy patterns, asking (yes / no / always for this run) through a
//! scripted asker and through the plain line asker, `--yes`, and reported decisions.

use reprise_testkit::assert_contains;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use crate::support::{invocation, subagent_invocation};
use async_trait::async_trait;
use reprise_agent::{Approval, ToolApprover};
use reprise_mcp::{
    Decision, GateAnswer, GateAsker, GateConfig, GateDecision, GateMode, GatePolicy, GateRequest,
    LineAsker, StepGate,
};

/// Answers from a script, and records what it was asked.
#[derive(Default)]
struct ScriptedAsker {
    answers: Mutex<VecDeque<GateAnswer>>,
    asked: Mutex<Vec<GateRequest>>,
}

impl ScriptedAsker {
    fn new(answers: &[GateAnswer]) -> Arc<Self> {
        Arc::new(ScriptedAsker {
            answers: Mutex::new(answers.iter().copied().collect()),
            asked: Mutex::default(),
        })
    }

    fn asked(&self) -> Vec<String> {
        self.asked
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.tool.clone())
            .collect()
    }
}

#[async_trait]
impl GateAsker for ScriptedAsker {
    async fn ask(&self, request: &GateRequest) -> GateAnswer {
        self.asked.lock().unwrap().push(request.clone());
        // Yield, so concurrent calls really overlap.
        tokio::task::yield_now().await;
        self.answers
            .lock()
            .unwrap()
            .pop_front()
            .expect("asked more often than scripted")
    }
}

fn policy(allow: &[&str], deny: &[&str]) -> GatePolicy {
    GatePolicy::from_config(&GateConfig {
        allow: allow.iter().map(|s| s.to_string()).collect(),
        deny: deny.iter().map(|s| s.to_string()).collect(),
    })
    .unwrap()
}

fn recorder() -> (
    Arc<Mutex<Vec<GateDecision>>>,
    impl Fn(&GateDecision) + Send + Sync + 'static,
) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let sink = log.clone();
    (log, move |d: &GateDecision| {
        sink.lock().unwrap().push(d.clone())
    })
}

#[tokio::test]
async fn policy_allows_and_denies_without_asking() {
    let asker = ScriptedAsker::new(&[]);
    let (log, report) = recorder();
    let gate = StepGate::new(
        policy(&["town__*"], &["town__burn*"]),
        GateMode::Ask(asker.clone()),
    )
    .with_reporter(report);
    assert_eq!(
        gate.approve(&invocation("c1", "town__move", "{}")).await,
        Approval::Allow
    );
    let Approval::Deny(reason) = gate.approve(&invocation("c2", "town__burn_it", "{}")).await
    else {
        panic!("deny expected")
    };
    assert!(
        reason.contains("denied by policy") && reason.contains("town__burn*"),
        "{reason}"
    );
    assert!(asker.asked().is_empty());
    let log = log.lock().unwrap();
    assert_eq!(log[0].decision, Decision::Allow);
    assert_eq!(
        (
            log[0].agent.as_str(),
            log[0].call_id.as_str(),
            log[0].tool.as_str()
        ),
        ("main", "c1", "town__move")
    );
    assert!(log[0].reason.contains("town__*"));
    assert_eq!(log[1].decision, Decision::Deny);
    assert_eq!(serde_json::to_value(&log[1]).unwrap()["decision"], "deny");
}

#[tokio::test]
async fn read_only_tools_run_without_asking_unless_denied() {
    let asker = ScriptedAsker::new(&[GateAnswer::No]);
    let (log, report) = recorder();
    let gate = StepGate::new(policy(&[], &["list_*"]), GateMode::Ask(asker.clone()))
        .with_read_only_tools(["read_file".to_owned(), "list_dir".to_owned()])
        .with_reporter(report);
    assert_eq!(
        gate.approve(&subagent_invocation("scout", "c1", "read_file", "{}"))
            .await,
        Approval::Allow
    );
    assert!(matches!(
        gate.approve(&invocation("c2", "list_dir", "{}")).await,
        Approval::Deny(_)
    ));
    assert!(matches!(
        gate.approve(&invocation("c3", "write_file", "{}")).await,
        Approval::Deny(_)
    ));
    assert_eq!(asker.asked(), ["write_file"]);
    let log = log.lock().unwrap();
    let decided: Vec<(Decision, &str)> = log
        .iter()
        .map(|d| (d.decision, d.reason.as_str()))
        .collect();
    assert_eq!(
        decided,
        [
            (Decision::Allow, "a read-only built-in tool"),
            (Decision::Deny, "matches deny pattern \"list_*\""),
            (Decision::AskNo, "the person answered no"),
        ]
    );
}

#[tokio::test]
async fn unlisted_tools_are_asked_yes_no_and_always_for_this_run() {
    let asker = ScriptedAsker::new(&[
        GateAnswer::Yes,
        GateAnswer::No,
        GateAnswer::AlwaysForThisRun,
        GateAnswer::Yes,
    ]);
    let (log, report) = recorder();
    let gate = StepGate::new(policy(&[], &[]), GateMode::Ask(asker.clone())).with_reporter(report);

    assert_eq!(
        gate.approve(&invocation("c1", "bash", r#"{"cmd":"ls"}"#))
            .await,
        Approval::Allow
    );
    let Approval::Deny(reason) = gate.approve(&invocation("c2", "bash", "{}")).await else {
        panic!("deny expected")
    };
    assert_contains!(reason, "declined");
    assert_eq!(
        gate.approve(&subagent_invocation("helper", "c3", "bash", "{}"))
            .await,
        Approval::Allow
    );
    // Always: no more questions about bash in this run.
    assert_eq!(
        gate.approve(&invocation("c4", "bash", "{}")).await,
        Approval::Allow
    );
    assert_eq!(
        gate.approve(&invocation("c5", "bash", "{}")).await,
        Approval::Allow
    );
    // Other tools are still asked.
    assert_eq!(
        gate.approve(&invocation("c6", "write_file", "{}")).await,
        Approval::Allow
    );
    assert_eq!(asker.asked(), ["bash", "bash", "bash", "write_file"]);
    assert_eq!(asker.asked.lock().unwrap()[0].arguments, r#"{"cmd":"ls"}"#);
    assert_eq!(asker.asked.lock().unwrap()[2].agent, "helper");
    assert_eq!(gate.always_allowed(), ["bash"]);

    let decisions: Vec<Decision> = log.lock().unwrap().iter().map(|d| d.decision).collect();
    assert_eq!(
        decisions,
        [
            Decision::AskYes,
            Decision::AskNo,
            Decision::Always,
            Decision::Allow,
            Decision::Allow,
            Decision::AskYes
        ]
    );
    let names: Vec<String> = decisions
        .iter()
        .map(|d| {
            serde_json::to_value(d)
                .unwrap()
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        names,
        ["ask-yes", "ask-no", "always", "allow", "allow", "ask-yes"]
    );
    let strs: Vec<&str> = decisions.iter().map(|d| d.as_str()).collect();
    assert_eq!(strs, names);
    assert_eq!(
        decisions.iter().map(|d| d.runs()).collect::<Vec<_>>(),
        [true, false, true, true, true, true]
    );
}

#[tokio::test]
async fn always_is_remembered_per_gate_never_across_runs() {
    let first = StepGate::new(
        policy(&[], &[]),
        GateMode::Ask(ScriptedAsker::new(&[GateAnswer::AlwaysForThisRun])),
    );
    assert_eq!(
        first.approve(&invocation("c1", "bash", "{}")).await,
        Approval::Allow
    );
    assert_eq!(
        first.approve(&invocation("c2", "bash", "{}")).await,
        Approval::Allow
    );
    // The next run (a new gate) asks again.
    let asker = ScriptedAsker::new(&[GateAnswer::No]);
    let second = StepGate::new(policy(&[], &[]), GateMode::Ask(asker.clone()));
    assert!(matches!(
        second.approve(&invocation("c3", "bash", "{}")).await,
        Approval::Deny(_)
    ));
    assert_eq!(asker.asked(), ["bash"]);
}

#[tokio::test]
async fn concurrent_calls_get_one_question_at_a_time() {
    let asker = ScriptedAsker::new(&[GateAnswer::AlwaysForThisRun]);
    let gate = Arc::new(StepGate::new(
        policy(&[], &[]),
        GateMode::Ask(asker.clone()),
    ));
    let calls = (0..5).map(|i| {
        let gate = gate.clone();
        async move {
            gate.approve(&invocation(&format!("c{i}"), "bash", "{}"))
                .await
        }
    });
    let results = futures::future::join_all(calls).await;
    assert!(results.iter().all(|a| *a == Approval::Allow));
    assert_eq!(
        asker.asked(),
        ["bash"],
        "the 'always' answer covers the calls that waited"
    );
}

#[tokio::test]
async fn yes_mode_runs_unlisted_tools_but_deny_still_denies() {
    let (log, report) = recorder();
    let gate = StepGate::new(policy(&[], &["rm_*"]), GateMode::Yes).with_reporter(report);
    assert_eq!(
        gate.approve(&invocation("c1", "bash", "{}")).await,
        Approval::Allow
    );
    assert!(matches!(
        gate.approve(&invocation("c2", "rm_rf", "{}")).await,
        Approval::Deny(_)
    ));
    let log = log.lock().unwrap();
    assert_eq!(
        (log[0].decision, log[0].reason.as_str()),
        (Decision::Allow, "--yes")
    );
    assert_eq!(log[1].decision, Decision::Deny);
}

#[tokio::test]
async fn unattended_mode_runs_what_patterns_allow_and_says_why_the_rest_did_not_run() {
    let (log, report) = recorder();
    let gate = StepGate::new(
        policy(&["list_*"], &[]),
        GateMode::Unattended("not a terminal; --yes allows".into()),
    )
    .with_reporter(report);
    assert_eq!(
        gate.approve(&invocation("c1", "list_dir", "{}")).await,
        Approval::Allow
    );
    assert_eq!(
        gate.approve(&invocation("c2", "bash", "{}")).await,
        Approval::Deny("no one could approve: not a terminal; --yes allows".into())
    );
    assert!(!gate.ask_again(&invocation("c3", "bash", "{}")).await);
    let log = log.lock().unwrap();
    assert_eq!(log[1].decision, Decision::NoOneToAsk);
    assert!(!log[1].decision.runs());
    assert_eq!(
        serde_json::to_value(&log[1]).unwrap()["decision"],
        "no-one-to-ask"
    );
}

#[tokio::test]
async fn the_line_asker_asks_on_a_line_and_reads_the_answer() {
    // Bad answer first (asked again), then "a".
    let asker = LineAsker::new(&b"maybe\nalways\n"[..], Vec::new());
    let request = GateRequest {
        agent: "main".into(),
        call_id: "call_7".into(),
        tool: "town__move".into(),
        arguments: r#"{"to":"north"}"#.into(),
    };
    assert_eq!(asker.ask(&request).await, GateAnswer::AlwaysForThisRun);
    let (_, output) = asker.into_inner();
    let shown = String::from_utf8(output).unwrap();
    assert_eq!(
        shown,
        "Run the tool town__move (agent main, call call_7)?\n  arguments: {\"to\":\"north\"}\n\
         [y]es / [n]o / [a]lways for this run: Please answer y, n or a.\n\
         [y]es / [n]o / [a]lways for this run: "
    );

    for (input, answer) in [
        ("y\n", GateAnswer::Yes),
        ("NO\n", GateAnswer::No),
        ("", GateAnswer::No),
    ] {
        let asker = LineAsker::new(input.as_bytes(), Vec::new());
        assert_eq!(asker.ask(&request).await, answer, "input {input:?}");
    }
}

#[tokio::test]
async fn the_line_asker_drives_a_gate_over_an_in_memory_pipe() {
    let (person, gate_side) = tokio::io::duplex(4096);
    let (gate_in, gate_out) = tokio::io::split(gate_side);
    let asker = Arc::new(LineAsker::new(tokio::io::BufReader::new(gate_in), gate_out));
    let (log, report) = recorder();
    let gate =
        Arc::new(StepGate::new(policy(&[], &[]), GateMode::Ask(asker)).with_reporter(report));

    let (person_in, mut person_out) = tokio::io::split(person);
    let person_task = tokio::spawn(async move {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
        let mut lines = tokio::io::BufReader::new(person_in);
        let mut seen = String::new();
        for answer in ["n\n", "a\n"] {
            // Read up to the prompt's end, then answer.
            let mut chunk = Vec::new();
            loop {
                lines.read_until(b':', &mut chunk).await.unwrap();
                if chunk.ends_with(b"for this run:") {
                    break;
                }
            }
            seen.push_str(&String::from_utf8(chunk).unwrap());
            person_out.write_all(answer.as_bytes()).await.unwrap();
        }
        seen
    });
    assert!(matches!(
        gate.approve(&invocation("c1", "fetch", r#"{"url":"x"}"#))
            .await,
        Approval::Deny(_)
    ));
    assert_eq!(
        gate.approve(&invocation("c2", "fetch", "{}")).await,
        Approval::Allow
    );
    assert_eq!(
        gate.approve(&invocation("c3", "fetch", "{}")).await,
        Approval::Allow
    );
    let seen = person_task.await.unwrap();
    assert_eq!(seen.matches("Run the tool fetch").count(), 2, "{seen}");
    assert_contains!(seen, "arguments: {\"url\":\"x\"}");
    let decisions: Vec<Decision> = log.lock().unwrap().iter().map(|d| d.decision).collect();
    assert_eq!(
        decisions,
        [Decision::AskNo, Decision::Always, Decision::Allow]
    );
}
