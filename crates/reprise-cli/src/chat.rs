//! What every chat screen does the same way: choosing the run to start with,
//! switching runs (`/resume`, `/fork`), and the texts shown for them.

use std::path::Path;

use anyhow::{Context, Result, bail};
use jiff::Timestamp;
use reprise_runs::{RunFolder, RunStore, append_history_with, list_runs};

use crate::cli::ChatArgs;
use crate::driver::{ChatSession, Opener};
use crate::run_cmds::{show_date, show_date_in};
use crate::run_source::RunSource;
use crate::tui::view::PickerRow;

/// The slash commands, for `/help`.
pub const HELP: &str = "\
/resume   pick an earlier run and continue its conversation
/fork     continue in a copy of this conversation (a new run; this one is kept)
/rename   give this run a title (shown by /resume and `reprise runs`)
/compact [what to keep]
          summarise the older part of the conversation for the model now
          (everything stays in the run and on screen)
/help     this list
/exit     leave (also Ctrl-D, or Ctrl-C at an empty prompt)
Ctrl-C during a turn stops the turn. A line typed during a turn is sent after it.";

/// Which run the chat starts with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartWith {
    /// A new conversation in the new run folder.
    New,
    /// The latest run with a conversation (`--continue`).
    Latest,
    /// A named run (`--resume RUN`).
    Named(String),
    /// Ask the person (`--resume` without a value).
    Pick,
}

impl StartWith {
    /// From the flags.
    pub fn from_args(args: &ChatArgs) -> StartWith {
        match (&args.resume, args.continue_) {
            (_, true) => StartWith::Latest,
            (Some(spec), _) if spec.is_empty() => StartWith::Pick,
            (Some(spec), _) => StartWith::Named(spec.clone()),
            (None, false) => StartWith::New,
        }
    }
}

/// The run a start option names, if any (`Latest` with no runs is `None`).
pub fn start_target(runs: &RunSource, start: &StartWith) -> Result<Option<RunFolder>> {
    match start {
        StartWith::New | StartWith::Pick => Ok(None),
        // Opened, not taken from the listing as it is: opening rebuilds a damaged
        // `session.json` (with a warning the chat shows) instead of failing on it.
        StartWith::Latest => match runs.list_newest(1)?.0.runs.first() {
            Some(run) => Ok(Some(runs.reopen(&run.folder())?)),
            None => Ok(None),
        },
        StartWith::Named(spec) => Ok(Some(runs.find(spec)?)),
    }
}

/// Passes `started` on, removing `fresh` (the run folder made at this start) when the
/// start failed and nothing was written in it: a chat that could not start leaves no
/// empty run folder behind.
pub fn unless_started<T>(started: Result<T>, fresh: &RunFolder) -> Result<T> {
    if started.is_err() {
        let _ = reprise_runs::remove_unused_run_folder(fresh);
    }
    started
}

/// When a run's conversation was last added to (as listings show it, else the
/// folder's modification time).
pub fn conversation_date(runs: &RunSource, folder: &RunFolder) -> String {
    let from_meta = runs.updated_at(folder);
    let ts = from_meta.or_else(|| {
        let modified = std::fs::metadata(&folder.dir).ok()?.modified().ok()?;
        Timestamp::try_from(modified).ok()
    });
    ts.map_or_else(|| folder.name().to_owned(), show_date)
}

/// The line shown after a resumed conversation is redrawn.
pub fn resumed_line(runs: &RunSource, folder: &RunFolder) -> String {
    resumed_text(&conversation_date(runs, folder))
}

/// `(resumed the conversation of <date>)`.
pub fn resumed_text(date: &str) -> String {
    format!("(resumed the conversation of {date})")
}

/// The runs for the `/resume` list, newest first.
pub fn picker_rows(runs: &RunSource) -> Result<Vec<PickerRow>> {
    let tz = jiff::tz::TimeZone::system();
    Ok(runs
        .list()?
        .runs
        .iter()
        .map(|run| PickerRow {
            name: run.name().to_owned(),
            date: show_date_in(run.updated_at, &tz),
            last_message: run.last_message.clone().unwrap_or_default(),
            title: run.display_title(reprise_runs::MAX_TITLE_CHARS),
        })
        .collect())
}

/// The runs whose person's messages contain `filter` (ignoring case), for the
/// `/resume` picker's filter: every message of every run, not only the last one.
pub fn picker_message_matches(runs_dir: &Path, filter: &str) -> std::collections::BTreeSet<String> {
    match list_runs(runs_dir) {
        Ok(list) => reprise_runs::runs_with_user_text(&list.runs, filter)
            .into_iter()
            .collect(),
        Err(_) => std::collections::BTreeSet::new(),
    }
}

/// Opens the session to continue in: `target`'s own, or (with `fork`) a copy of it
/// in `fresh`, the run folder created at this start. Without a target, `fresh`'s.
pub async fn open_start(
    opener: &Opener,
    fresh: RunFolder,
    target: Option<RunFolder>,
    fork: bool,
) -> Result<(ChatSession, bool)> {
    match target {
        None => Ok((opener.open(fresh).await?, false)),
        Some(target) if target.session_id.is_none() => {
            bail!("run {} has no conversation to resume", target.name())
        }
        Some(target) if fork => {
            let copy = fork_into(&opener.runs, &target, fresh, None).await?;
            Ok((opener.open_forked(copy).await?, true))
        }
        Some(target) => Ok((opener.open(target).await?, true)),
    }
}

/// A run folder that a fork just filled, with its store: the store owns the fork's
/// background data sync, which closing or dropping it waits for.
pub struct Forked {
    /// The new run folder.
    pub folder: RunFolder,
    /// Its store (`None` for a fork in the database, which is done when it returns).
    pub store: Option<RunStore>,
}

/// Copies a run's conversation into a new run folder.
pub async fn fork_into_new(opener: &Opener, source: &RunFolder) -> Result<Forked> {
    let target = opener.new_folder()?;
    fork_into(&opener.runs, source, target, None).await
}

/// Copies a run's conversation (up to entry `up_to`, or all) into `target`, a run
/// folder without a conversation.
pub async fn fork_into(
    runs: &RunSource,
    source: &RunFolder,
    target: RunFolder,
    up_to: Option<uuid::Uuid>,
) -> Result<Forked> {
    if runs.is_database() {
        let folder = runs.fork_in_database(source, &target, up_to).await?;
        return Ok(Forked {
            folder,
            store: None,
        });
    }
    let source_dir = source.dir.clone();
    let target_dir = target.dir.clone();
    let forked = tokio::task::spawn_blocking(move || {
        reprise_runs::fork_run(&source_dir, &target_dir, up_to)
    })
    .await
    .context("the fork was interrupted")?
    .with_context(|| format!("cannot fork run {}", source.name()))?;
    Ok(Forked {
        folder: RunFolder::open(&target.dir)?,
        store: Some(forked.store),
    })
}

/// `/rename TITLE`: gives the run in `dir` its title (an empty one removes it) and
/// says so in a line for the screen. With a database the title is kept there, with
/// the conversation.
pub async fn rename_run(runs: &RunSource, dir: &Path, title: &str) -> Result<String> {
    let title = match runs {
        RunSource::Folders { .. } => reprise_runs::set_title(dir, title)?.title,
        RunSource::Database { store, .. } => {
            let name = dir.file_name().and_then(|name| name.to_str()).unwrap_or("");
            store
                .set_title(name, title)
                .await?
                .ok_or_else(|| anyhow::anyhow!("this run has no conversation to name yet"))?
                .title
        }
    };
    Ok(match title {
        Some(title) => format!("(this run is now called “{title}”)"),
        None => "(this run has no title now: it is shown by its first message)".to_owned(),
    })
}

/// Remembers a submitted line in `history.jsonl`, redacted (failures are only logged:
/// the history is a convenience).
pub fn remember(opener: &Opener, text: &str, run: &str) {
    if let Err(error) = append_history_with(&opener.history_path(), text, run, &opener.redactor) {
        tracing::warn!("history.jsonl: {}", crate::error_text::with_causes(&error));
    }
}

/// A line typed at the prompt, understood.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    /// A message for the model.
    Message(String),
    /// `/resume`.
    Resume,
    /// `/fork`.
    Fork,
    /// `/rename TITLE` (an empty title removes it).
    Rename(String),
    /// `/compact [what to keep]`.
    Compact(Option<String>),
    /// `/help`.
    Help,
    /// `/exit` or `/quit`.
    Exit,
    /// Nothing to do (an empty line).
    Empty,
    /// A slash command that does not exist.
    Unknown(String),
}

impl Line {
    /// Understands a typed line.
    pub fn parse(text: &str) -> Line {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Line::Empty;
        }
        match trimmed {
            "/resume" => Line::Resume,
            "/fork" => Line::Fork,
            "/rename" => Line::Rename(String::new()),
            other if other.starts_with("/rename ") => {
                Line::Rename(other["/rename ".len()..].trim().to_owned())
            }
            "/help" | "/?" => Line::Help,
            "/compact" => Line::Compact(None),
            other if other.starts_with("/compact ") => {
                Line::Compact(Some(other["/compact ".len()..].trim().to_owned()))
            }
            "/exit" | "/quit" => Line::Exit,
            other if other.starts_with('/') && !other.starts_with("//") => {
                Line::Unknown(other.split_whitespace().next().unwrap_or(other).to_owned())
            }
            _ => Line::Message(text.trim_end_matches(['\n', '\r']).to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slash_commands_are_recognised() {
        assert_eq!(Line::parse("/resume"), Line::Resume);
        assert_eq!(
            Line::parse("/rename  Fix the parser "),
            Line::Rename("Fix the parser".into())
        );
        assert_eq!(Line::parse("/rename"), Line::Rename(String::new()));
        assert_eq!(Line::parse("/renamed"), Line::Unknown("/renamed".into()));
        assert_eq!(Line::parse(" /exit "), Line::Exit);
        assert_eq!(
            Line::parse("/frobnicate now"),
            Line::Unknown("/frobnicate".into())
        );
        assert_eq!(Line::parse("   "), Line::Empty);
        assert_eq!(Line::parse("/compact"), Line::Compact(None));
        assert_eq!(
            Line::parse("/compact  the file names "),
            Line::Compact(Some("the file names".into()))
        );
        assert_eq!(
            Line::parse("/compactly"),
            Line::Unknown("/compactly".into())
        );
        assert_eq!(
            Line::parse("hello /resume"),
            Line::Message("hello /resume".into())
        );
        assert_eq!(
            Line::parse("//not a command"),
            Line::Message("//not a command".into())
        );
    }

    #[test]
    fn start_options_come_from_the_flags() {
        let args = |resume: Option<&str>, continue_: bool| ChatArgs {
            resume: resume.map(str::to_owned),
            continue_,
            ..ChatArgs::default()
        };
        assert_eq!(StartWith::from_args(&args(None, false)), StartWith::New);
        assert_eq!(StartWith::from_args(&args(None, true)), StartWith::Latest);
        assert_eq!(
            StartWith::from_args(&args(Some(""), false)),
            StartWith::Pick
        );
        assert_eq!(
            StartWith::from_args(&args(Some("2026"), false)),
            StartWith::Named("2026".into())
        );
    }
}
