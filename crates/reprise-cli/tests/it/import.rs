//! `reprise import`: folders walked with progress, a dry run that writes nothing,
//! the same files twice creating nothing new, files that are not transcripts counted.

use reprise_testkit::testdata;
use serde_json::Value;

use crate::support::Sandbox;

/// A `~/.claude`-like folder: a project with the session that has subagents, and
/// files that are not transcripts.
fn claude_home(root: &std::path::Path) -> std::path::PathBuf {
    let home = root.join("dot-claude");
    let session = "ef958aa1-0e93-49f0-bb71-150f63befcd1";
    let project = home.join("projects").join("-experiments-worktrees");
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
    std::fs::copy(
        testdata("claude_code/cc-1.0.51_326189cf_summaries_system.jsonl"),
        project.join("326189cf-5676-4237-8cde-1ce80aae4a9f.jsonl"),
    )
    .unwrap();
    std::fs::write(
        home.join("history.jsonl"),
        "{\"display\":\"hi\",\"timestamp\":1}\n",
    )
    .unwrap();
    std::fs::write(home.join("settings.json"), "{\"model\":\"opus\"}\n").unwrap();
    home
}

#[tokio::test]
async fn a_folder_is_walked_once_and_a_second_import_creates_nothing() {
    let sandbox = Sandbox::new();
    let home = claude_home(sandbox.path());
    let home = home.to_str().unwrap();

    let dry = sandbox.run(&["import", "--dry-run", home], "").await;
    assert_eq!(dry.status, 0, "{}", dry.stderr);
    assert!(
        dry.stdout.contains("would create run 2026-04-18T13-10-51"),
        "{}",
        dry.stdout
    );
    assert!(
        dry.stdout.contains("dry run: would create 2 runs"),
        "{}",
        dry.stdout
    );
    assert!(
        dry.stdout.contains("2 files are not transcripts"),
        "{}",
        dry.stdout
    );
    assert!(
        dry.stderr.contains("[1/4]") && dry.stderr.contains("[4/4]"),
        "{}",
        dry.stderr
    );
    assert!(sandbox.runs().is_empty(), "a dry run wrote a run");

    let first = sandbox.run(&["import", home], "").await;
    assert_eq!(first.status, 0, "{}", first.stderr);
    assert!(
        first.stdout.contains("imported 2 sessions"),
        "{}",
        first.stdout
    );
    assert!(first.stdout.contains("1 subagent)"), "{}", first.stdout);
    let runs = sandbox.runs();
    assert_eq!(runs.len(), 2);
    let with_subagent = runs
        .iter()
        .find(|run| run.join("subagents/agent-a52886dc180afb356.jsonl").exists())
        .expect("the subagent came with its session");
    let meta: Value =
        serde_json::from_slice(&std::fs::read(with_subagent.join("session.json")).unwrap())
            .unwrap();
    assert_eq!(meta["importedFrom"]["tool"], "claude-code");
    assert_eq!(
        meta["importedFrom"]["sessionId"],
        "ef958aa1-0e93-49f0-bb71-150f63befcd1"
    );
    assert!(
        meta["importedFrom"]["path"]
            .as_str()
            .unwrap()
            .ends_with("ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl")
    );
    assert_eq!(
        meta["subagents"]["agent-a52886dc180afb356"],
        "subagents/agent-a52886dc180afb356.jsonl"
    );

    let again = sandbox.run(&["import", home], "").await;
    assert_eq!(again.status, 0, "{}", again.stderr);
    assert!(
        again
            .stdout
            .contains("imported 0 sessions (0 messages); 2 already imported"),
        "{}",
        again.stdout
    );
    assert_eq!(sandbox.runs().len(), 2);

    // The imported runs are listed like any other.
    let listed = sandbox.run(&["runs", "--json"], "").await;
    let rows: Vec<Value> = serde_json::from_str(&listed.stdout).unwrap();
    assert_eq!(rows.len(), 2);
}

#[tokio::test]
async fn a_file_that_is_no_transcript_fails_with_its_name() {
    let sandbox = Sandbox::new();
    let file = sandbox.path().join("notes.jsonl");
    std::fs::write(&file, "{\"hello\":1}\n").unwrap();
    let out = sandbox.run(&["import", file.to_str().unwrap()], "").await;
    assert_eq!(out.status, 1);
    assert!(
        out.stderr
            .contains("notes.jsonl: not a Claude Code, Codex or opencode transcript"),
        "{}",
        out.stderr
    );
    assert!(sandbox.runs().is_empty());
}

#[tokio::test]
async fn claude_code_2_0_subagents_beside_their_session_come_with_it_and_skipped_files_are_named() {
    // Claude Code 2.0 keeps a subagent's transcript beside the session's, tied to
    // it by `sessionId`; 2.1 moved them into `<session>/subagents/`.
    let sandbox = Sandbox::new();
    let project = sandbox.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::copy(
        testdata("claude_code/cc-2.1.114_ef958aa1_main_with_subagents.jsonl"),
        project.join("ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl"),
    )
    .unwrap();
    std::fs::copy(
        testdata("claude_code/cc-2.1.114_ef958aa1_subagent_agent-a52886dc180afb356.jsonl"),
        project.join("agent-a52886dc180afb356.jsonl"),
    )
    .unwrap();
    std::fs::write(project.join("settings.json"), "{\"model\":\"opus\"}\n").unwrap();
    let out = sandbox
        .run(&["import", project.to_str().unwrap()], "")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(out.stdout.contains("1 subagent)"), "{}", out.stdout);
    assert!(
        out.stdout.contains(
            "agent-a52886dc180afb356.jsonl: a subagent's transcript, imported with its session \
             ef958aa1-0e93-49f0-bb71-150f63befcd1"
        ),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("settings.json: not a transcript"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("1 subagent transcript imported with its session"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("no conversation"), "{}", out.stdout);
    let runs = sandbox.runs();
    assert_eq!(runs.len(), 1);
    let subagent = crate::support::jsonl(&runs[0].join("subagents/agent-a52886dc180afb356.jsonl"));
    assert!(subagent.len() > 30, "{}", subagent.len());
}
