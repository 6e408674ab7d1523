//! A real OpenTelemetry receiver: Arize Phoenix, from PyPI, installed by
//! `scripts/install-test-deps.sh phoenix` into the shared cache (`phoenix/venv`).
//! It takes OTLP over HTTP (`/v1/traces` on its HTTP port) and gRPC, keeps the
//! spans in SQLite in a working folder of its own, and answers for them over its
//! REST API.
//!
//! Each [`Phoenix`] runs on free loopback ports with a temporary working folder
//! and its telemetry off; dropping it stops the process and removes the folder.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::llama::deps_dir;

/// How long Phoenix may take to answer its health check (it migrates its database
/// and loads its web app first; tens of seconds on a busy machine).
const START_TIMEOUT: Duration = Duration::from_secs(180);

/// Why Phoenix did not start.
#[derive(Debug, thiserror::Error)]
pub enum PhoenixError {
    /// The virtualenv is missing.
    #[error(
        "Phoenix is not installed ({missing} is missing): run scripts/install-test-deps.sh phoenix"
    )]
    NotInstalled {
        /// What was looked for.
        missing: PathBuf,
    },
    /// The process could not be started or its folder made.
    #[error("cannot start Phoenix")]
    Spawn(#[source] std::io::Error),
    /// It did not answer in time, or exited.
    #[error("Phoenix did not come up within {timeout:?}; its log: {log}")]
    NotReady {
        /// The wait.
        timeout: Duration,
        /// Its output.
        log: PathBuf,
    },
}

/// A running Phoenix.
#[derive(Debug)]
pub struct Phoenix {
    child: Child,
    http_port: u16,
    grpc_port: u16,
    dir: PathBuf,
}

impl Phoenix {
    /// Starts Phoenix and waits until it answers.
    pub fn start() -> Result<Phoenix, PhoenixError> {
        let program = deps_dir().join("phoenix/venv/bin/phoenix");
        if !program.exists() {
            return Err(PhoenixError::NotInstalled { missing: program });
        }
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "reprise-phoenix-{}-{}",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).map_err(PhoenixError::Spawn)?;
        let log = dir.join("phoenix.log");
        let log_file = std::fs::File::create(&log).map_err(PhoenixError::Spawn)?;
        let log_err = log_file.try_clone().map_err(PhoenixError::Spawn)?;
        let (http_port, grpc_port) = (free_port()?, free_port()?);
        let child = Command::new(&program)
            .arg("serve")
            .env("PHOENIX_WORKING_DIR", &dir)
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_PORT", http_port.to_string())
            .env("PHOENIX_GRPC_PORT", grpc_port.to_string())
            // Nothing leaves the machine: no telemetry of its own, no assistant
            // reaching for the web, GitHub or remote MCP servers, no CDN assets.
            .env("PHOENIX_TELEMETRY_ENABLED", "false")
            .env("PHOENIX_DISABLE_AGENT_ASSISTANT", "true")
            .env("PHOENIX_AGENTS_DISABLE_WEB_ACCESS", "true")
            .env("PHOENIX_AGENTS_DISABLE_GITHUB", "true")
            .env("PHOENIX_AGENTS_DISABLE_BASH", "true")
            .env("PHOENIX_ENABLE_MCP_SERVER", "false")
            .env("PHOENIX_ALLOW_EXTERNAL_RESOURCES", "false")
            .env_remove("PHOENIX_SQL_DATABASE_URL")
            .env_remove("PHOENIX_COLLECTOR_ENDPOINT")
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(log_err)
            .spawn()
            .map_err(PhoenixError::Spawn)?;
        let mut phoenix = Phoenix {
            child,
            http_port,
            grpc_port,
            dir,
        };
        let started = Instant::now();
        loop {
            if get(http_port, "/healthz").is_some_and(|(status, _)| status == 200) {
                return Ok(phoenix);
            }
            let exited = phoenix.child.try_wait().ok().flatten().is_some();
            if exited || started.elapsed() > START_TIMEOUT {
                return Err(PhoenixError::NotReady {
                    timeout: START_TIMEOUT,
                    log,
                });
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The base address for OTLP over HTTP (`OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub fn otlp_http(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    /// The address for OTLP over gRPC.
    pub fn otlp_grpc(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc_port)
    }

    /// The spans of `project` (`default` unless the resource names one), newest
    /// first, as Phoenix's REST API gives them (`name`, `context.span_id`,
    /// `parent_id`, `attributes`, `status_code`, …).
    pub fn spans(&self, project: &str) -> Vec<Value> {
        let path = format!("/v1/projects/{project}/spans?limit=1000");
        get(self.http_port, &path)
            .filter(|(status, _)| *status == 200)
            .and_then(|(_, body)| serde_json::from_str::<Value>(&body).ok())
            .and_then(|value| value.get("data")?.as_array().cloned())
            .unwrap_or_default()
    }

    /// [`Phoenix::spans`] once there are at least `count` (Phoenix stores what it
    /// receives in the background), or what there is after `wait`.
    pub fn wait_for_spans(&self, project: &str, count: usize, wait: Duration) -> Vec<Value> {
        let started = Instant::now();
        loop {
            let spans = self.spans(project);
            if spans.len() >= count || started.elapsed() > wait {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// What Phoenix printed.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("phoenix.log")).unwrap_or_default()
    }
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> Result<u16, PhoenixError> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(PhoenixError::Spawn)?;
    Ok(listener.local_addr().map_err(PhoenixError::Spawn)?.port())
}

/// A GET over HTTP/1.0 (the answer ends with the connection): its status and body.
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nAccept: application/json\r\n\r\n"
    )
    .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_owned()))
}
