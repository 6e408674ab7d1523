//! What a run is to those who list and open runs: its folder, its summary in a
//! listing, and what a listing left out.

use std::fmt;
use std::path::{Path, PathBuf};

use jiff::{SignedDuration, Timestamp};

/// One run's folder, and the session it holds once it has a conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunFolder {
    /// The folder, `<runs_dir>/<name>`.
    pub dir: PathBuf,
    /// The session kept in the folder (from `session.json`); `None` for a new run.
    pub session_id: Option<String>,
    /// What was repaired when the folder was opened: a missing or damaged
    /// `session.json` rebuilt from the conversation.
    pub warnings: Vec<RunWarning>,
}

/// One run with a conversation, as `list_runs` sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSummary {
    /// The run's folder.
    pub dir: PathBuf,
    /// The session kept in it.
    pub session_id: String,
    /// When the conversation was last appended to (`updatedAt` of `session.json`, or
    /// the file's modification time when the field is missing).
    pub updated_at: Timestamp,
    /// The person's last message, when `session.json` records it.
    pub last_message: Option<String>,
    /// The person's first message, when `session.json` records it.
    pub first_message: Option<String>,
    /// How many messages the conversation holds, per `session.json`.
    pub message_count: u64,
    /// The title the run was given (`labels.json`).
    pub title: Option<String>,
    /// The run's tags (`labels.json`), sorted.
    pub tags: Vec<String>,
}

impl RunSummary {
    /// The folder's name (its start time).
    pub fn name(&self) -> &str {
        folder_name(&self.dir)
    }

    /// What a listing calls the run: its title, else the person's first message (else
    /// their last one, for runs that predate `firstMessage`), whitespace folded and
    /// cut to `max` characters with `…`; empty when there is none.
    pub fn display_title(&self, max: usize) -> String {
        let text = self
            .title
            .as_deref()
            .or(self.first_message.as_deref())
            .or(self.last_message.as_deref())
            .unwrap_or_default();
        // Folded into one string, without a vector of the words first.
        let mut folded = String::with_capacity(text.len());
        for word in text.split_whitespace() {
            if !folded.is_empty() {
                folded.push(' ');
            }
            folded.push_str(word);
        }
        if folded.chars().count() <= max {
            folded
        } else {
            let cut: String = folded.chars().take(max.saturating_sub(1)).collect();
            format!("{cut}…")
        }
    }

    /// The run as a folder to resume.
    pub fn folder(&self) -> RunFolder {
        RunFolder {
            dir: self.dir.clone(),
            session_id: Some(self.session_id.clone()),
            warnings: Vec::new(),
        }
    }
}

/// A run that `list_runs` left out because its `session.json` could not be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunWarning {
    /// The `session.json` in question.
    pub path: PathBuf,
    /// What was wrong with it.
    pub message: String,
}

impl fmt::Display for RunWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.message)
    }
}

/// The name of a run's folder (its start time).
pub(crate) fn folder_name(dir: &Path) -> &str {
    dir.file_name().and_then(|name| name.to_str()).unwrap_or("")
}

/// Which runs `prune` deletes.
#[derive(Clone, Copy, Debug, Default)]
pub struct PrunePlan {
    /// Runs last used longer ago than this.
    pub older_than: Option<SignedDuration>,
    /// All but the newest N runs.
    pub keep: Option<usize>,
}

impl PrunePlan {
    /// The runs of `runs` (newest first) that the plan deletes, as of `now`.
    pub fn select<'r>(&self, runs: &'r [RunSummary], now: Timestamp) -> Vec<&'r RunSummary> {
        runs.iter()
            .enumerate()
            .filter(|(index, run)| {
                let beyond_keep = self.keep.is_none_or(|keep| *index >= keep);
                let old = self
                    .older_than
                    .is_none_or(|age| now.duration_since(run.updated_at) > age);
                beyond_keep && old
            })
            .map(|(_, run)| run)
            .collect()
    }
}
