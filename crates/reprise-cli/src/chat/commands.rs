//! The slash commands: what a typed line means, and the one dispatcher that both
//! screens hand each line to.

use std::path::Path;

use anyhow::Result;
use reprise_session::runs::{RunFolder, append_history_with};

use crate::chat::fork::{Forked, fork_into};
use crate::chat::session::Opener;
use crate::runs::source::RunSource;

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

/// `/rename TITLE`: gives the run in `dir` its title (an empty one removes it) and
/// says so in a line for the screen. With a database the title is kept there, with
/// the conversation.
pub async fn rename_run(runs: &RunSource, dir: &Path, title: &str) -> Result<String> {
    let title = match runs {
        RunSource::Folders { .. } => reprise_session::runs::set_title(dir, title)?.title,
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
        tracing::warn!(
            "history.jsonl: {}",
            crate::display::error_text::with_causes(&error)
        );
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

/// Copies a run's conversation into a new run folder.
pub async fn fork_into_new(opener: &Opener, source: &RunFolder) -> Result<Forked> {
    let target = opener.new_folder()?;
    fork_into(&opener.runs, source, target, None).await
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
}
