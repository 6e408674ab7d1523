//! What `main` does: parse the command line, resolve settings, dispatch.

use std::io::IsTerminal;

use anyhow::{Context, Result};
use clap::Parser;
use reprise_redact::Redactor;
use tokio::sync::mpsc::unbounded_channel;

use crate::cli::{Cli, Command, McpAction};
use reprise_chat::config::{self, Settings};
use reprise_chat::provider::build_provider;
use reprise_chat::session::Opener;
use std::sync::Arc;

use reprise_runs::RunCatalog;

use reprise_chat::catalog::open_catalog;

/// Runs `reprise` with the process's arguments; returns the exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            crate::display::terminal::eprint_line(&format!("reprise: cannot start: {error}"));
            return 1;
        }
    };
    let telemetry = match start_telemetry(&cli, &runtime) {
        Ok(telemetry) => telemetry,
        Err(error) => {
            crate::display::terminal::eprint_line(&format!("reprise: {error:#}"));
            return 2;
        }
    };
    let level = crate::warnings::level_from_env(std::env::var("RUST_LOG").ok().as_deref());
    let layer = telemetry.as_ref().and_then(|telemetry| telemetry.layer());
    if let Err(error) = crate::warnings::install(cli.chat.log_file.as_deref(), level, layer) {
        let file = cli
            .chat
            .log_file
            .as_deref()
            .unwrap_or(std::path::Path::new(""));
        crate::display::terminal::eprint_line(&format!(
            "reprise: --log-file {}: {error}",
            file.display()
        ));
        return 2;
    }
    if cli.command.is_none() {
        // The chat redacts what it shows and logs from its first screen on (a
        // resumed conversation's redraw): the redactor's table is compiled while
        // the chat starts and reads the conversation.
        std::thread::spawn(reprise_redact::prepare);
    }
    let code = runtime.block_on(run(cli));
    // What is queued goes to the collector before the process ends (a few
    // seconds at most when it is slow).
    if let Some(telemetry) = telemetry {
        telemetry.shutdown();
    }
    match code {
        Ok(code) => code,
        // The reader went away (`reprise export … | head -1`): what it wanted it
        // has, as with grep and rg.
        Err(error) if is_broken_pipe(&error) => 0,
        Err(error) => {
            crate::display::terminal::eprint_line(&format!("reprise: {error:#}"));
            1
        }
    }
}

/// The chat's exporters, when `[telemetry]` or the `OTEL_*` variables ask for
/// them (the run commands export nothing). Started inside the runtime: gRPC needs
/// it. A config that cannot be read is said by the chat itself.
fn start_telemetry(
    cli: &Cli,
    runtime: &tokio::runtime::Runtime,
) -> Result<Option<reprise_telemetry::Telemetry>> {
    if cli.command.is_some() {
        return Ok(None);
    }
    let Ok(settings) = config::resolve(&cli.chat, &config::process_env) else {
        return Ok(None);
    };
    let _inside = runtime.enter();
    Ok(reprise_telemetry::Telemetry::start(&settings.telemetry)?)
}

/// Whether `error` comes from writing to a pipe whose reader is gone.
fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

async fn run(cli: Cli) -> Result<i32> {
    let settings = config::resolve(&cli.chat, &config::process_env)?;
    // Listing the MCP servers needs no runs: it does not connect to a database.
    let uses_runs = !matches!(cli.command, Some(Command::Mcp { .. }));
    let database_url = settings.database_url.as_deref().filter(|_| uses_runs);
    let runs = open_catalog(&settings.runs_dir, database_url, settings.database_lease).await?;
    let code = dispatch(cli, settings, &runs).await;
    runs.close().await;
    code
}

async fn dispatch(cli: Cli, settings: Settings, runs: &Arc<dyn RunCatalog>) -> Result<i32> {
    let catalog: &dyn RunCatalog = &**runs;
    let mut stdout = std::io::stdout().lock();
    let done = |result: Result<()>| result.map(|()| 0);
    match cli.command {
        Some(Command::Runs { json, all }) => {
            done(crate::commands::runs::runs(catalog, json, all, &mut stdout).await)
        }
        Some(Command::Show {
            run,
            json,
            tools,
            no_tools,
            subagents,
        }) => done(
            crate::commands::runs::show(
                catalog,
                &run,
                crate::commands::runs::ShowOptions {
                    json,
                    // The text shows the calls unless told not to; JSON when told to.
                    tools: if json { tools } else { !no_tools },
                    subagents,
                },
                &mut stdout,
            )
            .await,
        ),
        Some(Command::Fork { run, at, workdir }) => done(
            crate::commands::runs::fork(
                catalog,
                &settings,
                &run,
                at,
                workdir.as_deref(),
                &mut stdout,
            )
            .await,
        ),
        Some(Command::Rewind {
            run,
            to,
            files_only,
            conversation_only,
            undo,
            finish,
            nearest_earlier,
            dry_run,
            yes,
        }) => {
            use reprise_chat::rewind::RewindPart;
            let part = if files_only {
                RewindPart::FilesOnly
            } else if conversation_only {
                RewindPart::ConversationOnly
            } else {
                RewindPart::Both
            };
            let request = crate::commands::rewind::RewindRequest {
                run,
                to,
                part,
                dry_run,
                yes,
                undo,
                finish,
                nearest_earlier,
            };
            let mut input = std::io::stdin().lock();
            let ask = crate::commands::rewind::Ask {
                input: &mut input,
                terminal: std::io::stdin().is_terminal(),
            };
            done(
                crate::commands::rewind::rewind(catalog, &settings, &request, ask, &mut stdout)
                    .await,
            )
        }
        Some(Command::Rm { run, yes }) => {
            let mut input = std::io::stdin().lock();
            done(crate::commands::runs::rm(catalog, &run, yes, &mut input, &mut stdout).await)
        }
        Some(Command::Import { paths, dry_run }) => {
            crate::commands::import::import(catalog, &paths, dry_run, &mut stdout).await
        }
        Some(Command::Export {
            run,
            format,
            output,
            no_redact,
        }) => done(
            crate::commands::export::export(
                catalog,
                &run,
                format,
                output.as_deref(),
                !no_redact,
                &mut stdout,
            )
            .await,
        ),
        Some(Command::Usage {
            by,
            since,
            until,
            json,
            html,
        }) => {
            let request = crate::commands::usage::UsageRequest {
                by,
                since,
                until,
                json,
                html,
            };
            done(
                crate::commands::usage::usage(catalog, &settings.prices, &request, &mut stdout)
                    .await,
            )
        }
        Some(Command::History(command)) => {
            let mut input = std::io::stdin().lock();
            let mut redactor = Redactor::new().with_env_secrets();
            if let Some(key) = &settings.api_key {
                redactor = redactor.with_secret(key.clone());
            }
            let io = crate::commands::history::Io {
                out: &mut stdout,
                input: &mut input,
                stdin_terminal: std::io::stdin().is_terminal(),
                color: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
                redactor,
            };
            crate::commands::history::run(catalog, command, io).await
        }
        Some(Command::Mcp {
            action: McpAction::List,
        }) => {
            drop(stdout);
            done(crate::commands::mcp::list(&settings).await)
        }
        None => {
            drop(stdout);
            chat(settings, cli.chat, runs.clone()).await
        }
    }
}

/// How the chat draws itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The whole screen.
    FullScreen,
    /// Below the shell's scrollback.
    Inline,
    /// Lines in, lines out.
    Plain,
}

/// The mode the flags and the terminal call for.
pub fn mode_for(plain: bool, inline: bool, stdin_tty: bool, stdout_tty: bool) -> Mode {
    if plain || !stdin_tty || !stdout_tty {
        Mode::Plain
    } else if inline {
        Mode::Inline
    } else {
        Mode::FullScreen
    }
}

async fn chat(
    mut settings: Settings,
    args: crate::cli::ChatArgs,
    runs: Arc<dyn RunCatalog>,
) -> Result<i32> {
    // Held for the whole chat: dropping it stops the local model's server.
    let local = match crate::local::prepare(&mut settings, &args, &config::process_env).await {
        Ok(local) => local,
        // Already said in its own words.
        Err(error) => match error.downcast_ref::<crate::local::Interrupted>() {
            Some(interrupted) => return Ok(interrupted.exit_code()),
            None => return Err(error),
        },
    };
    let provider = build_provider(&settings)?;
    let mut redactor = Redactor::new().with_env_secrets();
    if let Some(key) = &settings.api_key {
        redactor = redactor.with_secret(key.clone());
    }
    if settings.telemetry.capture_content && settings.telemetry.is_on(config::process_env) {
        // Spans carry text only as the transcript's redactor leaves it.
        let redacting = redactor.clone();
        reprise_agent::capture_content(Some(Arc::new(move |text: &str| {
            redacting.redact(text).into_owned()
        })));
    }
    let root = std::env::current_dir().context("cannot read the working directory")?;
    let (ui_tx, ui_rx) = unbounded_channel();
    // The chat's warnings are its notices from here on: shown by the screen (never
    // printed over the full screen) and kept in the run's session.log.
    crate::warnings::to_chat(ui_tx.clone());
    // Each command starts through this binary, which makes the runs folder
    // read-only in a mount namespace of the command's own (see main.rs).
    settings.run_command.sandbox.trampoline = reprise_tools::this_binary();
    if let Some(warning) = reprise_chat::builtins::sandbox_warning(
        &settings,
        reprise_tools::SandboxSupport::detect(),
        reprise_chat::builtins::protection(&settings, root.clone()),
    ) {
        let _ = ui_tx.send(reprise_chat::events::UiEvent::Warning(warning));
    }
    let mode = mode_for(
        args.plain,
        args.inline,
        std::io::stdin().is_terminal(),
        std::io::stdout().is_terminal(),
    );
    if mode == Mode::Plain && !std::io::stdin().is_terminal() {
        // The lines on stdin are prompts, not answers: a call the gate would ask
        // about is not run, and the model is told why.
        settings.unattended = Some(reprise_chat::approval::NOT_A_TERMINAL.to_owned());
    }
    let opener = Opener {
        workdir: root,
        settings,
        provider,
        redactor,
        ui: ui_tx,
        runs,
    };
    let code = match mode {
        Mode::Plain => crate::screens::plain::run(opener, ui_rx, &args.start_options()).await,
        Mode::FullScreen | Mode::Inline => crate::screens::tui::app::run(
            opener,
            ui_rx,
            &args.start_options(),
            mode == Mode::Inline,
        )
        .await
        .map(|()| 0),
    };
    if let Some(server) = local {
        server.stop().await;
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_mode_when_not_on_a_terminal() {
        assert_eq!(mode_for(false, false, true, true), Mode::FullScreen);
        assert_eq!(mode_for(false, true, true, true), Mode::Inline);
        assert_eq!(mode_for(false, false, false, true), Mode::Plain);
        assert_eq!(mode_for(false, true, true, false), Mode::Plain);
        assert_eq!(mode_for(true, false, true, true), Mode::Plain);
    }
}
