//! Errors: a config that cannot be used, and what can go wrong talking to a server.

use thiserror::Error;

/// The `[mcp]` config (or one server's table) cannot be used.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ConfigError {
    /// A server name that cannot prefix tool names.
    #[error(
        "invalid MCP server name {name:?}: use ASCII letters, digits, '-' and '_', start and end with a letter or digit, no \"__\", at most 32 characters"
    )]
    InvalidServerName {
        /// The name as written.
        name: String,
    },
    /// A server's table is inconsistent or malformed.
    #[error("MCP server {server:?}: {reason}")]
    InvalidServer {
        /// The server's name.
        server: String,
        /// What is wrong.
        reason: String,
    },
    /// A credential written in the config file instead of taken from the environment.
    #[error(
        "MCP server {server:?}: {table}.{key} holds a literal value, but secrets must come from the environment: write {key} = \"${{SOME_VARIABLE}}\" and export SOME_VARIABLE"
    )]
    LiteralSecret {
        /// The server's name.
        server: String,
        /// `env` or `headers`.
        table: String,
        /// The variable or header name.
        key: String,
    },
    /// A value refers to an environment variable that is not set.
    #[error(
        "MCP server {server:?}: {table}.{key} refers to ${{{variable}}}, which is not set in the environment"
    )]
    MissingVariable {
        /// The server's name.
        server: String,
        /// `env` or `headers`.
        table: String,
        /// The variable or header name.
        key: String,
        /// The environment variable that is missing.
        variable: String,
    },
    /// A `[gate]` pattern that cannot be used.
    #[error(
        "gate pattern {pattern:?} is invalid: a pattern is a non-empty tool name without spaces, where `*` matches anything"
    )]
    InvalidPattern {
        /// The pattern as written.
        pattern: String,
    },
    /// A timeout that is not a positive number of seconds (at most a day).
    #[error("{}{field} = {value} is not a positive number of seconds (at most 86400)", server.as_ref().map(|s| format!("MCP server {s:?}: ")).unwrap_or_default())]
    InvalidTimeout {
        /// The server's name, or `None` for the `[mcp]` defaults.
        server: Option<String>,
        /// The field.
        field: String,
        /// The value given.
        value: f64,
    },
}

/// The error a failure of the MCP library itself comes as (a transport, the handshake,
/// a reply it could not read): kept whole as the source, its type left private.
pub type McpLibraryError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a server could not be started and listed.
#[derive(Debug, Error)]
pub enum StartError {
    /// Its config could not be resolved (a missing variable, a bad cwd).
    #[error("{0}")]
    Config(#[source] ConfigError),
    /// A header of a remote server's table is not a valid HTTP header name.
    #[error("invalid header name {name:?}")]
    HeaderName {
        /// The name as written.
        name: String,
        /// Why HTTP refuses it.
        #[source]
        source: http::header::InvalidHeaderName,
    },
    /// A header's value cannot be carried by HTTP; the value is never quoted, as it
    /// may hold a secret.
    #[error("header {name} has a value that HTTP cannot carry")]
    HeaderValue {
        /// The header's name.
        name: http::HeaderName,
        /// Why HTTP refuses the value.
        #[source]
        source: http::header::InvalidHeaderValue,
    },
    /// The process could not be spawned.
    #[error("could not start `{command}`: {source}")]
    Spawn {
        /// The command.
        command: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The process started, but its stdin or stdout was not handed over as a pipe.
    #[error("could not start `{command}`: its stdin/stdout could not be captured")]
    Pipes {
        /// The command.
        command: String,
    },
    /// The MCP handshake with a server process, or its tool listing, failed.
    #[error(
        "the MCP handshake failed ({source}){}{}",
        exit.as_ref().map(|exit| format!("; the process {exit}")).unwrap_or_default(),
        detail_suffix(stderr)
    )]
    Handshake {
        /// How the process ended, if it did (`exited with status 1`).
        exit: Option<String>,
        /// What the process printed on stderr, if anything.
        stderr: Option<String>,
        /// What the MCP library reported.
        #[source]
        source: McpLibraryError,
    },
    /// The MCP handshake with a remote server failed.
    #[error("the MCP handshake with {url} failed: {source}")]
    RemoteHandshake {
        /// The server's URL.
        url: String,
        /// What the MCP library reported.
        #[source]
        source: McpLibraryError,
    },
    /// A remote server completed the handshake but its tools could not be listed.
    #[error("listing the tools of {url} failed: {source}")]
    RemoteListing {
        /// The server's URL.
        url: String,
        /// What the MCP library reported.
        #[source]
        source: McpLibraryError,
    },
    /// The server did not finish starting in time.
    #[error("did not start within {:.1}s{}", after.as_secs_f64(), detail_suffix(detail))]
    Timeout {
        /// The startup timeout.
        after: std::time::Duration,
        /// What the server printed on stderr, if anything.
        detail: Option<String>,
    },
    /// The server was disabled in the config.
    #[error("disabled in the config (enabled = false)")]
    Disabled,
}

fn detail_suffix(detail: &Option<String>) -> String {
    detail
        .as_ref()
        .map(|d| format!("; {d}"))
        .unwrap_or_default()
}

/// A request to a running server failed.
#[derive(Debug, Error)]
pub enum ConnectionError {
    /// The connection is gone: the process exited, the pipe or the HTTP session broke.
    #[error("the connection closed: {reason}")]
    Closed {
        /// Why: how the process ended and what it printed, or the library's error.
        reason: String,
        /// What the MCP library reported.
        #[source]
        source: McpLibraryError,
    },
    /// The server answered with a JSON-RPC error.
    #[error("the server answered with error {code}: {message}")]
    Protocol {
        /// The JSON-RPC error code.
        code: i64,
        /// Its message.
        message: String,
    },
    /// Any other failure (an unexpected reply, a transport error).
    #[error("{0}")]
    Other(#[source] McpLibraryError),
}

impl ConnectionError {
    /// Whether the server should be restarted before the next call.
    pub fn is_fatal(&self) -> bool {
        matches!(self, ConnectionError::Closed { .. })
    }
}
