//! Short texts every screen and command words the same way: a text on one line, a
//! shortened text, a date, a subagent's mark, and the notes for a cut-off reply and a
//! compaction.

use jiff::Timestamp;
use reprise_agent::AgentEvent;

/// A text on one line, whitespace runs collapsed.
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The most characters of a tool call's arguments a screen or a log shows.
pub const ARGUMENTS_PREVIEW: usize = 1000;
/// How much further than [`ARGUMENTS_PREVIEW`] the arguments are read before they
/// are redacted: a secret across the cut is still seen whole, and hidden.
const PREVIEW_MARGIN: usize = 1000;

/// A tool call's arguments as a screen shows them: on one line, whitespace runs
/// collapsed, `redact`ed, at most [`ARGUMENTS_PREVIEW`] characters; longer
/// arguments are cut and say their size (`… (1048600 bytes)`). Only the start of
/// the arguments is read, however long they are.
pub fn arguments_preview(arguments: &str, redact: impl FnOnce(&str) -> String) -> String {
    arguments_preview_of(arguments, None, redact)
}

/// How much of a tool call's arguments a live view keeps (bytes): far more than
/// [`arguments_preview`] reads unless the arguments are mostly whitespace, far less
/// than a file written through a tool.
pub const ARGUMENTS_HEAD: usize = 64 * 1024;

/// The start of `arguments` that a view keeps, at most [`ARGUMENTS_HEAD`] bytes, and
/// their whole size when that start is not all of them.
pub fn arguments_head(arguments: &str) -> (&str, Option<usize>) {
    if arguments.len() <= ARGUMENTS_HEAD {
        return (arguments, None);
    }
    (
        &arguments[..arguments.floor_char_boundary(ARGUMENTS_HEAD)],
        Some(arguments.len()),
    )
}

/// [`arguments_preview`] of arguments of which only the start is at hand (see
/// [`arguments_head`]): `len` is their whole size when they were cut.
pub fn arguments_preview_of(
    arguments: &str,
    len: Option<usize>,
    redact: impl FnOnce(&str) -> String,
) -> String {
    let mut head = String::new();
    let mut cut = len.is_some();
    for word in arguments.split_whitespace() {
        if !head.is_empty() {
            head.push(' ');
        }
        let room = ARGUMENTS_PREVIEW + PREVIEW_MARGIN - head.chars().count();
        if word.chars().nth(room).is_some() {
            head.extend(word.chars().take(room));
            cut = true;
            break;
        }
        head.push_str(word);
        if head.chars().count() >= ARGUMENTS_PREVIEW + PREVIEW_MARGIN {
            cut = true;
            break;
        }
    }
    let shown = redact(&head);
    if !cut && shown.chars().count() <= ARGUMENTS_PREVIEW {
        return shown;
    }
    let kept: String = shown.chars().take(ARGUMENTS_PREVIEW).collect();
    format!("{kept}… ({} bytes)", len.unwrap_or(arguments.len()))
}

/// `text` cut to at most `max` characters, the cut marked with `…`.
pub fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        let cut: String = text.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

/// A timestamp as a person reads it: local time, to the minute.
pub fn show_date(ts: Timestamp) -> String {
    show_date_in(ts, &jiff::tz::TimeZone::system())
}

/// [`show_date`] in a given time zone (looked up once for a whole listing).
pub fn show_date_in(ts: Timestamp, tz: &jiff::tz::TimeZone) -> String {
    let zoned = ts.to_zoned_datetime(tz.clone());
    zoned.strftime("%Y-%m-%d %H:%M").to_string()
}

/// The line shown for a compaction event: `(compacted 182 messages: 7.1k → 0.9k
/// tokens)`, after `[name] ` for a subagent's.
pub fn compaction_line(event: &AgentEvent) -> Option<String> {
    let AgentEvent::Compacted {
        agent,
        messages,
        tokens_before,
        tokens_after,
        ..
    } = event
    else {
        return None;
    };
    Some(format!(
        "{}{}",
        subagent_prefix(agent),
        reprise_session::compaction_marker(*messages, *tokens_before, *tokens_after)
    ))
}

/// What the person is told when a reply reached `max_tokens`.
pub fn cut_off_note(max_tokens: Option<u32>) -> String {
    let limit = max_tokens.map(|n| format!(" ({n})")).unwrap_or_default();
    format!("the reply was cut off at max_tokens{limit}; ask again or raise max_tokens")
}

/// The cut-off note as a line of `agent`'s (after `[name] ` for a subagent's).
pub fn cut_off_line(agent: &str, max_tokens: Option<u32>) -> String {
    format!("{}{}", subagent_prefix(agent), cut_off_note(max_tokens))
}

/// What the person is told when a compaction's summary reached its limit.
pub fn summary_cut_off_line(agent: &str, max_tokens: u32) -> String {
    format!(
        "{}the summary of the older messages was cut off at its limit ({max_tokens} tokens); \
         it is kept as it is",
        subagent_prefix(agent)
    )
}

/// `[name] ` for a subagent, nothing for the main agent.
pub fn subagent_prefix(agent: &str) -> String {
    if agent == reprise_agent::DEFAULT_AGENT_NAME || agent.is_empty() {
        String::new()
    } else {
        format!("[{agent}] ")
    }
}

/// `  [name] ` for a subagent's lines (indented under the call that started it),
/// nothing for the main agent's.
pub fn subagent_indent(agent: &str) -> String {
    if agent == reprise_agent::DEFAULT_AGENT_NAME || agent.is_empty() {
        String::new()
    } else {
        format!("  [{agent}] ")
    }
}

/// `count` and the noun that goes with it: `1 file`, `2 files`, `0 files`.
pub fn counted<N>(count: N, one: &str, many: &str) -> String
where
    N: std::fmt::Display + PartialEq + From<u8>,
{
    if count == N::from(1) {
        format!("{count} {one}")
    } else {
        format!("{count} {many}")
    }
}

/// ` (+N lines)` after the first line of a text with `more` lines after it (` (+1
/// line)` for one), nothing for none.
pub fn more_lines(more: usize) -> String {
    if more == 0 {
        String::new()
    } else {
        format!(" (+{})", counted(more, "line", "lines"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_arguments_are_cut_and_say_their_size() {
        let same = |text: &str| text.to_owned();
        assert_eq!(
            arguments_preview("{\"a\":\n  1,\t\"b\": 2}", same),
            "{\"a\": 1, \"b\": 2}"
        );
        let content = "x".repeat(1 << 20);
        let arguments = format!("{{\"path\":\"big\",\"content\":\"{content}\"}}");
        let shown = arguments_preview(&arguments, same);
        assert!(shown.starts_with("{\"path\":\"big\",\"content\":\"xxx"));
        assert!(shown.ends_with(&format!("x… ({} bytes)", arguments.len())));
        assert_eq!(
            shown.chars().count(),
            ARGUMENTS_PREVIEW + 1 + " (1048600 bytes)".len()
        );
        // A secret across the cut is redacted whole, before the cut.
        let secret = format!("{} sk-0123456789abcdef", "y".repeat(ARGUMENTS_PREVIEW - 10));
        let redacted = arguments_preview(&secret, |text| {
            text.replace("sk-0123456789abcdef", "[secret]")
        });
        assert!(!redacted.contains("sk-0"), "{redacted}");
        assert!(redacted.ends_with("[secret]"), "{redacted}");
    }

    #[test]
    fn counts_take_the_singular_for_one_only() {
        assert_eq!(counted(1, "file", "files"), "1 file");
        assert_eq!(counted(0, "file", "files"), "0 files");
        assert_eq!(counted(2, "file", "files"), "2 files");
        assert_eq!(more_lines(0), "");
        assert_eq!(more_lines(1), " (+1 line)");
        assert_eq!(more_lines(3), " (+3 lines)");
    }
}
