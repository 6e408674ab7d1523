//! `.run/history.jsonl`: the prompt history that up/down walks through, shared by
//! every run. One `{"ts", "text", "run"}` line per submitted prompt, appended with a
//! single durable write, so several chats can append to it at once. The text is
//! redacted first: the history is kept beside every run and outlives them, so a
//! secret typed in a prompt must not stay in it (up/down then brings back the
//! prompt with the secret masked).

use std::path::Path;

use jiff::Timestamp;
use reprise_redact::Redactor;
use serde::{Deserialize, Serialize};

use crate::error::RunError;
use crate::fs::{append_line, for_each_complete_line, open_private_append};
use reprise_session::LoadWarning;
use reprise_session::now_millis;

/// The history's file name inside a runs directory.
pub const HISTORY_JSONL: &str = "history.jsonl";

/// One submitted prompt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// When it was submitted (RFC 3339, UTC, milliseconds on disk).
    #[serde(with = "ts_millis")]
    pub ts: Timestamp,
    /// What the person typed, secrets redacted.
    pub text: String,
    /// The run it was typed in (its folder name).
    pub run: String,
}

/// The history read back.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct History {
    /// Every readable entry, oldest first (newest last).
    pub entries: Vec<HistoryEntry>,
    /// Corrupt lines skipped and a torn last line ignored.
    pub warnings: Vec<LoadWarning>,
}

impl History {
    /// The prompts for up/down, newest last, with consecutive repeats collapsed into
    /// one (typing the same line three times in a row is one step back, not three).
    pub fn prompts(&self) -> Vec<&str> {
        let mut prompts: Vec<&str> = Vec::with_capacity(self.entries.len());
        for entry in &self.entries {
            if prompts.last() != Some(&entry.text.as_str()) {
                prompts.push(&entry.text);
            }
        }
        prompts
    }
}

/// Appends a prompt typed in run `run` to the history at `path`, redacted with the
/// built-in patterns; see [`append_history_with`].
pub fn append_history(path: &Path, text: &str, run: &str) -> Result<HistoryEntry, RunError> {
    append_history_with(path, text, run, &Redactor::new())
}

/// Appends a prompt typed in run `run` to the history at `path`, redacted with
/// `redactor`, creating the file (0600) and its directory (0700) when missing. One
/// write, synced before returning. Returns the entry as written.
pub fn append_history_with(
    path: &Path,
    text: &str,
    run: &str,
    redactor: &Redactor,
) -> Result<HistoryEntry, RunError> {
    if let Some(parent) = path.parent()
        && !parent.as_os_str().is_empty()
    {
        crate::fs::create_runs_dir(parent)?;
    }
    let entry = HistoryEntry {
        ts: now_millis(),
        text: redactor.redact(text).into_owned(),
        run: run.to_owned(),
    };
    let mut line = serde_json::to_vec(&entry).map_err(|source| RunError::Encode {
        path: path.to_path_buf(),
        source,
    })?;
    line.push(b'\n');
    let file = open_private_append(reprise_session::fs::parent_of(path), path)?;
    append_line(&file, path, &line, true)?;
    Ok(entry)
}

/// Reads the history at `path` (empty when the file does not exist). A torn last line
/// is ignored and a corrupt line skipped, each with a warning.
pub fn read_history(path: &Path) -> Result<History, RunError> {
    let mut history = History::default();
    let entries = &mut history.entries;
    for_each_complete_line(
        reprise_session::fs::parent_of(path),
        path,
        &mut history.warnings,
        |line, text, warnings| {
            if text.trim().is_empty() {
                return;
            }
            match serde_json::from_str::<HistoryEntry>(text) {
                Ok(entry) => entries.push(entry),
                Err(error) => warnings.push(LoadWarning {
                    file: path.to_path_buf(),
                    line,
                    message: format!("not a history entry, skipped: {error}"),
                }),
            }
        },
    )?;
    Ok(history)
}

mod ts_millis {
    use jiff::Timestamp;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(ts: &Timestamp, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&format_args!("{ts:.3}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Timestamp, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse::<Timestamp>().map_err(serde::de::Error::custom)
    }
}
