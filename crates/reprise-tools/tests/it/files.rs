//! The file tools: what they read and write, and the paths they refuse.

use std::os::unix::fs::PermissionsExt;

use reprise_agent::{Tool, ToolEffects};
use reprise_testkit::assert_contains;
use reprise_tools::{
    BUILTIN_TOOL_NAMES, builtin_tools, edit_file_tool, read_file_tool, write_file_tool,
};

use crate::support::{Folders, call};

#[test]
fn only_the_reading_tools_are_read_only() {
    let folders = Folders::new();
    let tools = builtin_tools(folders.workspace(), folders.settings());
    let names: Vec<String> = tools.iter().map(|tool| tool.spec().name).collect();
    assert_eq!(names, BUILTIN_TOOL_NAMES);
    for tool in &tools {
        let expected = match tool.spec().name.as_str() {
            "read_file" | "list_dir" => ToolEffects::ReadOnly,
            _ => ToolEffects::Changes,
        };
        assert_eq!(tool.effects(), expected, "{}", tool.spec().name);
    }
}

#[tokio::test]
async fn every_file_tool_names_a_missing_path_as_it_was_given() {
    let folders = Folders::new();
    let tools = builtin_tools(folders.workspace(), folders.settings());
    let arguments = r#"{"path":"gone/here","old":"a","new":"b"}"#;
    for tool in tools.iter().filter(|tool| tool.spec().name != "write_file") {
        if tool.spec().name == "run_command" {
            continue;
        }
        let output = call(tool.as_ref(), arguments).await;
        assert!(output.is_error, "{}", output.content);
        let (_, shown) = output.content.split_once(" failed: ").unwrap();
        assert!(shown.starts_with("gone/here: "), "{}", output.content);
        assert!(
            !output
                .content
                .contains(&folders.path("work").display().to_string())
        );
    }
}

#[tokio::test]
async fn write_file_creates_folders_replaces_atomically_and_keeps_the_mode() {
    let folders = Folders::new();
    let write = write_file_tool(folders.workspace());
    let output = call(&write, r#"{"path":"src/deep/new.txt","content":"one\n"}"#).await;
    assert_eq!(output.content, "created src/deep/new.txt (4 bytes)");
    let file = folders.path("work/src/deep/new.txt");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "one\n");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o750)).unwrap();
    let output = call(&write, r#"{"path":"./src/deep/new.txt","content":"two"}"#).await;
    assert_eq!(output.content, "wrote ./src/deep/new.txt (3 bytes)");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "two");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o750);
    let names: Vec<_> = std::fs::read_dir(folders.path("work/src/deep"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert_eq!(names, ["new.txt"], "no temporary file is left");
    let output = call(&write, r#"{"path":"src","content":"x"}"#).await;
    assert!(output.is_error);
    assert_contains!(output.content, "src: not a regular file but a folder");
}

#[tokio::test]
async fn edit_file_replaces_text_that_occurs_exactly_once() {
    let folders = Folders::new();
    let file = folders.path("work/notes.txt");
    std::fs::write(&file, "buy milk\nbuy bread\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let edit = edit_file_tool(folders.workspace());
    let output = call(&edit, r#"{"path":"notes.txt","old":"buy","new":"get"}"#).await;
    assert!(output.is_error);
    assert_contains!(
        output.content,
        "notes.txt: the text to replace (old) occurs 2 times"
    );
    let output = call(&edit, r#"{"path":"notes.txt","old":"cheese","new":"x"}"#).await;
    assert!(output.is_error);
    assert_contains!(output.content, "does not occur");
    let output = call(&edit, r#"{"path":"notes.txt","old":"","new":"x"}"#).await;
    assert_contains!(output.content, "is empty");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "buy milk\nbuy bread\n"
    );
    let output = call(
        &edit,
        r#"{"path":"notes.txt","old":"buy bread","new":"get bread"}"#,
    )
    .await;
    assert!(!output.is_error, "{}", output.content);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "buy milk\nget bread\n"
    );
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o640);
}

#[tokio::test]
async fn paths_out_of_the_folder_are_refused_without_naming_the_machine() {
    let folders = Folders::new();
    let secret = folders.path("outside/secret.txt");
    std::fs::write(&secret, "secret").unwrap();
    std::os::unix::fs::symlink(folders.path("outside"), folders.path("work/out")).unwrap();
    std::os::unix::fs::symlink("../outside/secret.txt", folders.path("work/up")).unwrap();
    std::fs::write(folders.path("work/inside.txt"), "inside").unwrap();
    std::os::unix::fs::symlink("inside.txt", folders.path("work/alias")).unwrap();
    let read: &dyn Tool = &read_file_tool(folders.workspace());
    let write: &dyn Tool = &write_file_tool(folders.workspace());
    let cases = [
        (
            read,
            r#"{"path":"../outside/secret.txt"}"#,
            "../outside/secret.txt: paths may not go up with ..",
        ),
        (
            read,
            r#"{"path":"/etc/hostname"}"#,
            "/etc/hostname: give a path relative to the working folder",
        ),
        (
            read,
            r#"{"path":"out/secret.txt"}"#,
            "out/secret.txt: the path leads out of the working folder",
        ),
        (
            read,
            r#"{"path":"up"}"#,
            "up: the path leads out of the working folder",
        ),
        (
            write,
            r#"{"path":"out/secret.txt","content":"x"}"#,
            "out/secret.txt: the path leads out",
        ),
        (
            write,
            r#"{"path":"out/new/x.txt","content":"x"}"#,
            "out/new/x.txt: the path leads out",
        ),
    ];
    for (tool, arguments, words) in cases {
        let output = call(tool, arguments).await;
        assert!(output.is_error, "{arguments}: {}", output.content);
        assert_contains!(output.content, words);
        assert!(
            !output
                .content
                .contains(&folders.base.path().display().to_string())
        );
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "secret");
    assert!(!folders.path("outside/new").exists());
    // A link that stays inside is followed; writing replaces the link itself.
    assert_eq!(call(read, r#"{"path":"alias"}"#).await.content, "inside");
    let output = call(write, r#"{"path":"up","content":"mine"}"#).await;
    assert!(!output.is_error, "{}", output.content);
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "secret");
    assert_eq!(
        std::fs::read_to_string(folders.path("work/up")).unwrap(),
        "mine"
    );
}

#[tokio::test]
async fn the_runs_folder_is_neither_read_nor_written() {
    let folders = Folders::new();
    std::fs::write(folders.path("work/.run/transcript.jsonl"), "{}\n").unwrap();
    std::os::unix::fs::symlink(".run", folders.path("work/runs")).unwrap();
    let tools = builtin_tools(folders.workspace(), folders.settings());
    let by_name = |name: &str| tools.iter().find(|t| t.spec().name == name).unwrap();
    let cases = [
        ("read_file", r#"{"path":".run/transcript.jsonl"}"#),
        ("read_file", r#"{"path":"runs/transcript.jsonl"}"#),
        ("list_dir", r#"{"path":".run"}"#),
        ("list_dir", r#"{"path":"runs"}"#),
        (
            "write_file",
            r#"{"path":".run/transcript.jsonl","content":"x"}"#,
        ),
        (
            "write_file",
            r#"{"path":"runs/transcript.jsonl","content":"x"}"#,
        ),
        ("write_file", r#"{"path":"runs/new.txt","content":"x"}"#),
        (
            "edit_file",
            r#"{"path":"runs/transcript.jsonl","old":"{}","new":"x"}"#,
        ),
    ];
    for (name, arguments) in cases {
        let output = call(by_name(name).as_ref(), arguments).await;
        assert!(output.is_error, "{name} {arguments}: {}", output.content);
        assert_contains!(output.content, "lies in the runs folder");
    }
    assert_eq!(
        std::fs::read_to_string(folders.path("work/.run/transcript.jsonl")).unwrap(),
        "{}\n"
    );
    assert!(!folders.path("work/.run/new.txt").exists());
    let output = call(
        by_name("write_file").as_ref(),
        r#"{"path":"runs/made/new.txt","content":"x"}"#,
    )
    .await;
    assert_contains!(output.content, "lies in the runs folder");
    assert!(
        !folders.path("work/.run/made").exists(),
        "no folder made there"
    );
    let listing = call(by_name("list_dir").as_ref(), "{}").await;
    assert_eq!(listing.content, ".run/\nruns\nsrc/");
}

#[tokio::test]
async fn a_fifo_is_refused_not_waited_on() {
    let folders = Folders::new();
    let fifo = folders.path("work/pipe");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap();
    let read = read_file_tool(folders.workspace());
    let output = tokio::time::timeout(reprise_testkit::A_MINUTE, call(&read, r#"{"path":"pipe"}"#))
        .await
        .unwrap();
    assert_contains!(output.content, "pipe: not a regular file but a FIFO");
}
