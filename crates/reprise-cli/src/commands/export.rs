//! `reprise export RUN --format markdown|html|json [-o FILE]`.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use reprise_chat::view::stream::ItemStream;
use reprise_chat::view::{Facts, FactsReader};
use reprise_runs::{RecordReader, RunCatalog, RunRecord};
use reprise_session::LoadWarning;
use serde_json::{Map, Value, json};

use crate::export::{HeadFacts, Masker, RunHead, markdown, shown_of, view_of, write_item};

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
    let mut file;
    let mut sink = match output {
        Some(path) => {
            file = create_private(path)?;
            Sink::new(&mut file, None, Some(path))
        }
        None => Sink::new(out, Some(format == ExportFormat::Json), None),
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
    for warning in &warnings {
        crate::display::terminal::eprint_line(&format!("warning: {warning}"));
    }
    Ok(())
}

/// Text is written out once this much is held.
const FLUSH_AT: usize = 1 << 20;

/// Where an export goes: a file as it is, or the terminal made safe (as JSON when
/// `terminal_json`, else as text).
struct Sink<'o> {
    out: &'o mut dyn Write,
    terminal_json: Option<bool>,
    path: Option<&'o Path>,
    text: String,
}

impl<'o> Sink<'o> {
    fn new(out: &'o mut dyn Write, terminal_json: Option<bool>, path: Option<&'o Path>) -> Self {
        Sink {
            out,
            terminal_json,
            path,
            text: String::with_capacity(FLUSH_AT + FLUSH_AT / 4),
        }
    }

    /// Writes `text` out when it is long, and empties it. Text ending in a carriage
    /// return waits: with a line break after it, it is a line end the terminal
    /// sanitizer drops.
    fn flush_full(&mut self, text: &mut String) -> Result<()> {
        if text.len() >= FLUSH_AT && !text.ends_with('\r') {
            self.write(text)?;
            text.clear();
        }
        Ok(())
    }

    fn write(&mut self, text: &str) -> Result<()> {
        let shown = match self.terminal_json {
            Some(true) => crate::display::terminal::visible_json(text),
            Some(false) => crate::display::terminal::visible(text),
            None => std::borrow::Cow::Borrowed(text),
        };
        let written = self.out.write_all(shown.as_bytes());
        match self.path {
            Some(path) => written.with_context(|| format!("cannot write {}", path.display())),
            None => Ok(written?),
        }
    }

    fn finish(mut self) -> Result<()> {
        let text = std::mem::take(&mut self.text);
        self.write(&text)?;
        self.out.flush()?;
        Ok(())
    }
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
    let mut entries = reader.entries(subagent);
    while let Some(entry) = entries.next().await {
        facts.push(&entry);
        if let Some((head, mask)) = head.as_mut() {
            head.push(&entry, mask);
        }
    }
    entries.finish().await?;
    let mut facts = facts.finish();
    if facts.wants_targets() {
        let mut entries = reader.entries(subagent);
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
    let mut entries = reader.entries(subagent);
    while let Some(entry) = entries.next().await {
        items.push(entry, &mut emit);
    }
    items.finish(&mut emit);
    if let Some(error) = failed {
        return Err(error);
    }
    Ok(entries.finish().await?)
}

/// Writes the run as JSON ([`json_export`]'s text) as its entries are read;
/// returns the warnings of the reading.
async fn stream_json(
    reader: &RecordReader,
    mask: &Masker,
    sink: &mut Sink<'_>,
) -> Result<Vec<LoadWarning>> {
    let mut text = std::mem::take(&mut sink.text);
    text.push_str("{\n  \"run\": ");
    text.push_str(&serde_json::to_string(&reader.name)?);
    text.push_str(",\n  \"session\": ");
    text.push_str(&indented(&mask.record_value(reader.session.clone()))?);
    text.push_str(",\n  \"entries\": ");
    let mut warnings = json_entries(reader, None, mask, sink, &mut text, "  ").await?;
    text.push_str(",\n  \"subagents\": ");
    if reader.subagents.is_empty() {
        text.push_str("{}");
    } else {
        text.push('{');
        for (index, name) in reader.subagents.iter().enumerate() {
            text.push_str(if index == 0 { "\n    " } else { ",\n    " });
            text.push_str(&serde_json::to_string(name)?);
            text.push_str(": ");
            warnings.extend(json_entries(reader, Some(name), mask, sink, &mut text, "    ").await?);
        }
        text.push_str("\n  }");
    }
    text.push_str("\n}\n");
    sink.text = text;
    Ok(warnings)
}

/// The entries of a transcript as a JSON array, laid out as `to_string_pretty`
/// lays it out at `indent`.
async fn json_entries(
    reader: &RecordReader,
    subagent: Option<&str>,
    mask: &Masker,
    sink: &mut Sink<'_>,
    text: &mut String,
    indent: &str,
) -> Result<Vec<LoadWarning>> {
    let mut entries = reader.entries(subagent);
    let mut any = false;
    let inner = format!("{indent}  ");
    while let Some(entry) = entries.next().await {
        text.push_str(if any { ",\n" } else { "[\n" });
        any = true;
        text.push_str(&inner);
        let value = mask.record_value(serde_json::to_value(&entry)?);
        // Strings hold their line breaks escaped: every one here is the layout's.
        text.push_str(&serde_json::to_string_pretty(&value)?.replace('\n', &format!("\n{inner}")));
        sink.flush_full(text)?;
    }
    if any {
        text.push('\n');
        text.push_str(indent);
        text.push(']');
    } else {
        text.push_str("[]");
    }
    Ok(entries.finish().await?)
}

/// A value as `to_string_pretty` lays it out one level in.
fn indented(value: &Value) -> Result<String> {
    Ok(serde_json::to_string_pretty(value)?.replace('\n', "\n  "))
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

/// Writes `text` to `path`, created readable by its owner only: an export or a
/// page of usage can hold what the conversations said.
pub(crate) fn write_private(path: &Path, text: &str) -> Result<()> {
    create_private(path)?
        .write_all(text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}
