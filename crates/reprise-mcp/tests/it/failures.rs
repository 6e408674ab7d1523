//! Servers that fail: never start, crash mid-call, never answer, or are cancelled.
//! The tool call gets an error result naming the server and the reason, a notice
//! is sent, and the server is restarted on the next call, a bounded number of times.

use reprise_testkit::assert_contains;
use std::sync::Arc;
use std::time::Duration;

use crate::support::*;
use reprise_agent::Tool;
use reprise_mcp::{McpHub, McpNotice, NoticeKind};
use tokio::sync::mpsc::UnboundedReceiver;

fn find(hub: &McpHub, name: &str) -> Arc<dyn Tool> {
    hub.tools()
        .into_iter()
        .find(|t| t.spec().name == name)
        .unwrap()
}

fn drain(notices: &mut UnboundedReceiver<McpNotice>) -> Vec<(NoticeKind, String)> {
    let mut out = Vec::new();
    while let Ok(n) = notices.try_recv() {
        out.push((n.kind, n.message));
    }
    out
}

fn notice_kinds(notices: &mut UnboundedReceiver<McpNotice>) -> Vec<NoticeKind> {
    drain(notices).into_iter().map(|(k, _)| k).collect()
}

/// The notices of a server that started, failed once and came back on the next call.
const STARTED_THEN_RESTARTED: [NoticeKind; 4] = [
    NoticeKind::Started,
    NoticeKind::Failed,
    NoticeKind::Restarting,
    NoticeKind::Restarted,
];

fn crashy_table(name: &str, extra: &str) -> String {
    format!(
        "[servers.{name}]\ncommand = \"node\"\nargs = [{}, {}, \"stdio\"]\n{extra}",
        quoted(&mcp_crashy_proxy()),
        quoted(&mcp_everything_server())
    )
}

#[tokio::test]
async fn servers_that_cannot_start_are_reported_with_the_reason() {
    let text = "
startup_timeout_secs = 1
[servers.missing]
command = \"/nonexistent/bin/mcp\"
[servers.exits]
command = \"sh\"
args = [\"-c\", \"echo 'fatal: no config found' >&2; exit 3\"]
[servers.silent]
command = \"sleep\"
args = [\"30\"]
";
    let (hub, mut notices) = start_hub_with_notices(text).await;
    let reason = |name: &str| {
        hub.statuses()
            .iter()
            .find(|s| s.name == name)
            .unwrap()
            .result
            .clone()
            .unwrap_err()
    };
    let missing = reason("missing");
    assert!(
        missing.contains("could not start `/nonexistent/bin/mcp`"),
        "{missing}"
    );
    let exits = reason("exits");
    assert_contains!(exits, "exited with status 3");
    assert_contains!(exits, "fatal: no config found");
    let silent = reason("silent");
    assert_contains!(silent, "did not start within 1.0s");
    assert!(hub.tools().is_empty());
    let notices = drain(&mut notices);
    assert_eq!(
        notices
            .iter()
            .filter(|(k, _)| *k == NoticeKind::StartFailed)
            .count(),
        3,
        "{notices:?}"
    );
    hub.shutdown().await;
}

#[tokio::test]
async fn a_crash_mid_call_is_an_error_and_the_next_call_restarts_the_server() {
    let (hub, mut notices) = start_hub_with_notices(&crashy_table("flaky", "")).await;
    let echo = find(&hub, "flaky__echo");
    let out = echo
        .call(invocation("c1", "flaky__echo", r#"{"message":"one"}"#))
        .await;
    assert_eq!(out.content, "Echo: one");

    let out = echo
        .call(invocation("c2", "flaky__echo", r#"{"message":"CRASH"}"#))
        .await;
    assert!(out.is_error, "{out:?}");
    assert!(
        out.content.contains("MCP server \"flaky\""),
        "{}",
        out.content
    );
    assert!(
        out.content.contains("exited with status 7"),
        "{}",
        out.content
    );
    assert_contains!(out.content, "crashing as asked");
    assert!(
        out.content.contains("restarted on the next call"),
        "{}",
        out.content
    );

    let out = echo
        .call(invocation("c3", "flaky__echo", r#"{"message":"two"}"#))
        .await;
    assert_eq!(out.content, "Echo: two", "{out:?}");

    let kinds = notice_kinds(&mut notices);
    assert_eq!(kinds, STARTED_THEN_RESTARTED);
    hub.shutdown().await;
}

#[tokio::test]
async fn restarts_are_bounded() {
    let text = format!("max_restarts = 1\n{}", crashy_table("flaky", ""));
    let (hub, mut notices) = start_hub_with_notices(&text).await;
    let echo = find(&hub, "flaky__echo");
    let crash = || echo.call(invocation("c", "flaky__echo", r#"{"message":"CRASH"}"#));
    assert!(crash().await.is_error);
    // The first restart is allowed, and crashes too.
    let out = crash().await;
    assert!(
        out.is_error && out.content.contains("exited with status 7"),
        "{out:?}"
    );
    // No second restart.
    let out = echo
        .call(invocation("c", "flaky__echo", r#"{"message":"hi"}"#))
        .await;
    assert!(out.is_error);
    assert!(
        out.content.contains("will not be restarted again"),
        "{}",
        out.content
    );
    assert_contains!(out.content, "restarted 1 times");
    let notices = drain(&mut notices);
    assert_eq!(
        notices
            .iter()
            .filter(|(k, _)| *k == NoticeKind::Restarted)
            .count(),
        1
    );
    let last_failure = notices
        .iter()
        .rev()
        .find(|(k, _)| *k == NoticeKind::Failed)
        .unwrap();
    assert!(last_failure.1.contains("stays down"), "{last_failure:?}");
    hub.shutdown().await;
}

#[tokio::test]
async fn a_call_that_never_answers_times_out_and_the_server_restarts() {
    // The reference server's long-running operation takes 30 s; calls may take 0.5 s.
    let text = format!("{}call_timeout_secs = 0.5\n", everything_table("slow"));
    let (hub, mut notices) = start_hub_with_notices(&text).await;
    let long = find(&hub, "slow__trigger-long-running-operation");
    let out = long
        .call(invocation(
            "c1",
            "slow__trigger-long-running-operation",
            r#"{"duration": 30, "steps": 3}"#,
        ))
        .await;
    assert!(out.is_error, "{out:?}");
    assert!(
        out.content.contains("MCP server \"slow\""),
        "{}",
        out.content
    );
    assert!(
        out.content.contains("timed out after 0.50s"),
        "{}",
        out.content
    );

    let echo = find(&hub, "slow__echo");
    let out = echo
        .call(invocation("c2", "slow__echo", r#"{"message":"after"}"#))
        .await;
    assert_eq!(out.content, "Echo: after", "{out:?}");
    let kinds = notice_kinds(&mut notices);
    assert_eq!(kinds, STARTED_THEN_RESTARTED);
    hub.shutdown().await;
}

#[tokio::test]
async fn a_cancelled_call_returns_at_once_and_keeps_the_server() {
    let (hub, mut notices) = start_hub_with_notices(&everything_table("ev")).await;
    let long = find(&hub, "ev__trigger-long-running-operation");
    let call = invocation(
        "c1",
        "ev__trigger-long-running-operation",
        r#"{"duration": 30, "steps": 3}"#,
    );
    let cancel = call.context.cancel.clone();
    let pending = tokio::spawn(async move { long.call(call).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    cancel.cancel();
    let out = pending.await.unwrap();
    assert!(out.is_error && out.content.contains("cancelled"), "{out:?}");
    let echo = find(&hub, "ev__echo");
    let out = echo
        .call(invocation("c2", "ev__echo", r#"{"message":"same server"}"#))
        .await;
    assert_eq!(out.content, "Echo: same server");
    let kinds = notice_kinds(&mut notices);
    assert_eq!(kinds, [NoticeKind::Started], "a cancel is not a failure");
    hub.shutdown().await;
}

#[tokio::test]
async fn a_server_that_died_while_idle_is_restarted_by_the_next_call() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[servers.ev]\ncommand = \"sh\"\nargs = [\"-c\", \"echo $$ > pid; exec node \\\"$0\\\" stdio\", {}]\ncwd = {}\n",
        quoted(&mcp_everything_server()),
        quoted(dir.path())
    );
    let (hub, mut notices) = start_hub_with_notices(&text).await;
    assert_eq!(notices.recv().await.unwrap().kind, NoticeKind::Started);
    let pid: u32 = std::fs::read_to_string(dir.path().join("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(wait_gone(pid).await);
    // The chat hears of it at once, not at the next call.
    let failed = tokio::time::timeout(Duration::from_secs(10), notices.recv())
        .await
        .expect("no notice of the death")
        .unwrap();
    assert_eq!(failed.kind, NoticeKind::Failed);
    assert!(
        failed.message.contains("killed by signal 9"),
        "{}",
        failed.message
    );
    assert!(
        failed.message.contains("restarted on the next call"),
        "{}",
        failed.message
    );
    let echo = find(&hub, "ev__echo");
    let out = echo
        .call(invocation("c1", "ev__echo", r#"{"message":"back"}"#))
        .await;
    assert_eq!(out.content, "Echo: back", "{out:?}");
    let new_pid: u32 = std::fs::read_to_string(dir.path().join("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_ne!(pid, new_pid);
    hub.shutdown().await;
    assert!(!process_alive(new_pid));
}
