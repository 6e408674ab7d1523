//! A tool result as the model reads it.

use reprise_agent::ToolOutput;
use serde_json::Value;

use crate::connection::{CallResult, ResultPart};

/// Text blocks joined by newlines; `structuredContent` as compact JSON, unless a text
/// block already says the same (servers usually mirror it there, and the model
/// should not read it twice); `isError` makes it an error result.
pub fn render_result(result: &CallResult) -> ToolOutput {
    let mut pieces: Vec<String> = result
        .parts
        .iter()
        .map(|part| match part {
            ResultPart::Text(text) | ResultPart::Described(text) => text.clone(),
        })
        .collect();
    if let Some(structured) = &result.structured {
        let mirrored = result.parts.iter().any(|part| match part {
            ResultPart::Text(text) => {
                serde_json::from_str::<Value>(text).ok().as_ref() == Some(structured)
            }
            ResultPart::Described(_) => false,
        });
        if !mirrored {
            pieces.push(structured.to_string());
        }
    }
    let content = pieces.join("\n");
    if result.is_error {
        ToolOutput::error(if content.is_empty() {
            "the tool reported an error without a message".to_string()
        } else {
            content
        })
    } else {
        ToolOutput::ok(content)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(parts: Vec<ResultPart>, structured: Option<Value>, is_error: bool) -> CallResult {
        CallResult {
            parts,
            structured,
            is_error,
        }
    }

    #[test]
    fn text_blocks_are_joined() {
        let out = render_result(&result(
            vec![
                ResultPart::Text("a".into()),
                ResultPart::Described("[image: png]".into()),
            ],
            None,
            false,
        ));
        assert_eq!(out, ToolOutput::ok("a\n[image: png]"));
    }

    #[test]
    fn structured_content_is_json_text_once() {
        let value = json!({"t": 1, "c": "sunny"});
        let alone = render_result(&result(vec![], Some(value.clone()), false));
        assert_eq!(
            serde_json::from_str::<Value>(&alone.content).unwrap(),
            value
        );
        let mirrored = render_result(&result(
            vec![ResultPart::Text(r#"{"c":"sunny","t":1}"#.into())],
            Some(value.clone()),
            false,
        ));
        assert_eq!(mirrored.content, r#"{"c":"sunny","t":1}"#);
        let beside = render_result(&result(
            vec![ResultPart::Text("weather:".into())],
            Some(value),
            false,
        ));
        assert_eq!(beside.content, "weather:\n{\"t\":1,\"c\":\"sunny\"}");
    }

    #[test]
    fn is_error_makes_an_error_result() {
        let out = render_result(&result(vec![ResultPart::Text("boom".into())], None, true));
        assert_eq!(out, ToolOutput::error("boom"));
        let empty = render_result(&result(vec![], None, true));
        assert!(empty.is_error && !empty.content.is_empty());
    }
}
