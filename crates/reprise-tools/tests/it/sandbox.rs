//! The Landlock sandbox of run_command on this machine's kernel (Landlock ABI 4 or
//! later is expected: the tests fail where the kernel has none).

use reprise_agent::Tool;
use reprise_testkit::assert_contains;
use reprise_tools::{Protection, SandboxSupport, run_command_tool};

use crate::support::{Folders, call, tree};

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

/// A runs folder inside the working folder with a transcript and a folder in it,
/// and a file at the top of the working folder.
fn with_a_run(folders: &Folders) {
    std::fs::create_dir(folders.path("work/.run/s1")).unwrap();
    std::fs::write(folders.path("work/.run/s1/transcript.jsonl"), "{}\n").unwrap();
    std::fs::write(folders.path("work/notes.txt"), "old\n").unwrap();
}

/// Runs each of `commands`, which must fail; the runs folder stays as it was.
async fn all_fail_and_leave_the_runs_folder(run: &impl Tool, folders: &Folders, commands: &[&str]) {
    let before = tree(&folders.path("work/.run"));
    assert!(!before.is_empty());
    for command in commands {
        let output = call(run, &serde_json(command)).await;
        assert!(
            !output.content.starts_with("exit status 0"),
            "{command}: {}",
            output.content
        );
    }
    assert_eq!(tree(&folders.path("work/.run")), before);
}

const TAMPERING: [&str; 6] = [
    "echo x > .run/f",
    "echo x >> .run/s1/transcript.jsonl",
    "rm .run/s1/transcript.jsonl",
    "rm -rf .run",
    "mv .run gone",
    "touch .run/new",
];

#[tokio::test]
async fn with_the_trampoline_the_working_folder_is_writable_whole_but_the_runs_folder() {
    assert_landlock();
    let folders = Folders::new();
    with_a_run(&folders);
    let settings = folders.settings();
    assert_eq!(
        Protection::detect(&folders.workspace(), &settings.sandbox),
        Protection::MountNamespace,
        "the trampoline cannot make namespaces on this machine"
    );
    let run = run_command_tool(folders.workspace(), settings);
    let output = call(
        &run,
        &serde_json(
            "touch new.txt && mkdir made && mv notes.txt made/moved.txt && rm new.txt \
             && echo y > top.txt && echo ok",
        ),
    )
    .await;
    assert_eq!(output.content, "exit status 0\n--- stdout ---\nok");
    assert!(!folders.path("work/new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(folders.path("work/made/moved.txt")).unwrap(),
        "old\n"
    );
    assert_eq!(
        std::fs::read_to_string(folders.path("work/top.txt")).unwrap(),
        "y\n"
    );
    all_fail_and_leave_the_runs_folder(&run, &folders, &TAMPERING).await;
    let output = call(&run, &serde_json("echo x > .run/f")).await;
    assert_contains!(output.content, "Read-only file system");
    // Landlock does not confine metadata; the read-only mount does.
    let output = call(&run, &serde_json("chmod 000 .run/s1")).await;
    assert_contains!(output.content, "Read-only file system");
    // The mounts are the command's own: the chat still writes the runs folder.
    std::fs::write(folders.path("work/.run/after"), "x").unwrap();
}

#[tokio::test]
async fn in_the_namespace_a_command_is_the_same_user_and_cannot_get_around_the_mount() {
    assert_landlock();
    let folders = Folders::new();
    with_a_run(&folders);
    let runs = folders.path("work/.run").canonicalize().unwrap();
    let run = run_command_tool(folders.workspace(), folders.settings());
    let output = call(&run, &serde_json("id -u; id -g")).await;
    let ids = format!(
        "exit status 0\n--- stdout ---\n{}\n{}",
        rustix::process::getuid().as_raw(),
        rustix::process::getgid().as_raw()
    );
    assert_eq!(output.content, ids);
    all_fail_and_leave_the_runs_folder(
        &run,
        &folders,
        &[
            "umount .run && echo x > .run/f",
            "umount -l .run && echo x > .run/f",
            "mount -o remount,rw .run && echo x > .run/f",
            "mount --bind src .run && echo x > .run/f",
            // The runs folder as the caller sees it, through its /proc entries.
            &format!("echo x > /proc/$PPID/root{}/f", runs.display()),
            "cd /proc/$PPID/cwd && echo x > f",
        ],
    )
    .await;
}

#[tokio::test]
async fn a_runs_folder_deeper_down_cannot_be_moved_away() {
    assert_landlock();
    let folders = Folders::new();
    std::fs::create_dir_all(folders.path("work/state/runs/s1")).unwrap();
    std::fs::write(folders.path("work/state/runs/s1/t.jsonl"), "{}\n").unwrap();
    let workspace = reprise_tools::Workspace::new(folders.path("work")).protect("state/runs");
    let run = run_command_tool(workspace, folders.settings());
    let before = tree(&folders.path("work/state"));
    for command in ["mv state elsewhere", "rm -rf state", "mv state/runs x"] {
        let output = call(&run, &serde_json(command)).await;
        assert!(
            !output.content.starts_with("exit status 0"),
            "{command}: {}",
            output.content
        );
    }
    assert_eq!(tree(&folders.path("work/state")), before);
    let output = call(
        &run,
        &serde_json("touch state/x new.txt && rm state/x && echo ok"),
    )
    .await;
    assert_eq!(output.content, "exit status 0\n--- stdout ---\nok");
}

#[tokio::test]
async fn a_temporary_folder_holding_the_working_folder_leaves_the_runs_folder_read_only() {
    assert_landlock();
    let folders = Folders::new();
    with_a_run(&folders);
    let mut settings = folders.settings();
    // The working folder lies on the way from the temporary folder to the runs
    // folder, so it is mounted over itself, under the command's feet.
    settings.sandbox.temp_dir = Some(folders.base.path().to_path_buf());
    let run = run_command_tool(folders.workspace(), settings);
    all_fail_and_leave_the_runs_folder(&run, &folders, &TAMPERING).await;
    let output = call(
        &run,
        &serde_json("touch new.txt && echo x > ../outside/x && echo ok"),
    )
    .await;
    assert_eq!(output.content, "exit status 0\n--- stdout ---\nok");
}

#[tokio::test]
async fn a_protected_folder_not_there_yet_cannot_be_made() {
    assert_landlock();
    let folders = Folders::new();
    let workspace = reprise_tools::Workspace::new(folders.path("work")).protect(".later");
    let run = run_command_tool(workspace, folders.settings());
    let output = call(&run, &serde_json("mkdir .later")).await;
    assert_contains!(output.content, "Permission denied");
    assert!(!folders.path("work/.later").exists());
}

#[tokio::test]
async fn without_a_trampoline_the_working_folder_is_allowed_entry_by_entry() {
    assert_landlock();
    let folders = Folders::new();
    with_a_run(&folders);
    let mut not_one = folders.settings();
    not_one.sandbox.trampoline = Some("/bin/true".into());
    for settings in [folders.settings_without_trampoline(), not_one] {
        assert_eq!(
            Protection::detect(&folders.workspace(), &settings.sandbox),
            Protection::EntryByEntry
        );
        let run = run_command_tool(folders.workspace(), settings);
        all_fail_and_leave_the_runs_folder(&run, &folders, &TAMPERING).await;
        let output = call(&run, &serde_json("echo x > .run/f")).await;
        assert_contains!(output.content, "Permission denied");
        let output = call(
            &run,
            &serde_json("echo new > notes.txt && echo y > src/b.txt && echo ok"),
        )
        .await;
        assert_eq!(output.content, "exit status 0\n--- stdout ---\nok");
        // Landlock cannot take the runs folder out of the working folder's tree: the
        // working folder's entries are allowed one by one, so new ones cannot be made.
        let output = call(&run, &serde_json("touch new.txt")).await;
        assert_contains!(output.content, "Permission denied");
    }
}

#[tokio::test]
async fn a_runs_folder_outside_the_working_folder_needs_no_namespace() {
    assert_landlock();
    let folders = Folders::new();
    std::fs::write(folders.path("work/notes.txt"), "old\n").unwrap();
    let elsewhere = reprise_tools::Workspace::new(folders.path("work")).protect("../outside");
    for settings in [folders.settings(), folders.settings_without_trampoline()] {
        assert_eq!(
            Protection::detect(&elsewhere, &settings.sandbox),
            Protection::Unneeded
        );
    }
    let run = run_command_tool(elsewhere, folders.settings_without_trampoline());
    let output = call(
        &run,
        &serde_json("touch new.txt && rm notes.txt && echo ok"),
    )
    .await;
    assert_eq!(output.content, "exit status 0\n--- stdout ---\nok");
    let output = call(&run, &serde_json("touch ../outside/x")).await;
    assert_contains!(output.content, "Permission denied");
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

#[test]
fn a_trampoline_that_cannot_set_the_sandbox_up_does_not_run_the_command() {
    use std::os::unix::process::CommandExt;
    let folders = Folders::new();
    let trampoline = || {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_reprise-sandbox"));
        command.arg0("reprise-sandbox-trampoline");
        command
    };
    let missing = folders.path("work/missing");
    let write = folders.path("work");
    let output = trampoline()
        .arg("--read-only")
        .arg(&missing)
        .arg("--write")
        .arg(&write)
        .args(["--", "echo ran"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(125));
    assert!(output.stdout.is_empty());
    assert_contains!(
        String::from_utf8_lossy(&output.stderr),
        "reprise sandbox: cannot mount"
    );
    let output = trampoline().args(["--shell", "bash"]).output().unwrap();
    assert_eq!(output.status.code(), Some(125));
    assert_contains!(
        String::from_utf8_lossy(&output.stderr),
        "not started by run_command: unknown argument --shell"
    );
    let alone = std::process::Command::new(env!("CARGO_BIN_EXE_reprise-sandbox"))
        .args(["--", "echo ran"])
        .output()
        .unwrap();
    assert_eq!(alone.status.code(), Some(2));
    assert!(alone.stdout.is_empty());
}
