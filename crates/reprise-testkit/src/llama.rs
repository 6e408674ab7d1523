//! A real model server for tests: llama.cpp's own HTTP server running Gemma 3 270M
//! (the wire format, tool calls included) or the model of `reprise --local`
//! ([`LlamaModel::local`]).
//!
//! `scripts/install-test-deps.sh` puts them in a cache shared by every clone (see
//! [`deps_dir`]); `scripts/llama-server.py` starts the server with settings that make
//! replies repeatable (temperature 0, a fixed seed, 2 threads). Gemma's chat
//! template is one under which the model writes tool calls that the server parses
//! into `tool_calls`.
//!
//! When the cache is missing, starting fails with a message that says to run the
//! install script: a test that needs the server fails rather than being skipped.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

/// The model name the server reports and accepts for Gemma 3 270M.
pub const MODEL: &str = "gemma3-270m";

/// A model the server can run: its GGUF file in the cache, its chat template in
/// `scripts/`, and the name it is served as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LlamaModel {
    /// The GGUF file's name in `deps_dir()/llama`.
    pub file: String,
    /// The chat template's file name in `scripts/`.
    pub chat_template: String,
    /// The name the server reports and accepts.
    pub alias: String,
}

impl LlamaModel {
    /// Gemma 3 270M, a base model, under a template that makes it write tool calls.
    pub fn gemma() -> LlamaModel {
        LlamaModel {
            file: "gemma3-270m-q4_k_m.gguf".to_owned(),
            chat_template: "llama-chat-template.jinja".to_owned(),
            alias: MODEL.to_owned(),
        }
    }

    /// The model of `reprise --local`, as `scripts/llama-pins.env` names it, under
    /// the ChatML template.
    ///
    /// # Panics
    /// When the pins file cannot be read or lacks the model's keys.
    pub fn local() -> LlamaModel {
        let pins = std::fs::read_to_string(scripts_dir().join("llama-pins.env"))
            .unwrap_or_else(|error| panic!("cannot read scripts/llama-pins.env: {error}"));
        let pin = |key: &str| {
            pins.lines()
                .filter_map(|line| line.trim().split_once('='))
                .find(|(name, _)| name.trim() == key)
                .map(|(_, value)| value.trim().trim_matches('"').to_owned())
                .unwrap_or_else(|| panic!("scripts/llama-pins.env has no {key}"))
        };
        LlamaModel {
            file: pin("LOCAL_MODEL_FILE"),
            chat_template: "llama-chatml.jinja".to_owned(),
            alias: pin("LOCAL_MODEL_NAME"),
        }
    }

    /// Where the install script puts the file.
    pub fn path(&self) -> PathBuf {
        deps_dir().join("llama").join(&self.file)
    }
}

/// The context size of the [`LlamaServer::shared`] instance.
pub const SHARED_CTX_SIZE: u32 = 4096;

/// The most tokens a reply of the [`LlamaServer::shared`] instance may have, whatever
/// the request asks. A base model never ends its turn by itself, so this bounds every
/// request of a client that sends no `max_tokens`. 32 holds one whole tool call (about
/// 25 tokens) and too little of a second one for the server to send it; 48 would cut
/// a second call in the middle of its arguments.
pub const SHARED_MAX_REPLY_TOKENS: u32 = 32;

/// How many lines of the server's log [`LlamaServer::diagnosis`] shows.
const LOG_TAIL_LINES: usize = 12;

/// How long loading may take. Generous: the machine running the tests may be busy.
const START_TIMEOUT: Duration = Duration::from_secs(180);

/// Why the server could not be started.
#[derive(Debug, thiserror::Error)]
pub enum LlamaError {
    /// The virtualenv or the weights are not in the cache.
    #[error(
        "llama.cpp's server for the tests is not installed: {missing} does not exist; \
         run scripts/install-test-deps.sh (or set REPRISE_TEST_DEPS to where it installed)"
    )]
    NotInstalled {
        /// The first file that is missing.
        missing: PathBuf,
    },
    /// The launcher could not be spawned.
    #[error("could not start {python}: {source}")]
    Spawn {
        /// The Python interpreter of the virtualenv.
        python: PathBuf,
        /// What spawning reported.
        #[source]
        source: std::io::Error,
    },
    /// The launcher ended before it said where it listens.
    #[error("llama.cpp's server exited before it was ready; its log is {}", log.display())]
    Exited {
        /// The server's log file.
        log: PathBuf,
    },
    /// The launcher did not say where it listens in time.
    #[error("llama.cpp's server was not ready after {timeout:?}; its log is {}", log.display())]
    Timeout {
        /// How long it was given.
        timeout: Duration,
        /// The server's log file.
        log: PathBuf,
    },
    /// The server said it listens but `/health` did not answer 200.
    #[error("llama.cpp's server at {address} is not healthy: {detail}")]
    Unhealthy {
        /// `host:port`.
        address: String,
        /// What the health check saw.
        detail: String,
    },
    /// The log file could not be created.
    #[error("could not create the server log {}: {source}", log.display())]
    Log {
        /// The log file.
        log: PathBuf,
        /// What creating it reported.
        #[source]
        source: std::io::Error,
    },
}

/// Where `scripts/install-test-deps.sh` installs: `$REPRISE_TEST_DEPS`, else
/// `$XDG_CACHE_HOME/reprise/test-deps`, else `~/.cache/reprise/test-deps`.
pub fn deps_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("REPRISE_TEST_DEPS").filter(|dir| !dir.is_empty()) {
        return PathBuf::from(dir);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache")
        });
    cache.join("reprise").join("test-deps")
}

/// The repository's `scripts/` folder.
fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts")
}

/// A running llama.cpp server on `127.0.0.1`. Dropping it stops the process; the
/// server also stops when the test process ends without dropping it (its stdin is a
/// pipe held here, and the launcher exits when that pipe closes).
#[derive(Debug)]
pub struct LlamaServer {
    // Behind a lock so that a shared server can still be asked whether it has exited.
    child: Mutex<Child>,
    // Held only so that the pipe closes when this value goes away.
    _stdin: ChildStdin,
    address: String,
    alias: String,
    log: PathBuf,
}

impl LlamaServer {
    /// Starts a server of its own with a context of `ctx_size` tokens and waits until
    /// it answers `/health`. Replies are as long as requests allow.
    pub fn start(ctx_size: u32) -> Result<LlamaServer, LlamaError> {
        Self::launch(&deps_dir(), &LlamaModel::gemma(), ctx_size, None)
    }

    /// A server of its own running `model`, with a context of `ctx_size` tokens and
    /// replies cut at `max_reply_tokens` (none: as long as requests allow).
    pub fn start_model(
        model: &LlamaModel,
        ctx_size: u32,
        max_reply_tokens: Option<u32>,
    ) -> Result<LlamaServer, LlamaError> {
        Self::launch(&deps_dir(), model, ctx_size, max_reply_tokens)
    }

    /// [`LlamaServer::start`] with replies cut at `max_reply_tokens` tokens by the
    /// server (`finish_reason: "length"`), whatever the request asks: a small cap cuts
    /// tool calls in the middle of their arguments (13 tokens leave `{`).
    pub fn start_with_reply_cap(
        ctx_size: u32,
        max_reply_tokens: u32,
    ) -> Result<LlamaServer, LlamaError> {
        Self::launch(
            &deps_dir(),
            &LlamaModel::gemma(),
            ctx_size,
            Some(max_reply_tokens),
        )
    }

    fn launch(
        deps: &Path,
        model: &LlamaModel,
        ctx_size: u32,
        max_reply_tokens: Option<u32>,
    ) -> Result<LlamaServer, LlamaError> {
        let llama = deps.join("llama");
        let python = llama.join("venv/bin/python");
        let alias = model.alias.clone();
        let template = scripts_dir().join(&model.chat_template);
        let model = llama.join(&model.file);
        for needed in [&python, &model] {
            if !needed.exists() {
                return Err(LlamaError::NotInstalled {
                    missing: needed.clone(),
                });
            }
        }
        // Each server of the process gets a log of its own.
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let log = std::env::temp_dir().join(format!(
            "reprise-llama-server-{}-{}.log",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::Relaxed)
        ));
        let log_file = std::fs::File::create(&log).map_err(|source| LlamaError::Log {
            log: log.clone(),
            source,
        })?;
        let mut child = Command::new(&python)
            .arg(scripts_dir().join("llama-server.py"))
            .args(["--port", "0", "--ctx-size", &ctx_size.to_string()])
            .arg("--model")
            .arg(&model)
            .arg("--chat-template")
            .arg(&template)
            .args(["--alias", &alias])
            .arg("--exit-on-stdin-eof")
            .args([
                "--n-predict",
                &max_reply_tokens.map_or(-1, i64::from).to_string(),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log_file)
            .spawn()
            .map_err(|source| LlamaError::Spawn {
                python: python.clone(),
                source,
            })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            stop(&mut child);
            return Err(LlamaError::Exited { log });
        };
        let ready = wait_for_address(stdout, START_TIMEOUT);
        let address = match ready {
            Ok(address) => address,
            Err(timed_out) => {
                stop(&mut child);
                return Err(if timed_out {
                    LlamaError::Timeout {
                        timeout: START_TIMEOUT,
                        log,
                    }
                } else {
                    LlamaError::Exited { log }
                });
            }
        };
        let server = LlamaServer {
            child: Mutex::new(child),
            _stdin: stdin,
            address,
            alias,
            log,
        };
        server.check_health()?;
        Ok(server)
    }

    /// One server per test process, started by the first caller with a context of
    /// [`SHARED_CTX_SIZE`] tokens and replies capped at [`SHARED_MAX_REPLY_TOKENS`].
    /// It serves one request at a time; concurrent requests queue.
    ///
    /// # Panics
    /// When the server cannot start, with the reason (and, when the dependencies are
    /// missing, the script that installs them): a test that needs it fails.
    pub fn shared() -> &'static LlamaServer {
        static SHARED: OnceLock<Result<LlamaServer, String>> = OnceLock::new();
        match SHARED.get_or_init(|| {
            LlamaServer::start_with_reply_cap(SHARED_CTX_SIZE, SHARED_MAX_REPLY_TOKENS)
                .map_err(|e| e.to_string())
        }) {
            Ok(server) => server,
            Err(reason) => panic!("{reason}"),
        }
    }

    /// The OpenAI-compatible base URL, `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.address)
    }

    /// The model name to send.
    pub fn model(&self) -> &str {
        &self.alias
    }

    /// The server's log file (llama.cpp writes a line per request).
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// What a failing test should say about the server: whether its process is still
    /// running or how it ended, and the last lines of its log. Tells a server that
    /// crashed from a request the client failed on its own.
    pub fn diagnosis(&self) -> String {
        let state = match self
            .child
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .try_wait()
        {
            Ok(None) => "is still running".to_owned(),
            Ok(Some(status)) => format!("has exited ({status})"),
            Err(error) => format!("is in an unknown state ({error})"),
        };
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n");
        format!(
            "llama.cpp's server at {} {state}; the end of its log {}:\n{tail}",
            self.address,
            self.log.display()
        )
    }

    fn check_health(&self) -> Result<(), LlamaError> {
        let unhealthy = |detail: String| LlamaError::Unhealthy {
            address: self.address.clone(),
            detail,
        };
        let mut stream =
            TcpStream::connect(&self.address).map_err(|error| unhealthy(error.to_string()))?;
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(|error| unhealthy(error.to_string()))?;
        write!(
            stream,
            "GET /health HTTP/1.0\r\nHost: {}\r\n\r\n",
            self.address
        )
        .map_err(|error| unhealthy(error.to_string()))?;
        let mut response = String::new();
        stream
            .read_to_string(&mut response)
            .map_err(|error| unhealthy(error.to_string()))?;
        let status_line = response.lines().next().unwrap_or_default();
        if status_line.split_whitespace().nth(1) == Some("200") {
            Ok(())
        } else {
            Err(unhealthy(format!("{status_line:?}")))
        }
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        stop(self.child.get_mut().unwrap_or_else(PoisonError::into_inner));
    }
}

fn stop(child: &mut Child) {
    // Killing an exited process fails harmlessly; wait() reaps it either way.
    let _ = child.kill();
    let _ = child.wait();
}

/// Reads the launcher's `listening http://HOST:PORT` line. `Err(true)` when it did not
/// come in time, `Err(false)` when the launcher closed its stdout first.
fn wait_for_address(stdout: impl Read + Send + 'static, timeout: Duration) -> Result<String, bool> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut sender = Some(sender);
        // Reads to the end, so that the launcher never writes into a closed pipe.
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(url) = line.strip_prefix("listening ") {
                let address = url.trim().trim_start_matches("http://").to_owned();
                if let Some(sender) = sender.take() {
                    let _ = sender.send(address);
                }
            }
        }
    });
    receiver
        .recv_timeout(timeout)
        .map_err(|error| matches!(error, mpsc::RecvTimeoutError::Timeout))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_dependencies_are_an_error_that_names_the_install_script() {
        let deps = std::env::temp_dir().join(format!("reprise-no-deps-{}", std::process::id()));
        let error = LlamaServer::launch(&deps, &LlamaModel::gemma(), 512, None).unwrap_err();
        assert!(
            matches!(&error, LlamaError::NotInstalled { missing } if *missing == deps.join("llama/venv/bin/python")),
            "{error:?}"
        );
        assert!(
            error
                .to_string()
                .contains("run scripts/install-test-deps.sh"),
            "{error}"
        );
    }

    #[test]
    fn the_launcher_and_its_chat_template_are_where_the_module_looks() {
        assert!(scripts_dir().join("llama-server.py").is_file());
        assert!(scripts_dir().join("llama-chat-template.jinja").is_file());
        assert!(
            scripts_dir()
                .join(LlamaModel::local().chat_template)
                .is_file()
        );
        assert!(LlamaModel::local().file.ends_with(".gguf"));
        assert!(scripts_dir().join("install-test-deps.sh").is_file());
    }
}
