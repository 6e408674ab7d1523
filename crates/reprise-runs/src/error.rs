//! The error of the run-folder modules (run folders, prompt history, session log,
//! transcript).

use std::path::PathBuf;

use reprise_session::IdError;
use reprise_session::IoError;
use reprise_session::StoreError;

/// What went wrong with a run folder or one of its files.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A file operation failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// A run name that could not name a folder (`../x`, `/etc`, empty).
    #[error(transparent)]
    InvalidId(#[from] IdError),
    /// No run matches what was asked for.
    #[error("no run matches {:?} in {runs_dir}", excerpt(spec))]
    NoSuchRun {
        /// What was asked for.
        spec: String,
        /// The runs directory searched.
        runs_dir: PathBuf,
    },
    /// `last` was asked for, but no run has a conversation yet.
    #[error("no run in {runs_dir} has a conversation yet")]
    NoRuns {
        /// The runs directory searched.
        runs_dir: PathBuf,
    },
    /// A prefix that names more than one run.
    #[error("{:?} matches {} runs: {}", excerpt(spec), .candidates.len(), .candidates.join(", "))]
    AmbiguousRun {
        /// What was asked for.
        spec: String,
        /// The names of the matching runs (sorted).
        candidates: Vec<String>,
    },
    /// A title that more than one run has.
    #[error(
        "{:?} is the title of {} runs: {}; name one by its run folder",
        excerpt(spec),
        .candidates.len(),
        .candidates.join(", ")
    )]
    AmbiguousTitle {
        /// What was asked for.
        spec: String,
        /// The names of the runs with that title, newest first.
        candidates: Vec<String>,
    },
    /// A search pattern that is not a valid regular expression.
    #[error("not a valid search pattern {pattern:?}: {message}")]
    Pattern {
        /// The pattern.
        pattern: String,
        /// What is wrong with it.
        message: String,
    },
    /// A metadata file that could not be understood.
    #[error("{path}: {message}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A run's recorded working folder is not the folder the run was given: the
    /// folder at that path is another one (replaced, moved, or named by a
    /// `workdir.json` that reprise did not write), or its identity was not recorded.
    #[error(
        "{}: not the folder this run was given ({reason}); the run works in the folder reprise was started in",
        .workdir.display()
    )]
    WorkdirNotVerified {
        /// The recorded path.
        workdir: PathBuf,
        /// Why it is not taken.
        reason: String,
    },
    /// Reading a transcript failed (see [`StoreError`]).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A record could not be encoded as JSON.
    #[error("encode a record for {}", .path.display())]
    Encode {
        /// The file it was meant for.
        path: PathBuf,
        /// The encoder's error.
        source: serde_json::Error,
    },
}

/// What an error shows of a run asked for: its start, when it is long (input
/// from the command line may be any size).
fn excerpt(spec: &str) -> String {
    const SHOWN: usize = reprise_session::MAX_ID_LEN;
    match spec.char_indices().nth(SHOWN) {
        Some((end, _)) => format!("{}… ({} bytes)", &spec[..end], spec.len()),
        None => spec.to_owned(),
    }
}

/// `error: cause: cause…`: an error and each error of its source chain once, on
/// one line.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
