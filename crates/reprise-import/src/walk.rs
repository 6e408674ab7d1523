//! Finding transcripts in a folder such as `~/.claude` or `~/.codex`.

use std::path::{Path, PathBuf};

use crate::error::ImportError;

/// The files under `path` that may be transcripts (`*.jsonl`, `*.json`), sorted; or
/// `path` itself when it is a file. Subagent transcripts (in a `subagents` folder)
/// are left out: they come with their session. Links are not followed below `path`;
/// only regular files are taken, and a `path` that is neither a file nor a folder (a
/// FIFO, a device) is refused.
pub fn find_transcripts(path: &Path) -> Result<Vec<PathBuf>, ImportError> {
    let meta = std::fs::metadata(path).map_err(|source| ImportError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    match reprise_session::fs::not_regular(meta.file_type()) {
        None => return Ok(vec![path.to_path_buf()]),
        Some(_) if meta.is_dir() => {}
        Some(what) => {
            return Err(ImportError::NotAFile {
                path: path.to_path_buf(),
                what,
            });
        }
    }
    let mut files = Vec::new();
    for item in walkdir::WalkDir::new(path).follow_links(false) {
        let item = item.map_err(|error| ImportError::Read {
            path: error.path().unwrap_or(path).to_path_buf(),
            source: error.into(),
        })?;
        if !item.file_type().is_file() {
            continue;
        }
        let file = item.path();
        let name = file
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let wanted =
            (name.ends_with(".jsonl") || name.ends_with(".json")) && !name.ends_with(".meta.json");
        let in_subagents = file
            .parent()
            .and_then(|parent| parent.file_name())
            .is_some_and(|parent| parent == "subagents");
        if wanted && !in_subagents {
            files.push(file.to_path_buf());
        }
    }
    files.sort();
    Ok(files)
}
