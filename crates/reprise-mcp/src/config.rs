//! The `[mcp]` section of the chat's TOML config, and its validation.
//!
//! ```toml
//! [mcp]
//! call_timeout_secs = 60
//!
//! [mcp.servers.town]
//! command = "node"
//! args = ["town-server.js", "stdio"]
//! env = { TOWN_TOKEN = "${MY_TOWN_TOKEN}", MODE = "fast" }
//! cwd = "tools/town"
//!
//! [mcp.servers.docs]
//! url = "https://docs.example.com/mcp"
//! headers = { Authorization = "Bearer ${DOCS_TOKEN}" }
//! ```
//!
//! Values of `env` and `headers` may refer to the environment with `${NAME}` (`$$` is
//! a literal `$`). An entry whose name looks like it carries a secret (`*_TOKEN`,
//! `API_KEY`, `Authorization`, …) must take its value from the environment: a literal
//! secret in the file is refused.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::ConfigError;
use crate::template::{Template, is_env_name};

/// Longest server name: `<server>__<tool>` must fit the 64 characters that
/// OpenAI-compatible servers accept as a function name.
pub const MAX_SERVER_NAME_LEN: usize = 32;

/// The `[mcp]` section: the servers and the defaults that apply to all of them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    /// The servers, by name (`[mcp.servers.<name>]`).
    #[serde(default)]
    pub servers: BTreeMap<String, ServerConfig>,
    /// How long one tool call may take before it fails (seconds; default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_timeout_secs: Option<f64>,
    /// How long a server may take to start and list its tools (seconds; default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_timeout_secs: Option<f64>,
    /// How many times one server may be restarted in one run (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_restarts: Option<u32>,
}

/// One `[mcp.servers.<name>]` table: a child process (`command`) or a remote server (`url`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// The program to start (stdio transport). Looked up in `PATH` when not a path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Extra environment variables for the process; values may use `${NAME}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Its working directory; a relative path is taken from the chat's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// The endpoint of a streamable-HTTP server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// HTTP headers sent with every request; values may use `${NAME}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Overrides `[mcp] call_timeout_secs` for this server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_timeout_secs: Option<f64>,
    /// Overrides `[mcp] startup_timeout_secs` for this server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_timeout_secs: Option<f64>,
    /// `false` keeps the table in the file without starting the server.
    #[serde(default = "default_enabled", skip_serializing_if = "is_true")]
    pub enabled: bool,
}

fn default_enabled() -> bool {
    true
}

fn is_true(value: &bool) -> bool {
    *value
}

impl McpConfig {
    /// Checks everything that can be checked without the environment: server names,
    /// one transport per server, variable and header names, `${…}` syntax, timeouts,
    /// and that no secret is written literally in the file.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_timeout(None, "call_timeout_secs", self.call_timeout_secs)?;
        check_timeout(None, "startup_timeout_secs", self.startup_timeout_secs)?;
        for (name, server) in &self.servers {
            validate_server_name(name)?;
            server.validate(name)?;
        }
        Ok(())
    }
}

impl ServerConfig {
    /// Checks one server's table; `name` is its (already valid) name.
    pub fn validate(&self, name: &str) -> Result<(), ConfigError> {
        let invalid = |reason: String| ConfigError::InvalidServer {
            server: name.to_string(),
            reason,
        };
        check_timeout(Some(name), "call_timeout_secs", self.call_timeout_secs)?;
        check_timeout(
            Some(name),
            "startup_timeout_secs",
            self.startup_timeout_secs,
        )?;
        match (&self.command, &self.url) {
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "has both `command` and `url`; a server is either a process or a URL".into(),
                ));
            }
            (None, None) => {
                return Err(invalid(
                    "needs `command` (a process speaking MCP on stdio) or `url` (a streamable-HTTP endpoint)"
                        .into(),
                ));
            }
            (Some(command), None) => {
                if command.trim().is_empty() {
                    return Err(invalid("`command` is empty".into()));
                }
                if !self.headers.is_empty() {
                    return Err(invalid(
                        "`headers` only applies to a `url` server; use `env` for a process".into(),
                    ));
                }
            }
            (None, Some(url)) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(invalid(format!(
                        "`url` must start with http:// or https://, got {url:?}"
                    )));
                }
                if !self.args.is_empty() || !self.env.is_empty() || self.cwd.is_some() {
                    return Err(invalid(
                        "`args`, `env` and `cwd` only apply to a `command` server".into(),
                    ));
                }
            }
        }
        for (key, value) in &self.env {
            if !is_env_name(key) {
                return Err(invalid(format!(
                    "env name {key:?} is not a valid variable name (letters, digits, _; not starting with a digit)"
                )));
            }
            check_value(name, "env", key, value)?;
        }
        for (key, value) in &self.headers {
            let header = http::HeaderName::from_bytes(key.as_bytes()).map_err(|_| {
                invalid(format!(
                    "header name {key:?} is not a valid HTTP header name"
                ))
            })?;
            if RESERVED_HEADERS.contains(&header.as_str()) {
                return Err(invalid(format!(
                    "header {key:?} is set by the MCP transport itself and cannot be configured"
                )));
            }
            check_value(name, "headers", key, value)?;
        }
        Ok(())
    }
}

/// Headers the streamable-HTTP transport manages; configuring them would break it.
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "content-type",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

/// Parses a `${…}` template and refuses a literal secret.
fn check_value(server: &str, table: &str, key: &str, value: &str) -> Result<(), ConfigError> {
    let template = Template::parse(value).map_err(|reason| ConfigError::InvalidServer {
        server: server.to_string(),
        reason: format!("{table}.{key}: {reason}"),
    })?;
    if looks_secret(key) && template.variables().next().is_none() && !value.is_empty() {
        return Err(ConfigError::LiteralSecret {
            server: server.to_string(),
            table: table.to_string(),
            key: key.to_string(),
        });
    }
    Ok(())
}

fn check_timeout(server: Option<&str>, field: &str, value: Option<f64>) -> Result<(), ConfigError> {
    match value {
        Some(secs) if !(secs.is_finite() && secs > 0.0 && secs <= 86_400.0) => {
            Err(ConfigError::InvalidTimeout {
                server: server.map(str::to_string),
                field: field.to_string(),
                value: secs,
            })
        }
        _ => Ok(()),
    }
}

/// Server names become the prefix of tool names (`<server>__<tool>`): ASCII letters,
/// digits, `-` and `_`, starting and ending with a letter or digit, no `__` (so the
/// prefix is unambiguous), at most [`MAX_SERVER_NAME_LEN`] characters.
pub fn validate_server_name(name: &str) -> Result<(), ConfigError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_SERVER_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric()
        && !name.contains("__");
    if ok {
        Ok(())
    } else {
        Err(ConfigError::InvalidServerName {
            name: name.to_string(),
        })
    }
}

/// Whether a variable or header name suggests its value is a credential.
pub(crate) fn looks_secret(name: &str) -> bool {
    const WORDS: &[&str] = &[
        "token",
        "secret",
        "password",
        "passwd",
        "key",
        "apikey",
        "auth",
        "authorization",
        "credential",
        "credentials",
        "cookie",
        "pat",
    ];
    name.to_ascii_lowercase()
        .split(['_', '-', '.'])
        .any(|word| WORDS.contains(&word))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> McpConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn a_full_example_parses_and_validates() {
        let config = parse(
            r#"
call_timeout_secs = 5
[servers.town]
command = "node"
args = ["server.js", "stdio"]
env = { TOWN_TOKEN = "${MY_TOKEN}", MODE = "fast" }
cwd = "tools"
[servers.docs]
url = "https://docs.example.com/mcp"
headers = { Authorization = "Bearer ${DOCS_TOKEN}" }
call_timeout_secs = 0.5
"#,
        );
        config.validate().unwrap();
        assert_eq!(config.servers.len(), 2);
        assert_eq!(config.servers["town"].args, ["server.js", "stdio"]);
        assert_eq!(config.servers["docs"].call_timeout_secs, Some(0.5));
        assert!(config.servers["docs"].enabled);
    }

    #[test]
    fn unknown_fields_are_refused() {
        let err = toml::from_str::<McpConfig>("[servers.a]\ncommand = \"x\"\nargz = []\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("argz"), "{err}");
    }

    #[test]
    fn server_names_are_checked() {
        for good in ["town", "a", "my-server", "s_1", "A9"] {
            validate_server_name(good).unwrap();
        }
        for bad in [
            "",
            "../x",
            "a__b",
            "_a",
            "a_",
            "a.b",
            "a b",
            &"x".repeat(33),
        ] {
            let err = validate_server_name(bad).unwrap_err().to_string();
            assert!(err.contains("server name"), "{bad}: {err}");
        }
    }

    #[test]
    fn exactly_one_transport() {
        let both = parse("[servers.a]\ncommand = \"x\"\nurl = \"http://h/\"\n");
        assert!(both.validate().unwrap_err().to_string().contains("both"));
        let neither = parse("[servers.a]\nargs = [\"x\"]\n");
        assert!(
            neither
                .validate()
                .unwrap_err()
                .to_string()
                .contains("needs")
        );
        let bad_url = parse("[servers.a]\nurl = \"ftp://h/\"\n");
        assert!(
            bad_url
                .validate()
                .unwrap_err()
                .to_string()
                .contains("http://")
        );
        let headers_on_process = parse("[servers.a]\ncommand = \"x\"\nheaders = { A = \"b\" }\n");
        assert!(headers_on_process.validate().is_err());
    }

    #[test]
    fn literal_secrets_are_refused_but_references_pass() {
        let literal = parse("[servers.a]\ncommand = \"x\"\nenv = { API_TOKEN = \"abc123\" }\n");
        let err = literal.validate().unwrap_err().to_string();
        assert!(err.contains("API_TOKEN") && err.contains("${"), "{err}");
        let header = parse("[servers.a]\nurl = \"http://h/\"\nheaders = { X-Api-Key = \"k\" }\n");
        assert!(matches!(
            header.validate(),
            Err(ConfigError::LiteralSecret { .. })
        ));
        parse("[servers.a]\ncommand = \"x\"\nenv = { API_TOKEN = \"${T}\", KEYBOARD = \"us\" }\n")
            .validate()
            .unwrap();
    }

    #[test]
    fn bad_templates_and_names_are_refused() {
        let unclosed = parse("[servers.a]\ncommand = \"x\"\nenv = { A = \"${B\" }\n");
        assert!(
            unclosed
                .validate()
                .unwrap_err()
                .to_string()
                .contains("env.A")
        );
        let bad_var = parse("[servers.a]\ncommand = \"x\"\nenv = { A = \"${1B}\" }\n");
        assert!(bad_var.validate().is_err());
        let bad_key = parse("[servers.a]\ncommand = \"x\"\nenv = { \"A-B\" = \"x\" }\n");
        assert!(bad_key.validate().is_err());
        let reserved =
            parse("[servers.a]\nurl = \"http://h/\"\nheaders = { Mcp-Session-Id = \"x\" }\n");
        assert!(
            reserved
                .validate()
                .unwrap_err()
                .to_string()
                .contains("transport")
        );
        let timeout = parse("call_timeout_secs = -1\n");
        assert!(timeout.validate().is_err());
    }
}
