//! `labels.json`: the title and tags a person gave a run.
//!
//! A file of its own, replaced whole (temp file + rename) by `reprise rename`,
//! `reprise tag` and `/rename`, and never written by the run store: a chat that has
//! the run open keeps appending to its conversation and rewriting `.summary.json`
//! without ever knowing about it, so a rename made meanwhile is never lost or
//! overwritten. Listings stat it beside `.summary.json` and cache what it holds (see
//! `list_cache`), so a title costs a listing one stat per run, never a read of the
//! conversation.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::RunError;
use crate::fs::{read_beneath, run_file_root};
use reprise_session::fs::write_file_atomic;

/// The file name of a run's title and tags.
pub const LABELS_JSON: &str = "labels.json";

/// The longest title kept, in characters.
pub const MAX_TITLE_CHARS: usize = 200;

/// The longest tag, in characters.
pub const MAX_TAG_CHARS: usize = 64;

/// What `labels.json` holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Labels {
    /// The run's title, when it was given one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The run's tags, sorted, each once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// A title as it is kept: its whitespace runs (newlines included) folded into single
/// spaces, at most [`MAX_TITLE_CHARS`] characters; `None` when nothing is left.
pub fn clean_title(title: &str) -> Option<String> {
    let folded = title.split_whitespace().collect::<Vec<_>>().join(" ");
    let cut: String = folded.chars().take(MAX_TITLE_CHARS).collect();
    (!cut.is_empty()).then_some(cut)
}

/// A tag as it is kept, or why it cannot be one: no whitespace, no control
/// characters, 1 to [`MAX_TAG_CHARS`] characters.
pub fn clean_tag(tag: &str) -> Result<String, String> {
    let tag = tag.trim();
    if tag.is_empty() {
        return Err("a tag cannot be empty".to_owned());
    }
    if tag.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("{tag:?}: a tag is one word, without spaces"));
    }
    if tag.chars().count() > MAX_TAG_CHARS {
        return Err(format!(
            "{tag:?}: a tag has at most {MAX_TAG_CHARS} characters"
        ));
    }
    Ok(tag.to_owned())
}

/// The labels of the run in `dir` (empty when it has none).
///
/// A `labels.json` that cannot be parsed reads as no labels: it is only a name, and
/// the next rename or tag replaces it.
pub fn read_labels(dir: &Path) -> Result<Labels, RunError> {
    let path = dir.join(LABELS_JSON);
    let Some(bytes) = read_beneath(run_file_root(&path), &path)? else {
        return Ok(Labels::default());
    };
    Ok(parse_labels(&bytes))
}

/// The labels in `bytes`; none when they cannot be parsed.
pub(crate) fn parse_labels(bytes: &[u8]) -> Labels {
    match serde_json::from_slice::<Labels>(bytes) {
        Ok(mut labels) => {
            labels.title = labels.title.as_deref().and_then(clean_title);
            labels
        }
        Err(error) => {
            tracing::debug!(%error, "labels.json not used");
            Labels::default()
        }
    }
}

/// Replaces the labels of the run in `dir` (atomically, synced); with neither a
/// title nor tags the file holds `{}`.
pub fn write_labels(dir: &Path, labels: &Labels) -> Result<(), RunError> {
    write_json_file(&dir.join(LABELS_JSON), serde_json::to_vec_pretty(labels))
}

/// Replaces the run file `path` with `encoded` and a newline (atomically, synced).
pub(crate) fn write_json_file(
    path: &Path,
    encoded: serde_json::Result<Vec<u8>>,
) -> Result<(), RunError> {
    let mut bytes = encoded.map_err(|source| RunError::Encode {
        path: path.to_path_buf(),
        source,
    })?;
    bytes.push(b'\n');
    write_file_atomic(run_file_root(path), path, &bytes, true)?;
    Ok(())
}

/// Gives the run in `dir` the title `title` (cleaned by [`clean_title`]); an empty
/// title removes it. Returns the labels written.
pub fn set_title(dir: &Path, title: &str) -> Result<Labels, RunError> {
    let mut labels = read_labels(dir)?;
    labels.title = clean_title(title);
    write_labels(dir, &labels)?;
    Ok(labels)
}

/// Adds `add` to the tags of the run in `dir` and removes `remove`. Returns the
/// labels written.
pub fn change_tags(dir: &Path, add: &[String], remove: &[String]) -> Result<Labels, RunError> {
    let mut labels = read_labels(dir)?;
    labels.tags.retain(|tag| !remove.contains(tag));
    for tag in add {
        if !labels.tags.contains(tag) {
            labels.tags.push(tag.clone());
        }
    }
    labels.tags.sort();
    write_labels(dir, &labels)?;
    Ok(labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_fold_whitespace_and_tags_refuse_spaces() {
        assert_eq!(clean_title("  a\n\tb  c "), Some("a b c".into()));
        assert_eq!(clean_title(" \n "), None);
        assert_eq!(
            clean_title(&"x".repeat(500)).map(|t| t.len()),
            Some(MAX_TITLE_CHARS)
        );
        assert_eq!(clean_tag(" bug "), Ok("bug".into()));
        assert!(clean_tag("two words").is_err());
        assert!(clean_tag("").is_err());
    }

    #[test]
    fn labels_round_trip_and_tags_stay_sorted_and_unique() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("r");
        std::fs::create_dir(&run).unwrap();
        assert_eq!(read_labels(&run).unwrap(), Labels::default());
        set_title(&run, "Fix the \"parser\"").unwrap();
        change_tags(&run, &["b".into(), "a".into(), "b".into()], &[]).unwrap();
        let labels = change_tags(&run, &["c".into()], &["b".into()]).unwrap();
        assert_eq!(labels.tags, ["a", "c"]);
        assert_eq!(read_labels(&run).unwrap(), labels);
        assert_eq!(labels.title.as_deref(), Some("Fix the \"parser\""));
        std::fs::write(run.join(LABELS_JSON), "not json").unwrap();
        assert_eq!(read_labels(&run).unwrap(), Labels::default());
    }
}
