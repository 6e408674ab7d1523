//! The [`RunCatalog`] of run folders: each run a folder of the runs directory,
//! holding its conversation.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use jiff::Timestamp;
use reprise_redact::Redactor;
use reprise_session::{LoadWarning, Loaded, SessionStore};
use uuid::Uuid;

use crate::catalog::{CatalogError, CatalogFork, RunCatalog, RunSizes, newest};
use crate::{
    Conversation, ConversationMessage, Labels, RunFolder, RunList, RunRecord, RunSummary,
    SearchHit, SearchQuery, change_tags, create_run_store, find_run_or_title, fork_run, list_runs,
    read_conversation_with_warnings, read_labels, read_run_entries, read_run_record, search_runs,
    set_title, stream_conversation, subagent_names, summarize_run,
};

/// The run folders under one runs directory.
#[derive(Clone, Debug)]
pub struct FolderCatalog {
    runs_dir: PathBuf,
}

impl FolderCatalog {
    /// The runs of `runs_dir`.
    pub fn new(runs_dir: impl Into<PathBuf>) -> Self {
        FolderCatalog {
            runs_dir: runs_dir.into(),
        }
    }
}

/// The bytes of the files under `dir`, walked without following links (an
/// unreadable folder counts as empty); iterative, so a deep tree cannot exhaust the
/// stack.
pub fn folder_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => pending.push(entry.path()),
                Ok(_) => total += entry.metadata().map_or(0, |meta| meta.len()),
                Err(_) => {}
            }
        }
    }
    total
}

#[async_trait::async_trait]
impl RunCatalog for FolderCatalog {
    fn runs_dir(&self) -> &Path {
        &self.runs_dir
    }

    fn place(&self) -> String {
        self.runs_dir.display().to_string()
    }

    fn listing_page(&self) -> Option<u32> {
        None
    }

    fn list(&self) -> Result<RunList, CatalogError> {
        Ok(list_runs(&self.runs_dir)?)
    }

    fn list_newest(&self, limit: u32) -> Result<(RunList, bool), CatalogError> {
        Ok(newest(list_runs(&self.runs_dir)?, limit))
    }

    fn find(&self, spec: &str) -> Result<RunFolder, CatalogError> {
        Ok(find_run_or_title(&self.runs_dir, spec)?)
    }

    fn reopen(&self, folder: &RunFolder) -> Result<RunFolder, CatalogError> {
        Ok(RunFolder::open(&folder.dir)?)
    }

    fn conversation(&self, folder: &RunFolder) -> Result<Conversation, CatalogError> {
        Ok(read_conversation_with_warnings(&folder.dir)?)
    }

    fn stream_conversation(
        &self,
        folder: &RunFolder,
        sink: &mut dyn FnMut(ConversationMessage),
    ) -> Result<Vec<LoadWarning>, CatalogError> {
        Ok(stream_conversation(&folder.dir, sink)?)
    }

    fn record(&self, folder: &RunFolder) -> Result<RunRecord, CatalogError> {
        Ok(read_run_record(&folder.dir)?)
    }

    fn subagent_names(&self, folder: &RunFolder) -> Result<Vec<String>, CatalogError> {
        Ok(subagent_names(&folder.dir))
    }

    fn entries(
        &self,
        folder: &RunFolder,
        subagent: Option<&str>,
    ) -> Result<Option<Loaded>, CatalogError> {
        Ok(read_run_entries(&folder.dir, subagent)?)
    }

    fn updated_at(&self, folder: &RunFolder) -> Option<Timestamp> {
        summarize_run(&folder.dir).map(|run| run.updated_at)
    }

    async fn new_session_id(&self, _folder: &RunFolder) -> Result<String, CatalogError> {
        Ok(Uuid::now_v7().to_string())
    }

    fn store_for(&self, folder: &RunFolder, redactor: &Redactor) -> Arc<dyn SessionStore> {
        Arc::new(create_run_store(&folder.dir).with_redactor(redactor.clone()))
    }

    async fn fork(
        &self,
        source: &RunFolder,
        target: RunFolder,
        up_to: Option<Uuid>,
    ) -> Result<CatalogFork, CatalogError> {
        let source_dir = source.dir.clone();
        let target_dir = target.dir.clone();
        let forked = tokio::task::spawn_blocking(move || fork_run(&source_dir, &target_dir, up_to))
            .await
            .map_err(CatalogError::ForkInterrupted)?
            .map_err(|error| CatalogError::Fork {
                run: source.name().to_owned(),
                source: Box::new(error.into()),
            })?;
        Ok(CatalogFork {
            folder: RunFolder::open(&target.dir)?,
            store: Some(forked.store),
        })
    }

    async fn delete(&self, folder: &RunFolder) -> Result<(), CatalogError> {
        std::fs::remove_dir_all(&folder.dir).map_err(|source| CatalogError::Delete {
            dir: folder.dir.clone(),
            source,
        })
    }

    async fn labels(&self, folder: &RunFolder) -> Result<Option<Labels>, CatalogError> {
        Ok(Some(read_labels(&folder.dir)?))
    }

    async fn set_title(
        &self,
        folder: &RunFolder,
        title: &str,
    ) -> Result<Option<Labels>, CatalogError> {
        Ok(Some(set_title(&folder.dir, title)?))
    }

    async fn change_tags(
        &self,
        folder: &RunFolder,
        add: &[String],
        remove: &[String],
    ) -> Result<Option<Labels>, CatalogError> {
        Ok(Some(change_tags(&folder.dir, add, remove)?))
    }

    fn ensure_local_folder(&self, _folder: &RunFolder) -> Result<(), CatalogError> {
        // The run folder is where its conversation is: created with it.
        Ok(())
    }

    fn search(
        &self,
        runs: &[RunSummary],
        query: &SearchQuery,
    ) -> Result<Vec<SearchHit>, CatalogError> {
        Ok(search_runs(runs, query)?)
    }

    fn sizes(&self) -> Result<RunSizes, CatalogError> {
        let list = list_runs(&self.runs_dir)?;
        let total = folder_bytes(&self.runs_dir);
        Ok(RunSizes::measured(
            list,
            |run| folder_bytes(&run.dir),
            total,
        ))
    }

    fn import_dir(&self) -> PathBuf {
        self.runs_dir.clone()
    }

    async fn take_in(&self, written: RunFolder) -> Result<RunFolder, CatalogError> {
        Ok(written)
    }

    async fn close(&self) {}
}
