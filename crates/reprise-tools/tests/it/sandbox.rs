//! The Landlock sandbox of run_command on this machine's kernel (Landlock ABI 4 or
//! later is expected: the tests fail where the kernel has none).

use reprise_testkit::assert_contains;
use reprise_tools::{SandboxSupport, run_command_tool};

use crate::support::{Folders, call};

fn assert_landlock() {
    let support = SandboxSupport::detect();
    assert!(
        support.files && support.network,
        "this kernel lacks Landlock (ABI 4 or later): {support:?}"
    );
}

#[tokio::test]
async fn a_command_writes_inside_the_folder_and_the_temporary_folder_only() {
    assert_landlock();
    let folders = Folders::new();
    let run = run_command_tool(folders.workspace(), folders.settings());
    let tmp = folders.path("tmp").display().to_string();
    let command = format!(
        "mkdir -p src/new && echo in > src/new/a.txt && echo tmp > {tmp}/t.txt && echo null > /dev/null \
         && echo ok"
    );
    let output = call(&run, &serde_json(&command)).await;
    assert_eq!(output.content, "exit status 0\n--- stdout ---\nok");
    assert_eq!(
        std::fs::read_to_string(folders.path("work/src/new/a.txt")).unwrap(),
        "in\n"
    );
    assert_eq!(
        std::fs::read_to_string(folders.path("tmp/t.txt")).unwrap(),
        "tmp\n"
    );
    for command in [
        "echo tty > /dev/tty",
        "echo out > ../outside/x.txt",
        "touch ../outside/new",
        "rm -r ../tmp/../outside",
    ] {
        let output = call(&run, &serde_json(command)).await;
        assert_contains!(output.content, "Permission denied");
        assert!(
            !output.content.starts_with("exit status 0"),
            "{}",
            output.content
        );
    }
    assert!(folders.path("outside").exists());
    assert!(!folders.path("outside/x.txt").exists());
}

#[tokio::test]
async fn writable_adds_folders() {
    assert_landlock();
    let folders = Folders::new();
    let mut settings = folders.settings();
    settings.sandbox.writable.push(folders.path("outside"));
    let run = run_command_tool(folders.workspace(), settings);
    let output = call(&run, &serde_json("echo out > ../outside/x.txt && echo ok")).await;
    assert_eq!(output.content, "exit status 0\n--- stdout ---\nok");
    assert_eq!(
        std::fs::read_to_string(folders.path("outside/x.txt")).unwrap(),
        "out\n"
    );
}

#[tokio::test]
async fn the_runs_folder_inside_the_working_folder_stays_out_of_reach() {
    assert_landlock();
    let folders = Folders::new();
    std::fs::write(folders.path("work/.run/transcript.jsonl"), "{}\n").unwrap();
    std::fs::write(folders.path("work/notes.txt"), "old\n").unwrap();
    let run = run_command_tool(folders.workspace(), folders.settings());
    for command in [
        "echo x >> .run/transcript.jsonl",
        "rm .run/transcript.jsonl",
        "touch .run/new",
        "mv .run gone",
    ] {
        let output = call(&run, &serde_json(command)).await;
        assert_contains!(output.content, "Permission denied");
    }
    assert_eq!(
        std::fs::read_to_string(folders.path("work/.run/transcript.jsonl")).unwrap(),
        "{}\n"
    );
    let output = call(
        &run,
        &serde_json("echo new > notes.txt && echo y > src/b.txt && echo ok"),
    )
    .await;
    assert_eq!(output.content, "exit status 0\n--- stdout ---\nok");
    assert_eq!(
        std::fs::read_to_string(folders.path("work/notes.txt")).unwrap(),
        "new\n"
    );
    // Landlock cannot take the runs folder out of the working folder's tree: the
    // working folder's entries are allowed one by one, so new ones cannot be made.
    let output = call(&run, &serde_json("touch new.txt")).await;
    assert_contains!(output.content, "Permission denied");
    let elsewhere = reprise_tools::Workspace::new(folders.path("work")).protect("../runs");
    let run = run_command_tool(elsewhere, folders.settings());
    let output = call(
        &run,
        &serde_json("touch new.txt && rm notes.txt && echo ok"),
    )
    .await;
    assert_eq!(output.content, "exit status 0\n--- stdout ---\nok");
}

#[tokio::test]
async fn no_tcp_connection_unless_the_network_is_allowed() {
    assert_landlock();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!("bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' && echo connected");
    let folders = Folders::new();
    let run = run_command_tool(folders.workspace(), folders.settings());
    let output = call(&run, &serde_json(&connect)).await;
    assert_contains!(output.content, "Permission denied");
    assert!(!output.content.contains("connected"), "{}", output.content);
    let mut settings = folders.settings();
    settings.sandbox.network = true;
    let run = run_command_tool(folders.workspace(), settings);
    let output = call(&run, &serde_json(&connect)).await;
    assert_eq!(output.content, "exit status 0\n--- stdout ---\nconnected");
    listener.set_nonblocking(true).unwrap();
    assert!(
        listener.accept().is_ok(),
        "the connection reached the listener"
    );
}

/// `{"command": COMMAND}` as JSON.
fn serde_json(command: &str) -> String {
    let escaped: String = command
        .chars()
        .flat_map(|c| match c {
            '"' => vec!['\\', '"'],
            '\\' => vec!['\\', '\\'],
            c => vec![c],
        })
        .collect();
    format!(r#"{{"command":"{escaped}"}}"#)
}
