//! `reprise rewind RUN --to N|ENTRY [--files-only | --conversation-only] [--dry-run]
//! [--yes]` and `reprise rewind RUN --undo`: a run's conversation and working folder
//! taken back to just before one of the person's messages, from a script;
//! `reprise rewind RUN --finish`: a restore a kill cut finished.

use std::io::{BufRead, Write};
use std::path::Path;

use anyhow::{Result, bail};
use reprise_chat::config::Settings;
use reprise_chat::rewind::RewindPart;
use reprise_chat::rewind_run::{RunRewindTarget, prepare_run_rewind};
use reprise_runs::RunCatalog;

use crate::display::terminal::{eprint_line, visible};

/// What the command line asked for.
#[derive(Clone, Debug)]
pub struct RewindRequest {
    /// The run.
    pub run: String,
    /// The message to go back to (`None` with `undo`).
    pub to: Option<String>,
    /// What is rewound.
    pub part: RewindPart,
    /// Only print what would be done.
    pub dry_run: bool,
    /// Do not ask.
    pub yes: bool,
    /// Undo the latest rewind.
    pub undo: bool,
    /// Finish the restore a crash cut.
    pub finish: bool,
    /// Restore the nearest earlier checkpoint where the one asked for is missing.
    pub nearest_earlier: bool,
}

/// The person's terminal, for the question.
pub struct Ask<'a> {
    /// Where the answer is read.
    pub input: &'a mut dyn BufRead,
    /// Whether that is a terminal.
    pub terminal: bool,
}

/// Runs `reprise rewind`.
pub async fn rewind(
    runs: &dyn RunCatalog,
    settings: &Settings,
    request: &RewindRequest,
    ask: Ask<'_>,
    out: &mut dyn Write,
) -> Result<()> {
    let target = RunRewindTarget {
        to: request.to.as_deref(),
        part: request.part,
        undo: request.undo,
        finish: request.finish,
        nearest_earlier: request.nearest_earlier,
    };
    let prepared = prepare_run_rewind(runs, settings, &request.run, target, &mut |warning| {
        eprint_line(&format!("warning: {warning}"));
    })
    .await?;
    // File names and the recorded working folder come from outside: shown escaped.
    write!(out, "{}", visible(&prepared.preview))?;
    if request.dry_run {
        writeln!(out, "(dry run: nothing changed)")?;
        prepared.let_go().await?;
        return Ok(());
    }
    if !request.yes && !confirm(ask, out)? {
        writeln!(out, "nothing changed")?;
        prepared.let_go().await?;
        return Ok(());
    }
    let run = prepared.run_name().to_owned();
    let workdir = prepared.workdir.clone();
    let left = prepared.carry_out().await?;
    report_done(out, &run, request, &workdir)?;
    if let Some(left) = left {
        writeln!(out, "{}", visible(&left))?;
    }
    Ok(())
}

fn confirm(ask: Ask<'_>, out: &mut dyn Write) -> Result<bool> {
    if !ask.terminal {
        bail!(
            "not on a terminal: add --yes to rewind without being asked (or --dry-run to see what it would do)"
        );
    }
    write!(out, "go ahead? [y/N] ")?;
    out.flush()?;
    let mut answer = String::new();
    ask.input.read_line(&mut answer)?;
    Ok(reprise_chat::answers::is_yes(&answer))
}

fn report_done(
    out: &mut dyn Write,
    run: &str,
    request: &RewindRequest,
    workdir: &Path,
) -> Result<()> {
    if request.finish {
        writeln!(
            out,
            "finished the cut restore of {run} in {} (undo with: reprise rewind {run} --undo)",
            visible(&workdir.display().to_string())
        )?;
    } else if request.undo {
        writeln!(
            out,
            "undid the last rewind of {run} ({})",
            visible(&workdir.display().to_string())
        )?;
    } else {
        writeln!(
            out,
            "rewound {run} (undo with: reprise rewind {run} --undo)"
        )?;
    }
    Ok(())
}
