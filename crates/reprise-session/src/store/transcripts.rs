//! The writers of one session's transcripts (its main one and its subagents'), and
//! the one path an append takes through them, for every store that keeps a
//! session's transcripts as JSONL files: [`FileSessionStore`](crate::FileSessionStore)
//! and the run folders of `reprise-runs`. The stores differ in where the files are
//! and in what they record beside them, not in how a transcript is appended to.

use std::collections::HashMap;
use std::path::PathBuf;

use reprise_message::Entry;

use crate::fs::{DirSync, create_private_dir_all};
use crate::store::id::SessionKey;
use crate::store::jsonl_writer::JsonlWriter;
use crate::store::session_store::{AppendReport, StoreError};

/// Where a store keeps a session's transcripts, and how it writes them.
pub trait TranscriptFiles {
    /// A new writer of `key`'s transcript (nothing is opened yet).
    fn new_writer(&self, key: &SessionKey) -> JsonlWriter;

    /// The folder of the subagent transcripts of session `id`.
    fn subagents_dir(&self, id: &str) -> PathBuf;
}

/// The writers of one session's transcripts, kept between appends so that an
/// append does not read a transcript again; each is made at its first use.
#[derive(Debug, Default)]
pub struct Transcripts {
    main: Option<JsonlWriter>,
    subagents: HashMap<String, JsonlWriter>,
}

/// What an append wrote: the indices (in the entries given) of those written, and
/// the counts.
pub type Appended = (Vec<usize>, AppendReport);

impl Transcripts {
    /// The writer of `key`'s transcript, made by `files` at its first use.
    pub fn writer(&mut self, files: &impl TranscriptFiles, key: &SessionKey) -> &mut JsonlWriter {
        match key.subagent_name() {
            None => self.main.get_or_insert_with(|| files.new_writer(key)),
            Some(name) => self
                .subagents
                .entry(name.to_owned())
                .or_insert_with(|| files.new_writer(key)),
        }
    }

    /// The main transcript's writer, once made.
    pub fn main(&self) -> Option<&JsonlWriter> {
        self.main.as_ref()
    }

    /// Whether every writer an append to `key` goes through knows its file's uuids
    /// already ([`JsonlWriter::is_indexed`]), so that the append reads nothing.
    pub fn are_indexed(&self, key: &SessionKey) -> bool {
        self.main.as_ref().is_some_and(JsonlWriter::is_indexed)
            && key.subagent_name().is_none_or(|name| {
                self.subagents
                    .get(name)
                    .is_some_and(JsonlWriter::is_indexed)
            })
    }

    /// Forgets the writer of the subagent `name` (its file went).
    pub fn forget_subagent(&mut self, name: &str) {
        self.subagents.remove(name);
    }

    /// Forgets every writer (the session's files went or were replaced).
    pub fn forget_all(&mut self) {
        self.main = None;
        self.subagents.clear();
    }

    /// Appends `entries` to `key`'s transcript, skipping those whose uuid it holds.
    /// To a subagent's: the main transcript's file first (it is what makes the
    /// session exist), then the subagents' folder (synced as `dir_sync` says), then
    /// `subagent_ready` (what the store records of the subagent before its
    /// transcript is written to), then the entries. `while_syncing` is called as
    /// [`JsonlWriter::append_indices_then`] calls it. The caller holds the session's
    /// writer lock.
    pub fn append_then(
        &mut self,
        files: &impl TranscriptFiles,
        key: &SessionKey,
        entries: &[Entry],
        dir_sync: DirSync,
        subagent_ready: impl FnOnce() -> Result<(), StoreError>,
        while_syncing: impl FnOnce(&[usize]),
    ) -> Result<Appended, StoreError> {
        if key.subagent_name().is_some() {
            self.writer(files, &key.main()).append(&[])?;
            create_private_dir_all(&files.subagents_dir(key.session_id()), dir_sync)?;
            subagent_ready()?;
        }
        let (written, report, _warnings) = self
            .writer(files, key)
            .append_indices_then(entries, while_syncing)?;
        Ok((written, report))
    }
}
