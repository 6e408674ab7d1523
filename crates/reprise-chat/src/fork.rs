//! A fork of a run into a new run (`reprise fork`, `/fork`): its conversation (or
//! its first messages) copied by the catalog, the checkpoints the copy names given
//! to it (`fork_checkpoints.rs`), and, when asked, its files as they were at the
//! fork's point written into a new or empty folder (`fork_files.rs`). Written once,
//! for the command and the chat.
//!
//! `--fork-session` forks into the run folder made at the start, without files
//! ([`open_start`](crate::start::open_start)).

use std::path::{Path, PathBuf};

use reprise_checkpoint::{CaptureOptions, CheckpointId, Materialized};
use reprise_runs::{CatalogFork, RunCatalog, RunFolder};
use reprise_session::{Entry, SessionKey};
use uuid::Uuid;

use crate::checkpoints::run_workdir;
use crate::error::{ChatError, Result};
use crate::fork_checkpoints::fork_with_checkpoints;
use crate::fork_files::{
    ForkFiles, empty_destination, fork_files, fork_point, outside_runs, resolved,
};

/// A fork to make.
pub struct ForkRequest<'a> {
    /// The run forked, with its conversation.
    pub source: &'a RunFolder,
    /// Where the copy ends (`--at N|ENTRY`); `None`: it copies everything.
    pub at: Option<ForkAt>,
    /// The folder the files are written into (new or empty); `None`: the
    /// conversation only.
    pub files: Option<&'a Path>,
    /// The source's working folder when it recorded none.
    pub fallback_workdir: &'a Path,
    /// What checkpoints capture.
    pub options: CaptureOptions,
}

/// Where a fork's copy of the conversation ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ForkAt {
    /// With the answer to the person's message N (counting their messages in the
    /// model's view from 1, as `rewind --to N` does): everything before their
    /// message N+1.
    Message(usize),
    /// With this entry (its uuid).
    Entry(Uuid),
}

impl std::str::FromStr for ForkAt {
    type Err = ChatError;

    /// A number (`3`) or an entry's uuid.
    fn from_str(text: &str) -> Result<ForkAt> {
        if let Ok(number) = text.parse::<usize>() {
            return Ok(ForkAt::Message(number));
        }
        text.parse::<Uuid>()
            .map(ForkAt::Entry)
            .map_err(|_| ChatError::NotAForkPoint {
                target: text.to_owned(),
            })
    }
}

/// A fork made.
pub struct ForkDone {
    /// The new run, with the store that owns its data's background sync.
    pub fork: CatalogFork,
    /// Why the new run has none of the checkpoints its conversation names, for the
    /// person: its files cannot be rewound. `None` when it has them all (or the
    /// source had none).
    pub warning: Option<String>,
    /// Where the files were written, and what was written.
    pub written: Option<(PathBuf, Materialized)>,
    /// Said when the fork's folder is inside the source's working folder: what
    /// that means for the source's checkpoints and rewinds.
    pub inside_workdir: Option<String>,
}

/// Forks a run into a new run folder: its conversation (or its first messages), the
/// checkpoints the copy names, and, when asked, its files as they were at the
/// fork's point. A fork whose files cannot be written fails, naming the new run
/// that holds the conversation.
pub async fn fork_run(runs: &dyn RunCatalog, request: ForkRequest<'_>) -> Result<ForkDone> {
    let source = request.source;
    let entries = match (&request.at, request.files) {
        (None, None) => Vec::new(),
        _ => run_entries(runs, source).await?,
    };
    let up_to = match &request.at {
        None => None,
        Some(at) => last_copied(source, &entries, at)?,
    };
    let files = match request.files {
        Some(dir) => {
            let dir = empty_destination(dir)?;
            outside_runs(&dir, runs.runs_dir())?;
            Some(dir)
        }
        None => None,
    };
    if files.is_some() {
        // The files of a half restored folder are not written out.
        let (workdir, _) = run_workdir(&source.dir, request.fallback_workdir);
        crate::checkpoints::refuse_unfinished(&workdir, &source.dir)?;
    }
    let inside_workdir = files.as_deref().and_then(|dir| {
        let (workdir, _) = run_workdir(&source.dir, request.fallback_workdir);
        let workdir = resolved(&workdir);
        resolved(dir).starts_with(&workdir).then(|| {
            format!(
                "{} is inside the working folder of run {} ({}): that run's checkpoints \
                 capture the fork's files, and a rewind of it changes or deletes them",
                dir.display(),
                source.name(),
                workdir.display()
            )
        })
    });
    let copied = match up_to {
        Some(uuid) => entries
            .iter()
            .position(|entry| entry.uuid == uuid)
            .map_or(entries.len(), |at| at + 1),
        None => entries.len(),
    };
    // With the files, the fork writes out the checkpoint after its last entry (or
    // the folder as it is now, when nothing changed it since).
    let at = match files {
        Some(_) => fork_point(&entries, copied)?,
        None => None,
    };
    // Built under a hidden name and renamed into place: a fork cut short leaves no
    // run folder behind.
    let target = reprise_runs::new_run_folder(runs.runs_dir())?;
    let forked = fork_with_checkpoints(runs, source, target, up_to, at.as_slice()).await?;
    let fork = forked.fork;
    let warning = match (&forked.warning, &forked.title_warning) {
        (Some(files), Some(title)) => Some(format!("{files}; {title}")),
        (files, title) => files.clone().or_else(|| title.clone()),
    };
    let Some(dir) = files else {
        return Ok(ForkDone {
            fork,
            warning,
            written: None,
            inside_workdir,
        });
    };
    if let (Some(why), Some(_)) = (&forked.warning, at) {
        return Err(ChatError::ForkFilesUnwritable {
            run: source.name().to_owned(),
            fork: fork.folder.name().to_owned(),
            why: why.clone(),
        });
    }
    let written = write_fork_files(runs, source, &fork.folder, at, &dir, &request).await;
    match written {
        Ok(written) => Ok(ForkDone {
            fork,
            warning,
            written: Some((dir, written)),
            inside_workdir,
        }),
        Err(error) => Err(ChatError::ForkWithoutFiles {
            fork: fork.folder.name().to_owned(),
            source: Box::new(error),
        }),
    }
}

/// The files of the fork's point written into `dir`, the fork's working folder.
async fn write_fork_files(
    runs: &dyn RunCatalog,
    source: &RunFolder,
    fork: &RunFolder,
    at: Option<CheckpointId>,
    dir: &Path,
    request: &ForkRequest<'_>,
) -> Result<Materialized> {
    runs.ensure_local_folder(source).await?;
    runs.ensure_local_folder(fork).await?;
    fork_files(
        ForkFiles {
            source: &source.dir,
            target: &fork.dir,
            at,
            dir,
            options: request.options.clone(),
        },
        request.fallback_workdir,
    )
}

/// The entries of a run's main conversation.
async fn run_entries(runs: &dyn RunCatalog, run: &RunFolder) -> Result<Vec<Entry>> {
    let Some(session_id) = run.session_id.as_deref() else {
        return Err(ChatError::NoConversation {
            run: run.name().to_owned(),
        });
    };
    let store = runs.store_for(run, &reprise_redact::Redactor::new());
    Ok(store
        .load(&SessionKey::session(session_id)?)
        .await?
        .unwrap_or_default()
        .entries)
}

/// The uuid of the last entry a fork ending `at` copies; `None`: every entry (the
/// person's last message in view, with all that came after it).
fn last_copied(run: &RunFolder, entries: &[Entry], at: &ForkAt) -> Result<Option<Uuid>> {
    match at {
        ForkAt::Entry(uuid) => match entries.iter().any(|entry| entry.uuid == *uuid) {
            true => Ok(Some(*uuid)),
            false => Err(ChatError::NoEntryToForkAt {
                target: uuid.to_string(),
                run: run.name().to_owned(),
            }),
        },
        ForkAt::Message(number) => {
            let messages = crate::rewind::person_messages(entries);
            if *number == 0 || *number > messages.len() {
                return Err(ChatError::NoMessageAt {
                    count: *number,
                    run: run.name().to_owned(),
                    messages: messages.len(),
                });
            }
            Ok(match messages.get(*number) {
                // The entry before the next message of the person's.
                Some((next, _)) => next
                    .checked_sub(1)
                    .and_then(|at| entries.get(at))
                    .map(|entry| entry.uuid),
                None => None,
            })
        }
    }
}
