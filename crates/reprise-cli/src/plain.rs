//! The plain line mode: for pipes, scripts and dumb terminals. Lines in on stdin,
//! the conversation out on stdout as plain text.

use std::io::{BufRead, IsTerminal, Write};

use anyhow::Result;
use reprise_agent::AgentEvent;
use tokio::sync::mpsc::{self, UnboundedReceiver};
use tokio_util::sync::CancellationToken;

use crate::approval::Answer;
use crate::chat::{self, HELP, Line, StartWith};
use crate::cli::ChatArgs;
use crate::driver::{
    ChatSession, Opener, Said, TurnEnd, UiEvent, one_line, redraw_of, subagent_prefix,
};
use crate::terminal_text::{eprint_line, visible};

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
}

impl Printer {
    fn print(&mut self, text: &str) {
        let mut out = std::io::stdout().lock();
        // Model text, tool results and run folders are untrusted: see terminal_text.
        let _ = out.write_all(visible(text).as_bytes());
        let _ = out.flush();
        if !text.is_empty() {
            self.at_line_start = text.ends_with('\n');
        }
    }

    fn line(&mut self, text: &str) {
        if !self.at_line_start {
            self.print("\n");
        }
        self.print(text);
        self.print("\n");
    }

    fn prompt(&mut self) {
        if self.interactive {
            if !self.at_line_start {
                self.print("\n");
            }
            self.print("› ");
            self.at_line_start = true;
        }
    }

    fn event(&mut self, redactor: &reprise_redact::Redactor, event: &AgentEvent) {
        match event {
            AgentEvent::TextDelta { agent, text } if agent == reprise_agent::DEFAULT_AGENT_NAME => {
                self.print(text);
            }
            AgentEvent::ToolCallStarted {
                agent,
                name,
                arguments,
                ..
            } => {
                let line = one_line(arguments);
                let args = redactor.redact(&line);
                self.line(&format!("⚙ {}{name} {args}", subagent_prefix(agent)));
            }
            AgentEvent::ToolCallFinished { output, .. } => {
                let marker = if output.is_error { "✗" } else { "↳" };
                let first = output.content.lines().next().unwrap_or("");
                let more = output.content.lines().count().saturating_sub(1);
                let more = if more > 0 {
                    format!(" (+{more} lines)")
                } else {
                    String::new()
                };
                self.line(&format!("  {marker} {}{more}", redactor.redact(first)));
            }
            AgentEvent::Retrying {
                attempt, reason, ..
            } => {
                eprint_line(&format!(
                    "(retrying, attempt {attempt}: {})",
                    first_clause(reason)
                ));
            }
            AgentEvent::ReplyCutOff { max_tokens, .. } => {
                if !self.at_line_start {
                    self.print("\n");
                }
                eprint_line(&format!("! {}", crate::driver::cut_off_note(*max_tokens)));
            }
            AgentEvent::Compacted { .. } => {
                if let Some(line) = crate::driver::compaction_line(event) {
                    self.line(&line);
                }
            }
            _ => {}
        }
    }
}

/// Runs the plain chat until stdin ends, `/exit`, or Ctrl-C at the prompt. Returns
/// the exit code: 1 when the last turn failed, so scripts can tell.
pub async fn run(
    opener: Opener,
    mut ui: UnboundedReceiver<UiEvent>,
    args: &ChatArgs,
) -> Result<i32> {
    let interactive = std::io::stdin().is_terminal();
    let mut printer = Printer {
        at_line_start: true,
        interactive,
    };
    let mut lines = Lines::spawn();
    let mut interrupts = Interrupts::listen()?;
    let fresh = opener.new_folder()?;
    let fresh_name = fresh.name().to_owned();
    let start = StartWith::from_args(args);
    let target = match &start {
        StartWith::Pick => pick_run(&opener, &mut lines, &mut printer).await?,
        other => {
            let target = chat::start_target(&opener.settings.runs_dir, other)?;
            if target.is_none() && *other == StartWith::Latest {
                printer.line("(no earlier conversation: starting a new one)");
            }
            target
        }
    };
    let (mut session, resumed) =
        chat::open_start(&opener, fresh, target, args.fork_session).await?;
    if resumed {
        show_resumed(&mut session, &mut printer)?;
        if session.run_name() != fresh_name {
            // The folder made at this start says where the conversation went.
            if let Ok(mut log) =
                reprise_session::runs::SessionLog::open(&opener.settings.runs_dir.join(&fresh_name))
                    .map(|log| log.with_redactor(opener.redactor.clone()))
            {
                let _ = log.write_line(&format!("(resumed run {})", session.run_name()));
            }
        }
    }
    warn_load(&session, &mut printer);
    while let Ok(UiEvent::Mcp(notice)) = ui.try_recv() {
        eprint_line(&notice.to_string());
    }

    let mut first = args.prompt.clone();
    let mut code = 0;
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
                        Some(UiEvent::Mcp(notice)) = ui.recv() => {
                            if interactive {
                                printer.print("\n");
                            }
                            eprint_line(&notice.to_string());
                            printer.prompt();
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
        match Line::parse(&text) {
            Line::Empty => continue,
            Line::Exit => {
                chat::remember(&opener, &text, session.run_name());
                break;
            }
            Line::Help => {
                chat::remember(&opener, &text, session.run_name());
                printer.line(HELP);
            }
            Line::Unknown(command) => {
                printer.line(&format!("unknown command {command}; /help lists them"));
            }
            Line::Resume => {
                chat::remember(&opener, &text, session.run_name());
                if let Some(target) = pick_run(&opener, &mut lines, &mut printer).await? {
                    if target.dir == session.folder.dir {
                        printer.line("(already in that run)");
                        continue;
                    }
                    match opener.open(target).await {
                        Ok(next) => {
                            std::mem::replace(&mut session, next).close().await;
                            show_resumed(&mut session, &mut printer)?;
                            warn_load(&session, &mut printer);
                        }
                        Err(error) => printer.line(&format!("✗ {error:#}")),
                    }
                }
            }
            Line::Fork => {
                chat::remember(&opener, &text, session.run_name());
                match fork(&opener, &session).await {
                    Ok(next) => {
                        let line = format!(
                            "(forked into run {}; run {} is kept as it was)",
                            next.run_name(),
                            session.run_name()
                        );
                        std::mem::replace(&mut session, next).close().await;
                        session.log_line(&line);
                        printer.line(&line);
                    }
                    Err(error) => printer.line(&format!("✗ {error:#}")),
                }
            }
            Line::Compact(focus) => {
                chat::remember(&opener, &text, session.run_name());
                let end = compact(
                    &mut session,
                    focus.as_deref(),
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
            Line::Message(message) => {
                chat::remember(&opener, &message, session.run_name());
                let end = turn(
                    &mut session,
                    &message,
                    &mut ui,
                    &mut lines,
                    &mut printer,
                    &mut interrupts,
                )
                .await;
                code = i32::from(matches!(end, TurnEnd::Failed(_)));
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
            }
        }
    }
    session.close().await;
    Ok(code)
}

async fn fork(opener: &Opener, session: &ChatSession) -> Result<ChatSession> {
    if session.folder.session_id.is_none() && session.agent.messages().is_empty() {
        anyhow::bail!("nothing to fork yet: this conversation is empty");
    }
    let folder = reprise_session::runs::RunFolder::open(&session.folder.dir)?;
    let copy = chat::fork_into_new(opener, &folder).await?;
    opener.open_forked(copy).await
}

async fn turn(
    session: &mut ChatSession,
    message: &str,
    ui: &mut UnboundedReceiver<UiEvent>,
    lines: &mut Lines,
    printer: &mut Printer,
    interrupts: &mut Interrupts,
) -> TurnEnd {
    let cancel = CancellationToken::new();
    // The session is borrowed by the turn; events are printed through a second view
    // of what they need (the redactor), taken before the turn starts.
    let shown = ShownSession::of(session);
    let turn = session.turn(message, cancel.clone());
    tokio::pin!(turn);
    let end = loop {
        tokio::select! {
            end = &mut turn => break end,
            Some(event) = ui.recv() => shown.handle(event, lines, printer).await,
            _ = interrupts.next() => cancel.cancel(),
        }
    };
    while let Ok(event) = ui.try_recv() {
        shown.handle(event, lines, printer).await;
    }
    end
}

/// `/compact`, its events printed as a turn's are.
async fn compact(
    session: &mut ChatSession,
    focus: Option<&str>,
    ui: &mut UnboundedReceiver<UiEvent>,
    lines: &mut Lines,
    printer: &mut Printer,
    interrupts: &mut Interrupts,
) -> TurnEnd {
    let cancel = CancellationToken::new();
    let shown = ShownSession::of(session);
    let work = session.compact(focus, cancel.clone());
    tokio::pin!(work);
    let end = loop {
        tokio::select! {
            end = &mut work => break end,
            Some(event) = ui.recv() => shown.handle(event, lines, printer).await,
            _ = interrupts.next() => cancel.cancel(),
        }
    };
    while let Ok(event) = ui.try_recv() {
        shown.handle(event, lines, printer).await;
    }
    end
}

/// What printing an event needs from the session, so printing can go on while the
/// turn holds the session.
struct ShownSession {
    redactor: reprise_redact::Redactor,
}

impl ShownSession {
    fn of(session: &ChatSession) -> ShownSession {
        ShownSession {
            redactor: session.redactor(),
        }
    }

    async fn handle(&self, event: UiEvent, lines: &mut Lines, printer: &mut Printer) {
        match event {
            UiEvent::Agent(event) => printer.event(&self.redactor, &event),
            UiEvent::Mcp(notice) => eprint_line(&notice.to_string()),
            UiEvent::Ask(ask) if !printer.interactive => {
                // The lines on stdin are prompts, not answers: never take one as
                // a yes or a no.
                let who = subagent_prefix(&ask.agent);
                printer.line(&format!("✗ {who}{} not run", ask.tool));
                eprint_line(&format!(
                    "! {who}{tool} was not run: stdin is not a terminal, so the gate cannot \
                     ask. Allow tools with --yes, or with [gate] allow = [\"{tool}\"] in the \
                     config.",
                    tool = ask.tool
                ));
                let _ = ask.reply.send(Answer::No);
            }
            UiEvent::Ask(ask) => {
                let who = subagent_prefix(&ask.agent);
                printer.line(&format!(
                    "run {who}{} {}? [y]es / [n]o / [a]lways for this run",
                    ask.tool,
                    one_line(&ask.arguments)
                ));
                let answer = loop {
                    match lines.next().await {
                        None => break Answer::No,
                        Some(line) => match line.trim() {
                            "y" | "yes" | "Y" => break Answer::Yes,
                            "n" | "no" | "N" => break Answer::No,
                            "a" | "always" | "A" => break Answer::Always,
                            _ => printer.line("answer y, n or a"),
                        },
                    }
                };
                let _ = ask.reply.send(answer);
            }
        }
    }
}

fn show_resumed(session: &mut ChatSession, printer: &mut Printer) -> Result<()> {
    let redraw = redraw_of(&session.folder.dir)?;
    let mut text = String::new();
    for said in &redraw.messages {
        match said {
            Said::User(message) => {
                for (i, line) in message.lines().enumerate() {
                    text.push_str(if i == 0 { "› " } else { "  " });
                    text.push_str(line);
                    text.push('\n');
                }
            }
            Said::Assistant(message) | Said::Compacted(message) => {
                text.push_str(message.trim_end());
                text.push('\n');
            }
        }
    }
    printer.print(&text);
    let line = chat::resumed_line(&session.folder);
    session.log_line(&line);
    printer.line(&line);
    Ok(())
}

fn warn_load(session: &ChatSession, printer: &mut Printer) {
    for warning in session.load_warnings() {
        printer.line(&format!("! {warning}"));
    }
}

async fn pick_run(
    opener: &Opener,
    lines: &mut Lines,
    printer: &mut Printer,
) -> Result<Option<reprise_session::runs::RunFolder>> {
    let rows = chat::picker_rows(&opener.settings.runs_dir)?;
    if rows.is_empty() {
        printer.line("(no run has a conversation yet)");
        return Ok(None);
    }
    let mut text = String::new();
    for (i, row) in rows.iter().enumerate() {
        text.push_str(&format!(
            "{:>3}. {}  {}\n",
            i + 1,
            row.date,
            one_line(&row.last_message)
        ));
    }
    printer.line(text.trim_end());
    loop {
        printer.print("resume which run? (a number; empty cancels) ");
        printer.at_line_start = true;
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
                return Ok(Some(reprise_session::runs::find_run(
                    &opener.settings.runs_dir,
                    name,
                )?));
            }
            _ => printer.line(&format!("type a number from 1 to {}", rows.len())),
        }
    }
}

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
