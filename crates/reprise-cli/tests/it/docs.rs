//! What the README, the guides and the local model script say about the chat is
//! what the chat does.

use clap::{CommandFactory, Parser};
use reprise_cli::cli::Cli;
use reprise_testkit::{assert_contains, workspace_root};

use crate::support::Sandbox;

fn read(path: &str) -> String {
    std::fs::read_to_string(workspace_root().join(path)).unwrap()
}

#[test]
fn the_config_guide_names_every_run_command() {
    let guide = read("docs/config.md");
    let usage = guide
        .lines()
        .find(|line| line.starts_with("reprise [OPTIONS] <"))
        .expect("the usage line of docs/config.md");
    for command in Cli::command().get_subcommands() {
        let name = command.get_name();
        if name == "help" {
            continue;
        }
        assert!(
            usage.contains(&format!(" {name} ")) || usage.contains(&format!("<{name} ")),
            "docs/config.md's usage line lacks {name}: {usage}"
        );
        assert!(
            guide.contains(&format!("| `reprise {name}")),
            "docs/config.md's table lacks reprise {name}"
        );
    }
}

#[test]
fn the_readme_names_the_default_model_and_links_the_local_model_guide() {
    let readme = read("README.md");
    assert_contains!(
        readme,
        &format!("`{}`", reprise_chat::config::DEFAULT_MODEL)
    );
    assert_contains!(readme, "(docs/local-model.md)");
    assert_contains!(readme, "--idle-timeout");
}

/// The reprise command line `scripts/local-model.sh --print-command ARGS` prints,
/// parsed as the binary parses it.
fn printed_command(args: &[&str]) -> (String, Cli) {
    let out = std::process::Command::new("bash")
        .arg(workspace_root().join("scripts/local-model.sh"))
        .arg("--print-command")
        .args(args)
        .env("LOCAL_MODEL_MAX_TOKENS", "256")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let line = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let (_, flags) = line
        .split_once("cargo run --release -p reprise-cli -- ")
        .expect(&line);
    let cli = Cli::try_parse_from(std::iter::once("reprise").chain(flags.split(' '))).unwrap();
    (line, cli)
}

#[test]
fn the_local_model_script_prints_a_command_line_that_fits_its_server() {
    let (default, cli) = printed_command(&[]);
    assert_eq!(cli.chat.max_tokens, Some(256), "the server's reply cap");
    assert_eq!(cli.chat.context_window, Some(8192), "the server's context");
    assert_eq!(
        cli.chat.base_url.as_deref(),
        Some("http://127.0.0.1:8080/v1")
    );
    assert!(cli.chat.idle_timeout.unwrap().as_secs() > 30);
    // The guide shows that very line.
    assert_contains!(read("docs/local-model.md"), &default);

    let (_, cli) = printed_command(&["9000", "1024"]);
    assert_eq!(cli.chat.context_window, Some(1024));
    assert_eq!(
        cli.chat.base_url.as_deref(),
        Some("http://127.0.0.1:9000/v1")
    );
}

#[tokio::test]
async fn show_help_says_a_title_finds_a_run() {
    let out = Sandbox::new().run(&["show", "--help"], "").await;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_contains!(out.stdout, "title");
}
