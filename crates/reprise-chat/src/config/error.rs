//! What can be wrong with the settings: a config file that cannot be read or says
//! something wrong, or a value out of its range.

use std::path::PathBuf;
use std::time::Duration;

/// Why settings could not be resolved. Each names the file and, where it can, the
/// line.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file could not be read (missing, not a regular file, too long).
    #[error("cannot read the config file {}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The config file is not UTF-8 text.
    #[error("cannot read the config file {}", .path.display())]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// Where the text stops being UTF-8.
        #[source]
        source: std::str::Utf8Error,
    },
    /// The file is not TOML, or a key is unknown or has a bad value. `message` is
    /// toml's, reworded for people (see `message::readable`).
    #[error("bad config file {}{position}: {key}{message}", .path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// `:line:column` of the problem, when known.
        position: String,
        /// `key: ` for a bad value, when the key is known.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// The `[mcp]` or `[gate]` section is wrong.
    #[error("bad config file {}: [{section}]", .path.display())]
    Section {
        /// The file.
        path: PathBuf,
        /// The section (`mcp`, `gate`).
        section: &'static str,
        /// What is wrong with it (boxed: it is as large as the rest together).
        #[source]
        source: Box<reprise_mcp::ConfigError>,
    },
    /// A table (`[agents.NAME]`, `[tools.NAME]`) is wrong.
    #[error("bad config file {}:{line}: [{table}]: {problem}", .path.display())]
    Table {
        /// The file.
        path: PathBuf,
        /// The line the table starts on.
        line: usize,
        /// The table's name (`agents.scout`), shortened when long.
        table: String,
        /// What is wrong with it.
        problem: String,
    },
    /// `database_lease` (or `--database-lease`) is shorter than a lease can be.
    #[error("database_lease is {lease:?}: a lease lasts at least {shortest:?}")]
    LeaseTooShort {
        /// The lease asked for.
        lease: Duration,
        /// The shortest lease.
        shortest: Duration,
    },
}
