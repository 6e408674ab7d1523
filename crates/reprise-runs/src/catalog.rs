//! The catalog of runs: every operation the chat and its commands do on runs, behind
//! one object-safe trait, whether the runs are folders or sessions in a database.
//!
//! The chat lists, finds, opens, forks, labels and deletes runs; where the
//! conversations are kept decides how each is done. A trait object
//! (`Arc<dyn RunCatalog>`) lets the chat and every command be written once, and each
//! place that keeps runs answer for itself, including refusing, with a typed
//! [`CatalogError::NotSupported`], what it cannot do.
//!
//! Every operation that reads or writes runs is async, on any runtime (a
//! current-thread one too): a database is asked without blocking a thread, and run
//! folders are read and written on the blocking pool. What the catalog was made
//! with (its runs directory, where its conversations are, the store of a run) is
//! given at once.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use jiff::Timestamp;
use reprise_redact::Redactor;
use reprise_session::{Loaded, SessionStore, StoreError};
use uuid::Uuid;

use crate::{
    Conversation, ConversationStream, EntryStream, Labels, RecordReader, RunError, RunFolder,
    RunList, RunRecord, RunStore, RunSummary, SearchHit, SearchQuery, SearchRole,
};

/// What a fork made: the new run, and the store that owns the background sync of its
/// data when the fork copied files (closing or dropping it waits for that sync).
pub struct CatalogFork {
    /// The new run.
    pub folder: RunFolder,
    /// The store of the new run folder; `None` where the fork was complete when it
    /// returned (in a database).
    pub store: Option<RunStore>,
}

/// The copy [`RunCatalog::fork`] makes: the conversation of `source`, whole or up to
/// and including the entry `up_to`, into `target`, a run without a conversation.
#[derive(Clone, Debug)]
pub struct RunFork<'a> {
    /// The run copied.
    pub source: &'a RunFolder,
    /// The new run.
    pub target: RunFolder,
    /// The last entry copied, or `None` for the whole conversation.
    pub up_to: Option<Uuid>,
}

/// What [`RunCatalog::search`] looks for, and where.
#[derive(Clone, Copy, Debug)]
pub struct RunSearch<'a> {
    /// The runs searched; a hit names its run by its place in this list.
    pub runs: &'a [RunSummary],
    /// What is looked for.
    pub query: &'a SearchQuery,
}

impl RunFork<'_> {
    /// The error of this fork failing for `error`.
    pub fn failed(&self, error: impl Into<CatalogError>) -> CatalogError {
        CatalogError::Fork {
            run: self.source.name().to_owned(),
            source: Box::new(error.into()),
        }
    }
}

impl<'a> RunSearch<'a> {
    /// A search of `runs` for `query`.
    pub fn new(runs: &'a [RunSummary], query: &'a SearchQuery) -> Self {
        Self { runs, query }
    }
}

/// The tags [`RunCatalog::change_tags`] adds to a run and takes from it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TagChange {
    /// Tags added.
    pub add: Vec<String>,
    /// Tags removed.
    pub remove: Vec<String>,
}

impl TagChange {
    /// Adds `tags`.
    pub fn add(tags: Vec<String>) -> Self {
        Self {
            add: tags,
            remove: Vec::new(),
        }
    }

    /// Removes `tags`.
    pub fn remove(tags: Vec<String>) -> Self {
        Self {
            add: Vec::new(),
            remove: tags,
        }
    }
}

/// The space runs take, as `reprise du` shows it.
#[derive(Clone, Debug)]
pub struct RunSizes {
    /// Each run with a conversation and its bytes, largest first (then by name).
    pub runs: Vec<(RunSummary, u64)>,
    /// Everything the runs are kept in, runs and shared files together.
    pub total: u64,
}

impl RunSizes {
    /// The sizes of `runs`, each measured by `size_of`, put largest first (then by
    /// name), with `total`.
    pub fn measured(runs: RunList, size_of: impl Fn(&RunSummary) -> u64, total: u64) -> Self {
        let mut runs: Vec<(RunSummary, u64)> = runs
            .runs
            .into_iter()
            .map(|run| {
                let bytes = size_of(&run);
                (run, bytes)
            })
            .collect();
        runs.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.name().cmp(b.0.name())));
        RunSizes { runs, total }
    }
}

/// What went wrong in a [`RunCatalog`] operation.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// A run folder or one of its files failed.
    #[error(transparent)]
    Run(#[from] RunError),
    /// The store of the runs failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// `last` was asked for, and no run has a conversation.
    #[error("no runs with a conversation in {place}")]
    NoRuns {
        /// Where the runs are.
        place: String,
    },
    /// Nothing is named or titled what was asked for.
    #[error("no run named {spec} in {place}")]
    NoSuchRun {
        /// What was asked for.
        spec: String,
        /// Where the runs are.
        place: String,
    },
    /// A prefix that names more than one run.
    #[error("{spec} names more than one run in {place}: {}", .candidates.join(", "))]
    AmbiguousName {
        /// What was asked for.
        spec: String,
        /// Where the runs are.
        place: String,
        /// The runs it names.
        candidates: Vec<String>,
    },
    /// A title that more than one run has.
    #[error("{spec} is the title of more than one run in {place}: {}", .candidates.join(", "))]
    AmbiguousTitle {
        /// What was asked for.
        spec: String,
        /// Where the runs are.
        place: String,
        /// The runs with that title.
        candidates: Vec<String>,
    },
    /// A new run's name is taken (another machine started a run in the same
    /// millisecond).
    #[error("a run named {name} already exists in {place}; start again")]
    NameTaken {
        /// The name.
        name: String,
        /// Where the runs are.
        place: String,
    },
    /// A fork of a run without a conversation.
    #[error("run {run} has no conversation to fork")]
    NothingToFork {
        /// The run.
        run: String,
    },
    /// A fork that failed.
    #[error("cannot fork run {run}")]
    Fork {
        /// The run forked.
        run: String,
        /// Why.
        #[source]
        source: Box<CatalogError>,
    },
    /// The task copying a fork ended before it was done.
    #[error("the fork was interrupted")]
    ForkInterrupted(#[source] tokio::task::JoinError),
    /// The task reading or writing run folders ended before it was done.
    #[error("the work on the runs was interrupted")]
    Interrupted(#[source] tokio::task::JoinError),
    /// A run's folder could not be removed.
    #[error("cannot delete {}", .dir.display())]
    Delete {
        /// The folder.
        dir: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A run's local folder could not be created.
    #[error("cannot create {}", .dir.display())]
    CreateFolder {
        /// The folder.
        dir: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// An operation this catalog does not do, and why.
    #[error("{operation} is not supported on {place}: {reason}")]
    NotSupported {
        /// The operation (`search`, `du`, …).
        operation: &'static str,
        /// Where the runs are.
        place: String,
        /// Why it is not done there.
        reason: &'static str,
    },
}

/// The runs of the chat, wherever they are kept; see the module documentation.
#[async_trait::async_trait]
pub trait RunCatalog: Send + Sync {
    /// The runs directory: run folders, or each run's local files (`session.log`,
    /// `transcript.jsonl`) when the conversations are elsewhere.
    fn runs_dir(&self) -> &Path;

    /// Where the conversations are, for messages: the runs directory or the server.
    fn place(&self) -> String;

    /// How many runs a listing of every run shows unless all are asked for: `None`
    /// where listing them all costs what listing a page does (run folders are all
    /// read to be sorted); a page of a database's session index, however many
    /// sessions it holds.
    fn listing_page(&self) -> Option<u32>;

    /// The runs with a conversation, newest first.
    async fn list(&self) -> Result<RunList, CatalogError>;

    /// The newest `limit` runs with a conversation, and whether there are older ones.
    async fn list_newest(&self, limit: u32) -> Result<(RunList, bool), CatalogError>;

    /// The run `spec` names: `last`, a run's name, a unique prefix of one, or a run's
    /// title.
    async fn find(&self, spec: &str) -> Result<RunFolder, CatalogError>;

    /// A run as it is now: with the session it holds, or `None` before the first
    /// message.
    async fn reopen(&self, folder: &RunFolder) -> Result<RunFolder, CatalogError>;

    /// What a run's conversation shows: the person's messages and the replies.
    async fn conversation(&self, folder: &RunFolder) -> Result<Conversation, CatalogError>;

    /// A run's conversation as [`RunCatalog::conversation`] reads it, its messages
    /// handed over as they are read, then the warnings
    /// ([`ConversationStream::finish`]).
    async fn stream_conversation(
        &self,
        folder: &RunFolder,
    ) -> Result<ConversationStream, CatalogError>;

    /// A run as it is kept, whole, for an export: its record (`session.json`, or the
    /// same fields where runs are kept elsewhere), its conversation's entries and
    /// each subagent's.
    async fn record(&self, folder: &RunFolder) -> Result<RunRecord, CatalogError>;

    /// A run as [`RunCatalog::record`] reads it, its entries read as they are taken
    /// (read whole first where runs are kept elsewhere than in folders).
    async fn record_reader(&self, folder: &RunFolder) -> Result<RecordReader, CatalogError> {
        Ok(RecordReader::whole(self.record(folder).await?))
    }

    /// The entries of a run's conversation (`subagent` `None`) or of one of its
    /// subagents' transcripts as [`RunCatalog::entries`] reads them, handed over as
    /// they are read (read whole first where runs are kept elsewhere than in
    /// folders); none where there is no such transcript.
    async fn stream_entries(
        &self,
        folder: &RunFolder,
        subagent: Option<&str>,
    ) -> Result<EntryStream, CatalogError> {
        let loaded = self.entries(folder, subagent).await?.unwrap_or_default();
        Ok(EntryStream::whole(loaded.entries, loaded.warnings))
    }

    /// The names of the subagents with a transcript in a run, in order; none for a
    /// run without subagents (which costs one directory read, or one query).
    async fn subagent_names(&self, folder: &RunFolder) -> Result<Vec<String>, CatalogError>;

    /// The entries of a run's conversation (`subagent` `None`) or of one of its
    /// subagents' transcripts, as the agent loads them, with what was skipped or
    /// repaired; `None` where there is no such transcript.
    async fn entries(
        &self,
        folder: &RunFolder,
        subagent: Option<&str>,
    ) -> Result<Option<Loaded>, CatalogError>;

    /// When a run's conversation was last added to, when known.
    async fn updated_at(&self, folder: &RunFolder) -> Option<Timestamp>;

    /// The session id a new run gets.
    async fn new_session_id(&self, folder: &RunFolder) -> Result<String, CatalogError>;

    /// The store that keeps a run's session, to write it (what it writes beside the
    /// conversation passes `redactor`). Making it reads nothing.
    fn store_for(&self, folder: &RunFolder, redactor: &Redactor) -> Arc<dyn SessionStore>;

    /// Makes the copy `fork` names: a run's conversation, whole or up to an entry, in
    /// a run without one.
    async fn fork(&self, fork: RunFork<'_>) -> Result<CatalogFork, CatalogError>;

    /// Deletes a run: its conversation and its local folder. The caller holds the
    /// session's writer lock.
    async fn delete(&self, folder: &RunFolder) -> Result<(), CatalogError>;

    /// A run's title and tags; `None` when the run has no conversation.
    async fn labels(&self, folder: &RunFolder) -> Result<Option<Labels>, CatalogError>;

    /// Gives a run its title (an empty one removes it); `None` when the run has no
    /// conversation to name.
    async fn set_title(
        &self,
        folder: &RunFolder,
        title: &str,
    ) -> Result<Option<Labels>, CatalogError>;

    /// Adds and removes tags of a run; `None` when the run has no conversation.
    async fn change_tags(
        &self,
        folder: &RunFolder,
        tags: TagChange,
    ) -> Result<Option<Labels>, CatalogError>;

    /// Creates a run's local folder (for `session.log` and `transcript.jsonl`) where
    /// it is missing.
    async fn ensure_local_folder(&self, folder: &RunFolder) -> Result<(), CatalogError>;

    /// The messages of `search.runs` that match `search.query`.
    async fn search(&self, search: RunSearch<'_>) -> Result<Vec<SearchHit>, CatalogError>;

    /// The names of the runs whose person's messages contain `text` (ignoring
    /// case), newest first, for a picker's filter; none for a blank `text`. Every run
    /// with a conversation is searched, as [`RunCatalog::search`] does.
    async fn runs_with_user_text(&self, text: &str) -> Result<Vec<String>, CatalogError> {
        if text.trim().is_empty() {
            return Ok(Vec::new());
        }
        let runs = self.list().await?.runs;
        let query = SearchQuery {
            ignore_case: true,
            role: Some(SearchRole::User),
            max_per_run: Some(1),
            ..SearchQuery::literal(text)
        };
        Ok(self
            .search(RunSearch::new(&runs, &query))
            .await?
            .into_iter()
            .filter_map(|hit| runs.get(hit.run).map(|run| run.name().to_owned()))
            .collect())
    }

    /// The space the runs take.
    async fn sizes(&self) -> Result<RunSizes, CatalogError>;

    /// Where an import (`reprise-import`) writes the run folders it converts before
    /// [`RunCatalog::take_in`] takes each in: the runs directory itself for run
    /// folders (where an import also finds what it imported before); a folder of
    /// its own where runs are kept elsewhere, emptied as the runs are taken in (an
    /// import there does not know what was imported before).
    fn import_dir(&self) -> PathBuf;

    /// Takes in a run folder an import wrote in [`RunCatalog::import_dir`], with its
    /// conversation and subagents, as a run of the catalog; returns that run. Run
    /// folders are in place already; elsewhere the entries are copied into a new
    /// session named like the folder, and the folder is removed.
    async fn take_in(&self, written: RunFolder) -> Result<RunFolder, CatalogError>;

    /// Lets go of what the catalog holds open (a database's connections).
    async fn close(&self);
}

/// The first `limit` runs of `list`, and whether there were more.
pub fn newest(mut list: RunList, limit: u32) -> (RunList, bool) {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let more = list.runs.len() > limit;
    list.runs.truncate(limit);
    (list, more)
}
