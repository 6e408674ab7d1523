//! A command cannot make the chat lose a message: whatever `run_command` does to the
//! folders above the runs folder (their modes, their names), the chat goes on
//! recording the conversation, `session.log` and `transcript.jsonl` of its run.
//!
//! Run as an unprivileged user (`reprise_testkit::unprivileged`): root ignores file
//! modes, so a folder of mode 000 would stop nothing.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use reprise_testkit::unprivileged;
use reprise_testkit::{Reply, ScriptedServer};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

use crate::support::{Output, Sandbox, jsonl, plain_yes, run_command};

/// The working folder `path` inside the sandbox, given with the sandbox to the
/// unprivileged user.
fn project(sandbox: &Sandbox, path: &str) -> PathBuf {
    let project = sandbox.path().join(path);
    std::fs::create_dir_all(&project).unwrap();
    unprivileged::hand_over(sandbox.path()).unwrap();
    project
}

/// Where the runs are kept: `.run` in the working folder, named as the chat names
/// it by default (relative to the folder it starts in), or by its absolute path.
#[derive(Clone, Copy)]
enum RunsDir {
    Default,
    Absolute,
}

/// The binary, unprivileged, in `workdir` with `args`.
fn unprivileged_in(
    sandbox: &Sandbox,
    workdir: &Path,
    runs: RunsDir,
    args: &[&str],
) -> tokio::process::Command {
    let binary = Path::new(env!("CARGO_BIN_EXE_reprise"));
    unprivileged_of(sandbox, binary, workdir, runs, args)
}

/// [`unprivileged_in`] with the binary at `binary`.
fn unprivileged_of(
    sandbox: &Sandbox,
    binary: &Path,
    workdir: &Path,
    runs: RunsDir,
    args: &[&str],
) -> tokio::process::Command {
    let wrapper = unprivileged::argv("");
    let wrapper: Vec<&str> = wrapper[..wrapper.len() - 1]
        .iter()
        .map(|part| part.to_str().unwrap())
        .collect();
    let mut command = sandbox.command_of(binary, &wrapper, args);
    command.current_dir(workdir);
    if let RunsDir::Absolute = runs {
        command.env("REPRISE_RUNS_DIR", workdir.join(".run"));
    }
    command
}

/// The binary run unprivileged in `workdir` with `args`, fed `input`.
async fn run_in(
    sandbox: &Sandbox,
    workdir: &Path,
    runs: RunsDir,
    args: &[&str],
    input: &str,
) -> Output {
    run_command(unprivileged_in(sandbox, workdir, runs, args), input).await
}

/// A chat in `workdir` whose model runs `command`, answers, then answers the next
/// prompt.
async fn chat_running(sandbox: &Sandbox, workdir: &Path, runs: RunsDir, command: &str) -> Output {
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::tool_call(
            "call_1",
            "run_command",
            serde_json::json!({ "command": command }).to_string(),
        ),
        Reply::text("Changed."),
        Reply::text("Still here."),
    ]);
    let base_url = server.base_url();
    run_in(
        sandbox,
        workdir,
        runs,
        &plain_yes(&base_url),
        "change the folder\nare you still there?\n",
    )
    .await
}

/// The one run folder under `runs`.
fn only_run(runs: &Path) -> PathBuf {
    let mut runs: Vec<PathBuf> = std::fs::read_dir(runs)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("session.json").exists())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs.remove(0)
}

/// `(role, text)` of each message in a run's `conversation.jsonl`.
fn messages(run: &Path) -> Vec<(String, String)> {
    jsonl(&run.join("conversation.jsonl"))
        .iter()
        .filter_map(|entry| {
            let message = entry.get("message")?;
            let text = match &message["content"] {
                Value::String(text) => text.clone(),
                _ => String::new(),
            };
            Some((message["role"].as_str()?.to_owned(), text))
        })
        .collect()
}

/// What every case must find in the run once the folders are back: the command's
/// result (holding `result`), the reply, the next prompt and its reply, in the
/// conversation, the log, the transcript, the prompt history and `reprise show`.
async fn assert_recorded(sandbox: &Sandbox, workdir: &Path, run: &Path, result: &str) {
    let roles: Vec<(String, String)> = messages(run);
    let find = |role: &str, text: &str| {
        roles
            .iter()
            .position(|(r, t)| r == role && t.contains(text))
            .unwrap_or_else(|| panic!("no {role} message with {text:?} in {roles:#?}"))
    };
    let result = find("tool", result);
    let reply = find("assistant", "Changed.");
    let prompt = find("user", "are you still there?");
    let second = find("assistant", "Still here.");
    assert!(
        result < reply && reply < prompt && prompt < second,
        "{roles:#?}"
    );

    let log = std::fs::read_to_string(run.join("session.log")).unwrap();
    assert!(log.contains("› are you still there?"), "{log}");
    assert!(log.contains("Still here."), "{log}");
    let transcript = jsonl(&run.join("transcript.jsonl"));
    assert!(
        transcript
            .iter()
            .any(|record| record["type"] == "tool_result" && record["name"] == "run_command"),
        "{transcript:#?}"
    );

    let history = jsonl(&run.parent().unwrap().join("history.jsonl"));
    assert_eq!(
        history.last().map(|entry| entry["text"].clone()),
        Some(Value::from("are you still there?")),
        "{history:#?}"
    );

    let out = run_in(sandbox, workdir, RunsDir::Default, &["show", "last"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    for text in [
        "change the folder",
        "Changed.",
        "are you still there?",
        "Still here.",
    ] {
        assert!(
            out.stdout.contains(text),
            "{text:?} not in:\n{}",
            out.stdout
        );
    }
}

/// No `!` line: nothing the chat keeps (the prompt history included) failed. A
/// checkpoint of a working folder the command made unreadable may fail, and says so:
/// that is the folder's state, not a record of the chat.
fn assert_no_warning(stderr: &str) {
    assert!(
        !stderr
            .lines()
            .any(|line| line.starts_with('!') && !line.starts_with("! checkpoint")),
        "{stderr}"
    );
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[tokio::test]
async fn a_command_closing_the_working_folder_loses_no_message() {
    let sandbox = Sandbox::new();
    let workdir = project(&sandbox, "project");
    let out = chat_running(&sandbox, &workdir, RunsDir::Default, "chmod 000 .").await;
    set_mode(&workdir, 0o755);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "Changed.\nStill here.\n", "{}", out.stderr);
    assert_no_warning(&out.stderr);
    let run = only_run(&workdir.join(".run"));
    assert_recorded(&sandbox, &workdir, &run, "exit status 0").await;
}

#[tokio::test]
async fn a_command_closing_the_folder_above_loses_no_message() {
    let sandbox = Sandbox::new();
    let workdir = project(&sandbox, "project");
    let out = chat_running(&sandbox, &workdir, RunsDir::Absolute, "chmod 000 ..").await;
    set_mode(sandbox.path(), 0o755);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "Changed.\nStill here.\n", "{}", out.stderr);
    assert_no_warning(&out.stderr);
    let run = only_run(&workdir.join(".run"));
    assert_recorded(&sandbox, &workdir, &run, "exit status 0").await;
}

#[tokio::test]
async fn a_command_cannot_rename_a_folder_above_and_loses_no_message() {
    // The folders on the way to the runs folder are mount points in the command's
    // namespace: a command cannot rename them.
    let sandbox = Sandbox::new();
    let workdir = project(&sandbox, "outer/project");
    let out = chat_running(
        &sandbox,
        &workdir,
        RunsDir::Absolute,
        "cd ../.. && mv outer outer-moved",
    )
    .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "Changed.\nStill here.\n", "{}", out.stderr);
    assert!(workdir.is_dir());
    let run = only_run(&workdir.join(".run"));
    assert_recorded(&sandbox, &workdir, &run, "Device or resource busy").await;
}

#[tokio::test]
async fn a_folder_above_renamed_during_the_chat_loses_no_message() {
    // Another program (the person, in another terminal) moves the folders.
    let sandbox = Sandbox::new();
    let workdir = project(&sandbox, "outer/project");
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::tool_call("call_1", "run_command", r#"{"command":"echo moved"}"#),
        Reply::text("Changed."),
        Reply::text("Still here."),
    ]);
    let base_url = server.base_url();
    let args = plain_yes(&base_url);
    let mut command = unprivileged_in(&sandbox, &workdir, RunsDir::Absolute, &args);
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap());
    stdin.write_all(b"change the folder\n").await.unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).await.unwrap();
    assert_eq!(line, "Changed.\n");
    let moved = sandbox.path().join("outer-moved/project");
    std::fs::rename(
        sandbox.path().join("outer"),
        sandbox.path().join("outer-moved"),
    )
    .unwrap();
    stdin.write_all(b"are you still there?\n").await.unwrap();
    drop(stdin);
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).await.unwrap();
    let output = child.wait_with_output().await.unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(rest, "Still here.\n", "{stderr}");
    assert_no_warning(&stderr);
    let run = only_run(&moved.join(".run"));
    assert_recorded(&sandbox, &moved, &run, "exit status 0").await;
}

#[tokio::test]
async fn a_binary_in_a_folder_the_user_cannot_search_still_protects_the_runs_folder() {
    // The binary lies where the user running it cannot search (as when it was
    // started through another user's path): the chat still starts itself as each
    // command's trampoline, so the top of the working folder stays writable and the
    // runs folder read-only, with no warning about a weaker sandbox.
    let sandbox = Sandbox::new();
    let workdir = project(&sandbox, "project");
    let closed = tempfile::tempdir().unwrap();
    let binary = closed.path().join("reprise");
    std::fs::copy(env!("CARGO_BIN_EXE_reprise"), &binary).unwrap();
    set_mode(closed.path(), 0o700);
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::tool_call(
            "call_1",
            "run_command",
            r#"{"command":"touch new.txt && touch .run/planted"}"#,
        ),
        Reply::text("Done."),
    ]);
    let base_url = server.base_url();
    let args = plain_yes(&base_url);
    let command = unprivileged_of(&sandbox, &binary, &workdir, RunsDir::Default, &args);
    let out = run_command(command, "make a file\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        !out.stderr.contains("cannot create or remove entries"),
        "{}",
        out.stderr
    );
    assert!(workdir.join("new.txt").is_file(), "{}", out.stderr);
    assert!(!workdir.join(".run/planted").exists(), "{}", out.stderr);
}

#[tokio::test]
async fn a_warning_about_a_run_file_names_its_real_path() {
    // The chat reads the run through the held runs folder; what it says about the
    // files names them as the person knows them.
    let sandbox = Sandbox::new();
    let server = ScriptedServer::start().await;
    server.push_all([Reply::text("First."), Reply::text("Second.")]);
    let out = sandbox.chat(&server.base_url(), &[], "hello\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let run = sandbox.conversations().remove(0);
    let conversation = run.join("conversation.jsonl");
    let mut text = std::fs::read_to_string(&conversation).unwrap();
    text.push_str("not json\n");
    std::fs::write(&conversation, text).unwrap();

    let out = sandbox
        .chat(&server.base_url(), &["--continue"], "again\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(!out.stderr.contains("/proc/self/fd"), "{}", out.stderr);
    let named = format!(
        ".run/{}/conversation.jsonl:",
        crate::run_commands::name(&run)
    );
    assert!(
        out.stderr.contains(&named),
        "{named:?} not in:\n{}",
        out.stderr
    );
}
