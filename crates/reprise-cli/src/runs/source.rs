//! Where conversations are kept: in the run folders, or in a PostgreSQL database that
//! many machines reach (`--database-url`).
//!
//! With a database, a run is a session there, named like a run folder (its start
//! time): listing, showing, forking, deleting and resuming read the database, so a
//! conversation started on one machine is continued on another. The run's folder
//! under the runs directory still holds what is local to a machine, `session.log` and
//! `transcript.jsonl`; it is created where a run is first opened.
//!
//! The screens ask for runs from code that is not async (a key press opens the
//! `/resume` list); a database query there blocks that worker thread of the runtime
//! for the length of one query, not the others.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use jiff::Timestamp;
use reprise_postgres::{PgSessionStore, PgStoreOptions, SessionSummary};
use reprise_redact::Redactor;
use reprise_session::runs::{
    Conversation, ConversationMessage, LAST_RUN, RunFolder, RunList, RunStore, RunSummary,
    conversation_of, create_run_store, find_run_or_title, fold_title, list_runs,
    read_conversation_with_warnings, stream_conversation,
};
use reprise_session::{LoadWarning, SessionKey, SessionStore, validate_id};

/// How long a command waits for the database before saying it cannot be reached.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Most names shown when a prefix names several runs.
const MAX_CANDIDATES: u32 = 20;

/// The runs of this chat: folders, or sessions in a database.
#[derive(Clone)]
pub enum RunSource {
    /// Run folders under `runs_dir`, each holding its conversation.
    Folders {
        /// The runs directory.
        runs_dir: PathBuf,
    },
    /// Sessions in PostgreSQL; `runs_dir` holds each run's local files.
    Database {
        /// The runs directory.
        runs_dir: PathBuf,
        /// The sessions.
        store: PgSessionStore,
    },
}

/// A store to open a run's session with.
pub enum RunStoreOf {
    /// The run folder's own store.
    Folder(RunStore),
    /// The database.
    Database(PgSessionStore),
}

impl RunSource {
    /// The runs of `runs_dir`, or of the database at `database_url` when one is given
    /// (connecting to it, and bringing its schema up to date).
    pub async fn open(runs_dir: &Path, database_url: Option<&str>) -> Result<RunSource> {
        let runs_dir = runs_dir.to_path_buf();
        let Some(url) = database_url else {
            return Ok(RunSource::Folders { runs_dir });
        };
        let options = PgStoreOptions {
            acquire_timeout: CONNECT_TIMEOUT,
            ..PgStoreOptions::default()
        };
        // The error names the server (host, port, database), never the password.
        let store = PgSessionStore::connect(url, options)
            .await
            .context("cannot use the database")?;
        Ok(RunSource::Database { runs_dir, store })
    }

    /// The runs directory.
    pub fn runs_dir(&self) -> &Path {
        match self {
            RunSource::Folders { runs_dir } | RunSource::Database { runs_dir, .. } => runs_dir,
        }
    }

    /// Where the conversations are, for messages: the runs directory or the server.
    pub fn place(&self) -> String {
        match self {
            RunSource::Folders { runs_dir } => runs_dir.display().to_string(),
            RunSource::Database { store, .. } => format!("the database at {}", store.server()),
        }
    }

    /// The runs with a conversation, newest first.
    pub fn list(&self) -> Result<RunList> {
        match self {
            RunSource::Folders { runs_dir } => Ok(list_runs(runs_dir)?),
            RunSource::Database { store, .. } => {
                let summaries = wait(store.list_summaries(None))?;
                Ok(RunList {
                    runs: summaries
                        .into_iter()
                        .filter(|summary| validate_id("run", &summary.info.id).is_ok())
                        .map(|summary| self.summary_of(summary))
                        .collect(),
                    warnings: Vec::new(),
                })
            }
        }
    }

    /// The newest `limit` runs with a conversation, and whether there are older ones.
    /// From a database this reads that many rows of the session index, not every
    /// session.
    pub fn list_newest(&self, limit: u32) -> Result<(RunList, bool)> {
        let mut list = match self {
            RunSource::Folders { runs_dir } => list_runs(runs_dir)?,
            RunSource::Database { store, .. } => {
                let summaries = wait(store.list_summaries(Some(limit.saturating_add(1))))?;
                RunList {
                    runs: summaries
                        .into_iter()
                        .filter(|summary| validate_id("run", &summary.info.id).is_ok())
                        .map(|summary| self.summary_of(summary))
                        .collect(),
                    warnings: Vec::new(),
                }
            }
        };
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let more = list.runs.len() > limit;
        list.runs.truncate(limit);
        Ok((list, more))
    }

    /// The run `spec` names: `last`, a run's name, a unique prefix of one, or a
    /// run's title (compared as the run folders compare them).
    pub fn find(&self, spec: &str) -> Result<RunFolder> {
        let RunSource::Database { store, .. } = self else {
            return Ok(find_run_or_title(self.runs_dir(), spec)?);
        };
        if spec == LAST_RUN {
            return match wait(store.list_summaries(Some(1)))?.into_iter().next() {
                Some(summary) => Ok(self.folder_of(&summary.info.id)),
                None => bail!("no runs with a conversation in {}", self.place()),
            };
        }
        let not_a_name = match self.find_by_name(store, spec)? {
            Ok(folder) => return Ok(folder),
            Err(why) => why,
        };
        let wanted = fold_title(spec);
        let titled: Vec<String> = wait(store.titles())?
            .into_iter()
            .filter(|(_, title)| !wanted.is_empty() && fold_title(title) == wanted)
            .map(|(id, _)| id)
            .collect();
        match titled.as_slice() {
            // Neither a name nor a title: with a space it was meant as a title; else
            // what was wrong with it as a name.
            [] if spec.contains(char::is_whitespace) => {
                bail!("no run named {spec} in {}", self.place())
            }
            [] => Err(not_a_name),
            [only] => Ok(self.folder_of(only)),
            several => bail!(
                "{spec} is the title of more than one run in {}: {}",
                self.place(),
                several.join(", ")
            ),
        }
    }

    /// The run whose name is `spec` or starts with it; the inner error when none
    /// is (the caller may still find it by title).
    fn find_by_name(
        &self,
        store: &PgSessionStore,
        spec: &str,
    ) -> Result<Result<RunFolder, anyhow::Error>> {
        if let Err(error) = validate_id("run", spec) {
            return Ok(Err(error.into()));
        }
        if wait(store.summary(spec))?.is_some() {
            return Ok(Ok(self.folder_of(spec)));
        }
        let candidates = wait(store.ids_starting_with(spec, MAX_CANDIDATES))?;
        match candidates.as_slice() {
            [] => Ok(Err(anyhow::anyhow!(
                "no run named {spec} in {}",
                self.place()
            ))),
            [only] => Ok(Ok(self.folder_of(only))),
            many => bail!(
                "{spec} names more than one run in {}: {}",
                self.place(),
                many.join(", ")
            ),
        }
    }

    /// A run as it is now: with the session it holds, or `None` before the first
    /// message.
    pub fn reopen(&self, folder: &RunFolder) -> Result<RunFolder> {
        match self {
            RunSource::Folders { .. } => Ok(RunFolder::open(&folder.dir)?),
            RunSource::Database { store, .. } => {
                let exists = wait(store.summary(folder.name()))?.is_some();
                Ok(RunFolder {
                    dir: folder.dir.clone(),
                    session_id: exists.then(|| folder.name().to_owned()),
                    warnings: Vec::new(),
                })
            }
        }
    }

    /// What a run's conversation shows: the person's messages and the replies.
    pub fn conversation(&self, folder: &RunFolder) -> Result<Conversation> {
        match self {
            RunSource::Folders { .. } => Ok(read_conversation_with_warnings(&folder.dir)?),
            RunSource::Database { store, .. } => {
                let Some(session_id) = folder.session_id.as_deref() else {
                    return Ok(Conversation::default());
                };
                let loaded = wait(store.load(&SessionKey::session(session_id)?))?;
                Ok(loaded.map(conversation_of).unwrap_or_default())
            }
        }
    }

    /// A run's conversation as [`RunSource::conversation`] reads it, each message
    /// handed to `sink` as it is read (from a folder; the database's rows are loaded
    /// first); returns the warnings.
    pub fn stream_conversation(
        &self,
        folder: &RunFolder,
        sink: &mut dyn FnMut(ConversationMessage),
    ) -> Result<Vec<LoadWarning>> {
        match self {
            RunSource::Folders { .. } => Ok(stream_conversation(&folder.dir, sink)?),
            RunSource::Database { .. } => {
                let conversation = self.conversation(folder)?;
                conversation.messages.into_iter().for_each(sink);
                Ok(conversation.warnings)
            }
        }
    }

    /// When a run's conversation was last added to, when known.
    pub fn updated_at(&self, folder: &RunFolder) -> Option<Timestamp> {
        match self {
            RunSource::Folders { .. } => {
                reprise_session::runs::summarize_run(&folder.dir).map(|run| run.updated_at)
            }
            RunSource::Database { store, .. } => wait(store.summary(folder.name()))
                .ok()
                .flatten()
                .map(|summary| summary.info.updated_at),
        }
    }

    /// The session id a new run gets: a fresh uuid in a folder, the run's name in the
    /// database (refused if a run of that name exists there, started elsewhere in the
    /// same millisecond).
    pub async fn new_session_id(&self, folder: &RunFolder) -> Result<String> {
        match self {
            RunSource::Folders { .. } => Ok(uuid::Uuid::now_v7().to_string()),
            RunSource::Database { store, .. } => {
                let name = folder.name();
                if store.summary(name).await?.is_some() {
                    bail!(
                        "a run named {name} already exists in {}; start again",
                        self.place()
                    );
                }
                Ok(name.to_owned())
            }
        }
    }

    /// The store that keeps a run's session.
    pub fn store_for(&self, folder: &RunFolder, redactor: &Redactor) -> RunStoreOf {
        match self {
            RunSource::Folders { .. } => {
                RunStoreOf::Folder(create_run_store(&folder.dir).with_redactor(redactor.clone()))
            }
            RunSource::Database { store, .. } => {
                RunStoreOf::Database(store.clone().with_redactor(redactor.clone()))
            }
        }
    }

    /// The store that keeps a run's session, to read it.
    pub fn reader_for(&self, folder: &RunFolder) -> Arc<dyn SessionStore> {
        match self.store_for(folder, &Redactor::new()) {
            RunStoreOf::Folder(store) => Arc::new(store),
            RunStoreOf::Database(store) => Arc::new(store),
        }
    }

    /// Copies a run's session (up to entry `up_to`, or all) into the database under
    /// `target`'s name.
    pub async fn fork_in_database(
        &self,
        source: &RunFolder,
        target: &RunFolder,
        up_to: Option<uuid::Uuid>,
    ) -> Result<RunFolder> {
        let RunSource::Database { store, .. } = self else {
            bail!("not a database");
        };
        let Some(session_id) = source.session_id.as_deref() else {
            bail!("run {} has no conversation to fork", source.name());
        };
        store
            .fork(session_id, target.name(), up_to)
            .await
            .with_context(|| format!("cannot fork run {}", source.name()))?;
        Ok(self.folder_of(target.name()))
    }

    /// Deletes a run's session from the database and its local folder, if any. The
    /// caller holds the session's writer lock.
    pub async fn delete_from_database(&self, folder: &RunFolder) -> Result<()> {
        let RunSource::Database { store, .. } = self else {
            bail!("not a database");
        };
        store.delete(&SessionKey::session(folder.name())?).await?;
        match std::fs::remove_dir_all(&folder.dir) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                Err(error).with_context(|| format!("cannot delete {}", folder.dir.display()))
            }
            _ => Ok(()),
        }
    }

    /// Creates a run's local folder (for `session.log` and `transcript.jsonl`) where it
    /// is missing: a run of the database opened on this machine for the first time.
    pub fn ensure_local_folder(&self, folder: &RunFolder) -> Result<()> {
        if matches!(self, RunSource::Database { .. }) && !folder.dir.is_dir() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&folder.dir)
                .with_context(|| format!("cannot create {}", folder.dir.display()))?;
        }
        Ok(())
    }

    /// Whether conversations are in a database.
    pub fn is_database(&self) -> bool {
        matches!(self, RunSource::Database { .. })
    }

    /// Lets go of the database (releases reach the server first).
    pub async fn close(&self) {
        if let RunSource::Database { store, .. } = self {
            store.close().await;
        }
    }

    fn folder_of(&self, session_id: &str) -> RunFolder {
        RunFolder {
            dir: self.runs_dir().join(session_id),
            session_id: Some(session_id.to_owned()),
            warnings: Vec::new(),
        }
    }

    fn summary_of(&self, summary: SessionSummary) -> RunSummary {
        RunSummary {
            dir: self.runs_dir().join(&summary.info.id),
            session_id: summary.info.id,
            updated_at: summary.info.updated_at,
            last_message: summary.last_message,
            first_message: summary.first_message,
            message_count: summary.message_count,
            title: summary.title,
            tags: summary.tags,
        }
    }
}

/// Waits for a database query from code that is not async (see the module's
/// documentation).
fn wait<F: Future>(future: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(future))
}
