//! A run as JSON, written as its entries are read: `session.json` and every entry
//! of the conversation and of each subagent, laid out as `serde_json`'s pretty
//! printer lays out the whole (`commands::export::json_export`).

use anyhow::Result;
use reprise_runs::RecordReader;
use reprise_session::LoadWarning;
use serde_json::Value;

use super::Masker;
use super::sink::Sink;

/// Writes the run as JSON (the text of `commands::export::json_export`) as its
/// entries are read;
/// returns the warnings of the reading.
pub async fn stream_json(
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
