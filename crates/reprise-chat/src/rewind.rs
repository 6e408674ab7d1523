//! Rewinds, as `reprise rewind` and `/rewind` make them: the person's messages to
//! choose from, what a rewind to one of them would do (the checkpoint to restore,
//! the messages that leave the model's view), its preview in words, and carrying it
//! out (files restored first, then the rewind entry appended).

use std::fmt::Write as _;
use std::path::Path;

use crate::error::{ChatError, Result};
use reprise_checkpoint::{CheckpointId, CheckpointStore, FinishPreview, RestorePreview};
use reprise_session::{Entry, Rewind, Role, TOOL_START_KIND, checkpoint_of, last_rewind, rewound};
use uuid::Uuid;

/// What a rewind takes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RewindPart {
    /// The conversation and the files.
    Both,
    /// The files only: the conversation stays as it is.
    FilesOnly,
    /// The conversation only: the files stay as they are.
    ConversationOnly,
}

impl RewindPart {
    /// What the choice is called where a person picks it.
    pub fn label(self) -> &'static str {
        match self {
            RewindPart::Both => "the conversation and the files",
            RewindPart::ConversationOnly => "the conversation only (the files stay)",
            RewindPart::FilesOnly => "the files only (the conversation stays)",
        }
    }

    /// The choices at a message: the files' only when a checkpoint was taken
    /// after it.
    pub fn choices(files: bool) -> Vec<RewindPart> {
        if files {
            vec![
                RewindPart::Both,
                RewindPart::ConversationOnly,
                RewindPart::FilesOnly,
            ]
        } else {
            vec![RewindPart::ConversationOnly]
        }
    }
}

/// One of the person's messages in the model's view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PersonMessage {
    /// Its number, counting the person's messages in view from 1.
    pub number: usize,
    /// Its entry's uuid.
    pub uuid: Uuid,
    /// Its text.
    pub text: String,
}

/// What a rewind (or the undo of one) will do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RewindPlan {
    /// The message rewound to, when the conversation is rewound.
    pub message: Option<PersonMessage>,
    /// The message whose files a files-only rewind goes back to (the folder as it
    /// was just before it); `None` for the other rewinds and an undo.
    pub files_before: Option<PersonMessage>,
    /// The checkpoint the files go back to; `None`: the files stay.
    pub files: Option<CheckpointId>,
    /// Whether `files` is the nearest earlier checkpoint, taken because the one
    /// after the message is missing (an older state than asked for).
    pub earlier: bool,
    /// How many messages leave the model's view.
    pub leaving: usize,
    /// The rewind an undo takes back, and how many messages come back into view.
    pub undoes: Option<(Uuid, usize)>,
}

/// The person's messages in the model's view, oldest first, with their position in
/// `entries`.
pub fn person_messages(entries: &[Entry]) -> Vec<(usize, PersonMessage)> {
    let hidden = rewound(entries);
    let mut out = Vec::new();
    for (at, entry) in entries.iter().enumerate() {
        if hidden[at] {
            continue;
        }
        if let Some(message) = entry.as_message()
            && message.role == Role::User
        {
            out.push((
                at,
                PersonMessage {
                    number: out.len() + 1,
                    uuid: entry.uuid,
                    text: message.text(),
                },
            ));
        }
    }
    out
}

/// The checkpoint `entry` names: a start record's, or the undo point of a rewind.
fn checkpoint_named_by(entry: &Entry) -> Option<CheckpointId> {
    let id = checkpoint_of(entry)
        .map(str::to_owned)
        .or_else(|| Rewind::from_entry(entry)?.undo)?;
    id.parse().ok()
}

/// The first checkpoint recorded after position `at`: the working folder as it was
/// before anything done after that entry changed it (a start record's checkpoint,
/// or the state a later rewind left behind). `None`: nothing was changed since, or
/// the checkpoint there is missing (see [`files_after`]).
pub fn checkpoint_after(entries: &[Entry], at: usize) -> Option<CheckpointId> {
    match files_after(entries, at) {
        FilesAfter::Checkpoint(id) => Some(id),
        FilesAfter::Unchanged | FilesAfter::Missing { .. } => None,
    }
}

/// The working folder as it was just after an entry, as the conversation records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilesAfter {
    /// Nothing recorded a change since: the folder is as it is now.
    Unchanged,
    /// The checkpoint holding it.
    Checkpoint(CheckpointId),
    /// The calls that came next started without their checkpoint (it could not be
    /// taken), and later ones have one: the state is lost, and the next checkpoint
    /// would be a later one. `earlier`: the nearest earlier state recorded.
    Missing {
        /// The nearest checkpoint recorded before it, if any.
        earlier: Option<CheckpointId>,
    },
}

/// The folder just after position `at` (see [`FilesAfter`]). A start record without
/// a checkpoint in a run that has checkpoints marks one that could not be taken:
/// the chat takes one before every start record it writes.
pub fn files_after(entries: &[Entry], at: usize) -> FilesAfter {
    let after = entries.get(at + 1..).unwrap_or_default();
    let Some(found) = after.iter().position(|entry| {
        checkpoint_named_by(entry).is_some() || entry.kind.as_deref() == Some(TOOL_START_KIND)
    }) else {
        return FilesAfter::Unchanged;
    };
    if let Some(id) = checkpoint_named_by(&after[found]) {
        return FilesAfter::Checkpoint(id);
    }
    if !after[found..]
        .iter()
        .any(|entry| checkpoint_named_by(entry).is_some())
    {
        // No checkpoint after it: nothing later would be restored in its place.
        return FilesAfter::Unchanged;
    }
    FilesAfter::Missing {
        earlier: entries[..=at.min(entries.len().saturating_sub(1))]
            .iter()
            .rev()
            .find_map(state_after),
    }
}

/// The checkpoint holding the folder as an entry left it: a start record's (the
/// calls it starts come after), or the target of a rewind that restored files.
fn state_after(entry: &Entry) -> Option<CheckpointId> {
    match Rewind::from_entry(entry) {
        Some(rewind) => rewind.files?.parse().ok(),
        None => checkpoint_of(entry)?.parse().ok(),
    }
}

/// Every checkpoint `entries` name (start records' checkpoints, rewinds' targets
/// and undo points), each once, in order: what a rewind in a fork of them may need.
pub fn named_checkpoints(entries: &[Entry]) -> Vec<CheckpointId> {
    let mut seen = std::collections::HashSet::new();
    entries
        .iter()
        .flat_map(|entry| {
            let target = Rewind::from_entry(entry)
                .and_then(|rewind| rewind.files)
                .and_then(|id| id.parse().ok());
            target.into_iter().chain(checkpoint_named_by(entry))
        })
        .filter(|id| seen.insert(*id))
        .collect()
}

/// What rewinding to `target` (a number counting the person's messages in view
/// from 1, or an entry's uuid) would do. When the checkpoint after that message is
/// missing, it fails, or, with `nearest_earlier`, restores the nearest earlier
/// checkpoint: never a later state.
pub fn plan_rewind(
    entries: &[Entry],
    target: &str,
    part: RewindPart,
    nearest_earlier: bool,
) -> Result<RewindPlan> {
    let messages = person_messages(entries);
    if messages.is_empty() {
        return Err(ChatError::NoMessageToRewindTo);
    }
    let found = match target.parse::<usize>() {
        Ok(number) => messages
            .iter()
            .find(|(_, message)| message.number == number)
            .ok_or(ChatError::NoSuchMessage {
                number,
                count: messages.len(),
            })?,
        Err(_) => {
            let Ok(uuid) = target.parse::<Uuid>() else {
                return Err(ChatError::NotARewindTarget {
                    target: target.to_owned(),
                });
            };
            messages
                .iter()
                .find(|(_, message)| message.uuid == uuid)
                .ok_or_else(|| ChatError::NoMessageWithUuid {
                    target: target.to_owned(),
                })?
        }
    };
    let (at, message) = found.clone();
    let (files, earlier) = match part {
        RewindPart::ConversationOnly => (None, false),
        RewindPart::Both | RewindPart::FilesOnly => match files_after(entries, at) {
            FilesAfter::Unchanged => (None, false),
            FilesAfter::Checkpoint(id) => (Some(id), false),
            FilesAfter::Missing {
                earlier: Some(id), ..
            } if nearest_earlier => (Some(id), true),
            FilesAfter::Missing { earlier } => {
                return Err(ChatError::CheckpointMissing {
                    number: message.number,
                    earlier: earlier.is_some(),
                });
            }
        },
    };
    let leaving = match part {
        RewindPart::FilesOnly => 0,
        RewindPart::Both | RewindPart::ConversationOnly => {
            let hidden = rewound(entries);
            entries[at..]
                .iter()
                .zip(&hidden[at..])
                .filter(|(entry, hidden)| !**hidden && crate::view::counts_as_message(entry))
                .count()
        }
    };
    if part == RewindPart::FilesOnly && files.is_none() {
        return Err(ChatError::NoCheckpointAfter {
            number: message.number,
        });
    }
    let files_only = part == RewindPart::FilesOnly;
    Ok(RewindPlan {
        files_before: files_only.then(|| message.clone()),
        message: (!files_only).then_some(message),
        files,
        earlier,
        leaving,
        undoes: None,
    })
}

/// What undoing the latest rewind would do: its undo checkpoint restored (when it
/// changed files), its messages back in view.
pub fn plan_undo(entries: &[Entry]) -> Result<RewindPlan> {
    let Some((uuid, rewind)) = last_rewind(entries) else {
        return Err(ChatError::NothingToUndo);
    };
    let at = entries.iter().position(|entry| entry.uuid == uuid);
    let returning = match (rewind.to, at) {
        (Some(to), Some(at)) => entries[..at]
            .iter()
            .position(|entry| entry.uuid == to)
            .map_or(0, |start| {
                entries[start..at]
                    .iter()
                    .filter(|entry| crate::view::counts_as_message(entry))
                    .count()
            }),
        _ => 0,
    };
    let files = match (&rewind.files, &rewind.undo) {
        (Some(_), Some(undo)) => undo.parse().ok(),
        _ => None,
    };
    Ok(RewindPlan {
        message: None,
        files_before: None,
        files,
        earlier: false,
        leaving: 0,
        undoes: Some((uuid, returning)),
    })
}

/// `1 message comes` / `3 messages come`.
fn messages_come(count: usize) -> String {
    if count == 1 {
        "1 message comes".to_owned()
    } else {
        format!("{count} messages come")
    }
}

/// `1 message leaves` / `3 messages leave`.
fn messages_leave(count: usize) -> String {
    if count == 1 {
        "1 message leaves".to_owned()
    } else {
        format!("{count} messages leave")
    }
}

/// The preview shown before a rewind: the files restored, created and deleted,
/// those changed outside reprise, the messages leaving (or coming back into) view.
pub fn preview_text(plan: &RewindPlan, preview: Option<&RestorePreview>) -> String {
    let mut text = String::new();
    match (&plan.undoes, &plan.message) {
        (Some(_), _) => text.push_str("undo the last rewind\n"),
        (None, Some(message)) => {
            let _ = writeln!(
                text,
                "rewind to just before message {}: {}",
                message.number,
                crate::text::one_line(&message.text)
                    .chars()
                    .take(60)
                    .collect::<String>()
            );
        }
        (None, None) => match &plan.files_before {
            Some(message) => {
                let _ = writeln!(
                    text,
                    "rewind the files to just before message {}: {}",
                    message.number,
                    crate::text::one_line(&message.text)
                        .chars()
                        .take(60)
                        .collect::<String>()
                );
            }
            None => text.push_str("rewind the files\n"),
        },
    }
    if plan.earlier {
        text.push_str(
            "  warning: the checkpoint after this message is missing (it could not be taken); \
             the files go back to the nearest earlier checkpoint, an older state\n",
        );
    }
    match preview {
        None => text.push_str("  files: left as they are\n"),
        Some(preview) => {
            let _ = writeln!(
                text,
                "  files: {} restored, {} created, {} deleted",
                preview.restored.len(),
                preview.created.len(),
                preview.deleted.len()
            );
            let lists = [
                ("restored", &preview.restored),
                ("created", &preview.created),
                ("deleted", &preview.deleted),
                ("kept (not captured)", &preview.kept),
            ];
            for (what, paths) in lists {
                for path in paths {
                    let _ = writeln!(text, "    {what:<9} {}", path.display());
                }
            }
            for (path, to) in &preview.linked {
                let _ = writeln!(
                    text,
                    "    hard-linked {} (one file with {} again)",
                    path.display(),
                    to.display()
                );
            }
            for path in &preview.unlinked {
                let _ = writeln!(
                    text,
                    "    unlinked  {} (given a file of its own: not hard-linked in the checkpoint)",
                    path.display()
                );
            }
            not_captured_text(&mut text, preview);
            if !preview.changed_outside.is_empty() {
                let _ = writeln!(
                    text,
                    "  changed outside reprise since the last checkpoint (an undo brings them back):"
                );
                for path in &preview.changed_outside {
                    let _ = writeln!(text, "    {}", path.display());
                }
            }
        }
    }
    if let Some((_, returning)) = plan.undoes {
        let _ = writeln!(
            text,
            "  {} back into the model's view",
            messages_come(returning)
        );
    } else if plan.message.is_some() {
        let _ = writeln!(text, "  {} the model's view", messages_leave(plan.leaving));
    } else {
        text.push_str("  the conversation stays as it is\n");
    }
    text
}

/// The paths a restore leaves as they are because a checkpoint could not read them:
/// the target's (unreadable when it was taken) and the folder's (unreadable now).
fn not_captured_text(text: &mut String, preview: &RestorePreview) {
    if !preview.not_captured.is_empty() {
        let _ = writeln!(
            text,
            "  warning: {} not captured by that checkpoint (they could not be read when it was \
             taken); left as they are now:",
            count(preview.not_captured.len(), "path was", "paths were")
        );
        for path in &preview.not_captured {
            let _ = writeln!(text, "    not captured {}", path.display());
        }
    }
    if !preview.unreadable_now.is_empty() {
        let _ = writeln!(
            text,
            "  warning: {} cannot be read now (an undo could not bring them back); left as they are:",
            count(preview.unreadable_now.len(), "path", "paths")
        );
        for path in &preview.unreadable_now {
            let _ = writeln!(text, "    unreadable {}", path.display());
        }
    }
}

fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// What restoring checkpoint `target` would do to `workdir`.
pub fn restore_preview(
    store: &mut CheckpointStore,
    target: &CheckpointId,
    workdir: &Path,
) -> Result<RestorePreview> {
    store.preview(target).map_err(|source| match source {
        reprise_checkpoint::CheckpointError::Unfinished { workdir, restore } => {
            crate::checkpoints::unfinished_error(&workdir, &restore)
        }
        source => ChatError::Compare {
            workdir: workdir.to_path_buf(),
            target: target.to_string(),
            source,
        },
    })
}

/// What finishing a cut restore will do, in words, as `reprise rewind RUN --finish`
/// shows it before asking (raw: escaped where shown).
pub fn finish_preview_text(preview: &FinishPreview, workdir: &Path) -> String {
    let mut text = String::new();
    let target = preview.restore.target.to_string();
    let _ = writeln!(
        text,
        "finish the restore that was cut (the files back to checkpoint {})",
        &target[..12.min(target.len())]
    );
    let remaining = &preview.remaining;
    let _ = writeln!(
        text,
        "  files: {} restored, {} created, {} deleted still to do ({} done before the cut)",
        remaining.restored.len(),
        remaining.created.len(),
        remaining.deleted.len(),
        preview.done
    );
    let lists = [
        ("restored", &remaining.restored),
        ("created", &remaining.created),
        ("deleted", &remaining.deleted),
        ("kept (not captured)", &remaining.kept),
    ];
    for (what, paths) in lists {
        for path in paths {
            let _ = writeln!(text, "    {what:<9} {}", path.display());
        }
    }
    if !preview.changed.is_empty() {
        let _ = writeln!(
            text,
            "  changed since the restore was cut (left as they are, not overwritten):"
        );
        for path in &preview.changed {
            let _ = writeln!(text, "    {}", path.display());
        }
    }
    let _ = writeln!(text, "  working folder: {}", workdir.display());
    text.push_str("  the conversation stays as it is\n");
    text
}

/// Finishes the restore that a crash cut in `store`, and returns the rewind entry
/// to append: the files rewound to its target, with its undo point (the rewind
/// entry of the cut restore was never appended: it comes after the restore).
/// `run` names the run, for the error when there is none to finish.
pub fn finish_cut_restore(
    store: &mut CheckpointStore,
    run: &str,
) -> Result<(FinishPreview, Entry)> {
    let done = store
        .finish()
        .map_err(crate::checkpoints::checkpoint_error)?
        .ok_or_else(|| ChatError::NothingToFinish {
            run: run.to_owned(),
        })?;
    let entry = Rewind {
        to: None,
        files: Some(done.restore.target.to_string()),
        undo: Some(done.restore.from.to_string()),
        undoes: None,
    }
    .to_entry();
    Ok((done, entry))
}

/// [`preview_text`], then the working folder when files are restored: what both
/// `reprise rewind` and `/rewind` show before asking (raw: escaped where shown).
pub fn preview_with_folder(
    plan: &RewindPlan,
    preview: Option<&RestorePreview>,
    workdir: &Path,
) -> String {
    let mut text = preview_text(plan, preview);
    if preview.is_some() {
        let _ = writeln!(text, "  working folder: {}", workdir.display());
    }
    text
}

/// Carries out `plan`: the files restored (when it restores any), then the entry
/// to append returned, with what the restore did. `store` is needed when the plan
/// restores files.
pub fn carry_out(
    plan: &RewindPlan,
    store: Option<&mut CheckpointStore>,
) -> Result<(Entry, Option<RestorePreview>)> {
    let (files, undo, done) = match (&plan.files, store) {
        (Some(target), Some(store)) => {
            let restored = store
                .restore(target)
                .map_err(crate::checkpoints::checkpoint_error)?;
            (
                Some(target.to_string()),
                Some(restored.undo.to_string()),
                Some(restored.preview),
            )
        }
        (Some(_), None) => return Err(ChatError::NoCheckpointStore),
        (None, _) => (None, None, None),
    };
    let entry = Rewind {
        to: plan.message.as_ref().map(|message| message.uuid),
        files,
        undo,
        undoes: plan.undoes.map(|(uuid, _)| uuid),
    }
    .to_entry();
    Ok((entry, done))
}

/// What a carried-out restore left as it was because no checkpoint could read it,
/// in one line (raw: escaped where shown); `None` when there is no such path.
pub fn left_unreadable(done: &RestorePreview) -> Option<String> {
    let paths: Vec<String> = done
        .not_captured
        .iter()
        .chain(&done.unreadable_now)
        .map(|path| path.display().to_string())
        .collect();
    if paths.is_empty() {
        return None;
    }
    Some(format!(
        "left as they are (not captured: they could not be read): {}",
        paths.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use reprise_checkpoint::UnfinishedRestore;

    use super::*;

    #[test]
    fn the_finish_preview_names_what_is_left_and_what_changed_since_the_cut() {
        let id = |digit: &str| digit.repeat(64).parse::<CheckpointId>().unwrap();
        let preview = FinishPreview {
            restore: UnfinishedRestore {
                store: PathBuf::from("/w/.run/r/checkpoints"),
                from: id("b"),
                target: id("a"),
            },
            remaining: RestorePreview {
                restored: vec!["src/x.rs".into()],
                created: vec!["gone/one.txt".into()],
                deleted: vec!["made/n.txt".into()],
                ..RestorePreview::default()
            },
            changed: vec!["src/y.rs".into()],
            done: 7,
        };
        assert_eq!(
            finish_preview_text(&preview, Path::new("/w")),
            "finish the restore that was cut (the files back to checkpoint aaaaaaaaaaaa)\n\
             \x20 files: 1 restored, 1 created, 1 deleted still to do (7 done before the cut)\n\
             \x20   restored  src/x.rs\n\
             \x20   created   gone/one.txt\n\
             \x20   deleted   made/n.txt\n\
             \x20 changed since the restore was cut (left as they are, not overwritten):\n\
             \x20   src/y.rs\n\
             \x20 working folder: /w\n\
             \x20 the conversation stays as it is\n"
        );
    }
}
