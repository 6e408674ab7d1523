//! `reprise export RUN --format markdown|html|json [-o FILE]`.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use reprise_chat::view::stream::ItemStream;
use reprise_chat::view::{Facts, FactsReader};
use reprise_runs::{RecordReader, RunCatalog, RunRecord};
use reprise_session::LoadWarning;
use serde_json::{Map, Value, json};

use crate::export::json::stream_json;
use crate::export::sink::Sink;
use crate::export::{HeadFacts, Masker, RunHead, markdown, shown_of, write_item};

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
/// subagent, strings masked unless `mask` keeps them; of a run held whole, as
/// `reprise export --format json` writes one as it reads it.
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

/// `reprise export`: writes the run to `output` (created 0600: with `--no-redact`
/// it holds secrets) or to `out`. The run is read as it is written, a few entries at
/// a time: the Markdown and the HTML read each transcript twice (first for what
/// its items need from further on, and for the heading), the JSON once.
pub async fn export(
    runs: &dyn RunCatalog,
    spec: &str,
    format: ExportFormat,
    output: Option<&Path>,
    redact: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let mask = Masker::new(redact);
    let folder = runs.find(spec).await?;
    let reader = runs.record_reader(&folder).await?;
    let title = runs.labels(&folder).await?.and_then(|labels| labels.title);
    let mut staged = output.map(Staged::open).transpose()?;
    let mut sink = match (staged.as_mut(), output) {
        (Some(Staged::Beside(file)), Some(path)) => Sink::new(file, None, Some(path)),
        (Some(Staged::Direct(file)), Some(path)) => Sink::new(file, None, Some(path)),
        _ => Sink::new(out, Some(format == ExportFormat::Json), None),
    };
    let warnings = match format {
        ExportFormat::Json => stream_json(&reader, &mask, &mut sink).await?,
        ExportFormat::Markdown => {
            stream_page(
                &markdown::Markdown,
                &reader,
                title.as_deref(),
                &mask,
                &mut sink,
            )
            .await?
        }
        ExportFormat::Html => {
            let page = crate::export::html::Html;
            stream_page(&page, &reader, title.as_deref(), &mask, &mut sink).await?
        }
    };
    sink.finish()?;
    if let (Some(Staged::Beside(file)), Some(path)) = (staged, output) {
        file.persist(path)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    for warning in &warnings {
        crate::display::terminal::eprint_line(&format!("warning: {warning}"));
    }
    Ok(())
}

/// Writes the run through `page`: the heading, the main conversation, each
/// subagent's; returns the warnings of the reading.
async fn stream_page(
    page: &dyn crate::export::Page,
    reader: &RecordReader,
    title: Option<&str>,
    mask: &Masker,
    sink: &mut Sink<'_>,
) -> Result<Vec<LoadWarning>> {
    let mut head = HeadFacts::default();
    let main = read_facts(reader, None, Some((&mut head, mask))).await?;
    let mut text = std::mem::take(&mut sink.text);
    page.head(
        &mut text,
        &RunHead::of(
            &reader.name,
            &reader.session,
            title,
            &head,
            reader.subagents.len(),
            mask,
        ),
    );
    let mut warnings = write_conversation(page, reader, None, &main, mask, sink, &mut text).await?;
    for name in &reader.subagents {
        let facts = read_facts(reader, Some(name), None).await?;
        page.subagent_start(&mut text, name);
        warnings.extend(
            write_conversation(page, reader, Some(name), &facts, mask, sink, &mut text).await?,
        );
        page.subagent_end(&mut text);
    }
    page.tail(&mut text);
    sink.text = text;
    Ok(warnings)
}

/// The facts of a transcript ([`Facts`]), read from it once (twice with rewinds);
/// with `head`, what the heading says of it too.
async fn read_facts(
    reader: &RecordReader,
    subagent: Option<&str>,
    mut head: Option<(&mut HeadFacts, &Masker)>,
) -> Result<Facts> {
    let mut facts = FactsReader::default();
    let mut entries = reader.view_entries(subagent);
    while let Some(entry) = entries.next().await {
        facts.push(&entry);
        if let Some((head, mask)) = head.as_mut() {
            head.push(&entry, mask);
        }
    }
    entries.finish().await?;
    let mut facts = facts.finish();
    if facts.wants_targets() {
        let mut entries = reader.view_entries(subagent);
        while let Some(entry) = entries.next().await {
            facts.push_target(&entry);
        }
        entries.finish().await?;
        facts.end_targets();
    }
    Ok(facts)
}

/// Writes the items of a transcript through `page` as its entries are read.
async fn write_conversation(
    page: &dyn crate::export::Page,
    reader: &RecordReader,
    subagent: Option<&str>,
    facts: &Facts,
    mask: &Masker,
    sink: &mut Sink<'_>,
    text: &mut String,
) -> Result<Vec<LoadWarning>> {
    let mut items = ItemStream::new(facts);
    let mut writer = page.items(text, subagent.is_some());
    let mut failed = None;
    let mut emit = |item: reprise_chat::view::Item<'_>| {
        write_item(&shown_of(item, mask), &mut *writer);
        if failed.is_none()
            && let Err(error) = sink.flush_full(writer.out())
        {
            failed = Some(error);
        }
    };
    let mut entries = reader.view_entries(subagent);
    while let Some(entry) = entries.next().await {
        items.push(entry, &mut emit);
    }
    items.finish(&mut emit);
    if let Some(error) = failed {
        return Err(error);
    }
    Ok(entries.finish().await?)
}

/// Creates `path` readable by its owner only: an export or a page of usage can
/// hold what the conversations said.
fn create_private(path: &Path) -> Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Where an export to a file is written as it is read.
enum Staged {
    /// A new file beside a regular file (or none) at the path, readable by its owner
    /// only, renamed over it once whole: an export that fails half-way leaves what
    /// was there before (and the new file is removed).
    Beside(tempfile::NamedTempFile),
    /// The path itself, when it names something other than a regular file (a link,
    /// a terminal, a pipe, `/dev/stdout`), which a rename would replace.
    Direct(std::fs::File),
}

impl Staged {
    fn open(path: &Path) -> Result<Staged> {
        // A link is written through, as it always was.
        match std::fs::symlink_metadata(path) {
            Ok(meta) if !meta.is_file() => return Ok(Staged::Direct(create_private(path)?)),
            _ => {}
        }
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        tempfile::Builder::new()
            .prefix(".reprise-export-")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .tempfile_in(dir)
            .map(Staged::Beside)
            .with_context(|| format!("cannot write {}", path.display()))
    }
}

/// Writes `text` to `path`, created readable by its owner only: an export or a
/// page of usage can hold what the conversations said.
pub(crate) fn write_private(path: &Path, text: &str) -> Result<()> {
    create_private(path)?
        .write_all(text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}
