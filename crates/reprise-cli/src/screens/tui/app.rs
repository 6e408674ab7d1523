//! The terminal side of the full-screen and inline chat: keys in, frames out, turns
//! run in the background so the screen stays live.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::backend::ChatTerminal;
use anyhow::{Context, Result};
use crossterm::event::{Event, EventStream};
use futures::StreamExt;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget};
use reprise_agent::{AgentEvent, DEFAULT_AGENT_NAME};
use reprise_redact::Redactor;
use reprise_runs::read_history;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::render;
use super::view::{Action, ChatView, Item, LiveView, Picker, Question, ToolView};
use super::wrap::wrap_lines;
use reprise_chat::commands::{ALREADY_IN_THAT_RUN, Outcome, Remember, dispatch, open_resumed};
use reprise_chat::events::Answer;
use reprise_chat::events::UiEvent;
use reprise_chat::session::{ChatSession, Opener, TurnEnd};
use reprise_chat::start::{StartOptions, StartWith};
use reprise_chat::turn_clock::TurnClock;

mod steps;

/// Rows the inline viewport takes below the scrollback.
const INLINE_HEIGHT: u16 = 14;

/// A turn running in the background; the session comes back when it ends.
struct Running {
    task: JoinHandle<(ChatSession, TurnEnd)>,
    cancel: CancellationToken,
    clock: TurnClock,
}

/// The chat's state outside the view: the session (or the turn holding it), the
/// queue of lines typed during a turn, the open question's reply.
struct App {
    opener: Opener,
    view: ChatView,
    session: Option<ChatSession>,
    running: Option<Running>,
    queue: VecDeque<String>,
    reply: Option<oneshot::Sender<Answer>>,
    redactor: Redactor,
    /// Inline mode: how many items have been printed into the scrollback.
    printed: usize,
    inline: bool,
    exit: bool,
    /// The run and number of entries the status line's context figure is for:
    /// estimating it again is only needed when they change.
    context_for: Option<(String, usize)>,
    /// What the open menu, or the prompt's question, is for.
    step: Option<steps::Step>,
}

/// Runs the full-screen (or inline) chat until the person leaves.
pub async fn run(
    opener: Opener,
    mut ui: UnboundedReceiver<UiEvent>,
    args: &StartOptions,
    inline: bool,
) -> Result<()> {
    let start = args.start.clone();
    let mut notices = Vec::new();
    // Resolved before this start's own run folder exists: a prefix such as
    // `--resume 2026-12-06T00` must not match the folder made for it.
    let target = reprise_chat::start::start_target(&*opener.runs, &start).await?;
    if target.is_none() && start == StartWith::Latest {
        notices.push("(no earlier conversation: starting a new one)".to_owned());
    }
    let fresh = opener.new_folder()?;
    let fresh_name = fresh.name().to_owned();
    let started = reprise_chat::start::open_start(&opener, fresh.clone(), target, args.fork).await;
    let (session, resumed) = reprise_chat::start::unless_started(started, &fresh)?;
    let history = read_history(&opener.history_path())
        .map(|h| h.prompts().into_iter().map(str::to_owned).collect())
        .unwrap_or_default();
    let mut app = App {
        view: ChatView {
            model: opener.settings.model.clone(),
            run: session.run_name().to_owned(),
            conversation: LiveView {
                usage: session.agent.usage_totals().await,
                ..LiveView::default()
            },
            ..ChatView::default()
        },
        redactor: session.redactor(),
        opener,
        session: Some(session),
        running: None,
        queue: VecDeque::new(),
        reply: None,
        printed: 0,
        inline,
        exit: false,
        context_for: None,
        step: None,
    };
    app.view.input.history = history;
    for notice in notices {
        app.view.conversation.items.push(Item::Notice(notice));
    }
    if resumed {
        app.show_resumed().await;
        if app.view.run != fresh_name {
            reprise_chat::start::note_in_fresh_folder(&app.opener, &fresh_name, &app.view.run);
        }
    }
    app.show_load_warnings();
    app.finish_cut_turn();
    if start == StartWith::Pick {
        app.open_picker().await;
    }

    let mut terminal = super::backend::init(inline.then_some(INLINE_HEIGHT))
        .context("cannot set up the terminal")?;
    let _ = crossterm::execute!(std::io::stdout(), crossterm::event::EnableBracketedPaste);
    let result = app
        .main_loop(&mut terminal, &mut ui, args.prompt.clone(), resumed)
        .await;
    let _ = crossterm::execute!(std::io::stdout(), crossterm::event::DisableBracketedPaste);
    if inline {
        let _ = terminal.clear();
    }
    if terminal.backend().had_unanswered_question() {
        super::backend::drain_late_answers();
    }
    ratatui::restore();
    let run_dir = app.opener.settings.runs_dir.join(&app.view.run);
    if result.is_ok() && run_dir.join(reprise_runs::SESSION_JSON).exists() {
        crate::display::terminal::print_line(&format!(
            "(the conversation is kept in {}; continue it with: reprise --resume {})",
            run_dir.display(),
            app.view.run
        ));
    }
    result
}

impl App {
    async fn main_loop(
        &mut self,
        terminal: &mut ChatTerminal,
        ui: &mut UnboundedReceiver<UiEvent>,
        prompt: Option<String>,
        _resumed: bool,
    ) -> Result<()> {
        let mut keys = EventStream::new();
        let mut ticker = tokio::time::interval(Duration::from_millis(100));
        // The first frame before the context figure: estimating a long resumed
        // history takes a moment, and the conversation should not wait for it. The
        // next frame, drawn right after, has it.
        self.paint(terminal)?;
        if let Some(prompt) = prompt {
            self.submit(prompt).await;
        }
        while !self.exit {
            self.draw(terminal)?;
            tokio::select! {
                event = keys.next() => match event {
                    Some(Ok(event)) => self.on_terminal_event(event).await,
                    Some(Err(error)) => return Err(error).context("reading the terminal"),
                    None => break,
                },
                Some(event) = ui.recv() => self.on_ui_event(event),
                joined = async {
                    match self.running.as_mut() {
                        Some(running) => (&mut running.task).await,
                        None => std::future::pending().await,
                    }
                } => {
                    self.running = None;
                    self.view.busy = None;
                    match joined {
                        Ok((session, end)) => {
                            self.session = Some(session);
                            // Events sent just before the turn ended come first.
                            while let Ok(event) = ui.try_recv() {
                                self.on_ui_event(event);
                            }
                            self.turn_ended(end);
                        }
                        Err(error) => {
                            self.view.conversation.items.push(Item::Error(format!("the turn crashed: {error}")));
                            self.exit = true;
                        }
                    }
                    self.next_queued().await;
                }
                _ = ticker.tick(), if self.running.is_some() => {
                    if let Some(running) = &self.running {
                        self.view.busy = Some(running.clock.worked(Instant::now()));
                        self.view.tick = self.view.tick.wrapping_add(1);
                    }
                }
            }
        }
        if let Some(running) = self.running.take() {
            running.cancel.cancel();
            if let Ok((session, _)) = running.task.await {
                self.session = Some(session);
            }
        }
        self.draw(terminal)?;
        if let Some(session) = self.session.take() {
            session.close().await;
        }
        Ok(())
    }

    fn draw(&mut self, terminal: &mut ChatTerminal) -> Result<()> {
        // Between turns the session is here to ask; during one, events update it.
        self.show_context();
        self.paint(terminal)
    }

    /// Draws the view as it is.
    fn paint(&mut self, terminal: &mut ChatTerminal) -> Result<()> {
        if self.inline {
            self.print_finished(terminal)?;
            terminal.draw(|frame| render::draw_live(frame, &self.view))?;
        } else {
            terminal.draw(|frame| render::draw(frame, &self.view))?;
        }
        Ok(())
    }

    /// Inline mode: finished items go into the terminal's scrollback, above the live
    /// area, once each.
    fn print_finished(&mut self, terminal: &mut ChatTerminal) -> Result<()> {
        let width = usize::from(terminal.size()?.width.max(1));
        while self.printed < self.view.conversation.items.len() {
            let item = &self.view.conversation.items[self.printed];
            if matches!(item, Item::Tool(ToolView { result: None, .. })) {
                break;
            }
            let mut lines: Vec<Line<'static>> = wrap_lines(
                &render::view_item_lines(&self.view, self.printed, width),
                width,
            );
            lines.push(Line::default());
            let height = u16::try_from(lines.len()).unwrap_or(u16::MAX);
            terminal.insert_before(height, |buffer| {
                let area = Rect {
                    height: buffer.area.height,
                    ..buffer.area
                };
                Paragraph::new(lines).render(area, buffer);
            })?;
            self.printed += 1;
        }
        Ok(())
    }

    async fn on_terminal_event(&mut self, event: Event) {
        match event {
            Event::Key(key) => {
                if let Some(action) = self.view.on_key(key) {
                    self.on_action(action).await;
                }
                self.search_picker_messages().await;
                // Lines queued behind a `/resume` go once its picker is closed.
                if !self.queue.is_empty() {
                    self.next_queued().await;
                }
            }
            Event::Paste(text) => {
                for c in text.chars() {
                    let key = match c {
                        '\n' | '\r' => crossterm::event::KeyEvent::new(
                            crossterm::event::KeyCode::Char('j'),
                            crossterm::event::KeyModifiers::CONTROL,
                        ),
                        c => crossterm::event::KeyEvent::from(crossterm::event::KeyCode::Char(c)),
                    };
                    let _ = self.view.on_key(key);
                }
                self.search_picker_messages().await;
            }
            _ => {}
        }
    }

    async fn on_action(&mut self, action: Action) {
        match action {
            Action::Submit(text) => {
                if self.running.is_some() {
                    self.queue.push_back(text);
                    self.view.queued = self.queue.iter().cloned().collect();
                } else {
                    self.submit(text).await;
                }
            }
            Action::CancelTurn => {
                if let Some(running) = &mut self.running {
                    running.cancel.cancel();
                    running.clock.resume(Instant::now());
                }
                // A question open now is not answered: the cancelled turn closes its
                // call, and every later one, as interrupted.
                self.reply = None;
            }
            Action::Exit => self.exit = true,
            Action::Resume(name) => self.resume(&name).await,
            Action::Chosen(index) => self.on_chosen(index).await,
            Action::Answered(text) => self.on_answered(text).await,
            Action::Dismissed => self.step = None,
            Action::Answer(answer) => {
                if let Some(reply) = self.reply.take() {
                    let _ = reply.send(answer);
                }
                if let Some(running) = &mut self.running {
                    running.clock.resume(Instant::now());
                }
            }
        }
    }

    async fn next_queued(&mut self) {
        while self.running.is_none()
            && !self.exit
            && self.view.picker.is_none()
            && self.step.is_none()
        {
            let Some(text) = self.queue.pop_front() else {
                break;
            };
            self.view.queued = self.queue.iter().cloned().collect();
            self.submit(text).await;
        }
    }

    /// Handles a line typed at the prompt (or queued during a turn).
    async fn submit(&mut self, text: String) {
        let Some(session) = self.session.as_ref() else {
            return;
        };
        let outcome = dispatch(&self.opener, session, &text, Remember::EveryLineTrimmed).await;
        self.on_outcome(outcome).await;
    }

    /// Does what a command's outcome asks of the screen.
    async fn on_outcome(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Nothing => {}
            Outcome::PickRewind(menu) => self.open_rewind(menu),
            Outcome::AskForkFiles { default } => self.open_fork_choice(default),
            Outcome::Exit => self.exit = true,
            Outcome::Notice(text) => self.view.conversation.items.push(Item::Notice(text)),
            Outcome::Unknown(text) | Outcome::Failed(text) => {
                self.view.conversation.items.push(Item::Error(text));
            }
            Outcome::PickRun => self.open_picker().await,
            Outcome::Forked {
                session: next,
                line,
            } => {
                self.switch_to(*next).await;
                self.view.conversation.items.push(Item::Notice(line));
                self.show_load_warnings();
                self.finish_cut_turn();
            }
            Outcome::Compact(focus) => self.start_compaction(focus),
            Outcome::Message(message) => self.start_turn(message),
        }
    }

    fn start_turn(&mut self, message: String) {
        if self.session.is_none() {
            return;
        }
        self.view
            .conversation
            .items
            .push(Item::User(message.clone()));
        self.view.scroll = 0;
        self.start_in_background(move |mut session, cancel| async move {
            let end = session.turn(&message, cancel).await;
            (session, end)
        });
    }

    /// Finishes the turn a crash cut, when the session has one: in the background
    /// like a turn (its questions come up as the gate's do).
    fn finish_cut_turn(&mut self) {
        let Some(line) = self.session.as_ref().and_then(ChatSession::cut_turn_line) else {
            return;
        };
        self.view
            .conversation
            .items
            .push(Item::Notice(line.to_owned()));
        self.start_in_background(move |mut session, cancel| async move {
            let end = session.resume_cut_turn(cancel).await;
            (session, end)
        });
    }

    /// `/compact`: runs in the background like a turn (Ctrl-C stops it).
    fn start_compaction(&mut self, focus: Option<String>) {
        self.start_in_background(move |mut session, cancel| async move {
            let end = session.compact(focus.as_deref(), cancel).await;
            (session, end)
        });
    }

    /// Runs `work` (a turn, a compaction) on the session in the background; the
    /// session comes back when it ends.
    fn start_in_background<F>(&mut self, work: impl FnOnce(ChatSession, CancellationToken) -> F)
    where
        F: std::future::Future<Output = (ChatSession, TurnEnd)> + Send + 'static,
    {
        let Some(session) = self.session.take() else {
            return;
        };
        let cancel = CancellationToken::new();
        let task = tokio::spawn(work(session, cancel.clone()));
        self.view.busy = Some(Duration::ZERO);
        self.running = Some(Running {
            task,
            cancel,
            clock: TurnClock::start(Instant::now()),
        });
    }

    /// The status line's context figures, from the session (when it changed).
    fn show_context(&mut self) {
        if let Some(session) = &self.session {
            // Entries, not the model view: asking for that would build it (a second
            // copy of a resumed history) before the first turn needs it.
            let key = (session.run_name().to_owned(), session.agent.entries().len());
            if self.context_for.as_ref() == Some(&key) {
                return;
            }
            self.context_for = Some(key);
            self.view.context = session
                .context_window()
                .map(|window| (session.context_used(), window));
        }
    }

    fn turn_ended(&mut self, end: TurnEnd) {
        self.view.conversation.arriving.clear();
        let unfinished = std::mem::take(&mut self.view.conversation.streaming);
        match end {
            TurnEnd::Answered => {
                if !unfinished.trim().is_empty() {
                    self.view
                        .conversation
                        .items
                        .push(Item::Assistant(unfinished));
                }
            }
            TurnEnd::Cancelled => {
                if !unfinished.trim().is_empty() {
                    self.view.conversation.items.push(Item::Notice(format!(
                        "{} … (cut off: this unfinished reply is not kept)",
                        unfinished.trim_end()
                    )));
                }
                self.view
                    .conversation
                    .items
                    .push(Item::Notice("(cancelled)".to_owned()));
            }
            TurnEnd::Failed(message) => {
                if !unfinished.trim().is_empty() {
                    self.view.conversation.items.push(Item::Notice(format!(
                        "{} … (cut off: not kept)",
                        unfinished.trim_end()
                    )));
                }
                self.view.conversation.items.push(Item::Error(message));
            }
        }
    }

    fn on_ui_event(&mut self, event: UiEvent) {
        match event {
            UiEvent::Agent(event) => self.on_agent_event(event),
            UiEvent::Ask(ask) => {
                self.view.question = Some(Question {
                    tool: ask.tool,
                    arguments: ask.arguments,
                    arguments_len: ask.arguments_len,
                    again: ask.again,
                    agent: if ask.agent == DEFAULT_AGENT_NAME {
                        String::new()
                    } else {
                        ask.agent
                    },
                });
                self.reply = Some(ask.reply);
                if let Some(running) = &mut self.running {
                    running.clock.pause(Instant::now());
                }
            }
            UiEvent::Mcp(notice) => {
                use reprise_mcp::NoticeKind;
                let text = notice.to_string();
                self.view.conversation.items.push(match notice.kind {
                    NoticeKind::Started | NoticeKind::Restarted | NoticeKind::Restarting => {
                        Item::Notice(text)
                    }
                    _ => Item::Warning(text),
                });
            }
            UiEvent::Warning(text) => {
                reprise_chat::start::log_in_run(&self.opener, &self.view.run, &format!("! {text}"));
                self.view.conversation.items.push(Item::Warning(text));
            }
        }
    }

    fn on_agent_event(&mut self, event: AgentEvent) {
        // The screen redraws from the view model as a whole: what changed needs no
        // telling.
        let _ = self.view.conversation.apply(&event, &self.redactor);
        if event.agent() != DEFAULT_AGENT_NAME {
            return;
        }
        match event {
            AgentEvent::Usage { usage, .. } => {
                if let Some((used, _)) = self.view.context.as_mut() {
                    *used = usage.prompt_tokens + usage.completion_tokens;
                }
            }
            AgentEvent::Compacted { tokens_after, .. } => {
                if let Some((used, _)) = self.view.context.as_mut() {
                    *used = tokens_after;
                }
            }
            _ => {}
        }
    }

    /// Searches every person's message of every run for the picker's filter, once per
    /// filter typed.
    async fn search_picker_messages(&mut self) {
        let Some(picker) = self.view.picker.as_mut() else {
            return;
        };
        let stale = picker
            .message_matches
            .as_ref()
            .is_none_or(|(searched, _)| *searched != picker.filter);
        if stale && !picker.filter.is_empty() {
            let names =
                reprise_chat::start::picker_message_matches(&*self.opener.runs, &picker.filter)
                    .await;
            picker.message_matches = Some((picker.filter.clone(), names));
        }
    }

    async fn open_picker(&mut self) {
        let open = self.session.as_ref().map(ChatSession::run_name);
        match reprise_chat::start::picker_rows(&*self.opener.runs, open).await {
            Ok(rows) if rows.is_empty() => self.view.conversation.items.push(Item::Notice(
                "(no other run has a conversation yet)".to_owned(),
            )),
            Ok(rows) => {
                self.view.picker = Some(Picker {
                    rows,
                    ..Picker::default()
                })
            }
            Err(error) => self
                .view
                .conversation
                .items
                .push(Item::Error(reprise_chat::error_text::with_causes(&error))),
        }
    }

    async fn resume(&mut self, name: &str) {
        let folder = match self.opener.runs.find(name).await {
            Ok(folder) => folder,
            Err(error) => {
                self.view
                    .conversation
                    .items
                    .push(Item::Error(format!("{error:#}")));
                return;
            }
        };
        match open_resumed(&self.opener, self.session.as_ref(), folder).await {
            Ok(None) => {
                self.view
                    .conversation
                    .items
                    .push(Item::Notice(ALREADY_IN_THAT_RUN.to_owned()));
                return;
            }
            Ok(Some(session)) => {
                self.switch_to(session).await;
                if !self.inline {
                    self.view.conversation.clear_items();
                }
                self.show_resumed().await;
                self.show_load_warnings();
                self.finish_cut_turn();
            }
            Err(error) => self
                .view
                .conversation
                .items
                .push(Item::Error(reprise_chat::error_text::with_causes(&error))),
        }
        self.next_queued().await;
    }

    /// Goes on in `next` (a run resumed or forked), closing the session it was in.
    async fn switch_to(&mut self, next: ChatSession) {
        self.view.run = next.run_name().to_owned();
        self.view.conversation.usage = next.agent.usage_totals().await;
        if let Some(old) = self.session.replace(next) {
            old.close().await;
        }
    }

    /// Redraws the resumed run's conversation, then the resumed line.
    async fn show_resumed(&mut self) {
        self.redraw_conversation().await;
        let Some(session) = self.session.as_mut() else {
            return;
        };
        let line = reprise_chat::start::resumed_line(&*self.opener.runs, &session.folder).await;
        session.log_line(&line);
        self.view.conversation.items.push(Item::Notice(line));
    }

    /// Draws the session's conversation (as the agent holds it: what a rewind took
    /// out of the model's view is not drawn) after the items shown.
    async fn redraw_conversation(&mut self) {
        let Some(session) = self.session.as_ref() else {
            return;
        };
        let calls: Vec<_> = match reprise_chat::subagents::past_calls_of(
            &*self.opener.runs,
            &session.folder,
            session.agent.entries(),
        )
        .await
        {
            Ok(calls) => calls.iter().map(|c| c.redacted(&self.redactor)).collect(),
            Err(error) => {
                self.view.conversation.items.push(Item::Warning(format!(
                    "the subagents' work cannot be redrawn: {}",
                    reprise_chat::error_text::with_causes(&error)
                )));
                Vec::new()
            }
        };
        // The conversation as the agent loaded it: the file is read once. Problems
        // reading it are the agent's load warnings, shown by show_load_warnings.
        // A very long one is redrawn from its last REDRAWN_MESSAGES messages: holding
        // every message once more for the screen doubled the memory of a resumed
        // 100 MB run, and nobody pages back through tens of thousands of them.
        let entries = session.agent.entries();
        let start = reprise_chat::view::redraw::tail_start(entries, REDRAWN_MESSAGES);
        let earlier = reprise_chat::view::redraw::shown_messages(&entries[..start]);
        if let Some(notice) = reprise_chat::view::redraw::earlier_notice(
            earlier,
            session.agent.skipped_history(),
            session.run_name(),
        ) {
            self.view.conversation.items.push(Item::Notice(notice));
        }
        let (items, work) =
            reprise_chat::view::redraw::redraw_with_subagents(&entries[start..], &calls);
        let offset = self.view.conversation.items.len();
        self.view.conversation.items.extend(items);
        self.view
            .conversation
            .work
            .extend(work.into_iter().map(|(index, work)| (index + offset, work)));
    }

    fn show_load_warnings(&mut self) {
        if let Some(session) = &self.session {
            for warning in session.load_warnings() {
                self.view.conversation.items.push(Item::Warning(warning));
            }
        }
    }
}

/// How many messages (tool results included) of a resumed conversation the full
/// screen redraws, at least; earlier ones are counted in a notice.
pub const REDRAWN_MESSAGES: usize = 1_000;
