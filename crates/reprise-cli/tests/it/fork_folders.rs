//! Where a fork's files may go: never inside the runs folder; inside the source's
//! working folder only with that said.

use crate::support::Sandbox;
use reprise_testkit::{Reply, ScriptedServer, assert_contains};

#[tokio::test]
async fn a_fork_folder_in_the_runs_folder_is_refused_and_one_in_the_working_folder_is_said() {
    let sandbox = Sandbox::new();
    let dir = sandbox.path();
    std::fs::create_dir(dir.join("src")).unwrap();
    let server = ScriptedServer::start().await;
    server.push_all([
        Reply::tool_call(
            "call_1",
            "write_file",
            r#"{"path":"src/a.txt","content":"one\n"}"#,
        ),
        Reply::text("ok"),
    ]);
    let out = sandbox
        .chat(&server.base_url(), &["--yes"], "write\n")
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    let runs_before = sandbox.runs();

    let evil = dir.join(".run/evil");
    for target in [evil.clone(), dir.join(".run/./x/../evil2")] {
        let out = sandbox
            .run(
                &[
                    "fork",
                    "last",
                    "--at",
                    "1",
                    "--workdir",
                    target.to_str().unwrap(),
                ],
                "",
            )
            .await;
        assert_ne!(out.status, 0, "{}", out.stdout);
        assert_contains!(out.stderr, "inside the runs folder");
    }
    assert!(!evil.exists());
    assert_eq!(sandbox.runs(), runs_before, "no run folder is made");

    let inside = dir.join("src/forked");
    let out = sandbox
        .run(
            &[
                "fork",
                "last",
                "--at",
                "1",
                "--workdir",
                inside.to_str().unwrap(),
            ],
            "",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stderr, "is inside the working folder of run");
    assert_contains!(out.stderr, "a rewind of it changes or deletes them");
    assert!(inside.is_dir());
}
