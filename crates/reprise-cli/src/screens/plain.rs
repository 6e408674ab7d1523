//! The plain line mode: for pipes, scripts and dumb terminals. Lines in on stdin,
//! the conversation out as plain text: all of it on stdout when stdout is a
//! terminal; when it is not (`reprise … > answer.txt`), the agent's replies on
//! stdout and everything else (the prompt's echo, tool lines, notices, a resumed
//! conversation) on stderr.

use std::io::{BufRead, IsTerminal, Write};

use anyhow::Result;
use reprise_agent::{AgentEvent, DEFAULT_AGENT_NAME};
use reprise_chat::view::live::{Change, LiveItem, LiveView, Place, ToolResultView};
use reprise_redact::Redactor;
use tokio::sync::mpsc::{self, UnboundedReceiver};
use tokio_util::sync::CancellationToken;

use crate::display::terminal::{eprint_line, visible};
use crate::screens::tui::view::Item;
use reprise_chat::commands::{
    ALREADY_IN_THAT_RUN, Outcome, Remember, dispatch, fork, open_resumed,
};
use reprise_chat::events::Answer;
use reprise_chat::events::UiEvent;
use reprise_chat::rewind_steps::{RewindChoice, RewindDone, RewindMenu};
use reprise_chat::session::AGAIN_QUESTION;
use reprise_chat::session::{ChatSession, Opener, TurnEnd};
use reprise_chat::start::{StartOptions, StartWith};
use reprise_chat::text::{arguments_preview_of, one_line, subagent_prefix};

/// Lines from stdin, read on a thread of their own so a line typed during a turn
/// waits (in order) for the turn to end.
struct Lines {
    rx: mpsc::Receiver<String>,
}

impl Lines {
    fn spawn() -> Lines {
        let (tx, rx) = mpsc::channel(64);
        std::thread::spawn(move || {
            let stdin = std::io::stdin();
            let mut lock = stdin.lock();
            loop {
                let mut line = String::new();
                match lock.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let line = line.trim_end_matches(['\n', '\r']).to_owned();
                        if tx.blocking_send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        Lines { rx }
    }

    async fn next(&mut self) -> Option<String> {
        self.rx.recv().await
    }
}

/// Prints what happens, keeping track of whether the cursor is at a line start.
struct Printer {
    at_line_start: bool,
    interactive: bool,
    /// A subagent's streamed text not yet ending in a line end, by subagent: its
    /// lines are printed whole, each prefixed with `[name]`.
    partial: std::collections::HashMap<String, String>,
    /// Whether the reply's text waits until its message is recorded before it is
    /// printed: when stdout is not a terminal (`reprise … > answer.txt`), where text
    /// once printed cannot be withdrawn, and an attempt that is retried, cancelled
    /// or fails keeps nothing.
    hold_text: bool,
    /// The text of the attempt under way, while `hold_text`.
    held: String,
    /// Whether stdout carries the agent's replies only, every other line going to
    /// stderr: when stdout is not a terminal.
    replies_only: bool,
    /// Whether text of the attempt under way was printed (on a terminal): when the
    /// attempt is tried again, that text is marked as withdrawn.
    streamed: bool,
    /// Why the last model call was retried: the same reason again is not repeated.
    last_retry: Option<String>,
    /// A streamed chunk ended in `\r`: held back, since with the next chunk's `\n`
    /// it is a line end (shown as one), and alone it is shown as `\r`.
    carriage: bool,
    /// The main agent's calls whose result is not printed yet, in call order. The
    /// agent decides every call of a reply before any runs, so their events come
    /// as ⚙ a, ⚙ b, ↳ a, ↳ b: printed call by call instead (⚙ a, ↳ a, ⚙ b, ↳ b).
    calls: std::collections::VecDeque<ShownCall>,
    /// Whether the chat said that calls needing approval are not run here.
    said_unattended: bool,
    /// The view model the agent's events fold into: the calls still open, the
    /// subagents at work.
    conversation: LiveView,
}

/// A call of the main agent on its way to the screen.
struct ShownCall {
    id: String,
    /// Its `⚙` line.
    line: String,
    /// Whether that line is printed.
    shown: bool,
    /// Its result's line, once it has one.
    result: Option<String>,
}

impl Printer {
    /// Streamed text, printed as it arrives.
    fn stream(&mut self, text: &str) {
        let joined;
        let mut text = text;
        if std::mem::take(&mut self.carriage) {
            joined = format!("\r{text}");
            text = &joined;
        }
        let (text, carriage) = match text.strip_suffix('\r') {
            Some(rest) => (rest, true),
            None => (text, false),
        };
        self.print(text);
        self.carriage = carriage;
    }

    fn print(&mut self, text: &str) {
        if std::mem::take(&mut self.carriage) {
            self.print("\r");
        }
        let mut out = std::io::stdout().lock();
        // Model text, tool results and run folders are untrusted: see display::terminal.
        let _ = out.write_all(visible(text).as_bytes());
        let _ = out.flush();
        if !text.is_empty() {
            self.at_line_start = text.ends_with('\n');
        }
    }

    /// Prints the calls' lines and results that are due: each call's line once the
    /// calls before it have their results, then its own result when it has one.
    fn flush_calls(&mut self) {
        while let Some(front) = self.calls.front_mut() {
            if !std::mem::replace(&mut front.shown, true) {
                let line = front.line.clone();
                self.line(&line);
            }
            let Some(front) = self.calls.front_mut() else {
                break;
            };
            let Some(result) = front.result.take() else {
                break;
            };
            self.calls.pop_front();
            self.line(&result);
        }
    }

    /// Prints every call still held (the turn ended: a call without a result
    /// gets none).
    fn end_calls(&mut self) {
        while let Some(call) = self.calls.pop_front() {
            if !call.shown {
                self.line(&call.line);
            }
            if let Some(result) = call.result {
                self.line(&result);
            }
        }
    }

    /// A line that is not a reply: on stdout beside the replies on a terminal, on
    /// stderr when stdout carries the replies only.
    fn line(&mut self, text: &str) {
        if self.replies_only {
            eprint_line(text);
            return;
        }
        if !self.at_line_start {
            self.print("\n");
        }
        self.print(text);
        self.print("\n");
    }

    /// Lines that are not a reply (each ending in a line end), as [`Printer::line`]
    /// places them.
    fn lines(&mut self, text: &str) {
        if let Some(text) = text.strip_suffix('\n') {
            self.line(text);
        } else if !text.is_empty() {
            self.line(text);
        }
    }

    /// A question asked on the line it leaves the cursor on.
    fn ask(&mut self, text: &str) {
        if self.replies_only {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(visible(text).as_bytes());
            let _ = err.flush();
        } else {
            self.print(text);
            self.at_line_start = true;
        }
    }

    /// The prompt, when a person types the lines: beside the replies on a terminal,
    /// on stderr when stdout carries the replies only.
    fn prompt(&mut self) {
        if self.interactive {
            if !self.replies_only && !self.at_line_start {
                self.print("\n");
            }
            self.ask("› ");
        }
    }

    /// Ends the prompt's line (something is said while it waits).
    fn leave_prompt(&mut self) {
        if self.interactive {
            self.ask("\n");
        }
    }

    /// Prints a subagent's complete lines; with `all`, the rest too.
    fn subagent_text(&mut self, redactor: &reprise_redact::Redactor, agent: &str, all: bool) {
        let Some(pending) = self.partial.get_mut(agent) else {
            return;
        };
        let cut = if all {
            pending.len()
        } else {
            pending.rfind('\n').map_or(0, |i| i + 1)
        };
        let done: String = pending.drain(..cut).collect();
        if done.trim().is_empty() {
            return;
        }
        let mark = reprise_chat::text::subagent_indent(agent);
        let text: String = redactor
            .redact(done.trim_end())
            .lines()
            .map(|line| format!("{mark}{line}\n"))
            .collect();
        self.lines(&text);
    }

    /// Folds an event into the view model, and prints what it changed.
    fn event(&mut self, redactor: &Redactor, event: &AgentEvent) {
        for change in self.conversation.apply(event, redactor) {
            self.show(redactor, change);
        }
        // What is printed is not needed again: the model keeps only what is open.
        if !self.conversation.is_open() {
            self.conversation.clear_items();
        }
    }

    fn show(&mut self, redactor: &Redactor, change: Change) {
        match change {
            Change::Streamed(text) => {
                if self.hold_text {
                    self.held.push_str(&text);
                } else {
                    self.streamed |= !text.is_empty();
                    self.stream(&text);
                }
            }
            Change::ReplyDone => {
                // The attempt is complete and kept: its text can go out.
                let held = std::mem::take(&mut self.held);
                self.print(&held);
                self.streamed = false;
                self.last_retry = None;
                if self.replies_only && !self.at_line_start {
                    // Each reply on lines of its own, whatever comes on stderr between.
                    self.print("\n");
                }
            }
            Change::SubagentText { agent, text } => {
                self.partial
                    .entry(agent.clone())
                    .or_default()
                    .push_str(&text);
                self.subagent_text(redactor, &agent, false);
            }
            Change::SubagentReplyDone { agent } => self.subagent_text(redactor, &agent, true),
            Change::Line(place) => {
                let prefix = subagent_prefix(self.conversation.agent_at(place));
                if let Some(item) = self.conversation.item(place).cloned() {
                    self.say(&prefix, &item);
                }
            }
            Change::Aside(item) => self.say("", &item),
            Change::CallStarted(place) => self.call_started(redactor, place),
            Change::CallFinished {
                place,
                agent,
                name,
                orphan,
                denied,
            } => self.call_finished(place, &agent, &name, orphan, denied),
            Change::Retrying {
                agent,
                attempt,
                reason,
            } => {
                // The failed attempt's text is not kept.
                self.held.clear();
                if std::mem::take(&mut self.streamed) && agent == DEFAULT_AGENT_NAME {
                    self.line(WITHDRAWN);
                }
                let reason = first_clause(&reason).to_owned();
                // A server that cannot be reached fails each attempt the same way:
                // said once, then the explanation when the turn gives up.
                if self.last_retry.as_deref() != Some(reason.as_str()) {
                    if !self.at_line_start {
                        self.print("\n");
                    }
                    eprint_line(&format!(
                        "{}(retrying, attempt {attempt}: {reason})",
                        subagent_prefix(&agent)
                    ));
                    self.last_retry = Some(reason);
                }
            }
        }
    }

    /// A notice on the lines beside the replies, a warning on stderr.
    fn say(&mut self, prefix: &str, item: &LiveItem) {
        match item {
            LiveItem::Warning(text) => {
                if !self.at_line_start {
                    self.print("\n");
                }
                eprint_line(&format!("! {prefix}{text}"));
            }
            LiveItem::Notice(text) => self.line(&format!("{prefix}{text}")),
            _ => {}
        }
    }

    fn call_started(&mut self, redactor: &Redactor, place: Place) {
        let agent = self.conversation.agent_at(place).to_owned();
        let Some(LiveItem::Tool(tool)) = self.conversation.item(place) else {
            return;
        };
        // The arguments are redacted already.
        let args = arguments_preview_of(&tool.arguments, tool.arguments_len, str::to_owned);
        let line = format!("⚙ {} {args}", tool.name);
        if agent == DEFAULT_AGENT_NAME && tool.agent.is_empty() {
            self.calls.push_back(ShownCall {
                id: tool.id.clone(),
                line,
                shown: false,
                result: None,
            });
            self.flush_calls();
        } else {
            let agent = if tool.agent.is_empty() {
                agent
            } else {
                tool.agent.clone()
            };
            self.subagent_text(redactor, &agent, true);
            self.line(&format!(
                "{}{line}",
                reprise_chat::text::subagent_indent(&agent)
            ));
        }
    }

    fn call_finished(
        &mut self,
        place: Option<Place>,
        agent: &str,
        name: &str,
        orphan: Option<ToolResultView>,
        denied: bool,
    ) {
        let main = agent == DEFAULT_AGENT_NAME;
        let (id, output) = match place.and_then(|place| self.conversation.item(place)) {
            Some(LiveItem::Tool(tool)) => (Some(tool.id.clone()), tool.result.clone()),
            _ => (None, None),
        };
        let Some(output) = output.or(orphan) else {
            return;
        };
        let indent = if main {
            String::new()
        } else {
            reprise_chat::text::subagent_indent(agent)
        };
        let marker = if output.is_error { "✗" } else { "↳" };
        let first = output.content.lines().next().unwrap_or("");
        let more = output.content.lines().count().saturating_sub(1);
        let result = format!(
            "{indent}  {marker} {first}{}",
            reprise_chat::text::more_lines(more)
        );
        let waiting = main
            .then(|| {
                self.calls
                    .iter_mut()
                    .find(|call| Some(&call.id) == id.as_ref() && call.result.is_none())
            })
            .flatten();
        match waiting {
            Some(call) => {
                call.result = Some(result);
                self.flush_calls();
            }
            None => self.line(&result),
        }
        if denied
            && output
                .content
                .contains(reprise_chat::approval::NOT_A_TERMINAL)
            && !std::mem::replace(&mut self.said_unattended, true)
        {
            eprint_line(&format!(
                "! {who}{name} was not run, nor will any call that needs approval \
                 be: no one can approve it, stdin is not a terminal. Allow tools with \
                 --yes, or with [gate] allow = [\"{name}\"] in the config.",
                who = subagent_prefix(agent),
            ));
        }
    }
}

/// Runs the plain chat until stdin ends, `/exit`, or Ctrl-C at the prompt. Returns
/// the exit code: 1 when the last turn failed, so scripts can tell.
pub async fn run(
    opener: Opener,
    mut ui: UnboundedReceiver<UiEvent>,
    args: &StartOptions,
) -> Result<i32> {
    let interactive = std::io::stdin().is_terminal();
    let stdout_is_terminal = std::io::stdout().is_terminal();
    let mut printer = Printer {
        at_line_start: true,
        interactive,
        partial: std::collections::HashMap::new(),
        hold_text: !stdout_is_terminal,
        held: String::new(),
        carriage: false,
        calls: std::collections::VecDeque::new(),
        said_unattended: false,
        conversation: LiveView::default(),
        replies_only: !stdout_is_terminal,
        streamed: false,
        last_retry: None,
    };
    let mut lines = Lines::spawn();
    let mut interrupts = Interrupts::listen()?;
    let start = args.start.clone();
    // Resolved before this start's own run folder exists: a prefix such as
    // `--resume 2026-12-06T00` must not match the folder made for it.
    let target = match &start {
        StartWith::Pick => pick_run(&opener, None, &mut lines, &mut printer).await?,
        other => {
            let target = reprise_chat::start::start_target(&*opener.runs, other).await?;
            if target.is_none() && *other == StartWith::Latest {
                printer.line("(no earlier conversation: starting a new one)");
            }
            target
        }
    };
    let fresh = opener.new_folder()?;
    let fresh_name = fresh.name().to_owned();
    let started = reprise_chat::start::open_start(&opener, fresh.clone(), target, args.fork).await;
    let (mut session, resumed) = reprise_chat::start::unless_started(started, &fresh)?;
    if resumed {
        show_resumed(&opener, &mut session, &mut printer).await?;
        if session.run_name() != fresh_name {
            reprise_chat::start::note_in_fresh_folder(&opener, &fresh_name, session.run_name());
        }
    }
    warn_load(&session, &mut printer);
    while let Ok(event) = ui.try_recv() {
        if let Some(text) = event.notice_text() {
            eprint_line(&text);
            if matches!(event, UiEvent::Warning(_)) {
                session.log_line(&text);
            }
        }
    }
    let mut code = 0;
    if let Some(failed) = finish_cut_turn(
        &mut session,
        &mut ui,
        &mut lines,
        &mut printer,
        &mut interrupts,
    )
    .await
    {
        code = i32::from(failed);
    }

    let mut first = args.prompt.clone();
    loop {
        let text = match first.take() {
            Some(prompt) => {
                if !interactive {
                    printer.line(&format!("› {prompt}"));
                }
                prompt
            }
            None => {
                printer.prompt();
                // An MCP server may finish starting while the prompt waits: say so
                // then, not only at the next turn.
                let next = loop {
                    tokio::select! {
                        line = lines.next() => break line,
                        _ = interrupts.next() => break None,
                        Some(event) = ui.recv() => {
                            if let Some(text) = event.notice_text() {
                                printer.leave_prompt();
                                eprint_line(&text);
                                if matches!(event, UiEvent::Warning(_)) {
                                    session.log_line(&text);
                                }
                                printer.prompt();
                            }
                        }
                    }
                };
                match next {
                    Some(line) => {
                        if !interactive && !line.trim().is_empty() {
                            printer.line(&format!("› {line}"));
                        }
                        line
                    }
                    None => break,
                }
            }
        };
        let mut outcome = dispatch(&opener, &session, &text, Remember::KnownAsTyped).await;
        if let Outcome::AskForkFiles { default } = &outcome {
            match fork_steps(&opener, &session, default, &mut lines, &mut printer).await {
                Some(next) => outcome = next,
                None => continue,
            }
        }
        // Whether another run's session took the place of this one.
        let mut switched = false;
        match outcome {
            Outcome::Nothing | Outcome::AskForkFiles { .. } => continue,
            Outcome::PickRewind(menu) => {
                match rewind_steps(&mut session, menu, &mut lines, &mut printer).await {
                    Ok(Some(done)) => printer.line(&done.line),
                    Ok(None) => {}
                    Err(error) => printer.line(&format!("✗ {error:#}")),
                }
            }
            Outcome::Exit => break,
            Outcome::Notice(text) | Outcome::Unknown(text) => printer.line(&text),
            Outcome::Failed(error) => printer.line(&format!("✗ {error}")),
            Outcome::PickRun => {
                let open = Some(session.run_name());
                if let Some(target) = pick_run(&opener, open, &mut lines, &mut printer).await? {
                    match open_resumed(&opener, Some(&session), target).await {
                        Ok(None) => printer.line(ALREADY_IN_THAT_RUN),
                        Ok(Some(next)) => {
                            std::mem::replace(&mut session, next).close().await;
                            show_resumed(&opener, &mut session, &mut printer).await?;
                            switched = true;
                        }
                        Err(error) => printer.line(&format!(
                            "✗ {}",
                            reprise_chat::error_text::with_causes(&error)
                        )),
                    }
                }
            }
            Outcome::Forked {
                session: next,
                line,
            } => {
                std::mem::replace(&mut session, *next).close().await;
                printer.line(&line);
                switched = true;
            }
            Outcome::Compact(focus) => {
                let end = run_printed(
                    &mut session,
                    |session, cancel| session.compact(focus.as_deref(), cancel),
                    &mut ui,
                    &mut lines,
                    &mut printer,
                    &mut interrupts,
                )
                .await;
                match end {
                    TurnEnd::Answered => {}
                    TurnEnd::Cancelled => printer.line("(cancelled)"),
                    TurnEnd::Failed(message) => eprint_line(&format!("✗ {message}")),
                }
            }
            Outcome::Message(message) => {
                let end = run_printed(
                    &mut session,
                    |session, cancel| session.turn(&message, cancel),
                    &mut ui,
                    &mut lines,
                    &mut printer,
                    &mut interrupts,
                )
                .await;
                code = i32::from(show_end(end, &mut printer));
            }
        }
        if switched {
            warn_load(&session, &mut printer);
            finish_cut_turn(
                &mut session,
                &mut ui,
                &mut lines,
                &mut printer,
                &mut interrupts,
            )
            .await;
        }
    }
    session.close().await;
    Ok(code)
}

/// Finishes the turn a crash cut, when the session has one, printing it as a turn;
/// `Some(failed)` when there was one.
async fn finish_cut_turn(
    session: &mut ChatSession,
    ui: &mut UnboundedReceiver<UiEvent>,
    lines: &mut Lines,
    printer: &mut Printer,
    interrupts: &mut Interrupts,
) -> Option<bool> {
    let line = session.cut_turn_line()?;
    printer.line(line);
    let end = run_printed(
        session,
        |session, cancel| session.resume_cut_turn(cancel),
        ui,
        lines,
        printer,
        interrupts,
    )
    .await;
    Some(show_end(end, printer))
}

/// Says how a turn ended; whether it failed.
fn show_end(end: TurnEnd, printer: &mut Printer) -> bool {
    let failed = matches!(end, TurnEnd::Failed(_));
    match end {
        TurnEnd::Answered => {
            if !printer.at_line_start {
                printer.print("\n");
            }
        }
        TurnEnd::Cancelled => printer.line("(cancelled)"),
        TurnEnd::Failed(message) => {
            if !printer.at_line_start {
                printer.print("\n");
            }
            eprint_line(&format!("✗ {message}"));
        }
    }
    failed
}

/// Runs `work` (a turn, a compaction) on the session, printing its events as they
/// come.
async fn run_printed<'s, F>(
    session: &'s mut ChatSession,
    work: impl FnOnce(&'s mut ChatSession, CancellationToken) -> F,
    ui: &mut UnboundedReceiver<UiEvent>,
    lines: &mut Lines,
    printer: &mut Printer,
    interrupts: &mut Interrupts,
) -> TurnEnd
where
    F: std::future::Future<Output = TurnEnd> + 's,
{
    let cancel = CancellationToken::new();
    // The session is borrowed by the work; events are printed through a second view
    // of what they need (the redactor), taken before the work starts.
    let shown = ShownSession::of(session);
    let work = work(session, cancel.clone());
    print_while(work, &shown, &cancel, ui, lines, printer, interrupts).await
}

/// Prints the events of `work` (a turn, a compaction) until it ends; Ctrl-C cancels
/// it. Text of an attempt that ended unrecorded (cancelled, failed) and a summary's
/// text are never the conversation's: nothing still held is printed.
async fn print_while(
    work: impl std::future::Future<Output = TurnEnd>,
    shown: &ShownSession,
    cancel: &CancellationToken,
    ui: &mut UnboundedReceiver<UiEvent>,
    lines: &mut Lines,
    printer: &mut Printer,
    interrupts: &mut Interrupts,
) -> TurnEnd {
    tokio::pin!(work);
    let end = loop {
        tokio::select! {
            end = &mut work => break end,
            Some(event) = ui.recv() => shown.handle(event, lines, printer, interrupts, cancel).await,
            _ = interrupts.next() => cancel.cancel(),
        }
    };
    while let Ok(event) = ui.try_recv() {
        shown
            .handle(event, lines, printer, interrupts, cancel)
            .await;
    }
    printer.end_calls();
    printer.held.clear();
    // The next turn's retries are said anew.
    printer.last_retry = None;
    printer.streamed = false;
    end
}

/// What printing an event needs from the session, so printing can go on while the
/// turn holds the session.
struct ShownSession {
    redactor: reprise_redact::Redactor,
    /// The run's folder, whose `session.log` keeps the warnings shown.
    run_dir: std::path::PathBuf,
}

impl ShownSession {
    fn of(session: &ChatSession) -> ShownSession {
        ShownSession {
            redactor: session.redactor(),
            run_dir: session.folder.dir.clone(),
        }
    }

    async fn handle(
        &self,
        event: UiEvent,
        lines: &mut Lines,
        printer: &mut Printer,
        interrupts: &mut Interrupts,
        cancel: &CancellationToken,
    ) {
        match event {
            UiEvent::Agent(event) => printer.event(&self.redactor, &event),
            UiEvent::Mcp(_) => {
                if let Some(text) = event.notice_text() {
                    eprint_line(&text);
                }
            }
            // The session is busy with the turn: the line goes to its log by a
            // handle of its own.
            UiEvent::Warning(_) => {
                if let Some(text) = event.notice_text() {
                    eprint_line(&text);
                    // Not reported when it fails: the line may say that
                    // session.log cannot be written.
                    if let Ok(log) = reprise_runs::SessionLog::open(&self.run_dir) {
                        let _ = log.with_redactor(self.redactor.clone()).write_line(&text);
                    }
                }
            }
            // Without a terminal the gate asks nothing (entry.rs makes it
            // unattended): were it to ask, the lines on stdin are prompts, not
            // answers, so none is taken as a yes. A call that may have run is not
            // run again: the resume says so on its line.
            UiEvent::Ask(ask) if !printer.interactive => {
                let _ = ask.reply.send(Answer::No);
            }
            UiEvent::Ask(ask) => {
                let who = subagent_prefix(&ask.agent);
                let call = format!(
                    "{who}{} {}",
                    ask.tool,
                    arguments_preview_of(&ask.arguments, ask.arguments_len, str::to_owned)
                );
                let (question, answers, hint) = if ask.again {
                    (
                        format!("{call} {AGAIN_QUESTION} [a]gain / [i]nterrupted"),
                        AGAIN_ANSWERS,
                        "answer a or i",
                    )
                } else {
                    (
                        format!("run {call}? [y]es / [n]o / [a]lways for this run"),
                        GATE_ANSWERS,
                        "answer y, n or a",
                    )
                };
                printer.line(&question);
                match read_answer(lines, printer, interrupts, answers, hint).await {
                    Some(answer) => {
                        let _ = ask.reply.send(answer);
                    }
                    // Ctrl-C stops the whole turn: this call and the ones after it
                    // get an "interrupted" result, and nothing more is asked.
                    None => cancel.cancel(),
                }
            }
        }
    }
}

/// What a line may answer to the gate's question.
const GATE_ANSWERS: &[(&[&str], Answer)] = &[
    (&["y", "yes", "Y"], Answer::Yes),
    (&["n", "no", "N"], Answer::No),
    (&["a", "always", "A"], Answer::Always),
];

/// What a line may answer to "run it again?": again is yes, interrupted is no.
const AGAIN_ANSWERS: &[(&[&str], Answer)] = &[
    (&["a", "again", "A"], Answer::Yes),
    (&["i", "interrupted", "I"], Answer::No),
];

/// Reads lines until one is an answer (one of `answers`' words), saying `hint` after each that is
/// not; the end of input is "no". `None` when Ctrl-C came first.
async fn read_answer(
    lines: &mut Lines,
    printer: &mut Printer,
    interrupts: &mut Interrupts,
    answers: &[(&[&str], Answer)],
    hint: &str,
) -> Option<Answer> {
    loop {
        let line = tokio::select! {
            line = lines.next() => line,
            _ = interrupts.next() => return None,
        };
        let Some(line) = line else {
            return Some(Answer::No);
        };
        let line = line.trim();
        match answers.iter().find(|(words, _)| words.contains(&line)) {
            Some((_, answer)) => return Some(*answer),
            None => printer.line(hint),
        }
    }
}

/// Rows assumed for a screen when stdout is not a terminal.
const DEFAULT_ROWS: usize = 24;

/// Redraws the end of the resumed conversation: the last items that fit a screen,
/// after a line that says how many earlier messages `reprise show` prints.
async fn show_resumed(
    opener: &Opener,
    session: &mut ChatSession,
    printer: &mut Printer,
) -> Result<()> {
    // Piped output has no screen: a terminal's default size stands in for one.
    let size = std::io::stdout()
        .is_terminal()
        .then(crossterm::terminal::size)
        .and_then(Result::ok);
    let (columns, rows) = size.map_or((80, DEFAULT_ROWS), |(c, r)| {
        (usize::from(c), usize::from(r))
    });
    let redactor = session.redactor();
    // Calls to subagents are drawn folded, with a line for their work.
    let calls: std::collections::HashMap<String, reprise_chat::subagents::PastCall> =
        reprise_chat::subagents::past_calls_of(
            &*opener.runs,
            &session.folder,
            session.agent.entries(),
        )
        .await?
        .iter()
        .map(|call| (call.id.clone(), call.redacted(&redactor)))
        .collect();
    // Only the end is drawn: a screen holds no more messages than it has rows.
    let entries = session.agent.entries();
    let start = reprise_chat::view::redraw::tail_start(entries, rows);
    let items = reprise_chat::view::redraw::redraw_items(&entries[start..]);
    // From the end back, as many items as fit (the resumed line and the prompt
    // take two rows).
    let budget = rows.saturating_sub(2).max(1);
    let mut used = 0;
    let mut blocks = Vec::new();
    let mut first_shown = items.len();
    for (index, item) in items.iter().enumerate().rev() {
        let block = match item {
            Item::Tool(tool) if calls.contains_key(&tool.id) => calls[&tool.id].folded_text(),
            _ => redraw_text(item, &redactor),
        };
        let height: usize = block
            .lines()
            .map(|line| line.chars().count().div_ceil(columns.max(1)).max(1))
            .sum();
        if used + height > budget && !blocks.is_empty() {
            break;
        }
        used += height;
        blocks.push(block);
        first_shown = index;
    }
    let earlier = reprise_chat::view::redraw::shown_messages(&entries[..start])
        + items[..first_shown]
            .iter()
            .filter(|item| matches!(item, Item::User(_) | Item::Assistant(_)))
            .count();
    let mut text = String::new();
    if let Some(notice) = reprise_chat::view::redraw::earlier_notice(
        earlier,
        session.agent.skipped_history(),
        session.run_name(),
    ) {
        text.push_str(&notice);
        text.push('\n');
    }
    for block in blocks.iter().rev() {
        text.push_str(block);
    }
    printer.lines(&text);
    let line = reprise_chat::start::resumed_line(&*opener.runs, &session.folder).await;
    session.log_line(&line);
    printer.line(&line);
    Ok(())
}

/// One redrawn item as plain lines, as the live plain view prints it.
fn redraw_text(item: &Item, redactor: &reprise_redact::Redactor) -> String {
    let mut text = String::new();
    match item {
        Item::User(message) => {
            for (i, line) in message.lines().enumerate() {
                text.push_str(if i == 0 { "› " } else { "  " });
                text.push_str(line);
                text.push('\n');
            }
        }
        Item::Tool(tool) => {
            let args = arguments_preview_of(&tool.arguments, tool.arguments_len, |text| {
                redactor.redact(text).into_owned()
            });
            text.push_str(&format!("⚙ {} {args}\n", tool.name));
            if let Some(result) = &tool.result {
                let marker = if result.is_error { "✗" } else { "↳" };
                let first = result.content.lines().next().unwrap_or("");
                let more = result.content.lines().count().saturating_sub(1) + result.folded_lines;
                let more = reprise_chat::text::more_lines(more);
                text.push_str(&format!("  {marker} {}{more}\n", redactor.redact(first)));
            }
        }
        Item::Assistant(message)
        | Item::Notice(message)
        | Item::Warning(message)
        | Item::Error(message) => {
            text.push_str(message.trim_end());
            text.push('\n');
        }
    }
    text
}

fn warn_load(session: &ChatSession, printer: &mut Printer) {
    for warning in session.load_warnings() {
        printer.line(&format!("! {warning}"));
    }
}

async fn pick_run(
    opener: &Opener,
    open: Option<&str>,
    lines: &mut Lines,
    printer: &mut Printer,
) -> Result<Option<reprise_runs::RunFolder>> {
    let rows = reprise_chat::start::picker_rows(&*opener.runs, open).await?;
    if rows.is_empty() {
        printer.line("(no other run has a conversation yet)");
        return Ok(None);
    }
    let mut text = String::new();
    for (i, row) in rows.iter().enumerate() {
        text.push_str(&format!(
            "{:>3}. {}  {}\n",
            i + 1,
            row.date,
            one_line(if row.title.is_empty() {
                &row.last_message
            } else {
                &row.title
            })
        ));
    }
    printer.line(text.trim_end());
    loop {
        printer.ask("resume which run? (a number; empty cancels) ");
        let Some(answer) = lines.next().await else {
            return Ok(None);
        };
        let answer = answer.trim();
        if answer.is_empty() {
            printer.line("(cancelled)");
            return Ok(None);
        }
        match answer.parse::<usize>() {
            Ok(n) if (1..=rows.len()).contains(&n) => {
                let name = &rows[n - 1].name;
                return Ok(Some(opener.runs.find(name).await?));
            }
            _ => printer.line(&format!("type a number from 1 to {}", rows.len())),
        }
    }
}

/// Whether a plain-mode answer cancels: an empty line, or Esc typed before Enter.
fn cancels(answer: &str) -> bool {
    answer.is_empty() || answer.contains('\x1b')
}

/// Asks until the answer is a number from 1 to `count`; `None` when cancelled.
async fn ask_number(
    question: &str,
    count: usize,
    lines: &mut Lines,
    printer: &mut Printer,
) -> Option<usize> {
    loop {
        printer.ask(question);
        let answer = lines.next().await?;
        let answer = answer.trim();
        if cancels(answer) {
            printer.line("(cancelled)");
            return None;
        }
        match answer.parse::<usize>() {
            Ok(n) if (1..=count).contains(&n) => return Some(n),
            _ => printer.line(&format!("type a number from 1 to {count}")),
        }
    }
}

/// `/rewind`: the person's messages, newest first, then what to rewind, the
/// preview and a question; `None` when cancelled or answered no.
async fn rewind_steps(
    session: &mut ChatSession,
    menu: RewindMenu,
    lines: &mut Lines,
    printer: &mut Printer,
) -> Result<Option<RewindDone>> {
    let mut text = String::new();
    if menu.undo {
        text.push_str("  u. undo the last rewind\n");
    }
    for item in &menu.messages {
        text.push_str(&format!(
            "{:>3}. {}\n",
            item.message.number,
            reprise_chat::text::shorten(&one_line(&item.message.text), 70)
        ));
    }
    printer.line(text.trim_end());
    let question = if menu.undo {
        "rewind to just before which message? (its number; u undoes the last rewind; empty cancels) "
    } else {
        "rewind to just before which message? (its number; empty cancels) "
    };
    let choice = loop {
        printer.ask(question);
        let Some(answer) = lines.next().await else {
            return Ok(None);
        };
        let answer = answer.trim();
        if cancels(answer) {
            printer.line("(cancelled)");
            return Ok(None);
        }
        if menu.undo && answer == "u" {
            break RewindChoice::Undo;
        }
        let found = answer
            .parse::<usize>()
            .ok()
            .and_then(|n| menu.messages.iter().find(|item| item.message.number == n));
        let Some(item) = found else {
            printer.line("type the number of one of the messages above");
            continue;
        };
        let parts = item.parts();
        let part = if parts.len() == 1 {
            parts[0]
        } else {
            let listed: Vec<String> = parts
                .iter()
                .enumerate()
                .map(|(i, part)| format!("{:>3}. {}", i + 1, part.label()))
                .collect();
            printer.line(&listed.join("\n"));
            let question = format!("rewind what? (1 to {}; empty cancels) ", parts.len());
            match ask_number(&question, parts.len(), lines, printer).await {
                Some(n) => parts[n - 1],
                None => return Ok(None),
            }
        };
        break RewindChoice::To {
            number: item.message.number,
            part,
        };
    };
    let prepared = session.prepare_rewind(choice).await?;
    printer.line(prepared.preview.trim_end());
    printer.ask("go ahead? [y/N] ");
    let answer = lines.next().await.unwrap_or_default();
    if !reprise_chat::answers::is_yes(&answer) {
        printer.line("(nothing changed)");
        return Ok(None);
    }
    Ok(Some(session.rewind(prepared).await?))
}

/// `/fork` in a run with checkpoints: with a copy of the files (into the folder
/// asked for, `default` offered) or the conversation only; `None` when cancelled.
async fn fork_steps(
    opener: &Opener,
    session: &ChatSession,
    default: &std::path::Path,
    lines: &mut Lines,
    printer: &mut Printer,
) -> Option<Outcome> {
    printer.line(&format!(
        "  1. with a copy of the files, in a new folder\n  2. the conversation only (the copy works in {})",
        session.workdir.display()
    ));
    let choice = ask_number("fork how? (1 or 2; empty cancels) ", 2, lines, printer).await?;
    let dir = if choice == 1 {
        printer.ask(&format!("folder for the files [{}]: ", default.display()));
        let answer = lines.next().await?;
        let answer = answer.trim();
        if answer.contains('\x1b') {
            printer.line("(cancelled)");
            return None;
        }
        Some(if answer.is_empty() {
            default.to_path_buf()
        } else {
            std::path::PathBuf::from(answer)
        })
    } else {
        None
    };
    Some(
        fork(opener, session, dir.as_deref())
            .await
            .unwrap_or_else(|error| Outcome::Failed(reprise_chat::error_text::with_causes(&error))),
    )
}

/// What follows the text of an attempt that failed and is tried again: it was
/// printed as it came, and is not the reply.
const WITHDRAWN: &str = "(withdrawn: the reply above broke off and is asked for again)";

/// The start of an error text, up to its first `: ` detail.
fn first_clause(text: &str) -> &str {
    text.split(": error").next().unwrap_or(text)
}

/// Ctrl-C (SIGINT), listened to for the whole chat so that none is missed between
/// two waits: during a turn it stops the turn, at the prompt it ends the chat.
struct Interrupts {
    #[cfg(unix)]
    signal: tokio::signal::unix::Signal,
}

impl Interrupts {
    fn listen() -> Result<Interrupts> {
        #[cfg(unix)]
        {
            let signal = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
            Ok(Interrupts { signal })
        }
        #[cfg(not(unix))]
        Ok(Interrupts {})
    }

    async fn next(&mut self) {
        #[cfg(unix)]
        {
            self.signal.recv().await;
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
