//! `/rewind` in an open chat, apart from any screen: what to choose from (the
//! person's messages, newest first, and the undo of the last rewind), the preview
//! of a choice, and carrying it out under the writer lock the chat holds, after
//! which the agent reads the conversation back so that the model's view drops what
//! was rewound.

use crate::error::{ChatError, Result};
use reprise_checkpoint::STORE_DIR_NAME;
use reprise_session::{SessionKey, last_rewind};
use tracing::Instrument;

use crate::rewind::{
    PersonMessage, RewindPart, RewindPlan, carry_out, checkpoint_after, left_unreadable,
    person_messages, plan_rewind, plan_undo, preview_with_folder, restore_preview,
};
use crate::session::ChatSession;

/// What `/rewind` offers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RewindMenu {
    /// Whether there is a rewind to undo.
    pub undo: bool,
    /// The person's messages in the model's view, newest first.
    pub messages: Vec<MenuMessage>,
}

impl RewindMenu {
    /// Whether there is nothing to offer.
    pub fn is_empty(&self) -> bool {
        !self.undo && self.messages.is_empty()
    }
}

/// One of the person's messages, as `/rewind` offers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MenuMessage {
    /// The message.
    pub message: PersonMessage,
    /// Whether its files can be rewound too (a checkpoint was taken after it).
    pub files: bool,
}

impl MenuMessage {
    /// What can be rewound at this message.
    pub fn parts(&self) -> Vec<RewindPart> {
        RewindPart::choices(self.files)
    }
}

/// What the person chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RewindChoice {
    /// Back to just before message `number` (counting from 1, as `--to` does).
    To {
        /// The message.
        number: usize,
        /// What is rewound.
        part: RewindPart,
    },
    /// The undo of the last rewind.
    Undo,
}

/// A choice with what it will do, ready to be confirmed.
#[derive(Clone, Debug)]
pub struct PreparedRewind {
    plan: RewindPlan,
    /// What it will do, in words (raw: escaped where shown).
    pub preview: String,
}

/// A rewind carried out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RewindDone {
    /// What to show.
    pub line: String,
    /// The text of the message rewound to, for the prompt (a conversation rewind).
    pub message: Option<String>,
}

/// What `/rewind` says when there is nothing to rewind.
pub const NOTHING_TO_REWIND: &str =
    "(nothing to rewind yet: no message of yours is in the conversation)";

impl ChatSession {
    /// Whether the run keeps checkpoints of its working folder.
    fn has_checkpoint_store(&self) -> bool {
        self.folder.dir.join(STORE_DIR_NAME).is_dir()
    }

    /// What `/rewind` offers now.
    pub async fn rewind_menu(&self) -> Result<RewindMenu> {
        let entries = self.stored_entries().await?;
        let store = self.has_checkpoint_store();
        let mut messages: Vec<MenuMessage> = person_messages(&entries)
            .into_iter()
            .map(|(at, message)| MenuMessage {
                files: store && checkpoint_after(&entries, at).is_some(),
                message,
            })
            .collect();
        messages.reverse();
        Ok(RewindMenu {
            undo: last_rewind(&entries).is_some(),
            messages,
        })
    }

    /// What `choice` will do, in words, ready to be carried out.
    pub async fn prepare_rewind(&self, choice: RewindChoice) -> Result<PreparedRewind> {
        let entries = self.stored_entries().await?;
        let plan = match choice {
            RewindChoice::Undo => plan_undo(&entries)?,
            RewindChoice::To { number, part } => {
                plan_rewind(&entries, &number.to_string(), part, false)?
            }
        };
        let preview = match plan.files {
            Some(target) => {
                let workdir = self.workdir.clone();
                Some(
                    self.checkpoints
                        .with_store(move |store| restore_preview(store, &target, &workdir))
                        .await?,
                )
            }
            None => None,
        };
        Ok(PreparedRewind {
            preview: preview_with_folder(&plan, preview.as_ref(), &self.workdir),
            plan,
        })
    }

    /// Carries out a prepared rewind: the files restored (through the chat's own
    /// checkpoint store), the rewind entry appended under the chat's writer lock,
    /// and the conversation read back, so that the next request leaves out what was
    /// rewound.
    pub async fn rewind(&mut self, prepared: PreparedRewind) -> Result<RewindDone> {
        let span = tracing::info_span!(
            target: "reprise_chat",
            "rewind",
            gen_ai.conversation.id = self.agent.session_id(),
            reprise.rewind.files = prepared.plan.files.is_some(),
            reprise.rewind.undo = prepared.plan.undoes.is_some(),
        );
        self.rewind_unobserved(prepared).instrument(span).await
    }

    async fn rewind_unobserved(&mut self, prepared: PreparedRewind) -> Result<RewindDone> {
        let plan = prepared.plan;
        let (entry, done) = match plan.files {
            Some(_) => {
                let plan = plan.clone();
                self.checkpoints
                    .with_store(move |store| carry_out(&plan, Some(store)))
                    .await?
            }
            None => carry_out(&plan, None)?,
        };
        let key = SessionKey::session(self.agent.session_id())?;
        self.agent
            .store()
            .append(&key, std::slice::from_ref(&entry))
            .await?;
        self.agent.reload().await.map_err(ChatError::ReadBack)?;
        let mut line = done_line(&plan);
        if let Some(left) = done.as_ref().and_then(left_unreadable) {
            line = format!("{line}\n({left})");
        }
        self.log_line(&line);
        Ok(RewindDone {
            line,
            message: plan.message.map(|message| message.text),
        })
    }
}

/// What the chat says once `plan` is carried out.
fn done_line(plan: &RewindPlan) -> String {
    let files = if plan.files.is_some() {
        "the files are restored"
    } else {
        "the files are left as they are"
    };
    match (&plan.undoes, &plan.message) {
        (Some((_, returning)), _) => format!(
            "(undid the last rewind: {} back in the model's view; {files})",
            match returning {
                1 => "1 message is".to_owned(),
                n => format!("{n} messages are"),
            }
        ),
        (None, Some(message)) => format!(
            "(rewound to just before message {}: {} the model's view; {files}; \
             /rewind can undo it)",
            message.number,
            crate::text::counted(plan.leaving, "message left", "messages left")
        ),
        (None, None) => "(the files are as they were then; the conversation stays as it is; \
                         /rewind can undo it)"
            .to_owned(),
    }
}
