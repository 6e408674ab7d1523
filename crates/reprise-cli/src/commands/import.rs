//! `reprise import PATH…`: sessions of Claude Code, Codex and opencode as new runs.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;
use reprise_import::{ImportError, ImportedFile, Importer, Outcome, find_transcripts};
use reprise_runs::{RunCatalog, RunFolder};

use crate::display::terminal::{eprint_line, visible};

/// What a whole `reprise import` did, for its closing line.
#[derive(Debug, Default)]
struct Totals {
    created: usize,
    would_create: usize,
    appended: usize,
    already: usize,
    messages: u64,
    not_transcripts: usize,
    empty: usize,
    subagents: usize,
    failed: usize,
}

fn describe(file: &ImportedFile) -> String {
    let what = match &file.outcome {
        Outcome::Created { run } => format!("created run {}", name_of(run)),
        Outcome::WouldCreate { name } => format!("would create run {name}"),
        Outcome::AlreadyImported { run } => format!("already imported as run {}", name_of(run)),
        Outcome::Appended {
            run,
            entries,
            dry_run: false,
        } => format!("appended {entries} new entries to run {}", name_of(run)),
        Outcome::Appended {
            run,
            entries,
            dry_run: true,
        } => format!("would append {entries} new entries to run {}", name_of(run)),
    };
    let mut text = format!(
        "{what} from {} ({} session {}",
        file.path.display(),
        file.tool.as_str(),
        file.session_id
    );
    if !file.subagents.is_empty() {
        text.push_str(&format!(
            ", {}",
            reprise_chat::text::counted(file.subagents.len(), "subagent", "subagents")
        ));
    }
    text.push_str(")\n");
    if !matches!(file.outcome, Outcome::AlreadyImported { .. }) {
        text.push_str(&format!("  {}\n", file.report));
        for remark in &file.report.remarks {
            text.push_str(&format!("  note: {remark}\n"));
        }
        if let Some(why) = &file.not_appended {
            text.push_str(&format!(
                "  note: imported before, but not appended to that run: {why}\n"
            ));
        }
    }
    text
}

fn name_of(run: &Path) -> String {
    run.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| run.display().to_string())
}

/// Imports `file` with `importer`, and takes the run it wrote into `runs`.
async fn import_into(
    runs: &dyn RunCatalog,
    importer: &mut Importer,
    file: &Path,
    dry_run: bool,
) -> Result<ImportedFile> {
    let mut imported = importer.import_file(file, dry_run).await?;
    if let Outcome::Created { run } = &imported.outcome {
        let taken = runs.take_in(RunFolder::open(run)?).await?;
        imported.outcome = Outcome::Created { run: taken.dir };
    }
    Ok(imported)
}

/// Imports every transcript found in `paths` into the runs of `runs` (or, with
/// `dry_run`, says what it would create). Returns the exit code: 1 when a file named
/// on the command line could not be imported.
pub async fn import(
    runs: &dyn RunCatalog,
    paths: &[PathBuf],
    dry_run: bool,
    out: &mut dyn Write,
) -> Result<i32> {
    let mut importer = Importer::new(&runs.import_dir())?;
    let mut totals = Totals::default();
    for path in paths {
        let files = find_transcripts(path)?;
        // A folder holds other files too (settings, histories): those are counted,
        // not errors.
        let walking = path.is_dir();
        let count = files.len();
        for (index, file) in files.iter().enumerate() {
            if walking && count > 1 {
                eprint_line(&format!("[{}/{count}] {}", index + 1, file.display()));
            }
            match import_into(runs, &mut importer, file, dry_run).await {
                Ok(imported) => {
                    match imported.outcome {
                        Outcome::Created { .. } => totals.created += 1,
                        Outcome::WouldCreate { .. } => totals.would_create += 1,
                        Outcome::AlreadyImported { .. } => totals.already += 1,
                        Outcome::Appended { .. } => totals.appended += 1,
                    }
                    if !matches!(imported.outcome, Outcome::AlreadyImported { .. }) {
                        totals.messages += imported.report.messages;
                    }
                    out.write_all(visible(&describe(&imported)).as_bytes())?;
                }
                Err(error) => {
                    let skipped = match error.downcast_ref::<ImportError>() {
                        Some(ImportError::Unrecognized { .. }) if walking => {
                            totals.not_transcripts += 1;
                            Some("not a transcript")
                        }
                        Some(ImportError::Empty { .. }) if walking => {
                            totals.empty += 1;
                            Some("no conversation in it")
                        }
                        Some(ImportError::Subagent { .. }) => {
                            totals.subagents += 1;
                            None
                        }
                        // An import error's text says all; a catalog's has its causes.
                        Some(error) => {
                            totals.failed += 1;
                            eprint_line(&format!("reprise: {error}"));
                            continue;
                        }
                        None => {
                            totals.failed += 1;
                            eprint_line(&format!("reprise: {error:#}"));
                            continue;
                        }
                    };
                    let line = match skipped {
                        Some(why) => format!("skipped {}: {why}\n", file.display()),
                        None => format!("skipped {error}\n"),
                    };
                    out.write_all(visible(&line).as_bytes())?;
                }
            }
        }
    }
    let mut summary = if dry_run {
        format!(
            "dry run: would create {} ({}); nothing written",
            reprise_chat::text::counted(totals.would_create, "run", "runs"),
            reprise_chat::text::counted(totals.messages, "message", "messages")
        )
    } else {
        format!(
            "imported {} ({})",
            reprise_chat::text::counted(totals.created, "session", "sessions"),
            reprise_chat::text::counted(totals.messages, "message", "messages")
        )
    };
    if totals.appended > 0 {
        summary.push_str(&format!(
            "; {} {} to their runs",
            reprise_chat::text::counted(totals.appended, "grown session", "grown sessions"),
            if dry_run {
                "would be appended"
            } else {
                "appended"
            }
        ));
    }
    if totals.already > 0 {
        summary.push_str(&format!("; {} already imported", totals.already));
    }
    let counted_clauses = [
        (
            totals.not_transcripts,
            "file is not a transcript",
            "files are not transcripts",
        ),
        (
            totals.empty,
            "transcript holds no conversation",
            "transcripts hold no conversation",
        ),
        (
            totals.subagents,
            "subagent transcript imported with its session",
            "subagent transcripts imported with their sessions",
        ),
    ];
    for (count, one, many) in counted_clauses {
        if count > 0 {
            summary.push_str(&format!(
                "; {}",
                reprise_chat::text::counted(count, one, many)
            ));
        }
    }
    if totals.failed > 0 {
        summary.push_str(&format!("; {} failed", totals.failed));
    }
    summary.push('\n');
    out.write_all(visible(&summary).as_bytes())?;
    Ok(if totals.failed > 0 { 1 } else { 0 })
}
