//! Session entries of a realistic shape, for benchmarks that fill sessions.

use reprise_message::{Entry, Message, ToolCall};

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
