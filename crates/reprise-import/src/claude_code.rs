//! Claude Code transcripts: `~/.claude/projects/<project>/<session>.jsonl`, with
//! subagents in `<session>/subagents/agent-*.jsonl` (or, in older versions, inline as
//! `isSidechain` lines).
//!
//! Every line carries `uuid` and `parentUuid`; a rewind leaves the abandoned branch
//! in the file, so the conversation is the chain from the last line back to the root
//! (crossing a compaction through `logicalParentUuid`), not the file's order.

use foldhash::{HashMap, HashSet};
use std::path::Path;

use jiff::Timestamp;
use reprise_session::ContentPart;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

use crate::builder::{Builder, image_description, image_part, parse_ts, text_part};
use crate::error::ImportError;
use crate::report::Report;
use crate::{Converted, SourceTool, read_bounded, read_file, split_lines};

#[derive(Deserialize)]
struct Record {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    subtype: Option<String>,
    #[serde(default)]
    uuid: Option<String>,
    #[serde(rename = "parentUuid", default)]
    parent: Option<String>,
    #[serde(rename = "logicalParentUuid", default)]
    logical_parent: Option<String>,
    #[serde(rename = "isSidechain", default)]
    sidechain: bool,
    #[serde(rename = "isMeta", default)]
    meta: Option<bool>,
    #[serde(rename = "isCompactSummary", default)]
    compact_summary: Option<bool>,
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(rename = "sessionId", default)]
    session_id: Option<String>,
    #[serde(default)]
    message: Option<ClaudeMessage>,
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    summary: Option<String>,
    #[serde(rename = "leafUuid", default)]
    leaf: Option<String>,
    #[serde(default)]
    attachment: Option<Value>,
    #[serde(rename = "compactMetadata", default)]
    compact_metadata: Option<Value>,
    /// The line itself, kept for a `system` line without `content`: what it holds
    /// is in fields of its own (a hook's summary, an API error).
    #[serde(skip)]
    line: Option<Box<[u8]>>,
}

/// Fields every Claude Code line carries: not what a system line is about.
const ENVELOPE_FIELDS: &[&str] = &[
    "parentUuid",
    "logicalParentUuid",
    "isSidechain",
    "type",
    "subtype",
    "timestamp",
    "uuid",
    "userType",
    "entrypoint",
    "cwd",
    "sessionId",
    "version",
    "gitBranch",
    "slug",
    "level",
    "isMeta",
];

/// What a `system` line says: its `content`, else its own fields as JSON.
fn system_text(record: &Record) -> String {
    if let Some(content) = &record.content {
        let text = content_text(content);
        if !text.is_empty() {
            return text;
        }
    }
    let Some(line) = &record.line else {
        return String::new();
    };
    match serde_json::from_slice::<serde_json::Map<String, Value>>(line) {
        Ok(mut fields) => {
            for name in ENVELOPE_FIELDS {
                fields.remove(*name);
            }
            fields.remove("content");
            if fields.is_empty() {
                String::new()
            } else {
                Value::Object(fields).to_string()
            }
        }
        Err(_) => String::new(),
    }
}

#[derive(Deserialize)]
struct ClaudeMessage {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    content: Value,
    #[serde(default)]
    usage: Option<ClaudeUsage>,
}

/// The Anthropic API's token counts: the prompt is the uncached input plus what was
/// written to and read from the prompt cache.
#[derive(Deserialize)]
struct ClaudeUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    cache_creation_input_tokens: u64,
    #[serde(default)]
    cache_read_input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
}

/// What the sniffer reads of a line: a long line is checked without building it.
#[derive(Deserialize)]
struct Probe {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(rename = "sessionId", default)]
    session_id: Option<IgnoredAny>,
    #[serde(default)]
    uuid: Option<IgnoredAny>,
    #[serde(rename = "leafUuid", default)]
    leaf: Option<IgnoredAny>,
}

/// Whether the first lines of a file look like a Claude Code transcript.
pub(crate) fn sniff(head: &[u8]) -> bool {
    split_lines(head).take(50).any(|line| {
        serde_json::from_slice::<Probe>(line).is_ok_and(|probe| {
            (matches!(
                probe.kind.as_str(),
                "user" | "assistant" | "system" | "attachment"
            ) && probe.session_id.is_some()
                && probe.uuid.is_some())
                || (probe.kind == "summary" && probe.leaf.is_some())
        })
    })
}

/// Parses `lines`; returns the records and how many lines were not records.
fn parse_lines(lines: &[&[u8]]) -> (Vec<Record>, u64) {
    let mut records = Vec::with_capacity(lines.len());
    let mut bad = 0;
    for line in lines {
        match serde_json::from_slice::<Record>(line) {
            Ok(mut record) => {
                if record.kind == "system"
                    && record
                        .content
                        .as_ref()
                        .is_none_or(|c| content_text(c).is_empty())
                {
                    record.line = Some(Box::from(*line));
                }
                records.push(record)
            }
            Err(_) => bad += 1,
        }
    }
    (records, bad)
}

/// Below this many lines, one thread parses them all.
const PARALLEL_LINES: usize = 4096;

/// Parses every line, on as many threads as there are cores for a long file: a
/// 100 MB transcript spends most of its import here.
fn parse_records(bytes: &[u8], report: &mut Report) -> Vec<Record> {
    let lines: Vec<&[u8]> = split_lines(bytes).collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    if threads < 2 || lines.len() < PARALLEL_LINES {
        let (records, bad) = parse_lines(&lines);
        report.skip("lines that are not JSON records", bad);
        return records;
    }
    let chunk = lines.len().div_ceil(threads);
    let parts: Vec<(Vec<Record>, u64)> = std::thread::scope(|scope| {
        let handles: Vec<_> = lines
            .chunks(chunk)
            .map(|part| {
                std::thread::Builder::new()
                    .spawn_scoped(scope, move || parse_lines(part))
                    .map_err(|_| part)
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| match handle {
                // A thread that panicked or could not start: parse its part here.
                Ok(handle) => handle.join().ok(),
                Err(part) => Some(parse_lines(part)),
            })
            .zip(lines.chunks(chunk))
            .map(|(done, part)| done.unwrap_or_else(|| parse_lines(part)))
            .collect()
    });
    let mut records = Vec::with_capacity(lines.len());
    for (part, bad) in parts {
        records.extend(part);
        report.skip("lines that are not JSON records", bad);
    }
    records
}

/// The live branch of `members` (indices into `records`): from the last member with
/// a uuid back to its root, in conversation order.
fn live_branch(records: &[Record], members: &[usize]) -> Vec<usize> {
    let mut by_uuid: HashMap<&str, usize> =
        HashMap::with_capacity_and_hasher(members.len(), Default::default());
    for &index in members {
        if let Some(uuid) = records[index].uuid.as_deref() {
            by_uuid.insert(uuid, index);
        }
    }
    let Some(&leaf) = members
        .iter()
        .rev()
        .find(|&&index| records[index].uuid.is_some())
    else {
        return Vec::new();
    };
    let mut chain = Vec::new();
    let mut seen = HashSet::default();
    let mut current = Some(leaf);
    while let Some(index) = current {
        if !seen.insert(index) {
            break;
        }
        chain.push(index);
        let record = &records[index];
        let parent = record
            .parent
            .as_deref()
            .or(record.logical_parent.as_deref());
        current = parent.and_then(|uuid| by_uuid.get(uuid).copied());
    }
    chain.reverse();
    chain
}

/// Whether every block of a user record is a tool result answering one of `calls`.
fn answers_only(record: &Record, calls: &HashSet<String>) -> bool {
    let Some(Value::Array(blocks)) = record.message.as_ref().map(|m| &m.content) else {
        return false;
    };
    !blocks.is_empty()
        && blocks.iter().all(|block| {
            block["type"] == "tool_result"
                && block["tool_use_id"]
                    .as_str()
                    .is_some_and(|id| calls.contains(id))
        })
}

/// The records of the conversation, in file order: the live branch, and the lines
/// that hang off it without being a rewind. Claude Code writes parallel tool calls
/// as a chain of assistant lines (one message id) whose results each hang off their
/// own call, so only one result lies on the parent chain; the others, and the
/// attachments after them, are part of the same turn. A line may stand before its
/// parent in the file, so what hangs off the branch is found by walking from
/// parents to children, not in file order.
fn live_records(records: &[Record], members: &[usize]) -> Vec<usize> {
    let chain = live_branch(records, members);
    let message_ids: HashSet<&str> = chain
        .iter()
        .filter(|&&i| records[i].kind == "assistant")
        .filter_map(|&i| records[i].message.as_ref()?.id.as_deref())
        .collect();
    let mut kept: HashSet<usize> = chain.iter().copied().collect();
    let mut children: HashMap<&str, Vec<usize>> = HashMap::default();
    for &index in members {
        let record = &records[index];
        if record.uuid.is_none() {
            continue;
        }
        if let Some(parent) = record.parent.as_deref() {
            children.entry(parent).or_default().push(index);
        }
        let same_message = record.kind == "assistant"
            && record
                .message
                .as_ref()
                .and_then(|m| m.id.as_deref())
                .is_some_and(|id| message_ids.contains(id));
        if same_message {
            kept.insert(index);
        }
    }
    let calls: HashSet<String> = kept
        .iter()
        .filter(|&&i| records[i].kind == "assistant")
        .filter_map(|&i| match records[i].message.as_ref().map(|m| &m.content) {
            Some(Value::Array(blocks)) => Some(blocks),
            _ => None,
        })
        .flatten()
        .filter(|block| block["type"] == "tool_use")
        .filter_map(|block| block["id"].as_str().map(str::to_owned))
        .collect();
    let mut pending: Vec<usize> = kept.iter().copied().collect();
    while let Some(index) = pending.pop() {
        let Some(uuid) = records[index].uuid.as_deref() else {
            continue;
        };
        for &child in children.get(uuid).map(Vec::as_slice).unwrap_or_default() {
            let record = &records[child];
            let hangs_off = match record.kind.as_str() {
                "user" => answers_only(record, &calls),
                "attachment" | "system" | "progress" => true,
                _ => false,
            };
            if hangs_off && kept.insert(child) {
                pending.push(child);
            }
        }
    }
    members
        .iter()
        .copied()
        .filter(|index| records[*index].uuid.is_some() && kept.contains(index))
        .collect()
}

/// Converts the records of one conversation (its live branch) into `builder`;
/// returns the live records.
fn convert_branch(records: &[Record], members: &[usize], builder: &mut Builder) -> Vec<usize> {
    let chain = live_records(records, members);
    let on_chain: HashSet<usize> = chain.iter().copied().collect();
    let mut abandoned_messages = 0u64;
    for &index in members {
        let record = &records[index];
        if record.uuid.is_none() {
            match record.kind.as_str() {
                // Titles; read by the caller.
                "summary" => {}
                other => builder
                    .report
                    .skip(format!("{other} lines (Claude Code state)"), 1),
            }
        } else if !on_chain.contains(&index) {
            if matches!(record.kind.as_str(), "user" | "assistant") {
                abandoned_messages += 1;
            }
            builder
                .report
                .skip("lines off the live branch (rewound)", 1);
        }
    }
    if abandoned_messages > 0 {
        let text = format!(
            "This conversation was rewound in Claude Code: the live branch is imported; \
             {abandoned_messages} messages of abandoned branches were left out."
        );
        builder.report.remarks.push(text.clone());
        let ts = chain
            .first()
            .and_then(|&i| parse_ts(records[i].timestamp.as_deref()));
        builder.note(ts, "rewinds", text);
    }
    let mut compaction: Option<(Option<Timestamp>, String, Option<u64>)> = None;
    for &index in &chain {
        let record = &records[index];
        let ts = parse_ts(record.timestamp.as_deref());
        let is_summary = record.compact_summary == Some(true);
        if let Some((at, boundary_text, tokens)) = compaction.take() {
            if is_summary {
                let summary = record
                    .message
                    .as_ref()
                    .map(|message| content_text(&message.content))
                    .unwrap_or_default();
                builder.compaction(at, summary, tokens);
                continue;
            }
            builder.compaction(at, boundary_text, tokens);
        }
        match record.kind.as_str() {
            "user" => user(record, ts, builder),
            "assistant" => assistant(record, ts, builder),
            "system" if record.subtype.as_deref() == Some("compact_boundary") => {
                let tokens = record
                    .compact_metadata
                    .as_ref()
                    .and_then(|meta| meta["preTokens"].as_u64());
                let text = record
                    .content
                    .as_ref()
                    .map(content_text)
                    .unwrap_or_default();
                compaction = Some((ts, text, tokens));
            }
            "system" => {
                let from = match &record.subtype {
                    Some(subtype) => format!("system lines ({subtype})"),
                    None => "system lines".to_owned(),
                };
                builder.note(ts, &from, system_text(record));
            }
            "attachment" => {
                let attachment = record.attachment.clone().unwrap_or(Value::Null);
                let what = attachment["type"].as_str().unwrap_or("unknown");
                let from = format!("attachments ({what})");
                let text = match &attachment["content"] {
                    Value::String(text) if !text.is_empty() => text.clone(),
                    _ => attachment.to_string(),
                };
                builder.note(ts, &from, text);
            }
            other => builder
                .report
                .skip(format!("{other} lines (Claude Code state)"), 1),
        }
    }
    if let Some((at, text, tokens)) = compaction {
        builder.compaction(at, text, tokens);
    }
    chain
}

/// The text of a `content` value: a string, or the text of its blocks.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|block| block["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn image_of(block: &Value) -> Option<String> {
    let source = &block["source"];
    match source["type"].as_str() {
        Some("base64") => Some(format!(
            "data:{};base64,{}",
            source["media_type"].as_str().unwrap_or("image/png"),
            source["data"].as_str()?
        )),
        Some("url") => source["url"].as_str().map(str::to_owned),
        _ => None,
    }
}

fn tool_result_text(block: &Value, report: &mut Report) -> String {
    match &block["content"] {
        Value::Array(parts) => {
            let mut texts = Vec::new();
            for part in parts {
                match part["type"].as_str() {
                    Some("text") => {
                        texts.push(part["text"].as_str().unwrap_or_default().to_owned())
                    }
                    Some("image") => {
                        report.skip("images in tool results (described in their text)", 1);
                        texts.push(image_description(&image_of(part).unwrap_or_default()));
                    }
                    Some(other) => {
                        report.skip(format!("{other} blocks in tool results"), 1);
                        texts.push(format!("[{other} not converted]"));
                    }
                    None => {}
                }
            }
            texts.join("\n")
        }
        other => content_text(other),
    }
}

fn user(record: &Record, ts: Option<Timestamp>, builder: &mut Builder) {
    let Some(message) = &record.message else {
        builder.report.skip("user lines without a message", 1);
        return;
    };
    let meta = record.meta == Some(true);
    let mut parts: Vec<ContentPart> = Vec::new();
    match &message.content {
        Value::String(text) => parts.push(text_part(text.clone())),
        Value::Array(blocks) => {
            for block in blocks {
                match block["type"].as_str().unwrap_or_default() {
                    "text" => parts.push(text_part(block["text"].as_str().unwrap_or_default())),
                    "image" => match image_of(block) {
                        Some(url) => parts.push(image_part(url)),
                        None => builder.report.skip("images without data", 1),
                    },
                    "tool_result" => {
                        let id = block["tool_use_id"].as_str().unwrap_or_default();
                        let text = tool_result_text(block, &mut builder.report);
                        builder.tool_result(ts, id, text);
                    }
                    other => builder
                        .report
                        .skip(format!("{other} blocks in user messages"), 1),
                }
            }
        }
        _ => builder.report.skip("user lines without content", 1),
    }
    builder.user(ts, parts, meta);
}

fn assistant(record: &Record, ts: Option<Timestamp>, builder: &mut Builder) {
    let Some(message) = &record.message else {
        builder.report.skip("assistant lines without a message", 1);
        return;
    };
    if message.model.as_deref() == Some("<synthetic>") {
        // Written by Claude Code itself (an API error, a notice), not by a model.
        builder.note(
            ts,
            "messages Claude Code wrote itself",
            content_text(&message.content),
        );
        return;
    }
    builder.assistant_key(message.id.as_deref());
    if let Some(usage) = &message.usage {
        builder.assistant_usage(
            usage
                .input_tokens
                .saturating_add(usage.cache_creation_input_tokens)
                .saturating_add(usage.cache_read_input_tokens),
            usage.output_tokens,
            Some(usage.cache_read_input_tokens),
        );
        if let Some(model) = &message.model {
            builder.assistant_model(model);
        }
    }
    match &message.content {
        Value::String(text) => builder.assistant_text(ts, text),
        Value::Array(blocks) => {
            for block in blocks {
                match block["type"].as_str().unwrap_or_default() {
                    "text" => {
                        builder.assistant_text(ts, block["text"].as_str().unwrap_or_default())
                    }
                    "thinking" => match block["thinking"].as_str() {
                        Some(text) if !text.is_empty() => builder.assistant_reasoning(ts, text),
                        // Newer versions keep only the signature of the thinking.
                        _ => builder
                            .report
                            .skip("thinking blocks holding only a signature", 1),
                    },
                    "redacted_thinking" => builder.report.skip("redacted thinking (encrypted)", 1),
                    "tool_use" => {
                        let input = &block["input"];
                        let arguments = if input.is_null() {
                            "{}".to_owned()
                        } else {
                            input.to_string()
                        };
                        builder.tool_call(
                            ts,
                            block["id"].as_str().unwrap_or_default(),
                            block["name"].as_str().unwrap_or_default(),
                            &arguments,
                        );
                    }
                    other => builder
                        .report
                        .skip(format!("{other} blocks in assistant messages"), 1),
                }
            }
        }
        _ => builder.report.skip("assistant lines without content", 1),
    }
}

/// Converts a Claude Code transcript and the subagent files beside it.
pub(crate) fn convert(path: &Path, bytes: &[u8]) -> Result<Converted, ImportError> {
    let mut report = Report::default();
    let records = parse_records(bytes, &mut report);
    let stem = path
        .file_stem()
        .and_then(|stem| stem.to_str())
        .unwrap_or("session")
        .to_owned();
    let session_id = records
        .iter()
        .find_map(|record| record.session_id.clone())
        .unwrap_or_else(|| stem.clone());
    let started = records
        .iter()
        .find_map(|record| parse_ts(record.timestamp.as_deref()));

    let main: Vec<usize> = (0..records.len())
        .filter(|&i| !records[i].sidechain)
        .collect();
    let mut builder = Builder::new(format!("claude-code:{session_id}:main"));
    builder.report = report;
    let on_main: HashSet<&str> = convert_branch(&records, &main, &mut builder)
        .into_iter()
        .filter_map(|i| records[i].uuid.as_deref())
        .collect();
    let title = records
        .iter()
        .filter(|record| record.kind == "summary")
        .filter(|record| {
            record
                .leaf
                .as_deref()
                .is_some_and(|leaf| on_main.contains(leaf))
        })
        .chain(records.iter().filter(|record| record.kind == "summary"))
        .find_map(|record| record.summary.clone());
    let (main_entries, mut report) = builder.finish();

    let mut subagents = Vec::new();
    // The older layout: sidechains inline, each a chain of its own.
    for (n, members) in sidechains(&records).into_iter().enumerate() {
        let name = format!("sidechain-{}", n + 1);
        let mut builder = Builder::new(format!("claude-code:{session_id}:{name}"));
        convert_branch(&records, &members, &mut builder);
        let (entries, sub_report) = builder.finish();
        report.absorb(sub_report);
        subagents.push((name, entries));
    }
    // The newer layout: <session>/subagents/agent-*.jsonl beside the transcript;
    // the 2.0 one: agent-*.jsonl in the transcript's own folder, naming the session.
    let folder = path.with_file_name(&stem).join("subagents");
    let mut files = subagent_files(&folder);
    if !stem.starts_with("agent-") {
        files.extend(sibling_subagent_files(path, &session_id));
    }
    for file in files {
        let Some(name) = file.file_stem().and_then(|s| s.to_str()).map(str::to_owned) else {
            continue;
        };
        if reprise_session::validate_id("subagent", &name).is_err() {
            report.skip("subagent files with a name reprise cannot use", 1);
            continue;
        }
        if subagents.iter().any(|(taken, _)| *taken == name) {
            continue;
        }
        let bytes = read_file(&file)?;
        let mut sub_report = Report::default();
        let records = parse_records(&bytes, &mut sub_report);
        let mut builder = Builder::new(format!("claude-code:{session_id}:{name}"));
        builder.report = sub_report;
        if let Some(meta) = subagent_meta(&file) {
            builder.note(
                parse_ts(records.first().and_then(|r| r.timestamp.as_deref())),
                "subagent descriptions",
                meta,
            );
        }
        let members: Vec<usize> = (0..records.len()).collect();
        convert_branch(&records, &members, &mut builder);
        let (entries, sub_report) = builder.finish();
        report.absorb(sub_report);
        subagents.push((name, entries));
    }
    let only_sidechains = !records.is_empty()
        && records
            .iter()
            .all(|record| record.sidechain || record.uuid.is_none());
    if stem.starts_with("agent-") && only_sidechains {
        return Err(ImportError::Subagent {
            path: path.to_path_buf(),
            session_id,
        });
    }
    Ok(Converted {
        tool: SourceTool::ClaudeCode,
        session_id,
        started,
        title,
        main: main_entries,
        subagents,
        report,
    })
}

/// The inline sidechains of a transcript, each as the indices of its records, in
/// the order they start.
fn sidechains(records: &[Record]) -> Vec<Vec<usize>> {
    let by_uuid: HashMap<&str, usize> = records
        .iter()
        .enumerate()
        .filter(|(_, record)| record.sidechain)
        .filter_map(|(i, record)| record.uuid.as_deref().map(|uuid| (uuid, i)))
        .collect();
    let mut root_of: HashMap<usize, usize> = HashMap::default();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut group_of_root: HashMap<usize, usize> = HashMap::default();
    for (index, record) in records.iter().enumerate() {
        if !record.sidechain {
            continue;
        }
        // Follow parents among sidechain lines to the root.
        let mut path = vec![index];
        let mut current = index;
        let root = loop {
            if let Some(&root) = root_of.get(&current) {
                break root;
            }
            let parent = records[current]
                .parent
                .as_deref()
                .and_then(|uuid| by_uuid.get(uuid).copied());
            match parent {
                Some(parent) if !path.contains(&parent) && parent != current => {
                    path.push(parent);
                    current = parent;
                }
                _ => break current,
            }
        };
        for step in path {
            root_of.insert(step, root);
        }
        let group = *group_of_root.entry(root).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[group].push(index);
    }
    groups
}

fn subagent_files(folder: &Path) -> Vec<std::path::PathBuf> {
    let Ok(read) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    let mut files: Vec<_> = read
        .filter_map(Result::ok)
        .map(|item| item.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .collect();
    files.sort();
    files
}

/// The longest subagent metadata file read: it holds a type and a description.
const MAX_META_BYTES: u64 = 1 << 20;

/// The most of a Claude Code 2.0 subagent file's first line read to find its session.
const MAX_PROBE_BYTES: u64 = 16 << 20;

/// The first line of what a Claude Code 2.0 subagent file says of its session.
#[derive(Deserialize)]
struct SessionProbe {
    #[serde(rename = "sessionId", default)]
    session_id: Option<String>,
}

/// The `agent-*.jsonl` files beside `path` (Claude Code 2.0) whose first line names
/// `session_id`, sorted.
fn sibling_subagent_files(path: &Path, session_id: &str) -> Vec<std::path::PathBuf> {
    use std::io::BufRead;
    let Some(folder) = path.parent() else {
        return Vec::new();
    };
    let folder = if folder.as_os_str().is_empty() {
        Path::new(".")
    } else {
        folder
    };
    let Ok(read) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    let mut files: Vec<_> = read
        .filter_map(Result::ok)
        .filter(|item| item.file_type().is_ok_and(|kind| kind.is_file()))
        .map(|item| item.path())
        .filter(|file| {
            file.extension().is_some_and(|ext| ext == "jsonl")
                && file
                    .file_name()
                    .and_then(|name| name.to_str())
                    .is_some_and(|name| name.starts_with("agent-"))
        })
        .filter(|file| {
            let Ok(handle) = std::fs::File::open(file) else {
                return false;
            };
            let mut line = Vec::new();
            std::io::BufReader::new(std::io::Read::take(handle, MAX_PROBE_BYTES))
                .read_until(b'\n', &mut line)
                .is_ok()
                && serde_json::from_slice::<SessionProbe>(&line)
                    .is_ok_and(|probe| probe.session_id.as_deref() == Some(session_id))
        })
        .collect();
    files.sort();
    files
}

fn subagent_meta(file: &Path) -> Option<String> {
    let meta = read_bounded(&file.with_extension("meta.json"), MAX_META_BYTES).ok()?;
    let meta: Value = serde_json::from_slice(&meta).ok()?;
    let kind = meta["agentType"].as_str().unwrap_or("subagent");
    let description = meta["description"].as_str().unwrap_or_default();
    Some(format!("{kind}: {description}"))
}
