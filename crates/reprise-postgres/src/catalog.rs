//! The [`RunCatalog`] of the chat's runs kept in PostgreSQL, for a chat that many
//! machines reach.
//!
//! A run is a session here, named like a run folder (its start time): listing,
//! showing, forking, deleting and resuming read the database, so a conversation
//! started on one machine is continued on another. The run's folder under the runs
//! directory still holds what is local to a machine, `session.log` and
//! `transcript.jsonl`; it is created where a run is first opened.
//!
//! Every query is awaited: the catalog works on any runtime, a current-thread one
//! too.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use jiff::Timestamp;
use reprise_redact::Redactor;
use reprise_runs::{
    CatalogError, CatalogFork, Conversation, ConversationStream, LAST_RUN, Labels, RunCatalog,
    RunError, RunFolder, RunFork, RunList, RunRecord, RunSearch, RunSizes, RunSummary, SearchHit,
    TagChange, conversation_of, fold_title, newest,
};
use reprise_session::{Loaded, SessionFork, SessionKey, SessionStore, validate_id};

use crate::{PgSessionStore, SessionSummary, catalog_search, catalog_sizes};

/// Most names shown when a prefix names several runs.
const MAX_CANDIDATES: u32 = 20;

/// How many runs a listing shows unless all are asked for.
const LISTING_PAGE: u32 = 100;

/// The chat's runs as sessions of a [`PgSessionStore`]; `runs_dir` holds each run's
/// local files.
#[derive(Clone)]
pub struct PgRunCatalog {
    runs_dir: PathBuf,
    store: PgSessionStore,
}

impl PgRunCatalog {
    /// The runs kept in `store`, with their local files under `runs_dir`.
    pub fn new(runs_dir: impl Into<PathBuf>, store: PgSessionStore) -> Self {
        PgRunCatalog {
            runs_dir: runs_dir.into(),
            store,
        }
    }

    /// The store the runs are kept in.
    pub fn store(&self) -> &PgSessionStore {
        &self.store
    }

    fn folder_of(&self, session_id: &str) -> RunFolder {
        RunFolder {
            dir: self.runs_dir.join(session_id),
            session_id: Some(session_id.to_owned()),
            warnings: Vec::new(),
        }
    }

    fn summary_of(&self, summary: SessionSummary) -> RunSummary {
        RunSummary {
            dir: self.runs_dir.join(&summary.info.id),
            session_id: summary.info.id,
            updated_at: summary.info.updated_at,
            last_message: summary.last_message,
            first_message: summary.first_message,
            message_count: summary.message_count,
            title: summary.title,
            tags: summary.tags,
        }
    }

    async fn listed(&self, limit: Option<u32>) -> Result<RunList, CatalogError> {
        let summaries = self.store.list_summaries(limit).await?;
        Ok(RunList {
            runs: summaries
                .into_iter()
                .filter(|summary| validate_id("run", &summary.info.id).is_ok())
                .map(|summary| self.summary_of(summary))
                .collect(),
            warnings: Vec::new(),
        })
    }

    /// The run whose name is `spec` or starts with it; the inner error when none is
    /// (the caller may still find it by title).
    async fn find_by_name(
        &self,
        spec: &str,
    ) -> Result<Result<RunFolder, CatalogError>, CatalogError> {
        if let Err(error) = validate_id("run", spec) {
            return Ok(Err(RunError::InvalidId(error).into()));
        }
        if self.store.summary(spec).await?.is_some() {
            return Ok(Ok(self.folder_of(spec)));
        }
        let candidates = self.store.ids_starting_with(spec, MAX_CANDIDATES).await?;
        match candidates.as_slice() {
            [] => Ok(Err(CatalogError::NoSuchRun {
                spec: spec.to_owned(),
                place: self.place(),
            })),
            [only] => Ok(Ok(self.folder_of(only))),
            _ => Err(CatalogError::AmbiguousName {
                spec: spec.to_owned(),
                place: self.place(),
                candidates,
            }),
        }
    }
}

fn labels_of(summary: Option<SessionSummary>) -> Option<Labels> {
    summary.map(|summary| Labels {
        title: summary.title,
        tags: summary.tags,
    })
}

#[async_trait::async_trait]
impl RunCatalog for PgRunCatalog {
    fn runs_dir(&self) -> &Path {
        &self.runs_dir
    }

    fn place(&self) -> String {
        format!("the database at {}", self.store.server())
    }

    /// The newest `LISTING_PAGE` runs: one page of the session index.
    fn listing_page(&self) -> Option<u32> {
        Some(LISTING_PAGE)
    }

    async fn list(&self) -> Result<RunList, CatalogError> {
        self.listed(None).await
    }

    /// Reads that many rows of the session index, not every session.
    async fn list_newest(&self, limit: u32) -> Result<(RunList, bool), CatalogError> {
        Ok(newest(
            self.listed(Some(limit.saturating_add(1))).await?,
            limit,
        ))
    }

    async fn find(&self, spec: &str) -> Result<RunFolder, CatalogError> {
        if spec == LAST_RUN {
            return match self.store.list_summaries(Some(1)).await?.into_iter().next() {
                Some(summary) => Ok(self.folder_of(&summary.info.id)),
                None => Err(CatalogError::NoRuns {
                    place: self.place(),
                }),
            };
        }
        let not_a_name = match self.find_by_name(spec).await? {
            Ok(folder) => return Ok(folder),
            Err(why) => why,
        };
        let wanted = fold_title(spec);
        let titled: Vec<String> = self
            .store
            .titles()
            .await?
            .into_iter()
            .filter(|(_, title)| !wanted.is_empty() && fold_title(title) == wanted)
            .map(|(id, _)| id)
            .collect();
        match titled.as_slice() {
            // Neither a name nor a title: with a space it was meant as a title; else
            // what was wrong with it as a name.
            [] if spec.contains(char::is_whitespace) => Err(CatalogError::NoSuchRun {
                spec: spec.to_owned(),
                place: self.place(),
            }),
            [] => Err(not_a_name),
            [only] => Ok(self.folder_of(only)),
            _ => Err(CatalogError::AmbiguousTitle {
                spec: spec.to_owned(),
                place: self.place(),
                candidates: titled,
            }),
        }
    }

    async fn reopen(&self, folder: &RunFolder) -> Result<RunFolder, CatalogError> {
        let exists = self.store.summary(folder.name()).await?.is_some();
        Ok(RunFolder {
            dir: folder.dir.clone(),
            session_id: exists.then(|| folder.name().to_owned()),
            warnings: Vec::new(),
        })
    }

    async fn conversation(&self, folder: &RunFolder) -> Result<Conversation, CatalogError> {
        let Some(session_id) = folder.session_id.as_deref() else {
            return Ok(Conversation::default());
        };
        let key = SessionKey::session(session_id).map_err(RunError::InvalidId)?;
        let loaded = self.store.load(&key).await?;
        Ok(loaded.map(conversation_of).unwrap_or_default())
    }

    /// The rows are loaded first, then handed over.
    async fn stream_conversation(
        &self,
        folder: &RunFolder,
    ) -> Result<ConversationStream, CatalogError> {
        Ok(ConversationStream::of(self.conversation(folder).await?))
    }

    async fn record(&self, folder: &RunFolder) -> Result<RunRecord, CatalogError> {
        crate::run_record::record(&self.store, folder.name()).await
    }

    async fn subagent_names(&self, folder: &RunFolder) -> Result<Vec<String>, CatalogError> {
        let Some(session_id) = folder.session_id.as_deref() else {
            return Ok(Vec::new());
        };
        Ok(self
            .store
            .list_subkeys(session_id)
            .await?
            .iter()
            .filter_map(|key| key.subagent_name().map(str::to_owned))
            .collect())
    }

    async fn entries(
        &self,
        folder: &RunFolder,
        subagent: Option<&str>,
    ) -> Result<Option<Loaded>, CatalogError> {
        let Some(session_id) = folder.session_id.as_deref() else {
            return Ok(None);
        };
        let key = match subagent {
            None => SessionKey::session(session_id),
            Some(name) => SessionKey::subagent(session_id, name),
        }
        .map_err(RunError::InvalidId)?;
        Ok(self.store.load(&key).await?)
    }

    async fn updated_at(&self, folder: &RunFolder) -> Option<Timestamp> {
        self.store
            .summary(folder.name())
            .await
            .ok()
            .flatten()
            .map(|summary| summary.info.updated_at)
    }

    /// The run's name, refused if a run of that name exists (started elsewhere in the
    /// same millisecond).
    async fn new_session_id(&self, folder: &RunFolder) -> Result<String, CatalogError> {
        let name = folder.name();
        if self.store.summary(name).await?.is_some() {
            return Err(CatalogError::NameTaken {
                name: name.to_owned(),
                place: self.place(),
            });
        }
        Ok(name.to_owned())
    }

    fn store_for(&self, _folder: &RunFolder, redactor: &Redactor) -> Arc<dyn SessionStore> {
        Arc::new(self.store.clone().with_redactor(redactor.clone()))
    }

    async fn fork(&self, fork: RunFork<'_>) -> Result<CatalogFork, CatalogError> {
        let Some(session_id) = fork.source.session_id.as_deref() else {
            return Err(CatalogError::NothingToFork {
                run: fork.source.name().to_owned(),
            });
        };
        let copy = SessionFork::new(session_id, fork.target.name(), fork.up_to);
        self.store
            .fork(copy)
            .await
            .map_err(|error| fork.failed(error))?;
        Ok(CatalogFork {
            folder: self.folder_of(fork.target.name()),
            store: None,
        })
    }

    async fn delete(&self, folder: &RunFolder) -> Result<(), CatalogError> {
        let key = SessionKey::session(folder.name()).map_err(RunError::InvalidId)?;
        self.store.delete(&key).await?;
        match tokio::fs::remove_dir_all(&folder.dir).await {
            Err(source) if source.kind() != std::io::ErrorKind::NotFound => {
                Err(CatalogError::Delete {
                    dir: folder.dir.clone(),
                    source,
                })
            }
            _ => Ok(()),
        }
    }

    async fn labels(&self, folder: &RunFolder) -> Result<Option<Labels>, CatalogError> {
        Ok(labels_of(self.store.summary(folder.name()).await?))
    }

    async fn set_title(
        &self,
        folder: &RunFolder,
        title: &str,
    ) -> Result<Option<Labels>, CatalogError> {
        Ok(labels_of(self.store.set_title(folder.name(), title).await?))
    }

    async fn change_tags(
        &self,
        folder: &RunFolder,
        tags: TagChange,
    ) -> Result<Option<Labels>, CatalogError> {
        let name = folder.name();
        let summary = self
            .store
            .change_tags(name, &tags.add, &tags.remove)
            .await?;
        Ok(labels_of(summary))
    }

    async fn ensure_local_folder(&self, folder: &RunFolder) -> Result<(), CatalogError> {
        let is_dir = tokio::fs::metadata(&folder.dir)
            .await
            .is_ok_and(|meta| meta.is_dir());
        if !is_dir {
            tokio::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&folder.dir)
                .await
                .map_err(|source| CatalogError::CreateFolder {
                    dir: folder.dir.clone(),
                    source,
                })?;
        }
        Ok(())
    }

    /// The same hits, snippets and order as in run folders; the database sends only
    /// the entries that may match a literal query, and every entry of the runs
    /// searched for a regular expression, each decided by the folders' matcher.
    async fn search(&self, search: RunSearch<'_>) -> Result<Vec<SearchHit>, CatalogError> {
        let RunSearch { runs, query } = search;
        catalog_search::search(&self.store, runs, query).await
    }

    /// For a database, a run's bytes are what its entries (its subagents' included)
    /// take as stored, large ones compressed (`pg_column_size` of each entry); the
    /// total is what the session tables take on the server with their indexes and
    /// out-of-line values (`pg_total_relation_size`), the whole database's sessions
    /// together, so at least the runs' sum.
    async fn sizes(&self) -> Result<RunSizes, CatalogError> {
        let list = self.list().await?;
        let bytes = catalog_sizes::session_bytes(&self.store).await?;
        let total = catalog_sizes::total_bytes(&self.store).await?;
        Ok(RunSizes::measured(
            list,
            |run| bytes.get(&run.session_id).copied().unwrap_or(0),
            total,
        ))
    }

    /// `.imports` in the runs directory.
    fn import_dir(&self) -> PathBuf {
        self.runs_dir.join(".imports")
    }

    async fn take_in(&self, written: RunFolder) -> Result<RunFolder, CatalogError> {
        let name = crate::run_record::take_in(self, &written).await?;
        Ok(self.folder_of(&name))
    }

    /// Releases reach the server first.
    async fn close(&self) {
        // Closing the pool cannot fail: a release that did not land was logged where
        // it failed, and its lease expires on its own.
        let _ = self.store.close().await;
    }
}
