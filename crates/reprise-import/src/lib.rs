//! Brings sessions of other coding agents into reprise run folders: Claude Code
//! transcripts, Codex rollouts and `opencode export` documents.
//!
//! Each source is converted into OpenAI chat-completions messages that resume
//! against any compatible server: tool calls stay tool calls, each paired with one
//! result (a call whose result never came is answered "interrupted"); what a model
//! never saw (system lines, attachments, developer instructions) is kept as `note`
//! entries, which runs show but never send; compactions become `compaction` entries.
//! Whatever is not converted is counted in a [`Report`], never dropped silently.
//!
//! ```no_run
//! # async fn demo() -> Result<(), reprise_import::ImportError> {
//! let mut importer = reprise_import::Importer::new(".run".as_ref())?;
//! let done = importer.import_file("session.jsonl".as_ref(), false).await?;
//! println!("{}: {}", done.path.display(), done.report);
//! # Ok(()) }
//! ```

mod builder;
mod claude_code;
mod codex;
mod error;
mod import;
mod opencode;
mod report;
mod walk;

use std::path::Path;

use jiff::Timestamp;
use reprise_session::Entry;

pub use builder::{COMPACTION_KIND, NOTE_KIND};
pub use error::ImportError;
pub use import::{IMPORTED_FROM, ImportedFile, Importer, Outcome};
pub use report::Report;
pub use walk::find_transcripts;

/// The tools whose sessions can be imported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SourceTool {
    /// Anthropic's Claude Code.
    ClaudeCode,
    /// OpenAI's Codex CLI.
    Codex,
    /// opencode.
    Opencode,
}

impl SourceTool {
    /// The name kept in `importedFrom.tool`.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceTool::ClaudeCode => "claude-code",
            SourceTool::Codex => "codex",
            SourceTool::Opencode => "opencode",
        }
    }
}

/// A converted session, not yet written anywhere.
#[derive(Clone, Debug)]
pub struct Converted {
    /// Where it came from.
    pub tool: SourceTool,
    /// The session id the source tool gave it.
    pub session_id: String,
    /// When it started, when the source says.
    pub started: Option<Timestamp>,
    /// Its title in the source tool, if it had one.
    pub title: Option<String>,
    /// The main conversation's entries.
    pub main: Vec<Entry>,
    /// Each subagent's name and entries.
    pub subagents: Vec<(String, Vec<Entry>)>,
    /// What was converted and what was not.
    pub report: Report,
}

impl Converted {
    /// A session of one conversation, without subagents: the one `builder` holds.
    pub(crate) fn single(
        tool: SourceTool,
        session_id: String,
        started: Option<Timestamp>,
        title: Option<String>,
        builder: builder::Builder,
    ) -> Self {
        let (main, report) = builder.finish();
        Self {
            tool,
            session_id,
            started,
            title,
            main,
            subagents: Vec::new(),
            report,
        }
    }
}

/// The lines of a JSONL text, without their line ends; blank lines left out.
pub(crate) fn split_lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes
        .split(|&b| b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
        .filter(|line| line.iter().any(|b| !b.is_ascii_whitespace()))
}

/// The longest transcript read, in bytes: a file is read whole, so a bigger one (or a
/// device that never ends) is refused rather than filling the memory.
pub const MAX_TRANSCRIPT_BYTES: u64 = 1 << 30;

/// Reads a transcript whole: a regular file of at most [`MAX_TRANSCRIPT_BYTES`];
/// anything else (a FIFO, a device) is refused without waiting on it.
pub(crate) fn read_file(path: &Path) -> Result<Vec<u8>, ImportError> {
    read_bounded(path, MAX_TRANSCRIPT_BYTES)
}

/// Reads the regular file `path` whole, if it holds at most `limit` bytes.
pub(crate) fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, ImportError> {
    reprise_session::fs::read_regular_file(path, limit).map_err(|error| ImportError::Read {
        path: path.to_path_buf(),
        source: error.source,
    })
}

/// How much of a file the sniffers read; the line that crosses it is read whole.
const SNIFF_BYTES: usize = 256 * 1024;

/// Which tool wrote this file, from its first lines (read whole, however long);
/// `None` when it is none of them.
pub fn detect(bytes: &[u8]) -> Option<SourceTool> {
    let head = &bytes[..bytes.len().min(SNIFF_BYTES)];
    let lines = match bytes[head.len()..].iter().position(|&b| b == b'\n') {
        Some(end) => &bytes[..head.len() + end],
        None => bytes,
    };
    if codex::sniff(lines) {
        Some(SourceTool::Codex)
    } else if claude_code::sniff(lines) {
        Some(SourceTool::ClaudeCode)
    } else if opencode::sniff(head) {
        Some(SourceTool::Opencode)
    } else {
        None
    }
}

/// Converts the transcript at `path` (its contents are `bytes`). A Claude Code
/// transcript brings the subagent files beside it (`<session>/subagents/`).
pub fn convert(path: &Path, bytes: &[u8]) -> Result<Converted, ImportError> {
    let converted = match detect(bytes) {
        Some(SourceTool::ClaudeCode) => claude_code::convert(path, bytes)?,
        Some(SourceTool::Codex) => codex::convert(path, bytes)?,
        Some(SourceTool::Opencode) => opencode::convert(path, bytes)?,
        None => {
            return Err(ImportError::Unrecognized {
                path: path.to_path_buf(),
            });
        }
    };
    if !converted
        .main
        .iter()
        .any(|entry| entry.as_message().is_some())
    {
        return Err(ImportError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(converted)
}

/// Reads and converts the transcript at `path`.
pub fn convert_file(path: &Path) -> Result<Converted, ImportError> {
    let bytes = read_file(path)?;
    convert(path, &bytes)
}
