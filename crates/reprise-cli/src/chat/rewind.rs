//! Rewinds, as `reprise rewind` and `/rewind` make them: the person's messages to
//! choose from, what a rewind to one of them would do (the checkpoint to restore,
//! the messages that leave the model's view), its preview in words, and carrying it
//! out (files restored first, then the rewind entry appended).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result, bail};
use reprise_checkpoint::{CheckpointId, CheckpointStore, RestorePreview};
use reprise_session::{Entry, Rewind, Role, checkpoint_of, last_rewind, rewound};
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
    /// The checkpoint the files go back to; `None`: the files stay.
    pub files: Option<CheckpointId>,
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
/// or the state a later rewind left behind). `None`: nothing was changed since.
pub fn checkpoint_after(entries: &[Entry], at: usize) -> Option<CheckpointId> {
    entries.iter().skip(at + 1).find_map(checkpoint_named_by)
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
/// from 1, or an entry's uuid) would do.
pub fn plan_rewind(entries: &[Entry], target: &str, part: RewindPart) -> Result<RewindPlan> {
    let messages = person_messages(entries);
    if messages.is_empty() {
        bail!("the conversation has no message of yours to rewind to");
    }
    let found = match target.parse::<usize>() {
        Ok(number) => messages
            .iter()
            .find(|(_, message)| message.number == number)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "--to {number}: the conversation has {} messages of yours (choose 1 to {})",
                    messages.len(),
                    messages.len()
                )
            })?,
        Err(_) => {
            let Ok(uuid) = target.parse::<Uuid>() else {
                bail!("--to {target:?}: not a message number nor an entry's uuid");
            };
            messages
                .iter()
                .find(|(_, message)| message.uuid == uuid)
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "--to {target}: no message of yours in the model's view has this uuid"
                    )
                })?
        }
    };
    let (at, message) = found.clone();
    let files = match part {
        RewindPart::ConversationOnly => None,
        RewindPart::Both | RewindPart::FilesOnly => checkpoint_after(entries, at),
    };
    let leaving = match part {
        RewindPart::FilesOnly => 0,
        RewindPart::Both | RewindPart::ConversationOnly => {
            let hidden = rewound(entries);
            entries[at..]
                .iter()
                .zip(&hidden[at..])
                .filter(|(entry, hidden)| !**hidden && entry.as_message().is_some())
                .count()
        }
    };
    if part == RewindPart::FilesOnly && files.is_none() {
        bail!(
            "no checkpoint of the working folder was taken after message {}: nothing to \
             restore (its files are as they are now)",
            message.number
        );
    }
    Ok(RewindPlan {
        message: (part != RewindPart::FilesOnly).then_some(message),
        files,
        leaving,
        undoes: None,
    })
}

/// What undoing the latest rewind would do: its undo checkpoint restored (when it
/// changed files), its messages back in view.
pub fn plan_undo(entries: &[Entry]) -> Result<RewindPlan> {
    let Some((uuid, rewind)) = last_rewind(entries) else {
        bail!("there is no rewind to undo");
    };
    let at = entries.iter().position(|entry| entry.uuid == uuid);
    let returning = match (rewind.to, at) {
        (Some(to), Some(at)) => entries[..at]
            .iter()
            .position(|entry| entry.uuid == to)
            .map_or(0, |start| {
                entries[start..at]
                    .iter()
                    .filter(|entry| entry.as_message().is_some())
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
        files,
        leaving: 0,
        undoes: Some((uuid, returning)),
    })
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
                crate::display::text::one_line(&message.text)
                    .chars()
                    .take(60)
                    .collect::<String>()
            );
        }
        (None, None) => text.push_str("rewind the files\n"),
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
            "  {returning} messages come back into the model's view"
        );
    } else if plan.message.is_some() {
        let _ = writeln!(text, "  {} messages leave the model's view", plan.leaving);
    } else {
        text.push_str("  the conversation stays as it is\n");
    }
    text
}

/// What restoring checkpoint `target` would do to `workdir`.
pub fn restore_preview(
    store: &mut CheckpointStore,
    target: &CheckpointId,
    workdir: &Path,
) -> Result<RestorePreview> {
    store.preview(target).with_context(|| {
        format!(
            "cannot compare {} with checkpoint {target}",
            workdir.display()
        )
    })
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
/// to append returned. `store` is needed when the plan restores files.
pub fn carry_out(plan: &RewindPlan, store: Option<&mut CheckpointStore>) -> Result<Entry> {
    let (files, undo) = match (&plan.files, store) {
        (Some(target), Some(store)) => {
            let restored = store.restore(target)?;
            (Some(target.to_string()), Some(restored.undo.to_string()))
        }
        (Some(_), None) => bail!("the run has no checkpoint store to restore from"),
        (None, _) => (None, None),
    };
    Ok(Rewind {
        to: plan.message.as_ref().map(|message| message.uuid),
        files,
        undo,
        undoes: plan.undoes.map(|(uuid, _)| uuid),
    }
    .to_entry())
}
