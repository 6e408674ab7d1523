
/// `/fork` in the middle of a chat: the new run's subagent continues the copy of its
/// transcript; the old run's keeps only what it had.
#[tokio::test]
async fn slash_fork_brings_the_subagents_along() {
    let sandbox = Sandbox::new();
    write_config(&sandbox, SCOUT);
    let server = ScriptedServer::start().await;
    one_delegation(&server, "p1", "The folder holds notes.txt.");
    server.push_all([
        delegate("p2", "anything else?"),
        Reply::text("No."),
        Reply::text("Nothing else."),
    ]);
    let out = sandbox
        .chat(
            &server.base_url(),
            &["--yes"],
            "what is here?\n/fork\nmore?\n",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "(forked into run");
    let runs = sandbox.conversations();
    assert_eq!(runs.len(), 2);
    let child_roles = |run: &Path| {
        let (messages, _): (Vec<Value>, Vec<Value>) =
            messages_of(&run.join("subagents/scout.jsonl")).into_iter().unzip();
        roles(&messages)
    };
    assert_eq!(child_roles(&runs[0]), ["user", "assistant", "tool", "assistant"]);
    assert_eq!(
        child_roles(&runs[1]),
        ["user", "assistant", "tool", "assistant", "user", "assistant"]
    );
    let child = request_messages(&server.request_bodies()[5]);
    assert_eq!(child[1]["content"], "list the folder");
    assert_eq!(child[5]["content"], "anything else?");
    server.assert_tool_call_pairing();
}
