//! `read_conversation`: what was said in a run, to redraw it when the run is resumed.
//!
//! Only the person's messages and the agent's text replies come back, and a marker
//! where a compaction happened. Left out: system messages, tool calls (an assistant
//! message with only tool calls has no text), tool results, entries of other kinds
//! (fork markers), and
//! slash-command expansions: user messages that the chat wrote for a command rather
//! than typed by the person, marked with `"isMeta": true` on the entry or on the
//! message (the same mark Claude Code uses; see [`mark_command_expansion`]). A line the
//! person typed that starts with `/` is kept: it is what they wrote.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::path::Path;

use uuid::Uuid;

use crate::error::RunError;
use crate::person_message::shows_as_message;
use crate::store::CONVERSATION_JSONL;
use reprise_session::Entry;
use reprise_session::parts::push_expected;
use reprise_session::{Compaction, compaction_marker};
use reprise_session::{Content, Role};
use reprise_session::{LoadWarning, Loaded};

/// One message to redraw.
///
/// A compaction comes back where its entry is, as an item with [`Role::System`]
/// whose text is the marker line (see [`compaction_marker`]): no system message of
/// the history is ever shown, so the role says it is not something anyone said. The
/// messages it summarised are all still there, before it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConversationMessage {
    /// [`Role::User`] or [`Role::Assistant`]; [`Role::System`] for a compaction
    /// marker.
    pub role: Role,
    /// The text as written (text parts joined).
    pub text: String,
}

/// A conversation read back, with the lines that could not be used.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Conversation {
    /// The messages, in order.
    pub messages: Vec<ConversationMessage>,
    /// Corrupt lines skipped and a torn last line ignored.
    pub warnings: Vec<LoadWarning>,
}

/// The person's messages and the agent's text replies in `dir/conversation.jsonl`
/// (none when the file does not exist). Problems with single lines are logged with
/// `tracing` and skipped; use [`read_conversation_with_warnings`] to get them.
pub fn read_conversation(dir: &Path) -> Result<Vec<ConversationMessage>, RunError> {
    let conversation = read_conversation_with_warnings(dir)?;
    for warning in &conversation.warnings {
        tracing::warn!("{warning}");
    }
    Ok(conversation.messages)
}

/// Like [`read_conversation`], returning the skipped lines as warnings.
///
/// The file is read by the same reader as a session load ([`reprise_session::load_file`]):
/// entry lines and bare messages (lines holding only a message); a torn last line is
/// ignored, a corrupt line or a repeated uuid skipped, each with a warning.
pub fn read_conversation_with_warnings(dir: &Path) -> Result<Conversation, RunError> {
    let mut messages = Vec::new();
    let expected = Cell::new(0);
    let mut shown = Shown::default();
    let warnings = read_entries(dir, &expected, &mut |entry| {
        // At most one message per entry: sized as the entries would be.
        if let Some(message) = shown.take(entry) {
            push_expected(&mut messages, &expected, message);
        }
    })?;
    Ok(Conversation {
        messages,
        warnings: warnings.unwrap_or_default(),
    })
}

/// Reads the conversation in `dir/conversation.jsonl` as
/// [`read_conversation_with_warnings`] does, handing each message to `sink` as soon
/// as it is read, and returns the warnings. A long conversation goes through in the
/// memory of a few chunks of its file, where collecting it first would hold all of
/// it (and take the pages for it from the system, which costs as much as parsing).
pub fn stream_conversation(
    dir: &Path,
    sink: &mut dyn FnMut(ConversationMessage),
) -> Result<Vec<LoadWarning>, RunError> {
    let mut shown = Shown::default();
    let warnings = read_entries(dir, &Cell::new(0), &mut |entry| {
        if let Some(message) = shown.take(entry) {
            sink(message);
        }
    })?;
    Ok(warnings.unwrap_or_default())
}

/// The entries of `dir/conversation.jsonl`, in order, never read through a link;
/// `None` when the file does not exist.
fn read_entries(
    dir: &Path,
    expected: &Cell<usize>,
    sink: &mut dyn FnMut(Entry),
) -> Result<Option<Vec<LoadWarning>>, RunError> {
    let path = dir.join(CONVERSATION_JSONL);
    // Only names the uuids derived for bare-message lines, which are not shown.
    let session_hint = dir
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or("run");
    Ok(reprise_session::parts::read_view_beneath(
        crate::fs::run_file_root(&path),
        &path,
        session_hint,
        expected,
        sink,
    )?)
}

/// The person's messages and the agent's text replies among a loaded session's
/// entries (from any store), with the load's warnings.
pub fn conversation_of(loaded: Loaded) -> Conversation {
    let mut shown = Shown::default();
    // The entries are taken apart: the texts move into the conversation, not copied.
    let mut messages = Vec::with_capacity(loaded.entries.len());
    messages.extend(
        loaded
            .entries
            .into_iter()
            .filter_map(|entry| shown.take(entry)),
    );
    Conversation {
        messages,
        warnings: loaded.warnings,
    }
}

/// Each entry's uuid with how many messages came up to it, to say how many a
/// compaction took in.
enum Counted {
    /// Before the first compaction: a list, as nothing searches it yet, and one map
    /// insert per entry was a good part of `reprise show` on a long conversation.
    List(Vec<(Uuid, usize)>),
    /// Only the entries a first reading found named by a compaction's `through`
    /// ([`CompactionMarkers::through`]): a few, however long the transcript.
    Named {
        /// The entries named.
        wanted: HashSet<Uuid>,
        /// How many messages came up to each, once it came.
        seen: HashMap<Uuid, usize>,
    },
    /// From the first compaction on: a map, so that each compaction is one lookup,
    /// however far back its `through` is, or when it names no entry at all (a
    /// damaged file with many such compactions would otherwise scan the history
    /// back to its start for each).
    Map(HashMap<Uuid, usize, foldhash::fast::RandomState>),
}

impl Default for Counted {
    fn default() -> Self {
        Counted::List(Vec::new())
    }
}

impl Counted {
    fn push(&mut self, uuid: Uuid, seen: usize) {
        match self {
            Counted::List(list) => list.push((uuid, seen)),
            Counted::Named {
                wanted,
                seen: counts,
            } => {
                if wanted.contains(&uuid) {
                    counts.insert(uuid, seen);
                }
            }
            Counted::Map(map) => {
                map.insert(uuid, seen);
            }
        }
    }

    /// How many messages came up to the entry `uuid`, if it came before.
    fn lookup(&mut self, uuid: Uuid) -> Option<usize> {
        if let Counted::List(list) = self {
            let map = std::mem::take(list).into_iter().collect();
            *self = Counted::Map(map);
        }
        match self {
            Counted::Map(map) => map.get(&uuid).copied(),
            Counted::Named { seen, .. } => seen.get(&uuid).copied(),
            Counted::List(_) => None,
        }
    }
}

/// Picks, from a transcript's entries handed over in order, what
/// [`read_conversation`] shows of each: for a reader that shows more of an entry
/// (its tool calls) beside it.
#[derive(Default)]
pub struct ConversationPicker(Shown);

impl ConversationPicker {
    /// What `entry` shows, if anything (its text is moved, not copied).
    pub fn take(&mut self, entry: Entry) -> Option<ConversationMessage> {
        self.0.take(entry)
    }
}

/// Picks, from a transcript's entries in order, what a conversation shows.
#[derive(Default)]
struct Shown {
    markers: CompactionMarkers,
}

impl Shown {
    /// What `entry` shows, if anything; its text is moved, not copied.
    fn take(&mut self, mut entry: Entry) -> Option<ConversationMessage> {
        let marker = self.markers.next(&entry);
        if let Some(text) = marker {
            return Some(ConversationMessage {
                role: Role::System,
                text,
            });
        }
        if !shows_as_message(&entry) {
            return None;
        }
        let message = entry.message.take()?;
        let text = match message.content {
            Some(Content::Text(text)) => text,
            _ => message.text(),
        };
        Some(ConversationMessage {
            role: message.role,
            text,
        })
    }
}

/// The marker line of each compaction in a transcript ([`compaction_marker`]): how
/// many messages it took in, counted since the compaction before it. Every reader
/// that marks compactions (this crate's conversation, `reprise show`, the exports,
/// the screens' redraw) counts with it.
#[derive(Default)]
pub struct CompactionMarkers {
    counted: Counted,
    /// Messages so far.
    seen: usize,
    /// Messages the compactions so far took in.
    compacted_up_to: usize,
}

impl CompactionMarkers {
    /// Markers for a transcript whose compactions name only entries among
    /// `throughs` (their `through`, gathered by a first reading): only those are
    /// remembered, where the others remember every entry.
    pub fn through(throughs: HashSet<Uuid>) -> Self {
        CompactionMarkers {
            counted: Counted::Named {
                wanted: throughs,
                seen: HashMap::new(),
            },
            seen: 0,
            compacted_up_to: 0,
        }
    }

    /// Counts `entry`, handed over in transcript order, and gives its marker line
    /// when it is a compaction whose `through` came before it.
    pub fn next(&mut self, entry: &Entry) -> Option<String> {
        let mut marker = None;
        if entry.as_message().is_some() {
            self.seen += 1;
        } else if let Some(compaction) = Compaction::from_entry(entry)
            && let Some(through) = self.counted.lookup(compaction.through)
        {
            marker = Some(compaction_marker(
                through.saturating_sub(self.compacted_up_to),
                compaction.tokens_before,
                compaction.tokens_after,
            ));
            self.compacted_up_to = self.compacted_up_to.max(through);
        }
        self.counted.push(entry.uuid, self.seen);
        marker
    }
}

/// Every entry of a run's main transcript (`subagent` `None`) or of one subagent's
/// (`subagents/<name>.jsonl`), with the lines that could not be used; `None` when
/// the file does not exist. Read as [`read_conversation_with_warnings`] reads, never
/// through a link.
pub fn read_run_entries(
    dir: &Path,
    subagent: Option<&str>,
) -> Result<Option<reprise_session::Loaded>, RunError> {
    let path = run_transcript(dir, subagent)?;
    Ok(reprise_session::parts::load_file_beneath(
        crate::fs::run_file_root(&path),
        &path,
        session_hint(dir),
    )?)
}

/// The entries [`read_run_entries`] reads, each handed to `sink` as soon as it is
/// read, without the `model` field of replies (which only the usage ledger reads);
/// returns the warnings, none when the file does not exist.
pub fn stream_run_entries(
    dir: &Path,
    subagent: Option<&str>,
    sink: &mut dyn FnMut(Entry),
) -> Result<Vec<LoadWarning>, RunError> {
    let path = run_transcript(dir, subagent)?;
    let warnings = reprise_session::parts::read_view_beneath(
        crate::fs::run_file_root(&path),
        &path,
        session_hint(dir),
        &Cell::new(0),
        sink,
    )?;
    Ok(warnings.unwrap_or_default())
}

/// The transcript of a run's conversation (`subagent` `None`) or of one subagent's.
fn run_transcript(dir: &Path, subagent: Option<&str>) -> Result<std::path::PathBuf, RunError> {
    Ok(match subagent {
        None => dir.join(CONVERSATION_JSONL),
        Some(name) => {
            reprise_session::validate_id("subagent", name)?;
            dir.join(crate::store::SUBAGENTS_DIR)
                .join(format!("{name}.jsonl"))
        }
    })
}

/// What the uuids derived for bare-message lines of a run's files are named by.
fn session_hint(dir: &Path) -> &str {
    dir.file_name()
        .and_then(|name| name.to_str())
        .unwrap_or("run")
}

/// The names of the subagents with a transcript (`subagents/<name>.jsonl`) in the
/// run folder `dir`, in order; none when it has no `subagents` folder.
pub fn subagent_names(dir: &Path) -> Vec<String> {
    let Ok(read) = std::fs::read_dir(dir.join(crate::store::SUBAGENTS_DIR)) else {
        return Vec::new();
    };
    let mut names: Vec<String> = read
        .filter_map(|item| item.ok())
        .filter_map(|item| {
            let name = item
                .file_name()
                .to_str()?
                .strip_suffix(".jsonl")?
                .to_owned();
            reprise_session::validate_id("subagent", &name)
                .is_ok()
                .then_some(name)
        })
        .collect();
    names.sort();
    names
}
