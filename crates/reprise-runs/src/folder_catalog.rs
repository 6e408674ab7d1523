//! The [`RunCatalog`] of run folders: each run a folder of the runs directory,
//! holding its conversation. The files are read and written on the blocking pool.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use jiff::Timestamp;
use reprise_redact::Redactor;
use reprise_session::{Loaded, SessionStore};
use uuid::Uuid;

use crate::catalog::{
    CatalogError, CatalogFork, RunCatalog, RunFork, RunSearch, RunSizes, TagChange, newest,
};
use crate::{
    Conversation, ConversationStream, EntryStream, Labels, RecordReader, RunError, RunFolder,
    RunList, RunRecord, SearchHit, change_tags, create_run_store, find_run_or_title, fork_run,
    list_runs, read_conversation_with_warnings, read_labels, read_run_entries, read_run_record,
    search_runs, set_title, stream_conversation, stream_run_entries, subagent_names, summarize_run,
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

    /// Runs `work` on the runs directory on the blocking pool.
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Path) -> Result<T, CatalogError> + Send + 'static,
    ) -> Result<T, CatalogError> {
        on_blocking_pool(self.runs_dir.clone(), work).await
    }

    /// Runs `work` on a run's folder on the blocking pool.
    async fn in_folder<T: Send + 'static>(
        &self,
        folder: &RunFolder,
        work: impl FnOnce(&Path) -> Result<T, CatalogError> + Send + 'static,
    ) -> Result<T, CatalogError> {
        on_blocking_pool(folder.dir.clone(), work).await
    }
}

/// Runs `work` on `dir` on the blocking pool.
async fn on_blocking_pool<T: Send + 'static>(
    dir: PathBuf,
    work: impl FnOnce(&Path) -> Result<T, CatalogError> + Send + 'static,
) -> Result<T, CatalogError> {
    tokio::task::spawn_blocking(move || work(&dir))
        .await
        .map_err(CatalogError::Interrupted)?
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

    async fn list(&self) -> Result<RunList, CatalogError> {
        self.blocking(|runs_dir| Ok(list_runs(runs_dir)?)).await
    }

    async fn list_newest(&self, limit: u32) -> Result<(RunList, bool), CatalogError> {
        Ok(newest(self.list().await?, limit))
    }

    async fn find(&self, spec: &str) -> Result<RunFolder, CatalogError> {
        let spec = spec.to_owned();
        self.blocking(move |runs_dir| Ok(find_run_or_title(runs_dir, &spec)?))
            .await
    }

    async fn reopen(&self, folder: &RunFolder) -> Result<RunFolder, CatalogError> {
        self.in_folder(folder, |dir| Ok(RunFolder::open(dir)?))
            .await
    }

    async fn conversation(&self, folder: &RunFolder) -> Result<Conversation, CatalogError> {
        self.in_folder(folder, |dir| Ok(read_conversation_with_warnings(dir)?))
            .await
    }

    async fn stream_conversation(
        &self,
        folder: &RunFolder,
    ) -> Result<ConversationStream, CatalogError> {
        let dir = folder.dir.clone();
        Ok(ConversationStream::read_blocking(move |sink| {
            Ok(stream_conversation(&dir, sink)?)
        }))
    }

    async fn record(&self, folder: &RunFolder) -> Result<RunRecord, CatalogError> {
        self.in_folder(folder, |dir| Ok(read_run_record(dir)?))
            .await
    }

    async fn record_reader(&self, folder: &RunFolder) -> Result<RecordReader, CatalogError> {
        self.in_folder(folder, |dir| Ok(RecordReader::folder(dir)?))
            .await
    }

    async fn stream_entries(
        &self,
        folder: &RunFolder,
        subagent: Option<&str>,
    ) -> Result<EntryStream, CatalogError> {
        let dir = folder.dir.clone();
        let subagent = subagent.map(str::to_owned);
        if let Some(name) = &subagent {
            reprise_session::validate_id("subagent", name).map_err(RunError::from)?;
        }
        Ok(EntryStream::read_blocking(move |sink| {
            Ok(stream_run_entries(&dir, subagent.as_deref(), sink)?)
        }))
    }

    async fn subagent_names(&self, folder: &RunFolder) -> Result<Vec<String>, CatalogError> {
        self.in_folder(folder, |dir| Ok(subagent_names(dir))).await
    }

    async fn entries(
        &self,
        folder: &RunFolder,
        subagent: Option<&str>,
    ) -> Result<Option<Loaded>, CatalogError> {
        let subagent = subagent.map(str::to_owned);
        self.in_folder(folder, move |dir| {
            Ok(read_run_entries(dir, subagent.as_deref())?)
        })
        .await
    }

    async fn updated_at(&self, folder: &RunFolder) -> Option<Timestamp> {
        self.in_folder(folder, |dir| {
            Ok(summarize_run(dir).map(|run| run.updated_at))
        })
        .await
        .ok()
        .flatten()
    }

    async fn new_session_id(&self, _folder: &RunFolder) -> Result<String, CatalogError> {
        Ok(Uuid::now_v7().to_string())
    }

    fn store_for(&self, folder: &RunFolder, redactor: &Redactor) -> Arc<dyn SessionStore> {
        Arc::new(create_run_store(&folder.dir).with_redactor(redactor.clone()))
    }

    async fn fork(&self, fork: RunFork<'_>) -> Result<CatalogFork, CatalogError> {
        let (source_dir, target_dir) = (fork.source.dir.clone(), fork.target.dir.clone());
        let up_to = fork.up_to;
        let forked = tokio::task::spawn_blocking(move || fork_run(&source_dir, &target_dir, up_to))
            .await
            .map_err(CatalogError::ForkInterrupted)?
            .map_err(|error| fork.failed(error))?;
        Ok(CatalogFork {
            folder: self.reopen(&fork.target).await?,
            store: Some(forked.store),
        })
    }

    async fn delete(&self, folder: &RunFolder) -> Result<(), CatalogError> {
        self.in_folder(folder, |dir| {
            std::fs::remove_dir_all(dir).map_err(|source| CatalogError::Delete {
                dir: dir.to_path_buf(),
                source,
            })
        })
        .await
    }

    async fn labels(&self, folder: &RunFolder) -> Result<Option<Labels>, CatalogError> {
        self.in_folder(folder, |dir| Ok(Some(read_labels(dir)?)))
            .await
    }

    async fn set_title(
        &self,
        folder: &RunFolder,
        title: &str,
    ) -> Result<Option<Labels>, CatalogError> {
        let title = title.to_owned();
        self.in_folder(folder, move |dir| Ok(Some(set_title(dir, &title)?)))
            .await
    }

    async fn change_tags(
        &self,
        folder: &RunFolder,
        tags: TagChange,
    ) -> Result<Option<Labels>, CatalogError> {
        self.in_folder(folder, move |dir| {
            Ok(Some(change_tags(dir, &tags.add, &tags.remove)?))
        })
        .await
    }

    async fn ensure_local_folder(&self, _folder: &RunFolder) -> Result<(), CatalogError> {
        // The run folder is where its conversation is: created with it.
        Ok(())
    }

    async fn search(&self, search: RunSearch<'_>) -> Result<Vec<SearchHit>, CatalogError> {
        let RunSearch { runs, query } = search;
        let (runs, query) = (runs.to_vec(), query.clone());
        self.blocking(move |_| Ok(search_runs(&runs, &query)?))
            .await
    }

    async fn sizes(&self) -> Result<RunSizes, CatalogError> {
        self.blocking(|runs_dir| {
            let list = list_runs(runs_dir)?;
            let total = folder_bytes(runs_dir);
            Ok(RunSizes::measured(
                list,
                |run| folder_bytes(&run.dir),
                total,
            ))
        })
        .await
    }

    fn import_dir(&self) -> PathBuf {
        self.runs_dir.clone()
    }

    async fn take_in(&self, written: RunFolder) -> Result<RunFolder, CatalogError> {
        Ok(written)
    }

    async fn close(&self) {}
}
