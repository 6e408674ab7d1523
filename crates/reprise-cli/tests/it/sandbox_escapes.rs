//! What a hostile command cannot take out of `run_command`'s sandbox, through the
//! binary: no set-id bit or file capability on a file it makes, no process left
//! running once the call ended, no more processes or memory than the caps allow.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use crate::support::{Output, Sandbox, plain_yes, run_command};
use reprise_testkit::assert_contains;
use reprise_testkit::{Reply, ScriptedServer};

fn write_config(sandbox: &Sandbox, text: &str) {
    let dir = sandbox.path().join("xdg/reprise");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

/// A chat with `--yes` whose model runs `command` once, then answers "Done.";
/// commands get `tmp/` of the sandbox as their temporary folder.
async fn chat_running(sandbox: &Sandbox, command: &str) -> (Output, String) {
    std::fs::create_dir_all(sandbox.path().join("tmp")).unwrap();
    let server = ScriptedServer::start().await;
    let arguments = serde_json::json!({ "command": command, "timeout": 60 }).to_string();
    server.push_all([
        Reply::tool_call("call_1", "run_command", &arguments),
        Reply::text("Done."),
    ]);
    let base_url = server.base_url();
    let mut chat = sandbox.command(&plain_yes(&base_url));
    chat.env("TMPDIR", sandbox.path().join("tmp"));
    let out = run_command(chat, "go\n").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let bodies = server.request_bodies();
    let messages = bodies[1]["messages"].as_array().unwrap();
    let result = messages.last().unwrap();
    assert_eq!(result["role"], "tool");
    (out, result["content"].as_str().unwrap().to_owned())
}

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode()
}

#[tokio::test]
async fn no_file_a_command_makes_carries_a_set_id_bit_or_a_capability() {
    // The tests run as root: without the sandbox each of these would leave a
    // program that runs as root for anyone.
    let sandbox = Sandbox::new();
    let command = r#"cp /usr/bin/id x && chmod 4755 x; echo "chmod x $?"
cp /usr/bin/id "$TMPDIR/y" && chmod g+s "$TMPDIR/y"; echo "chmod y $?"
install -m 6755 /usr/bin/id z; echo "install z $?"
perl -MFcntl -e 'sysopen(my $f, "w", O_CREAT | O_WRONLY, 04755) or die "open w: $!\n"'; echo "open w $?"
setcap cap_setuid+ep x; echo "setcap x $?"
chmod 755 x; echo "chmod 755 x $?""#;
    let (_, result) = chat_running(&sandbox, command).await;
    for said in [
        "chmod: changing permissions of 'x': Operation not permitted",
        "chmod x 1",
        "chmod y 1",
        "install z 1",
        "open w: Operation not permitted",
        "open w 1",
        "setcap x 1",
        "chmod 755 x 0",
    ] {
        assert_contains!(result, said);
    }
    let x = sandbox.path().join("x");
    assert_eq!(mode(&x) & 0o7777, 0o755, "{result}");
    assert_eq!(mode(&sandbox.path().join("tmp/y")) & 0o6000, 0, "{result}");
    let z = sandbox.path().join("z");
    assert!(!z.exists() || mode(&z) & 0o6000 == 0, "{result}");
    assert!(!sandbox.path().join("w").exists(), "{result}");
    let capabilities = std::process::Command::new("getcap")
        .arg(&x)
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
        .unwrap_or_default();
    assert!(!capabilities.contains("cap_setuid"), "{capabilities}");
}

#[tokio::test]
async fn no_process_a_call_started_outlives_it() {
    let sandbox = Sandbox::new();
    let command = "setsid sh -c 'sleep 2; echo w > late.txt' > /dev/null 2>&1 &
perl -e 'setpgrp(0, 0); sleep 2; open(my $f, \">\", \"late-group.txt\")' > /dev/null 2>&1 &
(sleep 2; echo w > late-orphan.txt) > /dev/null 2>&1 &
echo started";
    let started = Instant::now();
    let (_, result) = chat_running(&sandbox, command).await;
    assert_eq!(result, "exit status 0\n--- stdout ---\nstarted");
    let waited = started.elapsed();
    std::thread::sleep(Duration::from_secs(3).saturating_sub(waited) + Duration::from_secs(1));
    for late in ["late.txt", "late-group.txt", "late-orphan.txt"] {
        assert!(
            !sandbox.path().join(late).exists(),
            "{late} was written after the call"
        );
    }
}

#[tokio::test]
async fn a_fork_bomb_ends_the_call_under_a_low_cap() {
    let sandbox = Sandbox::new();
    write_config(&sandbox, "[tools.run_command]\nmax_processes = 40\n");
    let started = Instant::now();
    let (_, result) = chat_running(
        &sandbox,
        "bomb() { bomb | bomb & }; bomb; sleep 30; echo survived",
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "the call ran {:?}: {result}",
        started.elapsed()
    );
    assert!(
        result.starts_with("killed by signal 9 (SIGKILL)"),
        "{result}"
    );
    assert_contains!(
        result,
        "the command had more than 40 processes and threads at once (max_processes)"
    );
    assert!(!result.contains("survived"), "{result}");
}

#[tokio::test]
async fn an_allocation_over_the_memory_cap_fails() {
    let sandbox = Sandbox::new();
    write_config(
        &sandbox,
        "[tools.run_command]\nmax_memory = 104857600\n", // 100 MiB
    );
    let (_, result) = chat_running(
        &sandbox,
        "dd if=/dev/zero of=/dev/null bs=10M count=1 2>/dev/null && echo small ok
dd if=/dev/zero of=/dev/null bs=300M count=1",
    )
    .await;
    assert!(result.starts_with("exit status 1"), "{result}");
    assert_contains!(result, "small ok");
    assert_contains!(result, "dd: memory exhausted");
}
