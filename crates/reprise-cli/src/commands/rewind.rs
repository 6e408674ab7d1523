//! `reprise rewind RUN --to N|ENTRY [--files-only | --conversation-only] [--dry-run]
//! [--yes]` and `reprise rewind RUN --undo`: a run's conversation and working folder
//! taken back to just before one of the person's messages, from a script.

use std::io::{BufRead, Write};
use std::path::Path;

use anyhow::{Result, bail};
use reprise_runs::RunCatalog;
use reprise_session::SessionKey;

use crate::chat::checkpoints::{capture_options, open_store, run_workdir};
use crate::chat::rewind::{
    RewindPart, carry_out, plan_rewind, plan_undo, preview_with_folder, restore_preview,
};
use crate::config::Settings;
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
    let run = runs.find(&request.run)?;
    let Some(session_id) = run.session_id.as_deref() else {
        bail!("run {} has no conversation to rewind", run.name());
    };
    let store = runs.store_for(&run, &reprise_redact::Redactor::new().with_env_secrets());
    // A run open in a chat is not rewound under it.
    let lock = match store.lock(session_id).await {
        Ok(lock) => lock,
        Err(error @ reprise_session::StoreError::Locked { .. }) => {
            return Err(anyhow::Error::from(error).context(format!(
                "run {} is in use; leave that chat first (or use /rewind in it)",
                run.name()
            )));
        }
        Err(error) => return Err(error.into()),
    };
    let key = SessionKey::session(session_id)?;
    let entries = store.load(&key).await?.unwrap_or_default().entries;
    let plan = if request.undo {
        plan_undo(&entries)?
    } else {
        let Some(to) = request.to.as_deref() else {
            bail!("say where to rewind to (--to N or --to ENTRY) or --undo");
        };
        plan_rewind(&entries, to, request.part)?
    };
    runs.ensure_local_folder(&run)?;
    let (workdir, not_taken) = run_workdir(&run.dir, &std::env::current_dir()?);
    if let Some(warning) = not_taken {
        eprint_line(&format!("warning: {warning}"));
    }
    let mut checkpoints = match &plan.files {
        Some(_) => {
            if !run.dir.join(reprise_checkpoint::STORE_DIR_NAME).is_dir() {
                bail!(
                    "run {} has no checkpoints of its working folder here (they are kept in \
                     the run's local folder, {}, on the machine that took them)",
                    run.name(),
                    run.dir.display()
                );
            }
            Some(open_store(&run.dir, &workdir, capture_options(settings))?)
        }
        None => None,
    };
    let preview = match (&plan.files, checkpoints.as_mut()) {
        (Some(target), Some(store)) => Some(restore_preview(store, target, &workdir)?),
        _ => None,
    };
    // File names and the recorded working folder come from outside: shown escaped.
    let text = preview_with_folder(&plan, preview.as_ref(), &workdir);
    write!(out, "{}", visible(&text))?;
    if request.dry_run {
        writeln!(out, "(dry run: nothing changed)")?;
        lock.release().await?;
        return Ok(());
    }
    if !request.yes && !confirm(ask, out)? {
        writeln!(out, "nothing changed")?;
        lock.release().await?;
        return Ok(());
    }
    let entry = carry_out(&plan, checkpoints.as_mut())?;
    store.append(&key, std::slice::from_ref(&entry)).await?;
    // Released now: in a database the lease would keep the run "in use" a while.
    lock.release().await?;
    store.close().await?;
    report_done(out, run.name(), request.undo, &workdir)
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
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

fn report_done(out: &mut dyn Write, run: &str, undo: bool, workdir: &Path) -> Result<()> {
    if undo {
        writeln!(
            out,
            "undid the last rewind of {run} ({})",
            workdir.display()
        )?;
    } else {
        writeln!(
            out,
            "rewound {run} (undo with: reprise rewind {run} --undo)"
        )?;
    }
    Ok(())
}
