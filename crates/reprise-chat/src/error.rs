//! What can go wrong in the chat's logic: each failure of a library underneath kept
//! whole as the source, and the chat's own refusals (nothing to fork, no such
//! message to rewind to) with what a person needs to act.
//!
//! A screen or command shows an error with its causes
//! ([`with_causes`](crate::error_text::with_causes), or anyhow's `{:#}` once it is an
//! `anyhow::Error`): the variants below name what was being done, their sources say
//! why it failed.

use std::path::PathBuf;

use reprise_agent::AgentError;
use reprise_checkpoint::CheckpointError;
use reprise_provider::ProviderError;
use reprise_runs::{CatalogError, RunError};
use reprise_session::{IdError, StoreError};

use crate::config::ConfigError;

/// A result of the chat's logic.
pub type Result<T, E = ChatError> = std::result::Result<T, E>;

/// Why an operation of the chat failed.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    /// The settings could not be resolved.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The catalog of runs failed.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// A run folder or one of its files failed.
    #[error(transparent)]
    Run(#[from] RunError),
    /// The store of a conversation failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A session id is not one a store takes.
    #[error(transparent)]
    Id(#[from] IdError),
    /// The checkpoints of a working folder failed.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// The MCP servers' or the gate's configuration is wrong.
    #[error(transparent)]
    Mcp(#[from] reprise_mcp::ConfigError),
    /// A file or folder outside the runs failed (the working directory).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A new run folder could not be made.
    #[error("cannot create a run folder in {}", .dir.display())]
    NewRunFolder {
        /// The runs directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: RunError,
    },
    /// The agent of a run could not be started over its conversation.
    #[error("cannot open run {run}")]
    OpenRun {
        /// The run.
        run: String,
        /// Why.
        #[source]
        source: AgentError,
    },
    /// The run is open in another chat (its conversation's writer lock is held):
    /// the message says how to continue a copy of it instead.
    #[error(
        "cannot open run {run}, which another chat has open \
         (`reprise --resume {run} --fork-session` continues a copy of it)"
    )]
    RunOpenElsewhere {
        /// The run.
        run: String,
        /// Why (the store's lock).
        #[source]
        source: AgentError,
    },
    /// The model client could not be made from the settings.
    #[error("cannot use the model server at {base_url}")]
    ModelServer {
        /// The endpoint.
        base_url: String,
        /// Why.
        #[source]
        source: ProviderError,
    },
    /// The database that keeps the conversations could not be reached or set up.
    #[error("cannot use the database")]
    Database(#[source] reprise_postgres::PgStoreError),
    /// `/rename` in a run that has no conversation yet.
    #[error("this run has no conversation to name yet")]
    NothingToName,
    /// `/fork` before the first message.
    #[error("nothing to fork yet: this conversation is empty")]
    NothingToForkYet,
    /// A resume of a run that has no conversation.
    #[error("run {run} has no conversation to resume")]
    NothingToResume {
        /// The run.
        run: String,
    },
    /// A run was asked for its conversation, and has none.
    #[error("run {run} has no conversation")]
    NoConversation {
        /// The run.
        run: String,
    },
    /// `--at N` past the person's messages.
    #[error("--at {count}: run {run} has {messages} messages of yours (choose 1 to {messages})")]
    NoMessageAt {
        /// What was asked for.
        count: usize,
        /// The run.
        run: String,
        /// How many messages it has.
        messages: usize,
    },
    /// `--at` given neither a number nor a uuid.
    #[error("--at {target:?}: not a message number nor an entry's uuid")]
    NotAForkPoint {
        /// What was given.
        target: String,
    },
    /// `--at ENTRY` names no entry of the run's conversation.
    #[error("--at {target}: run {run} has no entry with that uuid")]
    NoEntryToForkAt {
        /// What was given.
        target: String,
        /// The run.
        run: String,
    },
    /// A fork was made, but the files it was to carry cannot be written (its
    /// checkpoints could not be given to it).
    #[error("run {run} was forked into {fork}, but its files cannot be written: {why}")]
    ForkFilesUnwritable {
        /// The run forked.
        run: String,
        /// The new run.
        fork: String,
        /// Why the new run has no checkpoints.
        why: String,
    },
    /// A fork with files whose conversation was copied but whose files were not
    /// written.
    #[error("run {fork} holds the copy of the conversation, without its files")]
    ForkWithoutFiles {
        /// The new run.
        fork: String,
        /// Why the files were not written.
        #[source]
        source: Box<ChatError>,
    },
    /// The folder for a fork's files cannot be made absolute.
    #[error("--workdir {}: cannot make it absolute", .dir.display())]
    WorkdirNotAbsolute {
        /// The folder as given.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The folder for a fork's files holds something already.
    #[error(
        "--workdir {}: the folder is not empty (a fork writes its files into a new or empty \
         folder)",
        .dir.display()
    )]
    WorkdirNotEmpty {
        /// The folder.
        dir: PathBuf,
    },
    /// A fork with files at a point whose checkpoint could not be taken.
    #[error(
        "the checkpoint of the working folder at the fork's point is missing (it could not \
         be taken), so its files as they were then cannot be written; fork without \
         --workdir, or at another point"
    )]
    ForkCheckpointMissing,
    /// The folder for a fork's files is inside the runs folder.
    #[error(
        "--workdir {}: inside the runs folder {}; a fork's files go in a folder of their own \
         (the runs folder is reprise's, and the fork's tools could write nothing there)",
        .dir.display(),
        .runs.display()
    )]
    WorkdirInRuns {
        /// The folder.
        dir: PathBuf,
        /// The runs folder.
        runs: PathBuf,
    },
    /// The folder for a fork's files cannot be read.
    #[error("--workdir {}", .dir.display())]
    Workdir {
        /// The folder.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The files of a checkpoint could not be written into a folder.
    #[error("cannot write the files into {}", .dir.display())]
    WriteFiles {
        /// The folder.
        dir: PathBuf,
        /// Why.
        #[source]
        source: CheckpointError,
    },
    /// A fork's checkpoints could not be shared with it.
    #[error("cannot share the checkpoints of {}", .store.display())]
    ShareCheckpoints {
        /// The source run's checkpoint store.
        store: PathBuf,
        /// Why.
        #[source]
        source: CheckpointError,
    },
    /// A run's checkpoint store could not be opened.
    #[error("cannot open the checkpoints of {} in {}", .workdir.display(), .run_dir.display())]
    OpenCheckpoints {
        /// The working folder.
        workdir: PathBuf,
        /// The run folder.
        run_dir: PathBuf,
        /// Why.
        #[source]
        source: CheckpointError,
    },
    /// The task doing the checkpoint store's work ended before it was done.
    #[error("the checkpoint store's work stopped")]
    CheckpointTask(#[source] tokio::task::JoinError),
    /// The run has no checkpoints to restore or compare with.
    #[error("this run has no checkpoints of its working folder")]
    NoCheckpoints,
    /// `reprise rewind` on a machine that does not hold the run's checkpoints.
    #[error(
        "run {run} has no checkpoints of its working folder here (they are kept in the run's \
         local folder, {}, on the machine that took them)",
        .dir.display()
    )]
    NoCheckpointsHere {
        /// The run.
        run: String,
        /// Its local folder.
        dir: PathBuf,
    },
    /// A rewind whose plan restores files, without a store to restore them from.
    #[error("the run has no checkpoint store to restore from")]
    NoCheckpointStore,
    /// A rewind in a conversation without a message of the person's.
    #[error("the conversation has no message of yours to rewind to")]
    NoMessageToRewindTo,
    /// A rewind to a message number that is not one.
    #[error("--to {number}: the conversation has {count} messages of yours (choose 1 to {count})")]
    NoSuchMessage {
        /// The number asked for.
        number: usize,
        /// How many there are.
        count: usize,
    },
    /// A rewind target that is neither a number nor a uuid.
    #[error("--to {target:?}: not a message number nor an entry's uuid")]
    NotARewindTarget {
        /// What was given.
        target: String,
    },
    /// A rewind to a uuid that names no message of the person's in view.
    #[error("--to {target}: no message of yours in the model's view has this uuid")]
    NoMessageWithUuid {
        /// The uuid given.
        target: String,
    },
    /// A rewind of the files only to a message after which nothing was checkpointed.
    #[error(
        "no checkpoint of the working folder was taken after message {number}: nothing to \
         restore (its files are as they are now)"
    )]
    NoCheckpointAfter {
        /// The message.
        number: usize,
    },
    /// A rewind of the files to a message after which the first checkpoint could not
    /// be taken: the next one there is holds a later state.
    #[error(
        "the checkpoint of the working folder before the calls after message {number} is \
         missing (it could not be taken when they ran), so the files as they were then \
         cannot be restored; {}",
        if *.earlier {
            "--nearest-earlier restores the nearest earlier checkpoint instead (an older state), \
             or --conversation-only leaves the files as they are"
        } else {
            "no earlier checkpoint exists either; --conversation-only leaves the files as they are"
        }
    )]
    CheckpointMissing {
        /// The message.
        number: usize,
        /// Whether an earlier checkpoint exists.
        earlier: bool,
    },
    /// An undo without a rewind.
    #[error("there is no rewind to undo")]
    NothingToUndo,
    /// `reprise rewind` without `--to` or `--undo`.
    #[error("say where to rewind to (--to N or --to ENTRY) or --undo")]
    NoRewindTarget,
    /// `reprise rewind` of a run without a conversation.
    #[error("run {run} has no conversation to rewind")]
    NothingToRewind {
        /// The run.
        run: String,
    },
    /// `reprise rewind` of a run a chat has open.
    #[error("run {run} is in use; leave that chat first (or use /rewind in it)")]
    RewindInUse {
        /// The run.
        run: String,
        /// The lock that is held.
        #[source]
        source: StoreError,
    },
    /// A restore of the working folder was cut before it finished: nothing touches
    /// the folder until `reprise rewind RUN --finish` finishes it.
    #[error(
        "{}: a rewind of run {run} was cut before it finished restoring the files of this \
         folder (they may be half restored); nothing works in it until `reprise rewind {run} \
         --finish` finishes it (it shows what it will do first)",
        .workdir.display()
    )]
    UnfinishedRestore {
        /// The working folder.
        workdir: PathBuf,
        /// The run whose rewind was cut.
        run: String,
    },
    /// `reprise rewind RUN --finish` of a run whose restores all finished.
    #[error("run {run} has no cut restore to finish")]
    NothingToFinish {
        /// The run.
        run: String,
    },
    /// A working folder could not be compared with a checkpoint.
    #[error("cannot compare {} with checkpoint {target}", .workdir.display())]
    Compare {
        /// The working folder.
        workdir: PathBuf,
        /// The checkpoint.
        target: String,
        /// Why.
        #[source]
        source: CheckpointError,
    },
    /// A rewind recorded whose conversation the agent could not read back.
    #[error("the rewind is recorded, but the conversation cannot be read back")]
    ReadBack(#[source] AgentError),
}
