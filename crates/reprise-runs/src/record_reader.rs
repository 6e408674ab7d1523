//! A run as it is kept, read as it goes, for an export that holds no more than a
//! few of its entries at a time: its record (`session.json`) and the names of its
//! subagents, then the entries of its conversation or of one subagent, read again
//! for each reading ([`RecordReader::entries`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use reprise_session::{Entry, IoError};
use serde_json::Value;

use crate::{
    CONVERSATION_JSONL, EntryStream, RunError, RunRecord, SESSION_JSON, SUBAGENTS_DIR,
    subagent_names,
};

/// A run's record, and its transcripts to read.
pub struct RecordReader {
    /// The run's name.
    pub name: String,
    /// Its `session.json` as it is (or the same fields, where runs are kept
    /// elsewhere).
    pub session: Value,
    /// The names of its subagents, in order.
    pub subagents: Vec<String>,
    source: Source,
}

/// Where the entries are read from.
enum Source {
    /// A run folder's files, the uuids of bare-message lines derived from the
    /// session id.
    Folder { dir: PathBuf, session_id: String },
    /// A run read whole already.
    Whole(Arc<RunRecord>),
}

impl RecordReader {
    /// A run read whole already ([`crate::RunCatalog::record`]).
    pub fn whole(record: RunRecord) -> Self {
        RecordReader {
            name: record.name.clone(),
            session: record.session.clone(),
            subagents: record
                .subagents
                .iter()
                .map(|(name, _)| name.clone())
                .collect(),
            source: Source::Whole(Arc::new(record)),
        }
    }

    /// The run folder `dir`: `session.json` read, the subagents named in it or kept
    /// in `subagents/`, as [`crate::read_run_record`] reads them.
    pub fn folder(dir: &Path) -> Result<Self, RunError> {
        let (name, session, subagents) = record_head(dir)?;
        let session_id = session["sessionId"].as_str().unwrap_or_default().to_owned();
        Ok(RecordReader {
            name,
            session,
            subagents,
            source: Source::Folder {
                dir: dir.to_owned(),
                session_id,
            },
        })
    }

    /// The entries of the conversation (`subagent` `None`) or of the subagent named
    /// so, read from the start; a run read whole gives its warnings with its
    /// conversation's.
    pub fn entries(&self, subagent: Option<&str>) -> EntryStream {
        self.read(subagent, false)
    }

    /// [`RecordReader::entries`] for a reader that shows the conversation: replies
    /// without their `model` field, which only the usage ledger and the JSON of the
    /// entries read.
    pub fn view_entries(&self, subagent: Option<&str>) -> EntryStream {
        self.read(subagent, true)
    }

    fn read(&self, subagent: Option<&str>, lean: bool) -> EntryStream {
        match &self.source {
            Source::Folder { dir, session_id } => {
                let path = match subagent {
                    None => dir.join(CONVERSATION_JSONL),
                    Some(name) => dir.join(SUBAGENTS_DIR).join(format!("{name}.jsonl")),
                };
                let session_id = session_id.clone();
                EntryStream::read_blocking(move |sink| {
                    let root = crate::fs::run_file_root(&path);
                    let warnings = if lean {
                        reprise_session::parts::read_view_beneath(
                            root,
                            &path,
                            &session_id,
                            &std::cell::Cell::new(0),
                            sink,
                        )
                    } else {
                        reprise_session::parts::read_file_beneath(root, &path, &session_id, sink)
                    };
                    Ok(warnings.map_err(RunError::from)?.unwrap_or_default())
                })
            }
            Source::Whole(record) => {
                let (entries, warnings): (Vec<Entry>, _) = match subagent {
                    None => (record.main.clone(), record.warnings.clone()),
                    Some(name) => (
                        record
                            .subagents
                            .iter()
                            .find(|(agent, _)| agent == name)
                            .map(|(_, entries)| entries.clone())
                            .unwrap_or_default(),
                        Vec::new(),
                    ),
                };
                EntryStream::whole(entries, warnings)
            }
        }
    }
}

/// A run folder's name, its `session.json`, and the names of its subagents (named
/// in `session.json` or kept in `subagents/`), sorted.
pub(crate) fn record_head(dir: &Path) -> Result<(String, Value, Vec<String>), RunError> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let meta_path = dir.join(SESSION_JSON);
    let bytes =
        std::fs::read(&meta_path).map_err(|source| IoError::new("read", &meta_path, source))?;
    let session: Value = serde_json::from_slice(&bytes).map_err(|error| RunError::Format {
        path: meta_path.clone(),
        message: format!("not JSON: {error}"),
    })?;
    let mut names: Vec<String> = session["subagents"]
        .as_object()
        .map(|map| map.keys().cloned().collect())
        .unwrap_or_default();
    for stem in subagent_names(dir) {
        if !names.contains(&stem) {
            names.push(stem);
        }
    }
    names.sort();
    names.retain(|name| reprise_session::validate_id("subagent", name).is_ok());
    Ok((name, session, names))
}
