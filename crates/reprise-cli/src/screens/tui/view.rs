//! The full-screen chat's state, and what each key does to it.
//!
//! Everything here is plain data and pure functions of it, so the screen can be
//! snapshot-tested without a terminal.

use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use reprise_chat::events::Answer;
use reprise_chat::start::PickerRow;

pub use reprise_chat::view::live::{
    LiveItem as Item, LiveView, SubagentWork, ToolResultView, ToolView,
};

/// The text being typed, with its cursor and the prompt history.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Input {
    /// The text.
    pub text: String,
    /// The cursor, as a char index into `text`.
    pub cursor: usize,
    /// Earlier lines, oldest first (from `history.jsonl` and this session).
    pub history: Vec<String>,
    /// Where up/down has got to in `history`, when browsing it.
    pub browsing: Option<usize>,
    /// What was typed before browsing started, restored by going past the newest.
    pub draft: String,
}

impl Input {
    fn byte_index(&self, chars: usize) -> usize {
        self.text
            .char_indices()
            .nth(chars)
            .map_or(self.text.len(), |(i, _)| i)
    }

    fn insert(&mut self, c: char) {
        let at = self.byte_index(self.cursor);
        self.text.insert(at, c);
        self.cursor += 1;
    }

    fn backspace(&mut self) {
        if self.cursor > 0 {
            let at = self.byte_index(self.cursor - 1);
            self.text.remove(at);
            self.cursor -= 1;
        }
    }

    fn delete(&mut self) {
        if self.cursor < self.text.chars().count() {
            let at = self.byte_index(self.cursor);
            self.text.remove(at);
        }
    }

    /// Puts `text` in the box, the cursor at its end.
    pub fn set(&mut self, text: String) {
        self.cursor = text.chars().count();
        self.text = text;
    }

    fn up(&mut self) {
        if self.history.is_empty() {
            return;
        }
        let next = match self.browsing {
            None => {
                self.draft = self.text.clone();
                self.history.len() - 1
            }
            Some(0) => 0,
            Some(i) => i - 1,
        };
        self.browsing = Some(next);
        self.set(self.history[next].clone());
    }

    fn down(&mut self) {
        match self.browsing {
            None => {}
            Some(i) if i + 1 < self.history.len() => {
                self.browsing = Some(i + 1);
                self.set(self.history[i + 1].clone());
            }
            Some(_) => {
                self.browsing = None;
                let draft = std::mem::take(&mut self.draft);
                self.set(draft);
            }
        }
    }

    /// Takes the typed line, leaving the box empty, and remembers it for up/down.
    fn take(&mut self) -> String {
        let text = std::mem::take(&mut self.text);
        self.cursor = 0;
        self.browsing = None;
        self.draft.clear();
        if !text.trim().is_empty() && self.history.last() != Some(&text) {
            self.history.push(text.clone());
        }
        text
    }
}

/// The `/resume` picker, shown in place of the prompt.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Picker {
    /// Every run, newest first.
    pub rows: Vec<PickerRow>,
    /// What has been typed to narrow the list.
    pub filter: String,
    /// The highlighted row, an index into [`Picker::visible`].
    pub selected: usize,
    /// The runs whose person's messages (any of them, not only the last) contain a
    /// filter, and which filter that was: searched by the chat as the filter changes.
    pub message_matches: Option<(String, std::collections::BTreeSet<String>)>,
}

impl Picker {
    /// The rows that match the filter (case-insensitive, on title, date, name, the
    /// last message, or any of the person's messages once searched).
    pub fn visible(&self) -> Vec<&PickerRow> {
        let filter = self.filter.to_lowercase();
        let searched = self
            .message_matches
            .as_ref()
            .filter(|(searched, _)| *searched == self.filter)
            .map(|(_, names)| names);
        self.rows
            .iter()
            .filter(|row| {
                filter.is_empty()
                    || searched.is_some_and(|names| names.contains(&row.name))
                    || row.title.to_lowercase().contains(&filter)
                    || row.last_message.to_lowercase().contains(&filter)
                    || row.date.to_lowercase().contains(&filter)
                    || row.name.to_lowercase().contains(&filter)
            })
            .collect()
    }
}

/// A list to choose from in place of the prompt (the steps of `/rewind` and
/// `/fork`): a text above it (a preview), then the choices.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Menu {
    /// What the box is titled.
    pub title: String,
    /// Lines shown above the choices (may be empty).
    pub text: String,
    /// The choices.
    pub options: Vec<String>,
    /// The highlighted choice.
    pub selected: usize,
}

/// A step-gate question: may this tool call run?
#[derive(Clone, Debug, PartialEq)]
pub struct Question {
    /// The tool.
    pub tool: String,
    /// Its arguments (of long ones, only their start).
    pub arguments: String,
    /// The arguments' whole size in bytes, when `arguments` holds only their start.
    pub arguments_len: Option<usize>,
    /// The agent asking (empty for the main agent).
    pub agent: String,
    /// Whether to run again a call that started before a crash (yes), or to tell
    /// the model it was interrupted (no).
    pub again: bool,
}

/// The whole screen's state.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatView {
    /// The conversation, with the reply arriving now, the subagents' work and the
    /// token totals.
    pub conversation: LiveView,
    /// How long the model has been working, while it works.
    pub busy: Option<Duration>,
    /// Advances while busy, to animate the spinner.
    pub tick: usize,
    /// The estimated size of the next request and the context window, in tokens.
    pub context: Option<(u64, u32)>,
    /// The prompt.
    pub input: Input,
    /// Lines typed during a turn, sent when it ends.
    pub queued: Vec<String>,
    /// The `/resume` picker, when open.
    pub picker: Option<Picker>,
    /// A step-gate question waiting for an answer.
    pub question: Option<Question>,
    /// A list to choose from, when open.
    pub menu: Option<Menu>,
    /// While the prompt holds an answer rather than a message: what is asked (the
    /// box's title). Enter gives [`Action::Answered`], Esc [`Action::Dismissed`].
    pub asking: Option<String>,
    /// How many lines the conversation is scrolled up from the bottom.
    pub scroll: usize,
    /// The model's name, for the status line.
    pub model: String,
    /// The run folder's name, for the status line.
    pub run: String,
}

/// What a key asks the chat to do.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Send (or queue, during a turn) this line.
    Submit(String),
    /// Stop the current turn.
    CancelTurn,
    /// Leave the chat.
    Exit,
    /// Resume this run (from the picker).
    Resume(String),
    /// The answer to the open question.
    Answer(Answer),
    /// The choice picked in the open menu (its index).
    Chosen(usize),
    /// The text typed at the prompt while it asked.
    Answered(String),
    /// The open menu or question of the prompt was closed without an answer.
    Dismissed,
}

impl ChatView {
    /// What a key press does: edits the state and maybe asks for an action.
    pub fn on_key(&mut self, key: KeyEvent) -> Option<Action> {
        if key.kind == KeyEventKind::Release {
            return None;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if let Some(question) = self.question.as_ref() {
            let _ = question;
            let answer = match key.code {
                KeyCode::Char('y') | KeyCode::Enter => Some(Answer::Yes),
                KeyCode::Char('a') => Some(Answer::Always),
                KeyCode::Char('n') | KeyCode::Esc => Some(Answer::No),
                // Ctrl-C stops the whole turn: this call and every one after it get
                // an "interrupted" result, and no further question is asked.
                KeyCode::Char('c') if ctrl => {
                    self.question = None;
                    return Some(Action::CancelTurn);
                }
                _ => None,
            };
            if answer.is_some() {
                self.question = None;
            }
            return answer.map(Action::Answer);
        }
        if self.picker.is_some() {
            return self.on_picker_key(key);
        }
        if self.menu.is_some() {
            return self.on_menu_key(key);
        }
        if self.asking.is_some() {
            match key.code {
                KeyCode::Esc => {
                    self.asking = None;
                    self.input.set(String::new());
                    return Some(Action::Dismissed);
                }
                KeyCode::Char('c') if ctrl => {
                    self.asking = None;
                    self.input.set(String::new());
                    return Some(Action::Dismissed);
                }
                KeyCode::Enter => {
                    self.asking = None;
                    let text = std::mem::take(&mut self.input.text);
                    self.input.cursor = 0;
                    return Some(Action::Answered(text));
                }
                KeyCode::Up | KeyCode::Down => return None,
                _ => {}
            }
        }
        match key.code {
            KeyCode::Char('c') if ctrl => {
                if self.busy.is_some() {
                    Some(Action::CancelTurn)
                } else if self.input.text.is_empty() {
                    Some(Action::Exit)
                } else {
                    self.input.set(String::new());
                    None
                }
            }
            KeyCode::Char('d') if ctrl => {
                if self.input.text.is_empty() {
                    Some(Action::Exit)
                } else {
                    self.input.delete();
                    None
                }
            }
            KeyCode::Char('u') if ctrl => {
                self.input.set(String::new());
                None
            }
            KeyCode::Char('a') if ctrl => {
                self.input.cursor = 0;
                None
            }
            KeyCode::Char('e') if ctrl => {
                self.input.cursor = self.input.text.chars().count();
                None
            }
            KeyCode::Char('j') if ctrl => {
                self.input.insert('\n');
                None
            }
            KeyCode::Char(c) if !ctrl => {
                self.input.insert(c);
                None
            }
            KeyCode::Enter if key.modifiers.contains(KeyModifiers::ALT) => {
                self.input.insert('\n');
                None
            }
            KeyCode::Enter => {
                if self.input.text.trim().is_empty() {
                    return None;
                }
                self.scroll = 0;
                Some(Action::Submit(self.input.take()))
            }
            KeyCode::Backspace => {
                self.input.backspace();
                None
            }
            KeyCode::Delete => {
                self.input.delete();
                None
            }
            KeyCode::Left => {
                self.input.cursor = self.input.cursor.saturating_sub(1);
                None
            }
            KeyCode::Right => {
                self.input.cursor = (self.input.cursor + 1).min(self.input.text.chars().count());
                None
            }
            KeyCode::Home => {
                self.input.cursor = 0;
                None
            }
            KeyCode::End => {
                self.input.cursor = self.input.text.chars().count();
                None
            }
            KeyCode::Up => {
                self.input.up();
                None
            }
            KeyCode::Down => {
                self.input.down();
                None
            }
            KeyCode::PageUp => {
                self.scroll += 10;
                None
            }
            KeyCode::PageDown => {
                self.scroll = self.scroll.saturating_sub(10);
                None
            }
            _ => None,
        }
    }

    fn on_menu_key(&mut self, key: KeyEvent) -> Option<Action> {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let menu = self.menu.as_mut()?;
        match key.code {
            KeyCode::Esc => {
                self.menu = None;
                Some(Action::Dismissed)
            }
            KeyCode::Char('c') if ctrl => {
                self.menu = None;
                Some(Action::Dismissed)
            }
            KeyCode::Up => {
                menu.selected = menu.selected.saturating_sub(1);
                None
            }
            KeyCode::Down => {
                if menu.selected + 1 < menu.options.len() {
                    menu.selected += 1;
                }
                None
            }
            KeyCode::Enter if !menu.options.is_empty() => {
                let chosen = menu.selected.min(menu.options.len() - 1);
                self.menu = None;
                Some(Action::Chosen(chosen))
            }
            _ => None,
        }
    }

    fn on_picker_key(&mut self, key: KeyEvent) -> Option<Action> {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let picker = self.picker.as_mut()?;
        let count = picker.visible().len();
        match key.code {
            KeyCode::Esc => {
                self.picker = None;
                None
            }
            KeyCode::Char('c') if ctrl => {
                self.picker = None;
                None
            }
            KeyCode::Up => {
                picker.selected = picker.selected.saturating_sub(1);
                None
            }
            KeyCode::Down => {
                if picker.selected + 1 < count {
                    picker.selected += 1;
                }
                None
            }
            KeyCode::Enter => {
                let name = picker
                    .visible()
                    .get(picker.selected)
                    .map(|r| r.name.clone());
                if name.is_some() {
                    self.picker = None;
                }
                name.map(Action::Resume)
            }
            KeyCode::Backspace => {
                picker.filter.pop();
                picker.selected = 0;
                None
            }
            KeyCode::Char(c) if !ctrl => {
                picker.filter.push(c);
                picker.selected = 0;
                None
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn ctrl(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
    }

    fn a_question() -> Question {
        Question {
            tool: "t".into(),
            arguments: "{}".into(),
            arguments_len: None,
            agent: String::new(),
            again: false,
        }
    }

    fn type_text(view: &mut ChatView, text: &str) {
        for c in text.chars() {
            assert_eq!(view.on_key(key(KeyCode::Char(c))), None);
        }
    }

    #[test]
    fn enter_submits_and_up_down_walk_the_history() {
        let mut view = ChatView::default();
        view.input.history = vec!["first".into(), "second".into()];
        type_text(&mut view, "draft");
        view.on_key(key(KeyCode::Up));
        assert_eq!(view.input.text, "second");
        view.on_key(key(KeyCode::Up));
        view.on_key(key(KeyCode::Up));
        assert_eq!(view.input.text, "first");
        view.on_key(key(KeyCode::Down));
        view.on_key(key(KeyCode::Down));
        assert_eq!(view.input.text, "draft");
        assert_eq!(
            view.on_key(key(KeyCode::Enter)),
            Some(Action::Submit("draft".into()))
        );
        assert_eq!(view.input.text, "");
        assert_eq!(view.input.history.last().map(String::as_str), Some("draft"));
    }

    #[test]
    fn ctrl_c_cancels_a_turn_and_exits_at_an_empty_prompt() {
        let mut view = ChatView {
            busy: Some(Duration::from_secs(1)),
            ..ChatView::default()
        };
        assert_eq!(view.on_key(ctrl('c')), Some(Action::CancelTurn));
        view.busy = None;
        type_text(&mut view, "abc");
        assert_eq!(view.on_key(ctrl('c')), None);
        assert_eq!(view.input.text, "");
        assert_eq!(view.on_key(ctrl('c')), Some(Action::Exit));
        assert_eq!(view.on_key(ctrl('d')), Some(Action::Exit));
    }

    #[test]
    fn the_picker_filters_moves_and_picks() {
        let row = |name: &str, message: &str| PickerRow {
            name: name.into(),
            date: name.into(),
            last_message: message.into(),
            title: String::new(),
        };
        let mut view = ChatView {
            picker: Some(Picker {
                rows: vec![
                    row("b", "bake bread"),
                    row("a", "fix the bike"),
                    row("0", "bread again"),
                ],
                ..Picker::default()
            }),
            ..ChatView::default()
        };
        view.on_key(key(KeyCode::Down));
        assert_eq!(
            view.on_key(key(KeyCode::Enter)),
            Some(Action::Resume("a".into()))
        );
        assert!(view.picker.is_none());

        view.picker = Some(Picker {
            rows: vec![
                row("b", "bake bread"),
                row("a", "fix the bike"),
                row("0", "bread again"),
            ],
            ..Picker::default()
        });
        type_text(&mut view, "bread");
        view.on_key(key(KeyCode::Down));
        view.on_key(key(KeyCode::Down));
        assert_eq!(
            view.on_key(key(KeyCode::Enter)),
            Some(Action::Resume("0".into()))
        );

        view.picker = Some(Picker::default());
        assert_eq!(view.on_key(key(KeyCode::Enter)), None);
        assert_eq!(view.on_key(key(KeyCode::Esc)), None);
        assert!(view.picker.is_none());
    }

    #[test]
    fn a_question_takes_y_n_or_a() {
        let mut view = ChatView {
            question: Some(a_question()),
            ..ChatView::default()
        };
        assert_eq!(view.on_key(key(KeyCode::Char('x'))), None);
        assert_eq!(
            view.on_key(key(KeyCode::Char('a'))),
            Some(Action::Answer(Answer::Always))
        );
        assert!(view.question.is_none());
    }

    #[test]
    fn ctrl_c_at_a_question_stops_the_turn_rather_than_answering() {
        let mut view = ChatView {
            question: Some(a_question()),
            busy: Some(Duration::from_secs(2)),
            ..ChatView::default()
        };
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(view.on_key(ctrl_c), Some(Action::CancelTurn));
        assert!(view.question.is_none());
    }
}
