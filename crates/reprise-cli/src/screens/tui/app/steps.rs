//! The full screen's steps of `/rewind` (a message, what to rewind, the preview
//! and a yes) and of `/fork` in a run with checkpoints (with the files or not, and
//! into which folder), each a menu in place of the prompt; Esc at any step closes
//! it with nothing changed.

use std::path::PathBuf;

use super::App;
use crate::screens::tui::view::{Item, Menu};
use reprise_chat::commands::{Outcome, fork};
use reprise_chat::rewind::RewindPart;
use reprise_chat::rewind_steps::{PreparedRewind, RewindChoice, RewindMenu};
use reprise_chat::text::one_line;

/// What the open menu, or the prompt's question, is for.
pub(super) enum Step {
    /// The person's messages (after the undo, when there is one).
    RewindMessage(RewindMenu),
    /// What to rewind at message `number`.
    RewindPart {
        /// The message.
        number: usize,
        /// The choices, in the menu's order.
        parts: Vec<RewindPart>,
    },
    /// The preview: yes or no.
    RewindConfirm(PreparedRewind),
    /// `/fork`: with the files or the conversation only.
    ForkKind {
        /// The folder offered for the files.
        default: PathBuf,
    },
    /// `/fork` with the files: the prompt asks for the folder.
    ForkFolder {
        /// What an empty answer means.
        default: PathBuf,
    },
}

impl App {
    fn open_menu(&mut self, step: Step, title: &str, text: String, options: Vec<String>) {
        self.view.menu = Some(Menu {
            title: title.to_owned(),
            text,
            options,
            selected: 0,
        });
        self.step = Some(step);
    }

    /// `/rewind`: the list of the person's messages, newest first.
    pub(super) fn open_rewind(&mut self, menu: RewindMenu) {
        let mut options = Vec::new();
        if menu.undo {
            options.push("↶ undo the last rewind".to_owned());
        }
        for item in &menu.messages {
            options.push(format!(
                "{:>3}. {}",
                item.message.number,
                one_line(&item.message.text)
            ));
        }
        self.open_menu(
            Step::RewindMessage(menu),
            "rewind to just before which message?",
            String::new(),
            options,
        );
    }

    /// `/fork` in a run with checkpoints: with the files or not.
    pub(super) fn open_fork_choice(&mut self, default: PathBuf) {
        let workdir = self
            .session
            .as_ref()
            .map(|session| session.workdir.display().to_string())
            .unwrap_or_default();
        self.open_menu(
            Step::ForkKind { default },
            "fork this run",
            String::new(),
            vec![
                "with a copy of the files, in a new folder".to_owned(),
                format!("the conversation only (the copy works in {workdir})"),
            ],
        );
    }

    /// The choice picked in the open menu.
    pub(super) async fn on_chosen(&mut self, index: usize) {
        match self.step.take() {
            Some(Step::RewindMessage(menu)) => {
                let offset = usize::from(menu.undo);
                if menu.undo && index == 0 {
                    return self.prepare(RewindChoice::Undo).await;
                }
                let Some(item) = menu.messages.get(index - offset) else {
                    return;
                };
                let number = item.message.number;
                let parts = item.parts();
                if let [part] = parts[..] {
                    return self.prepare(RewindChoice::To { number, part }).await;
                }
                let options = parts.iter().map(|part| part.label().to_owned()).collect();
                self.open_menu(
                    Step::RewindPart { number, parts },
                    &format!("rewind what, to just before message {number}?"),
                    String::new(),
                    options,
                );
            }
            Some(Step::RewindPart { number, parts }) => {
                if let Some(&part) = parts.get(index) {
                    self.prepare(RewindChoice::To { number, part }).await;
                }
            }
            Some(Step::RewindConfirm(prepared)) => {
                if index == 0 {
                    self.carry_out(prepared).await;
                } else {
                    self.view
                        .conversation
                        .items
                        .push(Item::Notice("(nothing changed)".to_owned()));
                }
            }
            Some(Step::ForkKind { default }) => {
                if index == 0 {
                    self.view.asking = Some("folder for the fork's files".to_owned());
                    self.view.input.set(default.display().to_string());
                    self.step = Some(Step::ForkFolder { default });
                } else {
                    self.fork(None).await;
                }
            }
            Some(Step::ForkFolder { .. }) | None => {}
        }
    }

    /// The text typed at the prompt while it asked.
    pub(super) async fn on_answered(&mut self, text: String) {
        if let Some(Step::ForkFolder { default }) = self.step.take() {
            let text = text.trim();
            let dir = if text.is_empty() {
                default
            } else {
                PathBuf::from(text)
            };
            self.fork(Some(dir)).await;
        }
    }

    async fn fork(&mut self, files: Option<PathBuf>) {
        let Some(session) = self.session.as_ref() else {
            return;
        };
        let outcome = fork(&self.opener, session, files.as_deref())
            .await
            .unwrap_or_else(|error| Outcome::Failed(reprise_chat::error_text::with_causes(&error)));
        self.on_outcome(outcome).await;
    }

    async fn prepare(&mut self, choice: RewindChoice) {
        let Some(session) = self.session.as_ref() else {
            return;
        };
        match session.prepare_rewind(choice).await {
            Ok(prepared) => {
                let yes = match choice {
                    RewindChoice::Undo => "yes, undo it",
                    RewindChoice::To { .. } => "yes, rewind",
                };
                let text = prepared.preview.clone();
                self.open_menu(
                    Step::RewindConfirm(prepared),
                    "go ahead?",
                    text,
                    vec![yes.to_owned(), "no, change nothing".to_owned()],
                );
            }
            Err(error) => self
                .view
                .conversation
                .items
                .push(Item::Error(reprise_chat::error_text::with_causes(&error))),
        }
    }

    async fn carry_out(&mut self, prepared: PreparedRewind) {
        let Some(session) = self.session.as_mut() else {
            return;
        };
        match session.rewind(prepared).await {
            Ok(done) => {
                // The conversation is drawn again as the model now sees it; the
                // inline mode cannot take back its scrollback.
                if !self.inline {
                    self.view.conversation.clear_items();
                    self.redraw_conversation().await;
                }
                self.view.conversation.items.push(Item::Notice(done.line));
                if let Some(text) = done.message
                    && self.view.input.text.is_empty()
                {
                    self.view.input.set(text);
                }
            }
            Err(error) => self
                .view
                .conversation
                .items
                .push(Item::Error(reprise_chat::error_text::with_causes(&error))),
        }
    }
}
