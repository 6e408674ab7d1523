//! What can go wrong while bringing a session in.

use std::path::PathBuf;

/// An import that failed.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A file or folder could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file or folder.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The path named is neither a regular file nor a folder (a FIFO, a device).
    #[error(
        "{path}: {what}, not a regular file or a folder (import reads transcript files, \
         or folders of them)"
    )]
    NotAFile {
        /// The path.
        path: PathBuf,
        /// What it is instead.
        what: &'static str,
    },
    /// The file is not a transcript of any tool this crate knows.
    #[error("{path}: not a Claude Code, Codex or opencode transcript")]
    Unrecognized {
        /// The file.
        path: PathBuf,
    },
    /// The file looked like a transcript but could not be read as one.
    #[error("{path}: {message}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The file holds no message to import.
    #[error("{path}: no conversation in it")]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// The file is a subagent's transcript (Claude Code 2.0 writes them beside the
    /// session's): it is imported with the session it names.
    #[error("{path}: a subagent's transcript, imported with its session {session_id}")]
    Subagent {
        /// The file.
        path: PathBuf,
        /// The session it belongs to.
        session_id: String,
    },
    /// The run folder could not be created or written.
    #[error("cannot write the imported run: {0}")]
    Run(#[from] reprise_runs::RunError),
    /// The session could not be written to the run folder.
    #[error("cannot write the imported session: {0}")]
    Store(#[from] reprise_session::StoreError),
    /// A file of the run folder could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
}
