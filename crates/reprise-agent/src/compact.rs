//! Compaction: when the history outgrows the model's context window, the older part
//! is summarised by the model and the summary stands in for it.
//!
//! What the model is sent after a compaction: the system prompt, the summary, and
//! the entries after the compaction's `through`. Where the summary goes depends on
//! what follows it, so that chat templates that allow one system message and strict
//! user/assistant alternation (Mistral's, Gemma's) accept the request:
//!
//! - the kept part starts with a user message: the summary is added to the end of
//!   the system message (it becomes the system message when there is no prompt);
//! - the kept part starts with an assistant message (a compaction in the middle of
//!   a run of tool calls): the summary is a user message of its own, right after
//!   the system message.
//!
//! The cut between the summarised and the kept part is always before a user or
//! assistant message, never before a tool result, and each side is paired by
//! [`reprise_session::model_view`]: a tool call is never separated from its result.

use reprise_provider::{ChatRequest, Provider, Usage};
use reprise_session::{Entry, Message, Role, model_view};
use tokio_util::sync::CancellationToken;

use crate::error::AgentError;
use crate::tokens::{MESSAGE_OVERHEAD, estimate_message, estimate_text};
use crate::usage::add_usage;

/// The share of the context window a request may fill before the history is
/// compacted.
pub const DEFAULT_COMPACT_THRESHOLD: f64 = 0.8;

/// The window assumed when none is known (a context-exceeded answer is the only
/// sign of it then).
pub const FALLBACK_CONTEXT_WINDOW: u32 = 8_192;

/// The share of the limit that the verbatim tail may keep after a compaction.
const KEEP_SHARE: f64 = 0.3;

/// The share kept after the server said the request did not fit: less, so the
/// retry fits even when the estimate was short.
const KEEP_SHARE_AFTER_EXCEEDED: f64 = 0.15;

/// The longest any one rendered message may be in a summary request, as a share
/// of the room for one piece (a larger tool result is cut in the middle).
const LONGEST_LINE_SHARE: f64 = 0.5;

/// What the summary is introduced with where the model reads it.
pub const SUMMARY_HEADING: &str =
    "Summary of the earlier part of this conversation (older messages were compacted):";

/// How big the model's context is and when to compact.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ContextSettings {
    /// The context window in tokens; `None` when unknown: no compaction before a
    /// request, only after the server answers that the request did not fit.
    pub window: Option<u32>,
    /// The share of the window a request may fill (default
    /// [`DEFAULT_COMPACT_THRESHOLD`]).
    pub threshold: f64,
    /// The `max_tokens` of a summary request; `None` for a third of the compaction
    /// limit. Either way at most a quarter of the window.
    pub summary_max_tokens: Option<u32>,
}

impl Default for ContextSettings {
    fn default() -> Self {
        ContextSettings {
            window: None,
            threshold: DEFAULT_COMPACT_THRESHOLD,
            summary_max_tokens: None,
        }
    }
}

/// The sizes that decide when and how far to compact, for one window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Budget {
    /// The context window.
    pub window: u64,
    /// Tokens kept free for the reply: `max_tokens`, at most a quarter of the window.
    pub reply_room: u64,
    /// The largest request sent without compacting first.
    pub limit: u64,
    /// The `max_tokens` asked for a summary, when set.
    pub summary_max_tokens: Option<u64>,
}

impl Budget {
    /// Summaries are asked for at most `summary_max_tokens` when it is set.
    pub fn new(
        window: u32,
        threshold: f64,
        max_tokens: Option<u32>,
        summary_max_tokens: Option<u32>,
    ) -> Budget {
        let window = u64::from(window.max(256));
        let quarter = window / 4;
        let reply_room = max_tokens.map_or(quarter, |n| u64::from(n).min(quarter));
        let by_share = (window as f64 * threshold.clamp(0.1, 1.0)) as u64;
        Budget {
            window,
            reply_room,
            limit: by_share.min(window - reply_room),
            summary_max_tokens: summary_max_tokens.map(u64::from),
        }
    }

    /// How much of the tail stays verbatim.
    pub fn keep(&self, after_exceeded: bool) -> u64 {
        let share = if after_exceeded {
            KEEP_SHARE_AFTER_EXCEEDED
        } else {
            KEEP_SHARE
        };
        (self.limit as f64 * share) as u64
    }

    /// The room for the text of one summary request (instructions aside).
    fn piece_room(&self) -> u64 {
        (self.window - self.reply_room.max(self.summary_limit())).saturating_sub(self.window / 8)
    }

    /// The `max_tokens` of a summary request: the one set, else a third of the limit
    /// (the size the summary is asked for and cut to), at least 64; at most a quarter
    /// of the window, whatever the chat's own replies may take.
    pub fn summary_limit(&self) -> u64 {
        match self.summary_max_tokens {
            Some(set) => set.clamp(1, (self.window / 4).max(1)),
            None => (self.limit / 3).min(self.window / 4).max(64),
        }
    }
}

/// The model's messages placed before the kept part: the system prompt and the
/// summary, as the module docs describe.
pub(crate) fn header(
    system: Option<&str>,
    summary: Option<&str>,
    kept_starts_with_assistant: bool,
) -> Vec<Message> {
    let Some(summary) = summary else {
        return system.map(Message::system).into_iter().collect();
    };
    let block = format!("{SUMMARY_HEADING}\n\n{summary}");
    if kept_starts_with_assistant {
        let mut messages: Vec<Message> = system.map(Message::system).into_iter().collect();
        messages.push(Message::user(block));
        return messages;
    }
    vec![Message::system(match system {
        Some(system) => format!("{system}\n\n{block}"),
        None => block,
    })]
}

/// The request messages for a history whose view starts at `start`.
pub(crate) fn view_messages(
    system: Option<&str>,
    summary: Option<&str>,
    entries: &[Entry],
    start: usize,
) -> Vec<Message> {
    let tail = model_view(&entries[start.min(entries.len())..]);
    let starts_with_assistant = tail.first().is_some_and(|m| m.role == Role::Assistant);
    let mut messages = header(system, summary, starts_with_assistant);
    messages.extend(tail);
    messages
}

/// Where to cut the history for a compaction: the index of the first entry kept.
/// `None` when there is nothing before the last possible cut to summarise.
///
/// Cuts are only before a user or assistant message (never before a tool result).
/// The kept part is the longest that fits in `keep` tokens, and at least the last
/// possible cut's.
pub(crate) fn choose_cut(entries: &[Entry], start: usize, keep: u64) -> Option<usize> {
    let tail = &entries[start.min(entries.len())..];
    let first_message = tail.iter().position(|entry| entry.as_message().is_some())?;
    // Walking back from the end: the tokens from each entry to the end.
    let mut kept = 0u64;
    let mut best: Option<usize> = None;
    for (offset, entry) in tail.iter().enumerate().rev() {
        let Some(message) = entry.as_message() else {
            continue;
        };
        kept += estimate_message(message);
        if offset <= first_message {
            break;
        }
        if message.role == Role::Tool {
            continue;
        }
        if best.is_some() && kept > keep {
            break;
        }
        best = Some(offset);
    }
    best.map(|offset| start + offset)
}

/// A message as a line of the text the summariser reads.
fn render(message: &Message, names: &std::collections::HashMap<String, String>) -> String {
    let text = message.text();
    match message.role {
        Role::User => format!("USER: {text}"),
        Role::Assistant => {
            let mut line = format!("ASSISTANT: {text}");
            for call in message.calls() {
                line.push_str(&format!(
                    "\n[calls tool {} with {}]",
                    call.function.name, call.function.arguments
                ));
            }
            line
        }
        Role::Tool => {
            let id = message.tool_call_id.as_deref().unwrap_or("");
            let name = names.get(id).map_or("a tool", String::as_str);
            format!("RESULT of {name}: {text}")
        }
        _ => format!("{}: {text}", message.role.as_str().to_ascii_uppercase()),
    }
}

/// `text` cut to about `max_bytes`, its middle left out (a tool result's start and
/// end say most about it).
fn shorten(text: String, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text;
    }
    let half = max_bytes / 2;
    let mut head_end = half;
    while !text.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = text.len() - half;
    while !text.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    format!(
        "{} […{} bytes left out…] {}",
        &text[..head_end],
        tail_start - head_end,
        &text[tail_start..]
    )
}

/// The instructions of a summary request; the summary should stay under `words`.
fn instructions(focus: Option<&str>, words: u64) -> String {
    let mut text = String::from(
        "You compact a conversation between a person and an AI assistant that uses tools, \
         so that the assistant can go on with it without the messages themselves. Write a \
         summary that keeps: what the person asked for and still wants, decisions made, \
         facts found (file names, values, errors, results of tool calls that matter \
         later), what was done, and what is left to do. Be concise and factual; write \
         plain text, no preamble.",
    );
    text.push_str(&format!(" Use at most {words} words."));
    if let Some(focus) = focus.map(str::trim).filter(|focus| !focus.is_empty()) {
        text.push_str("\nKeep in particular: ");
        text.push_str(focus);
    }
    text
}

/// Summarises `messages` (following `previous`, the summary of what came before
/// them) with as many model calls as it takes for each request to fit the window.
/// `scale` is how many real tokens one estimated token turned out to be.
/// A summary as the model wrote it.
pub(crate) struct Summary {
    /// The text.
    pub text: String,
    /// Every summary call's token counts, refused ones aside.
    pub usage: Option<Usage>,
    /// The limit a summary call's reply was cut at, when one was.
    pub cut_off_at: Option<u32>,
}

pub(crate) async fn summarise(
    provider: &dyn Provider,
    budget: &Budget,
    previous: Option<&str>,
    messages: &[Message],
    focus: Option<&str>,
    scale: f64,
    cancel: &CancellationToken,
) -> Result<Summary, AgentError> {
    let names = messages
        .iter()
        .flat_map(Message::calls)
        .map(|call| (call.id.clone(), call.function.name.clone()))
        .collect();
    // A summary bigger than a third of the limit would leave too little room for
    // the conversation after it: asked for, and cut to, that size.
    // The sizes below are in estimated tokens: `scale` real tokens each.
    let scale = scale.max(1.0);
    let summary_tokens = (budget.limit as f64 / 3.0 / scale) as u64;
    let instructions = instructions(focus, summary_tokens * 3 / 4);
    let mut room = (budget.piece_room() as f64 / scale) as u64;
    let mut lines: std::collections::VecDeque<String> =
        messages.iter().map(|m| render(m, &names)).collect();
    let mut summary = previous.map(str::to_owned);
    // Each context-exceeded answer halves the pieces; a few halvings are enough for
    // any estimate error, and a server that refuses even tiny requests is broken.
    let mut halvings = 0;
    // Every summary call's counts, refused ones aside (they report none).
    let mut usage: Option<Usage> = None;
    let mut cut_off_at = None;
    while !lines.is_empty() {
        let fixed = estimate_text(&instructions)
            + summary.as_deref().map_or(0, estimate_text)
            + 3 * MESSAGE_OVERHEAD
            + 64;
        let piece_tokens = room.saturating_sub(fixed).max(64);
        let longest = ((piece_tokens as f64 * LONGEST_LINE_SHARE) as usize)
            * crate::tokens::BYTES_PER_TOKEN as usize;
        let mut piece = String::new();
        let mut taken = 0;
        for line in &lines {
            let line = shorten(line.clone(), longest);
            if taken > 0 && estimate_text(&piece) + estimate_text(&line) > piece_tokens {
                break;
            }
            piece.push_str(&line);
            piece.push_str("\n\n");
            taken += 1;
        }
        let limit = u32::try_from(budget.summary_limit()).unwrap_or(u32::MAX);
        let request = summary_request(&instructions, summary.as_deref(), &piece, limit);
        match provider.complete(&request, None, cancel).await {
            Ok(completion) => {
                if let Some(counted) = completion.usage {
                    add_usage(usage.get_or_insert_with(Usage::default), counted);
                }
                if completion.finish_reason.as_deref() == Some("length") {
                    cut_off_at = Some(limit);
                }
                let text = completion.message.text().trim().to_owned();
                if text.is_empty() {
                    return Err(AgentError::EmptySummary);
                }
                let most = usize::try_from(summary_tokens * crate::tokens::BYTES_PER_TOKEN)
                    .unwrap_or(usize::MAX);
                summary = Some(shorten(text, most));
                lines.drain(..taken);
            }
            Err(error) if error.is_context_exceeded() && halvings < 4 => {
                halvings += 1;
                room /= 2;
            }
            Err(error) => return Err(error.into()),
        }
    }
    Ok(Summary {
        text: summary.ok_or(AgentError::EmptySummary)?,
        usage,
        cut_off_at,
    })
}

fn summary_request(
    instructions: &str,
    previous: Option<&str>,
    piece: &str,
    max_tokens: u32,
) -> ChatRequest {
    let mut prompt = String::new();
    if let Some(previous) = previous {
        prompt.push_str("The summary so far:\n\n");
        prompt.push_str(previous);
        prompt.push_str("\n\nThe conversation went on:\n\n");
    } else {
        prompt.push_str("The conversation:\n\n");
    }
    prompt.push_str(piece);
    prompt.push_str(
        "Write the summary of the whole conversation so far (the summary so far included).",
    );
    ChatRequest {
        messages: vec![Message::system(instructions), Message::user(prompt)],
        tools: Vec::new(),
        max_tokens: Some(max_tokens),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reprise_session::ToolCall;

    fn entries(messages: Vec<Message>) -> Vec<Entry> {
        messages.into_iter().map(Entry::message).collect()
    }

    fn call(id: &str) -> Message {
        Message::assistant_tool_calls(None, vec![ToolCall::function(id, "look", "{}")])
    }

    #[test]
    fn the_budget_leaves_room_for_the_reply() {
        let budget = Budget::new(8_192, 0.8, Some(4_096), None);
        assert_eq!(budget.reply_room, 2_048);
        assert_eq!(budget.limit, 6_144);
        let budget = Budget::new(2_048, 0.8, Some(256), None);
        assert_eq!(budget.limit, 1_638);
        let budget = Budget::new(2_048, 0.95, None, None);
        assert_eq!(budget.limit, 1_536);
    }

    #[test]
    fn a_summary_limit_that_is_set_wins_within_a_quarter_of_the_window() {
        assert_eq!(Budget::new(2_048, 0.8, Some(32), None).summary_limit(), 512);
        let set = |n| Budget::new(2_048, 0.8, Some(32), Some(n)).summary_limit();
        assert_eq!(set(32), 32);
        assert_eq!(set(100_000), 512);
        assert_eq!(set(0), 1);
    }

    #[test]
    fn a_cut_is_never_before_a_tool_result() {
        let history = entries(vec![
            Message::user("one"),
            call("a"),
            Message::tool("a", "x".repeat(3_000)),
            call("b"),
            Message::tool("b", "y".repeat(3_000)),
            Message::assistant("done"),
        ]);
        for keep in [0, 10, 500, 1_200, 2_500, 100_000] {
            let cut = choose_cut(&history, 0, keep).unwrap();
            assert_ne!(
                history[cut].as_message().unwrap().role,
                Role::Tool,
                "keep {keep}"
            );
            assert!(cut > 0);
        }
        // With little room, only the last message stays.
        assert_eq!(choose_cut(&history, 0, 10), Some(5));
        // With room for everything but the first message, all but it stay.
        assert_eq!(choose_cut(&history, 0, 100_000), Some(1));
    }

    #[test]
    fn a_lone_message_cannot_be_compacted() {
        let history = entries(vec![Message::user("one")]);
        assert_eq!(choose_cut(&history, 0, 0), None);
        let history = entries(vec![Message::user("one"), Message::assistant("two")]);
        assert_eq!(choose_cut(&history, 0, 0), Some(1));
        assert_eq!(choose_cut(&history, 1, 0), None);
    }

    #[test]
    fn the_summary_goes_where_the_template_accepts_it() {
        let folded = header(Some("be brief"), Some("S"), false);
        assert_eq!(folded.len(), 1);
        assert_eq!(folded[0].role, Role::System);
        assert!(folded[0].text().starts_with("be brief\n\n"));
        assert!(folded[0].text().ends_with("\n\nS"));
        let own = header(Some("be brief"), Some("S"), true);
        assert_eq!(own.len(), 2);
        assert_eq!(own[1].role, Role::User);
        let alone = header(None, Some("S"), false);
        assert_eq!(alone[0].role, Role::System);
        assert_eq!(header(None, None, false), Vec::<Message>::new());
    }

    #[test]
    fn a_long_text_keeps_its_ends() {
        let text = format!(
            "{}{}{}",
            "a".repeat(100),
            "b".repeat(1_000),
            "é".repeat(100)
        );
        let short = shorten(text, 300);
        assert!(short.starts_with("aaa"));
        assert!(short.ends_with("éé"));
        assert!(short.len() < 400);
    }
}
