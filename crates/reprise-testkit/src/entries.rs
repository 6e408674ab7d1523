//! Session entries of a realistic shape, for benchmarks that fill sessions.

use reprise_message::{Entry, MODEL_FIELD, Message, StoredUsage, TokenCounts, ToolCall};

/// Entry `i` of a coding agent's session, in a cycle of four: a prompt, a reply
/// with a tool call, the tool's result (code with escapes), an answer with non-ASCII
/// text. About 1 KB on average, so `n` entries make about `n` KB.
pub fn coding_agent_entry(i: usize) -> Entry {
    match i % 4 {
        0 => Entry::message(Message::user(format!(
            "Please look at src/main.rs and fix the failing test #{i}. It says \"expected 3, got 4\"."
        ))),
        1 => Entry::message(Message::assistant_tool_calls(
            Some("Let me read the file first.".into()),
            vec![ToolCall::function(
                format!("call_{i}"),
                "read_file",
                format!("{{\"path\":\"src/module_{i}.rs\",\"limit\":400}}"),
            )],
        )),
        // `i - 1` answers the call of the entry before: `i % 4 == 2` means `i >= 2`.
        2 => Entry::message(Message::tool(
            format!("call_{}", i - 1),
            "fn main() {\n    let value = compute(\"input\\tdata\");\n    println!(\"{value}\");\n}\n"
                .repeat(30),
        )),
        _ => Entry::message(Message::assistant(
            "The test fails because `compute` counts the trailing newline. I changed it to trim first; \
             the suite passes now. Ünïcödé and emoji 🎉 stay intact. "
                .repeat(6),
        )),
    }
}

/// Entry `i` of a chat of short turns, as the chat writes them: a prompt of about
/// 300 characters, then a reply of about 300 with the call's `usage` and `model`
/// beside it. About 500 bytes a line, so 200,000 entries make about 100 MB.
pub fn short_turn_entry(i: usize) -> Entry {
    const PROSE: &str = "The parser reads each record, checks the header against the schema and \
        keeps the rows that pass; the others go to a report with the line they came from. \
        Nothing is written until the whole file was read, so a failure halfway leaves the \
        output as it was. Run it again with `--strict` to stop at the first bad row. ";
    // A different window of the prose for each entry, so no two lines are alike.
    let from = (i * 7) % (PROSE.len() - 290);
    let text = format!("{} (#{i})", &PROSE[from..from + 290]);
    if i.is_multiple_of(2) {
        Entry::message(Message::user(text))
    } else {
        let mut entry = Entry::message(Message::assistant(text));
        let prompt_tokens = 1_000 + (i as u64 % 5_000);
        entry.usage = Some(StoredUsage::Counts(TokenCounts {
            prompt_tokens,
            completion_tokens: 75,
            total_tokens: prompt_tokens + 75,
        }));
        entry.extra.insert(
            MODEL_FIELD.to_owned(),
            serde_json::Value::String("qwen2.5-coder-7b-instruct".to_owned()),
        );
        entry
    }
}
