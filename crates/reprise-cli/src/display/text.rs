//! Short texts every screen and command words the same way: a text on one line, a
//! shortened text, a date, a subagent's mark, and the notes for a cut-off reply and a
//! compaction.

use jiff::Timestamp;
use reprise_agent::AgentEvent;

/// A text on one line, whitespace runs collapsed.
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
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
