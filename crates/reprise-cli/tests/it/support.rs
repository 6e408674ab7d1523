//! Running the real `reprise` binary in tests.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use reprise_testkit::pty::{CommandBuilder, CursorAnswers, Pty};
use serde_json::Value;
use tokio::io::AsyncWriteExt;

/// What a finished run of the binary printed.
pub struct Output {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

/// A working directory with a runs folder, and no config or history from the machine.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("xdg")).unwrap();
        Sandbox { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn runs_dir(&self) -> PathBuf {
        self.dir.path().join(".run")
    }

    /// The run folders, oldest first.
    pub fn runs(&self) -> Vec<PathBuf> {
        let mut runs: Vec<PathBuf> = std::fs::read_dir(self.runs_dir())
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok())
                    .map(|e| e.path())
                    .filter(|p| p.is_dir())
                    .collect()
            })
            .unwrap_or_default();
        runs.sort();
        runs
    }

    /// The run folders that hold a conversation, oldest first.
    pub fn conversations(&self) -> Vec<PathBuf> {
        self.runs()
            .into_iter()
            .filter(|p| p.join("session.json").exists())
            .collect()
    }

    pub fn command(&self, args: &[&str]) -> tokio::process::Command {
        self.command_through(&[], args)
    }

    /// The binary run by `wrapper` (a program and its arguments, the binary's path and
    /// `args` appended), with the same environment as [`Sandbox::command`].
    pub fn command_through(&self, wrapper: &[&str], args: &[&str]) -> tokio::process::Command {
        self.command_of(Path::new(env!("CARGO_BIN_EXE_reprise")), wrapper, args)
    }

    /// [`Sandbox::command_through`] with the binary at `binary` (a copy elsewhere).
    pub fn command_of(
        &self,
        binary: &Path,
        wrapper: &[&str],
        args: &[&str],
    ) -> tokio::process::Command {
        let mut command = match wrapper.split_first() {
            Some((program, wrapper_args)) => {
                let mut command = tokio::process::Command::new(program);
                command.args(wrapper_args).arg(binary);
                command
            }
            None => tokio::process::Command::new(binary),
        };
        // Telemetry of the person running the tests is not the tests' to send.
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("OTEL_") {
                command.env_remove(name);
            }
        }
        command
            .args(args)
            .current_dir(self.path())
            .env("XDG_CONFIG_HOME", self.path().join("xdg"))
            .env("TZ", "UTC")
            .env_remove("REPRISE_BASE_URL")
            .env_remove("REPRISE_MODEL")
            .env_remove("REPRISE_RUNS_DIR")
            .env_remove("REPRISE_CONFIG")
            .env_remove("REPRISE_DATABASE_URL")
            .env_remove("OPENAI_API_KEY")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }

    /// The binary in an 80×24 pseudo-terminal, with the same environment as
    /// [`Sandbox::command`] and `TERM=xterm-256color`.
    pub fn pty(&self, args: &[&str]) -> Pty {
        self.pty_with_env(args, &[])
    }

    /// [`Sandbox::pty`] with the variables `env` set too.
    pub fn pty_with_env(&self, args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Pty {
        self.pty_answering(args, env, CursorAnswers::AtOnce)
    }

    /// [`Sandbox::pty_with_env`] in a terminal answering cursor-position queries as
    /// `answers` says.
    pub fn pty_answering(
        &self,
        args: &[&str],
        env: &[(&str, &std::ffi::OsStr)],
        answers: CursorAnswers,
    ) -> Pty {
        let mut command = CommandBuilder::new(env!("CARGO_BIN_EXE_reprise"));
        command.args(args);
        command.cwd(self.path());
        command.env("TERM", "xterm-256color");
        command.env("TZ", "UTC");
        command.env("XDG_CONFIG_HOME", self.path().join("xdg"));
        for name in [
            "REPRISE_BASE_URL",
            "REPRISE_MODEL",
            "REPRISE_RUNS_DIR",
            "REPRISE_CONFIG",
            "REPRISE_DATABASE_URL",
            "OPENAI_API_KEY",
        ] {
            command.env_remove(name);
        }
        for (name, value) in env {
            command.env(name, value);
        }
        Pty::spawn_answering(command, answers)
    }

    /// Runs the binary with `args`, feeding `input` on stdin (then closing it).
    pub async fn run(&self, args: &[&str], input: &str) -> Output {
        self.run_through(&[], args, input).await
    }

    /// [`Sandbox::run`] with the binary run by `wrapper` (see [`Sandbox::command_through`]).
    pub async fn run_through(&self, wrapper: &[&str], args: &[&str], input: &str) -> Output {
        run_command(self.command_through(wrapper, args), input).await
    }

    /// A chat in plain mode against `base_url`.
    pub async fn chat(&self, base_url: &str, extra: &[&str], input: &str) -> Output {
        let mut args = vec!["--plain", "--base-url", base_url, "--model", "test-model"];
        args.extend_from_slice(extra);
        self.run(&args, input).await
    }
}

/// Runs `command`, feeding `input` on stdin (then closing it).
pub async fn run_command(mut command: tokio::process::Command, input: &str) -> Output {
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).await.unwrap();
    drop(stdin);
    let output = child.wait_with_output().await.unwrap();
    Output {
        status: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

pub use reprise_testkit::request_messages as messages;

/// `(role, text)` of each message of a request body.
pub fn roles_and_texts(body: &Value) -> Vec<(String, String)> {
    messages(body)
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// The run that `reprise fork` told the person to resume (`… reprise --resume ID)`).
pub fn resume_id(stdout: &str) -> String {
    stdout
        .split("reprise --resume ")
        .nth(1)
        .unwrap_or_else(|| panic!("no `reprise --resume` in {stdout}"))
        .trim_end()
        .trim_end_matches(')')
        .to_owned()
}

/// The `uuid` of the entry of `run`'s conversation whose first tool call is `call_id`.
pub fn uuid_of_call(run: &Path, call_id: &str) -> String {
    jsonl(&run.join("conversation.jsonl"))
        .into_iter()
        .find(|entry| entry["message"]["tool_calls"][0]["id"] == call_id)
        .and_then(|entry| entry["uuid"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no entry calls {call_id} in {}", run.display()))
}

/// The lines of a JSONL file, parsed.
pub fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The arguments of a chat in plain mode against the scripted server at `base_url`,
/// every call allowed (`--yes`).
pub fn plain_yes(base_url: &str) -> [&str; 6] {
    [
        "--plain",
        "--base-url",
        base_url,
        "--model",
        "test-model",
        "--yes",
    ]
}
