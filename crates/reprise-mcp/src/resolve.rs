//! From a validated config to what is started: `${…}` filled from the environment,
//! a relative `cwd` anchored, defaults applied.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{McpConfig, ServerConfig};
use crate::error::ConfigError;
use crate::template::Template;

/// Default time one tool call may take.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Default time a server may take to start and list its tools.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Default number of restarts of one server in one run.
pub const DEFAULT_MAX_RESTARTS: u32 = 3;

/// The variables a child process inherits without being listed in `env`, as the
/// official MCP SDKs do: enough to run, without handing every secret of the chat's
/// environment (the model's API key, say) to every server.
pub const INHERITED_ENV: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// Where `${NAME}` values and relative paths come from.
#[derive(Clone)]
pub struct ResolveContext {
    /// A relative `cwd` is joined to this directory.
    pub base_dir: PathBuf,
    env: EnvLookup,
}

type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

impl ResolveContext {
    /// Variables from `lookup`, relative paths from `base_dir`.
    pub fn new(
        base_dir: impl Into<PathBuf>,
        lookup: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        ResolveContext {
            base_dir: base_dir.into(),
            env: Arc::new(lookup),
        }
    }

    /// The process environment and current directory.
    pub fn from_process() -> Self {
        let base_dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        ResolveContext::new(base_dir, |name| std::env::var(name).ok())
    }

    /// One variable.
    pub fn var(&self, name: &str) -> Option<String> {
        (self.env)(name)
    }
}

impl fmt::Debug for ResolveContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResolveContext")
            .field("base_dir", &self.base_dir)
            .finish_non_exhaustive()
    }
}

/// A server ready to be started. Its `Debug` output hides env and header values.
#[derive(Clone, PartialEq)]
pub struct ServerSpec {
    /// The server's name (the tool-name prefix).
    pub name: String,
    /// How to reach it.
    pub transport: TransportSpec,
    /// Per-call timeout.
    pub call_timeout: Duration,
    /// Startup timeout (spawn, handshake, tool list).
    pub startup_timeout: Duration,
}

/// How to reach a server.
#[derive(Clone, PartialEq)]
pub enum TransportSpec {
    /// A child process speaking MCP on stdin/stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Its complete environment (nothing else is inherited).
        env: BTreeMap<String, String>,
        /// Its working directory (`None`: the chat's).
        cwd: Option<PathBuf>,
    },
    /// A streamable-HTTP endpoint.
    Http {
        /// The URL.
        url: String,
        /// Headers sent with every request.
        headers: BTreeMap<String, String>,
    },
}

impl TransportSpec {
    /// A one-line description without secrets: the command line or the URL.
    pub fn summary(&self) -> String {
        match self {
            TransportSpec::Stdio { command, args, .. } => std::iter::once(command.as_str())
                .chain(args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            TransportSpec::Http { url, .. } => url.clone(),
        }
    }
}

impl fmt::Debug for TransportSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransportSpec::Stdio {
                command,
                args,
                env,
                cwd,
            } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &env.keys().collect::<Vec<_>>())
                .field("cwd", cwd)
                .finish(),
            TransportSpec::Http { url, headers } => f
                .debug_struct("Http")
                .field("url", url)
                .field("headers", &headers.keys().collect::<Vec<_>>())
                .finish(),
        }
    }
}

impl fmt::Debug for ServerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerSpec")
            .field("name", &self.name)
            .field("transport", &self.transport)
            .field("call_timeout", &self.call_timeout)
            .field("startup_timeout", &self.startup_timeout)
            .finish()
    }
}

impl McpConfig {
    /// The per-server defaults of this section.
    pub(crate) fn defaults(&self) -> (Duration, Duration) {
        (
            self.call_timeout_secs
                .map(Duration::from_secs_f64)
                .unwrap_or(DEFAULT_CALL_TIMEOUT),
            self.startup_timeout_secs
                .map(Duration::from_secs_f64)
                .unwrap_or(DEFAULT_STARTUP_TIMEOUT),
        )
    }

    /// The restart budget per server and run.
    pub fn restart_budget(&self) -> u32 {
        self.max_restarts.unwrap_or(DEFAULT_MAX_RESTARTS)
    }
}

impl ServerConfig {
    /// Fills `${…}` from `ctx`, anchors `cwd`, applies `defaults` (call, startup).
    /// The config must have passed [`McpConfig::validate`].
    pub fn resolve(
        &self,
        name: &str,
        ctx: &ResolveContext,
        defaults: (Duration, Duration),
    ) -> Result<ServerSpec, ConfigError> {
        let render = |table: &str, key: &str, value: &str| -> Result<String, ConfigError> {
            let template = Template::parse(value).map_err(|reason| ConfigError::InvalidServer {
                server: name.to_string(),
                reason: format!("{table}.{key}: {reason}"),
            })?;
            template
                .render(&|var| ctx.var(var))
                .map_err(|variable| ConfigError::MissingVariable {
                    server: name.to_string(),
                    table: table.to_string(),
                    key: key.to_string(),
                    variable,
                })
        };
        let transport = match (&self.command, &self.url) {
            (Some(command), None) => {
                let mut env: BTreeMap<String, String> = INHERITED_ENV
                    .iter()
                    .filter_map(|var| ctx.var(var).map(|value| (var.to_string(), value)))
                    .collect();
                for (key, value) in &self.env {
                    env.insert(key.clone(), render("env", key, value)?);
                }
                let cwd = self.cwd.as_ref().map(|cwd| ctx.base_dir.join(cwd));
                if let Some(dir) = &cwd
                    && !dir.is_dir()
                {
                    return Err(ConfigError::InvalidServer {
                        server: name.to_string(),
                        reason: format!("cwd {} is not a directory", dir.display()),
                    });
                }
                TransportSpec::Stdio {
                    command: command.clone(),
                    args: self.args.clone(),
                    env,
                    cwd,
                }
            }
            (None, Some(url)) => {
                let mut headers = BTreeMap::new();
                for (key, value) in &self.headers {
                    headers.insert(key.clone(), render("headers", key, value)?);
                }
                TransportSpec::Http {
                    url: url.clone(),
                    headers,
                }
            }
            _ => {
                return Err(ConfigError::InvalidServer {
                    server: name.to_string(),
                    reason: "needs exactly one of `command` and `url`".into(),
                });
            }
        };
        Ok(ServerSpec {
            name: name.to_string(),
            transport,
            call_timeout: self
                .call_timeout_secs
                .map(Duration::from_secs_f64)
                .unwrap_or(defaults.0),
            startup_timeout: self
                .startup_timeout_secs
                .map(Duration::from_secs_f64)
                .unwrap_or(defaults.1),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> ResolveContext {
        ResolveContext::new("/base", |name| match name {
            "MY_TOKEN" => Some("s3cr3t".into()),
            "PATH" => Some("/usr/bin".into()),
            "OPENAI_API_KEY" => Some("sk-leak".into()),
            _ => None,
        })
    }

    fn server(text: &str) -> ServerConfig {
        let config: McpConfig = toml::from_str(text).unwrap();
        config.validate().unwrap();
        config.servers.into_values().next().unwrap()
    }

    #[test]
    fn env_is_minimal_plus_configured() {
        let s = server(
            "[servers.a]\ncommand = \"node\"\nenv = { API_TOKEN = \"${MY_TOKEN}\", MODE = \"x\" }\n",
        );
        let spec = s
            .resolve("a", &ctx(), (DEFAULT_CALL_TIMEOUT, DEFAULT_STARTUP_TIMEOUT))
            .unwrap();
        let TransportSpec::Stdio { env, .. } = &spec.transport else {
            panic!("stdio expected")
        };
        assert_eq!(env.get("API_TOKEN").map(String::as_str), Some("s3cr3t"));
        assert_eq!(env.get("MODE").map(String::as_str), Some("x"));
        assert_eq!(env.get("PATH").map(String::as_str), Some("/usr/bin"));
        assert!(!env.contains_key("OPENAI_API_KEY"));
        let debug = format!("{spec:?}");
        assert!(
            !debug.contains("s3cr3t") && debug.contains("API_TOKEN"),
            "{debug}"
        );
    }

    #[test]
    fn a_missing_variable_names_server_key_and_variable() {
        let s = server(
            "[servers.docs]\nurl = \"http://h/\"\nheaders = { Authorization = \"Bearer ${NOPE}\" }\n",
        );
        let err = s
            .resolve(
                "docs",
                &ctx(),
                (DEFAULT_CALL_TIMEOUT, DEFAULT_STARTUP_TIMEOUT),
            )
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("docs")
                && err.contains("headers.Authorization")
                && err.contains("${NOPE}"),
            "{err}"
        );
    }

    #[test]
    fn timeouts_override_defaults_and_cwd_must_exist() {
        let s = server("[servers.a]\ncommand = \"x\"\ncall_timeout_secs = 0.25\n");
        let spec = s
            .resolve("a", &ctx(), (DEFAULT_CALL_TIMEOUT, Duration::from_secs(7)))
            .unwrap();
        assert_eq!(spec.call_timeout, Duration::from_millis(250));
        assert_eq!(spec.startup_timeout, Duration::from_secs(7));
        let s = server("[servers.a]\ncommand = \"x\"\ncwd = \"no/such/dir\"\n");
        let err = s
            .resolve("a", &ctx(), (DEFAULT_CALL_TIMEOUT, DEFAULT_STARTUP_TIMEOUT))
            .unwrap_err();
        assert!(err.to_string().contains("not a directory"));
    }
}
