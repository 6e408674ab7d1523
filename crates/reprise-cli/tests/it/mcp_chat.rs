//! MCP tools in the chat, end to end: the plain chat (real binary, pipes), a scripted
//! model server, and the reference MCP server (`@modelcontextprotocol/server-everything`,
//! installed by scripts/install-test-deps.sh), behind the step gate.

use reprise_testkit::assert_contains;
use std::path::PathBuf;

use crate::support::{Sandbox, jsonl};
use reprise_testkit::{Reply, ScriptedServer, mcp_crashy_proxy, mcp_everything_server};

/// Writes the sandbox's config file.
fn write_config(sandbox: &Sandbox, text: &str) {
    let dir = sandbox.path().join("xdg/reprise");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

/// `[mcp.servers.ev]` running `node` on these scripts over stdio, then `extra`.
fn ev_server(scripts: &[PathBuf], extra: &str) -> String {
    let mut args = String::new();
    for script in scripts {
        args.push_str(&format!("{:?}, ", script.display().to_string()));
    }
    format!("[mcp.servers.ev]\ncommand = \"node\"\nargs = [{args}\"stdio\"]\n{extra}")
}

/// The reference server as "ev", then the gate section.
pub(crate) fn configure(sandbox: &Sandbox, gate: &str) {
    write_config(
        sandbox,
        &ev_server(&[mcp_everything_server()], &format!("\n{gate}")),
    );
}

/// The last message of a request body sent to the model.
fn last_message(body: &serde_json::Value) -> serde_json::Value {
    body["messages"].as_array().unwrap().last().unwrap().clone()
}

fn echo(id: &str, message: &str) -> Reply {
    Reply::tool_call(id, "ev__echo", format!(r#"{{"message":"{message}"}}"#))
}

#[tokio::test]
async fn the_gate_asks_about_mcp_tools_and_always_lasts_one_run() {
    let sandbox = Sandbox::new();
    configure(&sandbox, "");
    let server = ScriptedServer::start().await;
    server.push_all([
        echo("c1", "one"),
        Reply::text("Echoed one."),
        echo("c2", "two"),
        Reply::text("Not echoed."),
        echo("c3", "three"),
        Reply::text("Echoed three."),
        echo("c4", "four"),
        Reply::text("Echoed four without asking."),
    ]);
    // The gate asks only when stdin is a terminal: type into one.
    let base_url = server.base_url();
    let args = ["--plain", "--base-url", &base_url, "--model", "test-model"];
    let mut pty = sandbox.pty(&args);
    pty.wait_text("MCP server \"ev\": started").await;
    let steps = [
        ("say one", Some("one"), "y", "Echoed one."),
        ("say two", Some("two"), "n", "Not echoed."),
        ("say three", Some("three"), "a", "Echoed three."),
        ("say four", None, "", "Echoed four without asking."),
    ];
    for (prompt, asked, answer, reply) in steps {
        pty.line(prompt);
        if let Some(message) = asked {
            pty.wait_text(&format!(r#"run ev__echo {{"message":"{message}"}}?"#))
                .await;
            pty.line(answer);
        }
        pty.wait_text(reply).await;
    }
    assert!(
        !pty.contents().contains(r#"{"message":"four"}?"#),
        "{}",
        pty.contents()
    );
    pty.line("/exit");
    assert!(pty.wait_exit().await, "{}", pty.contents());

    let bodies = server.request_bodies();
    // The tool was offered under its server's prefix, with its schema.
    let offered: Vec<&str> = bodies[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(offered.contains(&"ev__echo"), "{offered:?}");
    let result_of = |body: &serde_json::Value| {
        let messages = body["messages"].as_array().unwrap();
        messages.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(result_of(&bodies[1]), "Echo: one");
    assert!(
        result_of(&bodies[3]).contains("not allowed"),
        "{}",
        result_of(&bodies[3])
    );
    assert_eq!(result_of(&bodies[7]), "Echo: four");

    let run = sandbox.conversations().remove(0);
    let decisions: Vec<String> = jsonl(&run.join("transcript.jsonl"))
        .iter()
        .filter_map(|r| r["decision"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(decisions, ["ask-yes", "ask-no", "always", "allow"]);

    // A new start on the same run: new servers, a new gate, which asks again.
    server.push_all([echo("c5", "five"), Reply::text("Echoed five.")]);
    let mut args = args.to_vec();
    args.push("--continue");
    let mut pty = sandbox.pty(&args);
    pty.wait_text("MCP server \"ev\": started").await;
    pty.line("say five");
    pty.wait_text(r#"run ev__echo {"message":"five"}?"#).await;
    pty.line("y");
    pty.wait_text("Echoed five.").await;
    pty.line("/exit");
    assert!(pty.wait_exit().await, "{}", pty.contents());
    assert_eq!(result_of(&server.request_bodies()[9]), "Echo: five");
}

#[tokio::test]
async fn allow_and_deny_patterns_decide_without_asking() {
    let sandbox = Sandbox::new();
    configure(
        &sandbox,
        "[gate]\nallow = [\"ev__echo\"]\ndeny = [\"ev__get-*\"]\n",
    );
    let server = ScriptedServer::start().await;
    server.push_all([
        echo("c1", "ok"),
        Reply::tool_call("c2", "ev__get-sum", r#"{"a":1,"b":2}"#),
        Reply::text("Done."),
    ]);
    let out = sandbox.chat(&server.base_url(), &[], "go\n").await;
    assert_eq!(out.status, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(!out.stdout.contains("run ev__"), "{}", out.stdout);
    let bodies = server.request_bodies();
    let last = bodies[2]["messages"].as_array().unwrap();
    let n = last.len();
    assert_eq!(last[n - 3]["content"], "Echo: ok");
    assert!(
        last[n - 1]["content"]
            .as_str()
            .unwrap()
            .contains("deny pattern"),
        "{}",
        last[n - 1]
    );
}

#[tokio::test]
async fn mcp_list_shows_servers_and_tools() {
    let sandbox = Sandbox::new();
    configure(&sandbox, "");
    let out = sandbox.run(&["mcp", "list"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "ev");
    assert_contains!(out.stdout, "ev__echo");
}

#[tokio::test]
async fn a_server_crashing_mid_call_leaves_the_chat_usable_and_resumable() {
    let sandbox = Sandbox::new();
    write_config(
        &sandbox,
        &ev_server(&[mcp_crashy_proxy(), mcp_everything_server()], ""),
    );
    let server = ScriptedServer::start().await;
    server.push_all([
        echo("c1", "CRASH"),
        Reply::text("The tool broke."),
        echo("c2", "again"),
        Reply::text("It works again."),
    ]);
    let out = sandbox
        .chat(&server.base_url(), &["--yes"], "crash it\ntry again\n")
        .await;
    assert_eq!(out.status, 0, "{}\n{}", out.stdout, out.stderr);
    assert_contains!(out.stdout, "The tool broke.");
    assert_contains!(out.stderr, "↳ Echo: again");
    assert_contains!(out.stderr, "MCP server \"ev\"");
    let bodies = server.request_bodies();
    let crashed = last_message(&bodies[1]);
    assert_eq!(crashed["role"], "tool");
    assert_eq!(crashed["tool_call_id"], "c1");
    server.assert_tool_call_pairing();

    server.push(Reply::text("Resumed."));
    let out = sandbox
        .chat(&server.base_url(), &["--yes", "-c"], "still there?\n")
        .await;
    assert_eq!(out.status, 0, "{}\n{}", out.stdout, out.stderr);
    assert_contains!(out.stdout, "Resumed.");
    server.assert_tool_call_pairing();
}

#[tokio::test]
async fn a_call_that_never_answers_times_out_and_the_chat_goes_on_and_resumes() {
    // The reference server's long-running operation takes 30 s; calls on "ev" may take 1 s.
    let sandbox = Sandbox::new();
    write_config(
        &sandbox,
        &ev_server(&[mcp_everything_server()], "call_timeout_secs = 1\n"),
    );
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::tool_call(
            "c1",
            "ev__trigger-long-running-operation",
            r#"{"duration":30,"steps":3}"#,
        ),
        Reply::text("The operation took too long."),
        Reply::text("Still here."),
        echo("c2", "after"),
        Reply::text("Echoed after."),
    ]);
    let out = sandbox
        .chat(
            &server.base_url(),
            &["--yes"],
            "run the long one\nare you there?\necho after\n",
        )
        .await;
    assert_eq!(out.status, 0, "{}\n{}", out.stdout, out.stderr);

    // The chat says which server timed out, and that the next call brought it back.
    let notices: Vec<&str> = out
        .stderr
        .lines()
        .filter(|line| line.starts_with("MCP server \"ev\": "))
        .collect();
    let position = |needle: &str| {
        notices
            .iter()
            .position(|line| line.contains(needle))
            .unwrap_or_else(|| panic!("no notice with {needle:?}:\n{}", out.stderr))
    };
    let timed_out = position("\"trigger-long-running-operation\" timed out after 1s");
    let restarting = position("restarting (1 of 3)");
    let restarted = position("MCP server \"ev\": restarted");
    assert!(
        timed_out < restarting && restarting < restarted,
        "{}",
        out.stderr
    );
    // And shows the failed call as a failed tool result in the transcript.
    assert!(
        out.stderr
            .lines()
            .any(|line| line.trim_start().starts_with("✗ MCP server \"ev\"")
                && line.contains("timed out after 1s")),
        "{}",
        out.stderr
    );

    // The conversation went on: a plain turn, then a call on the restarted server.
    assert!(
        out.stdout.contains("The operation took too long."),
        "{}",
        out.stdout
    );
    assert_contains!(out.stdout, "Still here.");
    assert_contains!(out.stderr, "↳ Echo: after");
    assert_contains!(out.stdout, "Echoed after.");

    let bodies = server.request_bodies();
    assert_eq!(bodies.len(), 5, "{bodies:#?}");
    // The model got the failure as the tool call's result.
    let result = last_message(&bodies[1]);
    assert_eq!(result["role"], "tool");
    assert_eq!(result["tool_call_id"], "c1");
    let text = result["content"].as_str().unwrap();
    assert_contains!(text, "MCP server \"ev\"");
    assert_contains!(text, "timed out after 1s");
    // The following turn reached the model; every request keeps calls and results paired.
    let turn_two = bodies[2]["messages"].as_array().unwrap();
    assert_eq!(turn_two.last().unwrap()["content"], "are you there?");
    let echoed = last_message(&bodies[4]);
    assert_eq!(echoed["tool_call_id"], "c2");
    assert_eq!(echoed["content"], "Echo: after");
    server.assert_tool_call_pairing();

    // A new start resumes the conversation, timeout and all.
    server.push(Reply::text("Resumed."));
    let out = sandbox
        .chat(
            &server.base_url(),
            &["--yes", "--continue"],
            "still there?\n",
        )
        .await;
    assert_eq!(out.status, 0, "{}\n{}", out.stdout, out.stderr);
    assert_contains!(out.stdout, "Resumed.");
    let bodies = server.request_bodies();
    assert_eq!(bodies.len(), 6);
    let resumed = bodies[5]["messages"].as_array().unwrap();
    assert!(
        resumed
            .iter()
            .any(|m| m["tool_call_id"] == "c1"
                && m["content"].as_str().unwrap().contains("timed out")),
        "{resumed:#?}"
    );
    assert_eq!(resumed.last().unwrap()["content"], "still there?");
    server.assert_tool_call_pairing();
}
