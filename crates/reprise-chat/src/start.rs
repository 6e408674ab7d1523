//! What every chat screen does the same way: choosing the run to start with,
//! switching runs (`/resume`, `/fork`), and the texts shown for them.

use crate::error::{ChatError, Result};
use jiff::Timestamp;
use reprise_runs::{RunCatalog, RunFolder};

use crate::session::{ChatSession, Opener};
use crate::text::{show_date, show_date_in};

/// One run in the `/resume` picker.
#[derive(Clone, Debug, PartialEq)]
pub struct PickerRow {
    /// The run folder's name (what is resumed).
    pub name: String,
    /// When it was last used, as shown.
    pub date: String,
    /// The person's last message.
    pub last_message: String,
    /// What the run is called: its title, else the person's first message (shown in
    /// place of the last message when set).
    pub title: String,
}

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

/// How the chat starts, as the command line asks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartOptions {
    /// Which run it starts with.
    pub start: StartWith,
    /// Whether it continues in a copy of that run (`--fork-session`).
    pub fork: bool,
    /// The first message to send.
    pub prompt: Option<String>,
}

/// The run a start option names, if any (`Latest` with no runs is `None`).
pub async fn start_target(runs: &dyn RunCatalog, start: &StartWith) -> Result<Option<RunFolder>> {
    match start {
        StartWith::New | StartWith::Pick => Ok(None),
        // Opened, not taken from the listing as it is: opening rebuilds a damaged
        // `session.json` (with a warning the chat shows) instead of failing on it.
        StartWith::Latest => match runs.list_newest(1).await?.0.runs.first() {
            Some(run) => Ok(Some(runs.reopen(&run.folder()).await?)),
            None => Ok(None),
        },
        StartWith::Named(spec) => Ok(Some(runs.find(spec).await?)),
    }
}

/// Passes `started` on, removing `fresh` (the run folder made at this start) when the
/// start failed and nothing was written in it: a chat that could not start leaves no
/// empty run folder behind.
pub fn unless_started<T, E>(started: Result<T, E>, fresh: &RunFolder) -> Result<T, E> {
    if started.is_err() {
        let _ = reprise_runs::remove_unused_run_folder(fresh);
    }
    started
}

/// When a run's conversation was last added to (as listings show it, else the
/// folder's modification time).
pub async fn conversation_date(runs: &dyn RunCatalog, folder: &RunFolder) -> String {
    let from_meta = runs.updated_at(folder).await;
    let ts = from_meta.or_else(|| {
        let modified = std::fs::metadata(&folder.dir).ok()?.modified().ok()?;
        Timestamp::try_from(modified).ok()
    });
    ts.map_or_else(|| folder.name().to_owned(), show_date)
}

/// The line shown after a resumed conversation is redrawn.
pub async fn resumed_line(runs: &dyn RunCatalog, folder: &RunFolder) -> String {
    resumed_text(&conversation_date(runs, folder).await)
}

/// `(resumed the conversation of <date>)`.
pub fn resumed_text(date: &str) -> String {
    format!("(resumed the conversation of {date})")
}

/// Writes in the run folder made at this start (`fresh`) which run the conversation
/// went on in, when it was resumed elsewhere.
pub fn note_in_fresh_folder(opener: &Opener, fresh: &str, resumed: &str) {
    log_in_run(opener, fresh, &format!("(resumed run {resumed})"));
}

/// Appends `line` to the `session.log` of run `run` (a notice the screen shows
/// while the session is busy with a turn). A failure is not reported: the line
/// may be the warning that `session.log` cannot be written.
pub fn log_in_run(opener: &Opener, run: &str, line: &str) {
    if let Ok(mut log) = reprise_runs::SessionLog::open(&opener.settings.runs_dir.join(run))
        .map(|log| log.with_redactor(opener.redactor.clone()))
    {
        let _ = log.write_line(line);
    }
}

/// The runs for the `/resume` list, newest first.
pub async fn picker_rows(runs: &dyn RunCatalog, open: Option<&str>) -> Result<Vec<PickerRow>> {
    let tz = jiff::tz::TimeZone::system();
    Ok(runs
        .list()
        .await?
        .runs
        .iter()
        // The run the chat is in is not one to go back to.
        .filter(|run| Some(run.name()) != open)
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
pub async fn picker_message_matches(
    runs: &dyn RunCatalog,
    filter: &str,
) -> std::collections::BTreeSet<String> {
    runs.runs_with_user_text(filter)
        .await
        .map(|names| names.into_iter().collect())
        .unwrap_or_default()
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
        Some(target) if target.session_id.is_none() => Err(ChatError::NothingToResume {
            run: target.name().to_owned(),
        }),
        Some(target) if fork => {
            let forked = crate::fork_checkpoints::fork_with_checkpoints(
                opener.runs.as_ref(),
                &target,
                fresh,
                None,
                &[],
            )
            .await?;
            let mut session = opener.open_forked(forked.fork).await?;
            for warning in [forked.warning, forked.title_warning].into_iter().flatten() {
                session.add_note(warning);
            }
            Ok((session, true))
        }
        Some(target) => Ok((opener.open(target).await?, true)),
    }
}
