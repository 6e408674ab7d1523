//! The slash commands: what a typed line means, and the one dispatcher that both
//! screens hand each line to.

use std::path::{Path, PathBuf};

use crate::error::{ChatError, Result};
use reprise_runs::{RunCatalog, RunFolder, append_history_with};

use crate::events::UiEvent;
use crate::fork::{ForkRequest, fork_run};
use crate::rewind_steps::{NOTHING_TO_REWIND, RewindMenu};
use crate::session::{ChatSession, Opener};

/// The slash commands, for `/help`.
pub const HELP: &str = "\
/resume   pick an earlier run and continue its conversation
/fork     continue in a copy of this conversation (a new run; this one is kept);
          when the run has checkpoints, with a copy of its files in a new folder
/rewind   take the conversation and/or the files back to before one of your
          messages (or undo the last rewind)
/rename   give this run a title (shown by /resume and `reprise runs`)
/compact [what to keep]
          summarise the older part of the conversation for the model now
          (everything stays in the run and on screen)
/help     this list
/exit     leave (also Ctrl-D, or Ctrl-C at an empty prompt)
Ctrl-C during a turn stops the turn. A line typed during a turn is sent after it.";

/// `/help`: the slash commands, then the tools the model may call in this run
/// (the chat's own, the MCP servers' and the subagents), each with what it does.
fn help_text(session: &ChatSession) -> String {
    let mut text = HELP.to_owned();
    let tools = &session.agent.model_view().tools;
    if tools.is_empty() {
        text.push_str("\nThe model has no tools in this run.");
        return text;
    }
    text.push_str("\nTools the model may call (each call goes through the step gate):");
    let width = tools
        .iter()
        .map(|tool| tool.name.chars().count())
        .max()
        .unwrap_or(0);
    for tool in tools {
        let what = crate::text::one_line(&tool.description);
        text.push_str(&format!(
            "\n  {:<width$}  {}",
            tool.name,
            crate::text::shorten(&what, 70)
        ));
    }
    text
}

/// `/rename TITLE`: gives the run `folder` its title (an empty one removes it) and
/// says so in a line for the screen. The title is kept where the conversation is.
async fn rename_run(runs: &dyn RunCatalog, folder: &RunFolder, title: &str) -> Result<String> {
    let title = runs
        .set_title(folder, title)
        .await?
        .ok_or(ChatError::NothingToName)?
        .title;
    Ok(match title {
        Some(title) => format!("(this run is now called “{title}”)"),
        None => "(this run has no title now: it is shown by its first message)".to_owned(),
    })
}

/// Remembers a submitted line in `history.jsonl`, redacted. A failure is a warning
/// on the screen, not an error: the history is a convenience, and the line itself
/// goes on to the conversation.
fn remember(opener: &Opener, text: &str, run: &str) {
    let path = opener.history_path();
    // Through the held runs folder, as the run's own files (see `Opener::open`).
    let held = reprise_runs::held::through_held(&path);
    if let Err(error) = append_history_with(&held, text, run, &opener.redactor) {
        let _ = opener.ui.send(UiEvent::Warning(format!(
            "{}: this line may not be kept for up/down: {}",
            path.display(),
            crate::error_text::with_causes(&error)
        )));
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
    /// `/rewind`.
    Rewind,
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
            "/rewind" => Line::Rewind,
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

/// Which typed lines go to `history.jsonl`, and as what text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Remember {
    /// Every line but an empty one, its trailing white space trimmed (the full
    /// screen).
    EveryLineTrimmed,
    /// Messages and known commands as they were typed; not an unknown command (the
    /// plain mode).
    KnownAsTyped,
}

impl Remember {
    /// The text `history.jsonl` keeps of `text`, understood as `line`, if any.
    fn text_of<'a>(self, line: &'a Line, text: &'a str) -> Option<&'a str> {
        match (self, line) {
            (_, Line::Empty) => None,
            (Remember::EveryLineTrimmed, _) => Some(text.trim_end()),
            (Remember::KnownAsTyped, Line::Unknown(_)) => None,
            (Remember::KnownAsTyped, Line::Message(message)) => Some(message),
            (Remember::KnownAsTyped, _) => Some(text),
        }
    }
}

/// What a typed line comes to: what the screen shows or does next.
pub enum Outcome {
    /// Nothing (an empty line).
    Nothing,
    /// `/exit`: leave the chat.
    Exit,
    /// A note to show (`/help`, a run renamed).
    Notice(String),
    /// A command that does not exist: the text saying so.
    Unknown(String),
    /// The command failed: what went wrong.
    Failed(String),
    /// `/resume`: the screen lets the person pick a run, then opens it with
    /// [`open_resumed`].
    PickRun,
    /// `/fork` done: the chat goes on in `session` (the screen closes the one it
    /// had); `line`, already in the new run's log, says so.
    Forked {
        /// The session of the copy.
        session: Box<ChatSession>,
        /// What to show.
        line: String,
    },
    /// `/fork` in a run with checkpoints: the screen asks whether the copy gets the
    /// files too, in a new folder (`default` offered), then calls [`fork`].
    AskForkFiles {
        /// The folder offered for the files.
        default: PathBuf,
    },
    /// `/rewind`: the screen lets the person pick from `menu`, shows
    /// [`ChatSession::prepare_rewind`]'s preview, and on a yes calls
    /// [`ChatSession::rewind`].
    PickRewind(RewindMenu),
    /// `/compact [what to keep]`: the screen runs [`ChatSession::compact`] as it
    /// runs a turn.
    Compact(Option<String>),
    /// A message: the screen runs [`ChatSession::turn`] with it.
    Message(String),
}

/// Understands a line typed in `session`'s chat (or queued during a turn),
/// remembers it in the history as `remember` says, and does what a command does
/// apart from any screen.
pub async fn dispatch(
    opener: &Opener,
    session: &ChatSession,
    text: &str,
    remember: Remember,
) -> Outcome {
    let line = Line::parse(text);
    if let Some(kept) = remember.text_of(&line, text) {
        self::remember(opener, kept, session.run_name());
    }
    let done = match line {
        Line::Empty => return Outcome::Nothing,
        Line::Exit => return Outcome::Exit,
        Line::Help => return Outcome::Notice(help_text(session)),
        Line::Unknown(command) => {
            return Outcome::Unknown(format!("unknown command {command}; /help lists them"));
        }
        Line::Resume => return Outcome::PickRun,
        Line::Compact(focus) => return Outcome::Compact(focus),
        Line::Message(message) => return Outcome::Message(message),
        Line::Rename(title) => rename_run(&*opener.runs, &session.folder, &title)
            .await
            .map(Outcome::Notice),
        Line::Fork => match fork_files_offer(session) {
            Some(default) => Ok(Outcome::AskForkFiles { default }),
            None => fork(opener, session, None).await,
        },
        Line::Rewind => session.rewind_menu().await.map(|menu| {
            if menu.is_empty() {
                Outcome::Notice(NOTHING_TO_REWIND.to_owned())
            } else {
                Outcome::PickRewind(menu)
            }
        }),
    };
    done.unwrap_or_else(|error| Outcome::Failed(crate::error_text::with_causes(&error)))
}

/// What `/resume` says when the run picked is the one the chat is in.
pub const ALREADY_IN_THAT_RUN: &str = "(already in that run)";

/// Opens the session of `target`, the run picked after `/resume`, to go on in; `None`
/// when it is the run of `current` (then [`ALREADY_IN_THAT_RUN`] is shown).
pub async fn open_resumed(
    opener: &Opener,
    current: Option<&ChatSession>,
    target: RunFolder,
) -> Result<Option<ChatSession>> {
    if current.is_some_and(|session| session.folder.dir == target.dir) {
        return Ok(None);
    }
    Ok(Some(opener.open(target).await?))
}

/// The folder `/fork` offers for the copy's files, when the run has checkpoints
/// of its working folder: `<workdir>-fork-N`, the first that does not exist.
fn fork_files_offer(session: &ChatSession) -> Option<PathBuf> {
    if !session
        .folder
        .dir
        .join(reprise_checkpoint::STORE_DIR_NAME)
        .is_dir()
    {
        return None;
    }
    let name = session.workdir.file_name()?.to_string_lossy().into_owned();
    let parent = session.workdir.parent()?;
    (1..10_000)
        .map(|n| parent.join(format!("{name}-fork-{n}")))
        .find(|dir| std::fs::symlink_metadata(dir).is_err())
}

/// `/fork`: copies the conversation of `session` into a new run and opens it; with
/// `files`, the working folder as it is now is written into that folder (new or
/// empty), where the new run's tools then work.
pub async fn fork(opener: &Opener, session: &ChatSession, files: Option<&Path>) -> Result<Outcome> {
    let source = opener.runs.reopen(&session.folder).await?;
    if source.session_id.is_none() {
        return Err(ChatError::NothingToForkYet);
    }
    let forked = fork_run(
        opener.runs.as_ref(),
        ForkRequest {
            source: &source,
            at: None,
            files,
            fallback_workdir: &session.workdir,
            options: crate::checkpoints::capture_options(&opener.settings),
        },
    )
    .await?;
    let copy = forked.fork;
    let mut next = opener.open_forked(copy).await?;
    if let Some(warning) = forked.warning {
        next.add_note(warning);
    }
    let mut line = format!(
        "(forked into run {}; run {} is kept as it was)",
        next.run_name(),
        source.name()
    );
    if let Some((dir, written)) = forked.written {
        line.push_str(&format!(
            "\n(wrote the working folder's {}, {}, into {})",
            crate::text::counted(written.files, "file", "files"),
            crate::text::counted(written.bytes, "byte", "bytes"),
            dir.display()
        ));
    }
    if let Some(inside) = forked.inside_workdir {
        line.push_str(&format!("\n(note: {inside})"));
    }
    next.log_line(&line);
    Ok(Outcome::Forked {
        session: Box::new(next),
        line,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_screen_keeps_its_lines_in_the_history() {
        let kept = |remember: Remember, text: &str| {
            remember
                .text_of(&Line::parse(text), text)
                .map(str::to_owned)
        };
        for remember in [Remember::EveryLineTrimmed, Remember::KnownAsTyped] {
            assert_eq!(kept(remember, "  "), None);
            assert_eq!(kept(remember, "hello"), Some("hello".into()));
        }
        assert_eq!(
            kept(Remember::EveryLineTrimmed, "/bogus "),
            Some("/bogus".into())
        );
        assert_eq!(
            kept(Remember::EveryLineTrimmed, "hello  "),
            Some("hello".into())
        );
        assert_eq!(kept(Remember::KnownAsTyped, "/bogus "), None);
        assert_eq!(
            kept(Remember::KnownAsTyped, "hello  "),
            Some("hello  ".into())
        );
        assert_eq!(
            kept(Remember::KnownAsTyped, "/rename x "),
            Some("/rename x ".into())
        );
    }

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
}
