//! `reprise export RUN --format markdown|html|json [-o FILE]`.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use reprise_runs::{RunCatalog, RunRecord};
use serde_json::{Map, Value, json};

use crate::export::{Masker, markdown, view_of};

/// What `reprise export` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// Markdown that reads well on GitHub.
    #[value(alias = "md")]
    Markdown,
    /// One self-contained HTML file: no network, no scripts.
    Html,
    /// Every entry, as JSON.
    Json,
}

/// The run as JSON: `session.json` and every entry of the conversation and of each
/// subagent, strings masked unless `mask` keeps them.
pub fn json_export(run: &RunRecord, mask: &Masker) -> Result<String> {
    let entries = |entries: &[reprise_session::Entry]| -> Result<Value> {
        Ok(Value::Array(
            entries
                .iter()
                .map(|entry| serde_json::to_value(entry).map(|value| mask.record_value(value)))
                .collect::<Result<_, _>>()?,
        ))
    };
    let mut subagents = Map::new();
    for (name, list) in &run.subagents {
        subagents.insert(name.clone(), entries(list)?);
    }
    let value = json!({
        "run": run.name,
        "session": mask.record_value(run.session.clone()),
        "entries": entries(&run.main)?,
        "subagents": subagents,
    });
    let mut text = serde_json::to_string_pretty(&value)?;
    text.push('\n');
    Ok(text)
}

/// Renders the run named `spec` (a name, a unique prefix, `last`, or its title) in
/// `format`.
pub async fn render(
    runs: &dyn RunCatalog,
    spec: &str,
    format: ExportFormat,
    mask: &Masker,
) -> Result<String> {
    let folder = runs.find(spec).await?;
    let run = runs.record(&folder).await?;
    let title = runs.labels(&folder).await?.and_then(|labels| labels.title);
    for warning in &run.warnings {
        crate::display::terminal::eprint_line(&format!("warning: {warning}"));
    }
    Ok(match format {
        ExportFormat::Json => json_export(&run, mask)?,
        ExportFormat::Markdown => markdown::render(&view_of(&run, title.as_deref(), mask)),
        ExportFormat::Html => crate::export::html::render(&view_of(&run, title.as_deref(), mask)),
    })
}

/// `reprise export`: writes the run to `output` (created 0600: with `--no-redact`
/// it holds secrets) or to `out`.
pub async fn export(
    runs: &dyn RunCatalog,
    spec: &str,
    format: ExportFormat,
    output: Option<&Path>,
    redact: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let text = render(runs, spec, format, &Masker::new(redact)).await?;
    match output {
        Some(path) => write_private(path, &text)?,
        None => {
            // The terminal would run escape sequences a message holds.
            let shown = if format == ExportFormat::Json {
                crate::display::terminal::visible_json(&text)
            } else {
                crate::display::terminal::visible(&text)
            };
            out.write_all(shown.as_bytes())?;
        }
    }
    Ok(())
}

/// Writes `text` to `path`, created readable by its owner only: an export or a
/// page of usage can hold what the conversations said.
pub(crate) fn write_private(path: &Path, text: &str) -> Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}
