//! llama.cpp's server started from the cache folder on a free loopback port, for as
//! long as the chat runs.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

use crate::local::install::LocalDir;
use reprise_chat::local_pins::ModelPins;

/// The launcher and the chat template (ChatML, which SmolLM2-Instruct was tuned on),
/// built in and written next to the weights.
const LAUNCHER: &str = include_str!("../../../../scripts/llama-server.py");
const CHAT_TEMPLATE: &str = include_str!("../../../../scripts/llama-chatml.jinja");

/// The context the server is started with, in tokens.
pub const CONTEXT_TOKENS: u32 = 8192;
/// The most tokens a reply may have: the model ends its turn by itself, and this
/// bounds the reply that loops (a 135M model does, now and then).
pub const REPLY_TOKENS: u32 = 256;

/// How long loading the model may take on a busy machine.
const START_TIMEOUT: Duration = Duration::from_secs(180);

/// A running server. Dropping it stops the process; if the chat dies without
/// dropping it, the server stops too, because its stdin (a pipe held here) closes.
#[derive(Debug)]
pub struct LocalServer {
    child: Child,
    _stdin: ChildStdin,
    base_url: String,
    log: PathBuf,
}

impl LocalServer {
    /// Starts the server of `dir` (installed) with `model` and waits until it
    /// listens.
    pub async fn start(dir: &LocalDir, model: &ModelPins) -> Result<LocalServer> {
        let launcher = dir.root().join("llama-server.py");
        let template = dir.root().join("llama-chatml.jinja");
        write_if_changed(&launcher, LAUNCHER)?;
        write_if_changed(&template, CHAT_TEMPLATE)?;
        let log = dir.root().join("server.log");
        let log_file = std::fs::File::create(&log)
            .with_context(|| format!("cannot create {}", log.display()))?;
        let mut child = Command::new(dir.python())
            .arg(&launcher)
            .args(["--port", "0"])
            .args(["--ctx-size", &CONTEXT_TOKENS.to_string()])
            .args(["--n-predict", &REPLY_TOKENS.to_string()])
            .args(["--alias", &model.name])
            .arg("--model")
            .arg(dir.weights(model))
            .arg("--chat-template")
            .arg(&template)
            .arg("--exit-on-stdin-eof")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log_file)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {}", dir.python().display()))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            bail!("llama.cpp's server has no pipes");
        };
        let mut lines = BufReader::new(stdout).lines();
        let listening = tokio::time::timeout(START_TIMEOUT, async {
            while let Some(line) = lines.next_line().await? {
                if let Some(address) = line.strip_prefix("listening ") {
                    return Ok(Some(address.trim().to_owned()));
                }
            }
            Ok::<_, std::io::Error>(None)
        })
        .await;
        let address = match listening {
            Ok(Ok(Some(address))) => address,
            Ok(Ok(None)) | Ok(Err(_)) => {
                return Err(anyhow!(
                    "llama.cpp's server exited before it listened; the end of its log ({}):\n{}",
                    log.display(),
                    log_tail(&log)
                ));
            }
            Err(_) => bail!(
                "llama.cpp's server did not listen within {} s; its log is {}",
                START_TIMEOUT.as_secs(),
                log.display()
            ),
        };
        Ok(LocalServer {
            child,
            _stdin: stdin,
            base_url: format!("{address}/v1"),
            log,
        })
    }

    /// The OpenAI-compatible endpoint (`http://127.0.0.1:PORT/v1`).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The server's log.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Stops the server and waits until it has exited.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// Writes `text` to `path` unless it already holds it (0600, like every file reprise
/// writes).
fn write_if_changed(path: &Path, text: &str) -> Result<()> {
    if std::fs::read_to_string(path).is_ok_and(|old| old == text) {
        return Ok(());
    }
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// The last lines of the server's log, shown as visible text.
fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(10)..].join("\n");
    crate::display::terminal::visible(&tail).into_owned()
}
