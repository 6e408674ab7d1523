//! `reprise runs | show | fork | rm`: the runs, for people and scripts.

use std::io::{BufRead, Write};

use anyhow::{Result, bail};
use reprise_chat::subagents::PastCall;
use reprise_runs::{ConversationMessage, RunCatalog, RunFolder};
use reprise_session::Role;
use serde_json::json;

use crate::display::terminal::{eprint_line, push_json_string, visible, visible_json};
use reprise_chat::text::{arguments_preview, one_line, shorten, show_date_in};

/// `reprise runs`: a table (date, messages, last message, run), or JSON. Unless
/// `all`, the newest runs of the catalog's [listing page](RunCatalog::listing_page);
/// a note on stderr says when older runs were left out.
pub async fn runs(
    source: &dyn RunCatalog,
    json: bool,
    all: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let list = match source.listing_page().filter(|_| !all) {
        None => source.list().await?,
        Some(page) => {
            let (list, more) = source.list_newest(page).await?;
            if more {
                eprint_line(&format!(
                    "note: the newest {page} runs; `reprise runs --all` lists every one"
                ));
            }
            list
        }
    };
    for warning in &list.warnings {
        eprint_line(&format!(
            "warning: {}: {}",
            warning.path.display(),
            warning.message
        ));
    }
    let dirs: Vec<&std::path::Path> = list.runs.iter().map(|run| run.dir.as_path()).collect();
    let cuts = reprise_chat::checkpoints::restore_cuts(&dirs);
    for (run, cut) in list.runs.iter().zip(cuts) {
        if cut {
            eprint_line(&reprise_chat::checkpoints::restore_cut_note(run.name()));
        }
    }
    if json {
        return write_runs_json(out, &list.runs);
    }
    if list.runs.is_empty() {
        let line = format!("no runs with a conversation in {}\n", source.place());
        out.write_all(visible(&line).as_bytes())?;
        return Ok(());
    }
    // Built as one string: 10,000 rows through a locked, buffered writer in one go.
    // What a run holds is untrusted: the whole text goes through the sanitizer.
    let tz = jiff::tz::TimeZone::system();
    let mut text = String::with_capacity(list.runs.len() * 100);
    text.push_str(&format!(
        "{:<16}  {:>8}  {:<48}  {}\n",
        "DATE", "MESSAGES", "TITLE", "RUN"
    ));
    for run in &list.runs {
        // The title, else the first message; then the tags.
        let mut shown = run.display_title(usize::MAX);
        for tag in &run.tags {
            shown.push_str(" #");
            shown.push_str(tag);
        }
        // Escaped before shortening, so the column is as wide as what is shown.
        let last = shorten(&one_line(&visible(&shown)), 48);
        text.push_str(&format!(
            "{:<16}  {:>8}  {:<48}  {}\n",
            show_date_in(run.updated_at, &tz),
            run.message_count,
            last,
            run.name()
        ));
    }
    out.write_all(visible(&text).as_bytes())?;
    Ok(())
}

/// `reprise runs --json`: the rows as [`write_json`](crate::display::terminal::write_json) lays out a JSON array of
/// objects (`run`, `dir`, `sessionId`, `updatedAt`, `messages`, `title`, `shownAs`,
/// `tags`, `firstMessage`, `lastMessage`), made safe for a terminal, written by hand
/// a megabyte at a time: 100,000 runs built as JSON values and pretty-printed by
/// serde took a fifth of the listing's time.
fn write_runs_json(out: &mut dyn Write, runs: &[reprise_runs::RunSummary]) -> Result<()> {
    if runs.is_empty() {
        out.write_all(b"[]\n")?;
        return Ok(());
    }
    let mut json = Vec::with_capacity(FLUSH_AT + FLUSH_AT / 4);
    json.extend_from_slice(b"[\n");
    let optional = |json: &mut Vec<u8>, text: Option<&str>| match text {
        Some(text) => push_json_string(json, text),
        None => json.extend_from_slice(b"null"),
    };
    // Reused by every row, so that no row allocates for its time.
    let mut updated_at = String::with_capacity(32);
    for (index, run) in runs.iter().enumerate() {
        if index > 0 {
            json.extend_from_slice(b",\n");
        }
        json.extend_from_slice(b"  {\n    \"run\": ");
        push_json_string(&mut json, run.name());
        json.extend_from_slice(b",\n    \"dir\": ");
        let dir = run
            .dir
            .to_str()
            .ok_or_else(|| anyhow::anyhow!("path contains invalid UTF-8 characters"))?;
        push_json_string(&mut json, dir);
        json.extend_from_slice(b",\n    \"sessionId\": ");
        push_json_string(&mut json, &run.session_id);
        json.extend_from_slice(b",\n    \"updatedAt\": ");
        updated_at.clear();
        std::fmt::Write::write_fmt(&mut updated_at, format_args!("{}", run.updated_at))?;
        push_json_string(&mut json, &updated_at);
        json.extend_from_slice(b",\n    \"messages\": ");
        write!(json, "{}", run.message_count)?;
        json.extend_from_slice(b",\n    \"title\": ");
        optional(&mut json, run.title.as_deref());
        json.extend_from_slice(b",\n    \"shownAs\": ");
        push_json_string(&mut json, &run.display_title(80));
        json.extend_from_slice(b",\n    \"tags\": ");
        if run.tags.is_empty() {
            json.extend_from_slice(b"[]");
        } else {
            json.push(b'[');
            for (index, tag) in run.tags.iter().enumerate() {
                json.extend_from_slice(if index == 0 {
                    b"\n      "
                } else {
                    b",\n      "
                });
                push_json_string(&mut json, tag);
            }
            json.extend_from_slice(b"\n    ]");
        }
        json.extend_from_slice(b",\n    \"firstMessage\": ");
        optional(&mut json, run.first_message.as_deref());
        json.extend_from_slice(b",\n    \"lastMessage\": ");
        optional(&mut json, run.last_message.as_deref());
        json.extend_from_slice(b"\n  }");
        if json.len() >= FLUSH_AT {
            out.write_all(&json)?;
            json.clear();
        }
    }
    json.extend_from_slice(b"\n]\n");
    out.write_all(&json)?;
    Ok(())
}

/// How `reprise show` prints.
#[derive(Clone, Copy, Debug, Default)]
pub struct ShowOptions {
    /// As JSON.
    pub json: bool,
    /// With the tool calls and their results.
    pub tools: bool,
    /// With the subagents' work under the calls that started it.
    pub subagents: bool,
}

/// A subagent call as `show --json --subagents` prints it.
fn past_call_json(call: &reprise_chat::subagents::PastCall) -> serde_json::Value {
    use reprise_chat::subagents::{PastResult, PastStep};
    let result = |result: &Option<PastResult>| {
        result
            .as_ref()
            .map(|r| json!({"content": r.content, "isError": r.is_error}))
    };
    let steps: Vec<_> = call
        .steps
        .iter()
        .map(|step| match step {
            PastStep::Text(text) => json!({"role": "assistant", "text": text}),
            PastStep::Tool {
                id,
                name,
                arguments,
                result: step_result,
            } => json!({
                "role": "tool_call", "id": id, "name": name, "arguments": arguments,
                "result": result(step_result),
            }),
        })
        .collect();
    json!({
        "role": "subagent",
        "agent": call.agent,
        "id": call.id,
        "task": reprise_chat::subagents::task_of(&call.arguments),
        "steps": steps,
        "result": result(&call.result),
    })
}

/// `reprise show RUN`: the conversation as text, or `read_conversation` as JSON;
/// with `subagents`, each subagent call with its work where it was made.
///
/// Each message is written as it is read: a long conversation goes through in a
/// few megabytes. Warnings about the transcript come after it.
pub async fn show(
    source: &dyn RunCatalog,
    spec: &str,
    options: ShowOptions,
    out: &mut dyn Write,
) -> Result<()> {
    let run = source.find(spec).await?;
    print_repairs(&run);
    if reprise_chat::checkpoints::restore_cut(&run.dir) {
        eprint_line(&reprise_chat::checkpoints::restore_cut_note(run.name()));
    }
    // A rewind's marks need the whole conversation: the entry comes after what
    // it took out of the model's view.
    if options.tools || reprise_runs::may_hold_rewinds(&run) {
        return show_entries(source, &run, options, out).await;
    }
    let calls = if options.subagents {
        reprise_chat::subagents::past_calls(source, &run).await?
    } else {
        Vec::new()
    };
    let warnings = if options.json {
        stream_shown(source, &run, &calls, ConversationJson::new(out)).await?
    } else {
        stream_shown(source, &run, &calls, ConversationText::new(out)).await?
    };
    for warning in &warnings {
        eprint_line(&format!("warning: {warning}"));
    }
    Ok(())
}

/// Writes the conversation of `run` through `writer` as it is read, each of
/// `calls` after the message it followed; returns the warnings about the transcript.
async fn stream_shown(
    source: &dyn RunCatalog,
    run: &RunFolder,
    calls: &[PastCall],
    mut writer: impl StreamedShow,
) -> Result<Vec<reprise_session::LoadWarning>> {
    // The calls made after `shown` messages, in order.
    let calls_after = |shown: usize| calls.iter().filter(move |call| call.after_shown == shown);
    for call in calls_after(0) {
        writer.push_past_call(call)?;
    }
    let mut shown = 0;
    let mut messages = source.stream_conversation(run).await?;
    while let Some(message) = messages.next().await {
        writer.push_message(&message);
        shown += 1;
        for call in calls_after(shown) {
            writer.push_past_call(call)?;
        }
    }
    let warnings = messages.finish().await?;
    writer.end()?;
    Ok(warnings)
}

/// What `show` writes a conversation through as it is read: its text or its JSON.
trait StreamedShow {
    /// A message.
    fn push_message(&mut self, message: &ConversationMessage);
    /// A subagent call with its work.
    fn push_past_call(&mut self, call: &PastCall) -> Result<()>;
    /// Writes what is still held.
    fn end(self) -> Result<()>;
}

impl StreamedShow for ConversationText<'_> {
    fn push_message(&mut self, message: &ConversationMessage) {
        self.push(message);
    }

    fn push_past_call(&mut self, call: &PastCall) -> Result<()> {
        self.push_call(&call.full_text());
        Ok(())
    }

    fn end(self) -> Result<()> {
        self.finish()
    }
}

impl StreamedShow for ConversationJson<'_> {
    fn push_message(&mut self, message: &ConversationMessage) {
        self.push(message);
    }

    fn push_past_call(&mut self, call: &PastCall) -> Result<()> {
        self.push_row(&past_call_json(call))
    }

    fn end(self) -> Result<()> {
        self.finish()
    }
}

/// `show` of the conversation's items: with `tools`, each call after the reply that
/// made it (`⚙ name arguments`), its result under it (`↳` the first line, `✗` for a
/// failure), as the chat draws them; with `subagents`, a call to a subagent with all
/// its work instead. Arguments and results pass the redactor. What a rewind took
/// out of the model's view is marked, and each rewind says what it did.
///
/// Without `subagents` the conversation is read twice as it goes (first for what
/// its items need from further on), a few entries held at a time; with them, whole.
async fn show_entries(
    source: &dyn RunCatalog,
    run: &RunFolder,
    options: ShowOptions,
    out: &mut dyn Write,
) -> Result<()> {
    let redactor = reprise_redact::Redactor::new().with_env_secrets();
    let mut writer = if options.json {
        ShowWriter::Json(ConversationJson::new(out))
    } else {
        ShowWriter::Text(ConversationText::new(out))
    };
    let mut failed = None;
    let warnings = if options.subagents {
        let loaded = source.entries(run, None).await?.unwrap_or_default();
        let calls = reprise_chat::subagents::past_calls_of(source, run, &loaded.entries).await?;
        let delegated: std::collections::HashMap<&str, reprise_chat::subagents::PastCall> = calls
            .iter()
            .map(|call| (call.id.as_str(), call.redacted(&redactor)))
            .collect();
        for item in reprise_chat::view::items_of(&loaded.entries) {
            rows_of_item(item, options, &delegated, &redactor, &mut |row| {
                if failed.is_none() {
                    failed = writer.write(&row).err();
                }
            });
        }
        loaded.warnings
    } else {
        let facts = read_facts(source, run).await?;
        let delegated = std::collections::HashMap::new();
        let mut items = reprise_chat::view::stream::ItemStream::new(&facts);
        let mut emit = |item: reprise_chat::view::Item<'_>| {
            rows_of_item(item, options, &delegated, &redactor, &mut |row| {
                if failed.is_none() {
                    failed = writer.write(&row).err();
                }
            });
        };
        let mut entries = source.stream_entries(run, None).await?;
        while let Some(entry) = entries.next().await {
            items.push(entry, &mut emit);
        }
        items.finish(&mut emit);
        entries.finish().await?
    };
    if let Some(error) = failed {
        return Err(error);
    }
    writer.finish()?;
    for warning in &warnings {
        eprint_line(&format!("warning: {warning}"));
    }
    Ok(())
}

/// The facts of a run's conversation ([`reprise_chat::view::Facts`]), read as it
/// goes: once, twice when it holds rewinds.
async fn read_facts(source: &dyn RunCatalog, run: &RunFolder) -> Result<reprise_chat::view::Facts> {
    let mut reader = reprise_chat::view::FactsReader::default();
    let mut entries = source.stream_entries(run, None).await?;
    while let Some(entry) = entries.next().await {
        reader.push(&entry);
    }
    entries.finish().await?;
    let mut facts = reader.finish();
    if facts.wants_targets() {
        let mut entries = source.stream_entries(run, None).await?;
        while let Some(entry) = entries.next().await {
            facts.push_target(&entry);
        }
        entries.finish().await?;
        facts.end_targets();
    }
    Ok(facts)
}

/// Hands the rows `show` prints for `item` to `push`; calls made by `delegated`
/// subagents show as their work.
fn rows_of_item(
    item: reprise_chat::view::Item<'_>,
    options: ShowOptions,
    delegated: &std::collections::HashMap<&str, reprise_chat::subagents::PastCall>,
    redactor: &reprise_redact::Redactor,
    push: &mut dyn FnMut(ShownRow),
) {
    use reprise_chat::view::ItemKind;
    let rewound = item.rewound;
    let message = |role: Role, text: String| {
        (!text.trim().is_empty()).then_some(ShownRow::Message(
            ConversationMessage { role, text },
            rewound,
        ))
    };
    match item.kind {
        ItemKind::Person(person) => {
            if let Some(row) = person
                .typed_text()
                .and_then(|text| message(Role::User, text))
            {
                push(row);
            }
        }
        ItemKind::Reply {
            message: reply,
            calls,
        } => {
            if let Some(row) = message(Role::Assistant, reply.text()) {
                push(row);
            }
            let mut results = Vec::new();
            for call in calls {
                if let Some(past) = delegated.get(call.call.id.as_str()) {
                    push(ShownRow::Subagent(past.clone(), rewound));
                    continue;
                }
                if !options.tools {
                    continue;
                }
                push(ShownRow::Call {
                    id: call.call.id.clone(),
                    name: call.call.function.name.clone(),
                    arguments: redactor.redact(&call.call.function.arguments).into_owned(),
                    rewound,
                });
                results.extend(
                    call.result
                        .map(|result| shown_result(redactor, &result, rewound)),
                );
            }
            for row in results {
                push(row);
            }
        }
        ItemKind::Result(result) if options.tools => push(shown_result(redactor, &result, rewound)),
        ItemKind::Compaction {
            marker: Some(marker),
            ..
        } => {
            if let Some(row) = message(Role::System, marker) {
                push(row);
            }
        }
        ItemKind::Rewound { messages } => {
            push(ShownRow::Mark(reprise_chat::view::rewound_line(messages)))
        }
        ItemKind::Rewind { line } => push(ShownRow::Mark(line)),
        _ => {}
    }
}

/// What `show` of the items writes its rows through: their JSON or their text.
enum ShowWriter<'o> {
    Json(ConversationJson<'o>),
    Text(ConversationText<'o>),
}

impl ShowWriter<'_> {
    fn write(&mut self, row: &ShownRow) -> Result<()> {
        match self {
            ShowWriter::Json(writer) => match row {
                ShownRow::Message(message, rewound) => writer.push_marked(message, *rewound),
                // The JSON keeps its rows: a rewound message says so itself.
                ShownRow::Mark(_) => {}
                ShownRow::Subagent(call, rewound) => {
                    writer.push_row(&marked(past_call_json(call), *rewound))?
                }
                ShownRow::Call {
                    id,
                    name,
                    arguments,
                    rewound,
                } => writer.push_row(&marked(
                    json!({"role": "tool_call", "id": id, "name": name, "arguments": arguments}),
                    *rewound,
                ))?,
                ShownRow::Result {
                    id,
                    text,
                    failed,
                    after_crash,
                    rewound,
                } => {
                    let mut row =
                        json!({"role": "tool", "id": id, "text": text, "isError": failed});
                    if let Some(mark) = after_crash {
                        row["afterCrash"] = json!(mark.as_str());
                    }
                    writer.push_row(&marked(row, *rewound))?;
                }
            },
            ShowWriter::Text(writer) => match row {
                ShownRow::Message(message, rewound) => writer.push_marked(message, *rewound),
                ShownRow::Mark(line) => writer.push_tool_line(&format!("{line}\n")),
                ShownRow::Subagent(call, rewound) => {
                    writer.push_tool_lines(&call.full_text(), *rewound)
                }
                ShownRow::Call {
                    name,
                    arguments,
                    rewound,
                    ..
                } => writer.push_tool_lines(
                    &format!("⚙ {name} {}\n", arguments_preview(arguments, str::to_owned)),
                    *rewound,
                ),
                ShownRow::Result {
                    text,
                    failed,
                    after_crash,
                    rewound,
                    ..
                } => {
                    let marker = if *failed { "✗" } else { "↳" };
                    if let Some(mark) = after_crash {
                        writer.push_tool_lines(
                            &format!("  (after a crash: {})\n", mark.describe()),
                            *rewound,
                        );
                    }
                    let first = text.lines().next().unwrap_or("");
                    let more = text.lines().count().saturating_sub(1);
                    let more = reprise_chat::text::more_lines(more);
                    writer.push_tool_lines(&format!("  {marker} {first}{more}\n"), *rewound);
                }
            },
        }
        Ok(())
    }

    fn finish(self) -> Result<()> {
        match self {
            ShowWriter::Json(writer) => writer.finish(),
            ShowWriter::Text(writer) => writer.finish(),
        }
    }
}

/// One thing `show` with the tool calls prints, in order.
enum ShownRow {
    /// What the conversation shows without the calls, and whether a rewind took
    /// it out of the model's view.
    Message(ConversationMessage, bool),
    /// A line about a rewind.
    Mark(String),
    /// A call to a subagent, with its work, and whether a rewind took it out of
    /// the model's view.
    Subagent(reprise_chat::subagents::PastCall, bool),
    /// A tool call.
    Call {
        id: String,
        name: String,
        arguments: String,
        rewound: bool,
    },
    /// A call's result.
    Result {
        id: String,
        text: String,
        failed: bool,
        /// What the resume of a turn a crash cut did with the call.
        after_crash: Option<reprise_session::AfterCrash>,
        rewound: bool,
    },
}

/// A call's result as `show` prints it, redacted.
fn shown_result(
    redactor: &reprise_redact::Redactor,
    result: &reprise_chat::view::CallResult<'_>,
    rewound: bool,
) -> ShownRow {
    ShownRow::Result {
        id: result.message.tool_call_id.clone().unwrap_or_default(),
        text: redactor.redact(&result.message.text()).into_owned(),
        failed: result.is_error,
        after_crash: result.after_crash,
        rewound,
    }
}

/// A JSON row with `"rewound": true` when a rewind took it out of the model's view.
fn marked(mut row: serde_json::Value, rewound: bool) -> serde_json::Value {
    if rewound {
        row["rewound"] = json!(true);
    }
    row
}

/// What each line of a message a rewind took out of the model's view starts with.
const REWOUND_MARK: &str = "│ ";

/// Appends each line of `lines` to `text` behind the rewind's mark.
fn push_rewound_lines(text: &mut String, lines: &str) {
    for line in lines.lines() {
        text.push_str(REWOUND_MARK);
        text.push_str(line);
        text.push('\n');
    }
}

/// Output is written a megabyte at a time.
const FLUSH_AT: usize = 1 << 20;

/// Where `show` writes. The first write that fails is kept, and nothing is written
/// after it.
struct ShowOut<'o> {
    out: &'o mut dyn Write,
    error: Option<std::io::Error>,
}

impl<'o> ShowOut<'o> {
    fn new(out: &'o mut dyn Write) -> Self {
        Self { out, error: None }
    }

    fn write(&mut self, bytes: &[u8]) {
        if self.error.is_none()
            && let Err(error) = self.out.write_all(bytes)
        {
            self.error = Some(error);
        }
    }

    fn result(self) -> Result<()> {
        match self.error {
            Some(error) => Err(error.into()),
            None => Ok(()),
        }
    }
}

/// `show`'s text: the person's lines marked, the replies as written, made safe for
/// a terminal.
struct ConversationText<'o> {
    out: ShowOut<'o>,
    text: String,
    /// Whether tool lines were written since the last message: the next message
    /// is set off from them by a blank line.
    after_tools: bool,
}

impl<'o> ConversationText<'o> {
    fn new(out: &'o mut dyn Write) -> Self {
        Self {
            out: ShowOut::new(out),
            text: String::with_capacity(FLUSH_AT + FLUSH_AT / 4),
            after_tools: false,
        }
    }

    /// Lines of a tool call or its result, as they are.
    fn push_tool_line(&mut self, lines: &str) {
        self.text.push_str(lines);
        self.after_tools = true;
        self.flush_full();
    }

    /// Lines of a tool call or its result; a rewind's mark before each when it
    /// took them out of the model's view.
    fn push_tool_lines(&mut self, lines: &str, rewound: bool) {
        if !rewound {
            return self.push_tool_line(lines);
        }
        let mut marked = String::with_capacity(lines.len() + 8);
        push_rewound_lines(&mut marked, lines);
        self.push_tool_line(&marked);
    }

    /// A message; one a rewind took out of the model's view has each line marked.
    fn push_marked(&mut self, message: &ConversationMessage, rewound: bool) {
        let start = self.text.len() + usize::from(self.after_tools);
        self.push(message);
        if rewound {
            let block = self.text.split_off(start);
            let body = block.strip_suffix("\n\n").unwrap_or(&block);
            push_rewound_lines(&mut self.text, body);
            self.text.push('\n');
        }
    }

    fn push(&mut self, message: &ConversationMessage) {
        if std::mem::take(&mut self.after_tools) {
            self.text.push('\n');
        }
        let text = &mut self.text;
        if message.role == Role::System {
            // A compaction marker: where the model's view was summarised.
            text.push_str(&message.text);
            text.push('\n');
        } else if message.role == Role::User {
            for (i, line) in message.text.lines().enumerate() {
                text.push_str(if i == 0 { "› " } else { "  " });
                text.push_str(line);
                text.push('\n');
            }
        } else {
            text.push_str(message.text.trim_end());
            text.push('\n');
        }
        text.push('\n');
        self.flush_full();
    }

    /// A subagent call with its work.
    fn push_call(&mut self, call: &str) {
        self.text.push_str(call);
        self.text.push('\n');
        self.flush_full();
    }

    fn flush_full(&mut self) {
        if self.text.len() >= FLUSH_AT {
            self.write_out();
        }
    }

    fn write_out(&mut self) {
        self.out.write(visible(&self.text).as_bytes());
        self.text.clear();
    }

    fn finish(mut self) -> Result<()> {
        self.write_out();
        self.out.result()
    }
}

/// `show --json` of a conversation: the rows `read_conversation` returns, as
/// `serde_json::to_writer_pretty` lays them out, made safe for a terminal. Written
/// by hand: serde's string escaper took as long as loading the conversation.
struct ConversationJson<'o> {
    out: ShowOut<'o>,
    json: Vec<u8>,
    /// Rows written so far.
    rows: usize,
}

impl<'o> ConversationJson<'o> {
    fn new(out: &'o mut dyn Write) -> Self {
        Self {
            out: ShowOut::new(out),
            json: Vec::with_capacity(FLUSH_AT + FLUSH_AT / 4),
            rows: 0,
        }
    }

    /// Starts a row: the array's opening or the comma after the row before.
    fn open_row(&mut self) {
        self.json
            .extend_from_slice(if self.rows == 0 { b"[\n  " } else { b",\n  " });
        self.rows += 1;
    }

    /// Writes what the rows hold once `json` has grown past [`FLUSH_AT`].
    fn flush_if_full(&mut self) {
        if self.json.len() >= FLUSH_AT {
            self.out.write(&self.json);
            self.json.clear();
        }
    }

    /// A row of any shape (a subagent call), laid out as `write_json` lays out the
    /// rows of an array.
    fn push_row(&mut self, row: &serde_json::Value) -> Result<()> {
        self.open_row();
        let pretty = String::from_utf8(serde_json::to_vec_pretty(row)?)?;
        // Strings hold their line breaks escaped: every one here is the layout's.
        self.json
            .extend_from_slice(visible_json(&pretty).replace('\n', "\n  ").as_bytes());
        self.flush_if_full();
        Ok(())
    }

    fn push(&mut self, message: &ConversationMessage) {
        self.push_marked(message, false);
    }

    /// A message; one a rewind took out of the model's view gets `"rewound": true`.
    fn push_marked(&mut self, message: &ConversationMessage, rewound: bool) {
        self.open_row();
        let json = &mut self.json;
        json.extend_from_slice(b"{\n");
        match &message.role {
            Role::System => json.extend_from_slice(b"    \"kind\": \"compaction\",\n"),
            role => {
                json.extend_from_slice(b"    \"role\": ");
                push_json_string(json, role.as_str());
                json.extend_from_slice(b",\n");
            }
        }
        if rewound {
            json.extend_from_slice(b"    \"rewound\": true,\n");
        }
        json.extend_from_slice(b"    \"text\": ");
        push_json_string(json, &message.text);
        json.extend_from_slice(b"\n  }");
        self.flush_if_full();
    }

    fn finish(mut self) -> Result<()> {
        self.json
            .extend_from_slice(if self.rows == 0 { b"[]\n" } else { b"\n]\n" });
        self.out.write(&self.json);
        self.out.result()
    }
}

/// `reprise fork RUN [--at N|ENTRY] [--workdir DIR]`: a new run folder holding a
/// copy of the conversation (up to the answer to the person's message N, or to an
/// entry) and, with `workdir`, the working folder
/// as it was at that point written into DIR, where the new run then works. Prints
/// the new run's name.
pub async fn fork(
    runs: &dyn RunCatalog,
    settings: &reprise_chat::config::Settings,
    spec: &str,
    at: Option<reprise_chat::fork::ForkAt>,
    workdir: Option<&std::path::Path>,
    out: &mut dyn Write,
) -> Result<()> {
    let source = runs.find(spec).await?;
    print_repairs(&source);
    if source.session_id.is_none() {
        bail!("run {} has no conversation to fork", source.name());
    }
    // The working folder of a run that recorded none, for its files.
    let here = match workdir {
        Some(_) => std::env::current_dir()?,
        None => std::path::PathBuf::new(),
    };
    let forked = reprise_chat::fork::fork_run(
        runs,
        reprise_chat::fork::ForkRequest {
            source: &source,
            at,
            files: workdir,
            fallback_workdir: &here,
            options: reprise_chat::checkpoints::capture_options(settings),
        },
    )
    .await?;
    let target = forked.fork;
    // The command ends here: wait for the copy's data to be on disk.
    if let Some(store) = target.store {
        reprise_session::SessionStore::close(&store).await?;
    }
    if let Some(warning) = &forked.warning {
        crate::display::terminal::eprint_line(&format!("warning: {warning}"));
    }
    if let Some(inside) = &forked.inside_workdir {
        crate::display::terminal::eprint_line(&format!("warning: {inside}"));
    }
    if let Some((dir, written)) = &forked.written {
        writeln!(
            out,
            "wrote {} ({}) into {}",
            reprise_chat::text::counted(written.files, "file", "files"),
            reprise_chat::text::counted(written.bytes, "byte", "bytes"),
            dir.display()
        )?;
    }
    writeln!(
        out,
        "forked {} into {} (resume it with: reprise --resume {})",
        source.name(),
        target.folder.name(),
        target.folder.name()
    )?;
    Ok(())
}

/// `reprise rm RUN [--yes]`: deletes a run, after asking unless `yes`.
pub async fn rm(
    runs: &dyn RunCatalog,
    spec: &str,
    yes: bool,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
) -> Result<()> {
    let run = runs.find(spec).await?;
    print_repairs(&run);
    // A run open in a chat is not deleted under it: holding its writer lock while
    // deleting also keeps a chat from opening it meanwhile.
    let _lock = match run.session_id.as_deref() {
        Some(session_id) => {
            let store = runs.store_for(&run, &reprise_redact::Redactor::new());
            match store.lock(session_id).await {
                Ok(lock) => Some(lock),
                // Only a lock held by another chat means "in use"; a read-only file
                // system or a permission error is reported as what it is.
                Err(error @ reprise_session::StoreError::Locked { .. }) => {
                    return Err(anyhow::Error::from(error).context(format!(
                        "run {} is in use; leave that chat first",
                        run.name()
                    )));
                }
                Err(error) => {
                    return Err(anyhow::Error::from(error)
                        .context(format!("cannot delete run {}", run.name())));
                }
            }
        }
        None => None,
    };
    if !yes {
        let messages = runs
            .conversation(&run)
            .await
            .map(|c| c.messages.len())
            .unwrap_or(0);
        write!(
            out,
            "delete run {} ({} shown in it)? [y/N] ",
            run.name(),
            reprise_chat::text::counted(messages, "message", "messages")
        )?;
        out.flush()?;
        let mut answer = String::new();
        input.read_line(&mut answer)?;
        if !reprise_chat::answers::is_yes(&answer) {
            writeln!(out, "kept {}", run.name())?;
            return Ok(());
        }
    }
    runs.delete(&run).await?;
    writeln!(out, "deleted {}", run.name())?;
    Ok(())
}

/// Warns about what opening a run repaired (a rebuilt `session.json`).
fn print_repairs(run: &RunFolder) {
    for warning in &run.warnings {
        crate::display::terminal::eprint_line(&format!("warning: {warning}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::display::terminal::write_json;

    #[test]
    fn the_conversation_json_is_serdes_pretty_rows_made_visible() {
        let message = |role, text: &str| ConversationMessage {
            role,
            text: text.to_owned(),
        };
        let messages = vec![
            message(Role::User, "fix \"this\"\n\tplease \u{1b}[2J"),
            message(Role::System, "(compacted 3 messages)"),
            message(Role::Assistant, "done \u{9b} \u{202e}é 🎉\\"),
            message(Role::Assistant, ""),
            // Past the point where the buffer is written out.
            message(Role::User, &"a line \u{1b}[31m\n".repeat(100_000)),
            message(Role::Assistant, "after"),
        ];
        let rows: Vec<serde_json::Value> = messages
            .iter()
            .map(|m| match m.role {
                Role::System => json!({"kind": "compaction", "text": m.text}),
                _ => json!({"role": m.role.as_str(), "text": m.text}),
            })
            .collect();
        let mut expected = Vec::new();
        write_json(&mut expected, &rows).unwrap();
        let mut ours = Vec::new();
        let mut writer = ConversationJson::new(&mut ours);
        for message in &messages {
            writer.push(message);
        }
        writer.finish().unwrap();
        assert_eq!(
            String::from_utf8(ours).unwrap(),
            String::from_utf8(expected).unwrap()
        );
        let mut empty = Vec::new();
        write_json(&mut empty, &Vec::<serde_json::Value>::new()).unwrap();
        let mut ours = Vec::new();
        ConversationJson::new(&mut ours).finish().unwrap();
        assert_eq!(ours, empty);
    }

    /// A writer whose writes fail once `room` bytes are taken.
    struct Full {
        room: usize,
        calls_after_failing: usize,
    }

    impl Write for Full {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            if self.room == 0 {
                self.calls_after_failing += 1;
                return Err(std::io::ErrorKind::BrokenPipe.into());
            }
            let taken = bytes.len().min(self.room);
            self.room -= taken;
            Ok(taken)
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn show_stops_writing_at_the_first_failed_write_and_reports_it() {
        let long = ConversationMessage {
            role: Role::User,
            text: "x".repeat(FLUSH_AT),
        };
        let mut out = Full {
            room: 10,
            calls_after_failing: 0,
        };
        let mut json = ConversationJson::new(&mut out);
        for _ in 0..3 {
            json.push(&long);
        }
        let error = json.finish().unwrap_err();
        assert!(error.to_string().contains("roken pipe"), "{error}");
        assert_eq!(out.calls_after_failing, 1);

        let mut out = Full {
            room: 10,
            calls_after_failing: 0,
        };
        let mut text = ConversationText::new(&mut out);
        for _ in 0..3 {
            text.push(&long);
        }
        assert!(text.finish().is_err());
        assert_eq!(out.calls_after_failing, 1);
    }
}

#[cfg(test)]
mod runs_json_tests {
    use super::*;
    use crate::display::terminal::write_json;

    #[test]
    fn runs_json_is_what_serde_pretty_prints_made_safe() {
        let run = |name: &str, title: Option<&str>, tags: &[&str], first: Option<&str>| {
            reprise_runs::RunSummary {
                dir: std::path::Path::new("/tmp/runs").join(name),
                session_id: format!("s-{name}"),
                updated_at: jiff::Timestamp::from_millisecond(1_780_000_000_123).unwrap(),
                last_message: Some("last \"quoted\"\nline\u{1b}[2J \u{202e}rtl \u{9b}".to_owned()),
                first_message: first.map(str::to_owned),
                message_count: 42,
                title: title.map(str::to_owned),
                tags: tags.iter().map(|tag| (*tag).to_owned()).collect(),
            }
        };
        let runs = [
            run(
                "2026-01-01T00-00-00-000Z",
                None,
                &[],
                Some("first\tone é 日本"),
            ),
            run(
                "2026-01-02T00-00-00-000Z",
                Some("A title"),
                &["x", "y\u{7f}"],
                None,
            ),
            run(
                "2026-01-03T00-00-00-000Z",
                Some("t"),
                &["only"],
                Some(&"long ".repeat(40)),
            ),
        ];
        let rows: Vec<_> = runs
            .iter()
            .map(|run| {
                json!({
                    "run": run.name(),
                    "dir": run.dir,
                    "sessionId": run.session_id,
                    "updatedAt": run.updated_at.to_string(),
                    "messages": run.message_count,
                    "title": run.title,
                    "shownAs": run.display_title(80),
                    "tags": run.tags,
                    "firstMessage": run.first_message,
                    "lastMessage": run.last_message,
                })
            })
            .collect();
        for count in [0, 1, 3] {
            let mut expected = Vec::new();
            write_json(&mut expected, &rows[..count].to_vec()).unwrap();
            let mut ours = Vec::new();
            write_runs_json(&mut ours, &runs[..count]).unwrap();
            assert_eq!(
                String::from_utf8(ours).unwrap(),
                String::from_utf8(expected).unwrap()
            );
        }
    }
}
