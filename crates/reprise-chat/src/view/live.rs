//! A conversation as it happens: the items a screen shows while the agent works,
//! with the agent's events folded into them ([`LiveView::apply`]). A resumed
//! conversation starts from the items its entries make ([`super::redraw`]); both
//! screens fold every later event here, and each says what the fold did
//! ([`Change`]) in its own way.

use std::collections::{BTreeMap, HashMap};

use reprise_agent::{AgentEvent, DEFAULT_AGENT_NAME, StartedCall, ToolOutput};
use reprise_provider::Usage;
use reprise_redact::Redactor;
use reprise_session::Role;

use crate::text::{arguments_head, compaction_line, cut_off_line, cut_off_note, subagent_prefix};

/// How many lines of a tool's result a screen shows under its call.
pub const RESULT_LINES_SHOWN: usize = 3;

/// One thing shown in the conversation.
#[derive(Clone, Debug, PartialEq)]
pub enum LiveItem {
    /// The person's message.
    User(String),
    /// The assistant's reply (Markdown).
    Assistant(String),
    /// A tool call and, once it returned, its result.
    Tool(ToolView),
    /// A line from the chat itself, such as `(resumed the conversation of …)`.
    Notice(String),
    /// Something the person should know (a corrupt line skipped, a torn tail cut).
    Warning(String),
    /// Something that failed.
    Error(String),
}

/// A tool call as shown.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolView {
    /// The call id.
    pub id: String,
    /// The agent that made it (empty for the main agent).
    pub agent: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, as JSON text (redacted); of long arguments only the start
    /// (see [`arguments_head`]).
    pub arguments: String,
    /// The arguments' whole size in bytes, when `arguments` holds only their start.
    pub arguments_len: Option<usize>,
    /// The result, once it returned.
    pub result: Option<ToolResultView>,
}

impl ToolView {
    /// The call `call` as it starts, made by `agent` (empty for the main agent), its
    /// arguments redacted (of long ones, the start that a preview reads).
    fn started(call: StartedCall<'_>, agent: &str, redactor: &Redactor) -> Self {
        Self {
            id: call.id.to_owned(),
            agent: agent.to_owned(),
            name: call.name.to_owned(),
            arguments: redactor
                .redact(arguments_head(call.arguments).0)
                .into_owned(),
            arguments_len: arguments_head(call.arguments).1,
            result: None,
        }
    }
}

/// A tool call's result as shown.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolResultView {
    /// What the tool returned, redacted (in a redrawn conversation, only the lines
    /// shown).
    pub content: String,
    /// Whether it failed (or was denied).
    pub is_error: bool,
    /// Lines left out of `content` (a redrawn result keeps only what is shown, so
    /// that a long conversation is not held twice).
    pub folded_lines: usize,
}

/// A subagent's work, shown under the call that started it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SubagentWork {
    /// The subagent.
    pub agent: String,
    /// Its replies ([`LiveItem::Assistant`]) and tool calls ([`LiveItem::Tool`]), in
    /// order.
    pub items: Vec<LiveItem>,
    /// Its reply arriving now.
    pub streaming: String,
}

impl SubagentWork {
    /// Moves the reply arriving now into the work.
    pub fn finish_stream(&mut self) {
        let text = std::mem::take(&mut self.streaming);
        if !text.trim().is_empty() {
            self.items.push(LiveItem::Assistant(text));
        }
    }
}

/// The conversation a screen shows: its items, the reply arriving now, the
/// subagents' work under their calls, and the session's token totals.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LiveView {
    /// The conversation.
    pub items: Vec<LiveItem>,
    /// The reply arriving now.
    pub streaming: String,
    /// Subagents' work, by the index in `items` of the call that started it.
    pub work: BTreeMap<usize, SubagentWork>,
    /// The call each working subagent works for, as an index in `items`.
    pub working: HashMap<String, usize>,
    /// The tools of the calls whose arguments are arriving now (shown until the
    /// reply is complete, when the calls themselves are).
    pub arriving: Vec<String>,
    /// The session's running totals of prompt and completion tokens: what its
    /// entries recorded when the chat opened it, plus every call since; `None` when
    /// the server never reported usage.
    pub usage: Option<Usage>,
}

/// Where an item is: in the conversation, or in a subagent's work under a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// `items[index]`.
    Main(usize),
    /// Item `index` of the work under the call `items[call]`.
    Work {
        /// The call's index in the conversation.
        call: usize,
        /// The item's index in the work.
        index: usize,
    },
}

/// What folding one event did, for a screen that prints as things happen.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// The main agent's reply arriving now grew by this text.
    Streamed(String),
    /// The main agent's reply is complete and recorded.
    ReplyDone,
    /// A subagent's reply grew by this text.
    SubagentText {
        /// The subagent.
        agent: String,
        /// The new text.
        text: String,
    },
    /// A subagent's message is recorded.
    SubagentReplyDone {
        /// The subagent.
        agent: String,
    },
    /// A line ([`LiveItem::Notice`] or [`LiveItem::Warning`]) was added here.
    Line(Place),
    /// A line ([`LiveItem::Notice`] or [`LiveItem::Warning`]) about a subagent whose
    /// work the items fold under its call, and so do not keep.
    Aside(LiveItem),
    /// A call was added here.
    CallStarted(Place),
    /// The call here has its result now.
    CallFinished {
        /// Where the call is; `None` when no open call had its id (the result is
        /// then the one given).
        place: Option<Place>,
        /// The agent that ran it.
        agent: String,
        /// The tool's name.
        name: String,
        /// The result, redacted, when no call had its id.
        orphan: Option<ToolResultView>,
        /// Whether the approver refused it (it did not run).
        denied: bool,
    },
    /// A model call failed and is tried again.
    Retrying {
        /// The agent whose call it was.
        agent: String,
        /// Which attempt comes next.
        attempt: u32,
        /// Why.
        reason: String,
    },
}

impl LiveView {
    /// The item at `place`.
    pub fn item(&self, place: Place) -> Option<&LiveItem> {
        match place {
            Place::Main(index) => self.items.get(index),
            Place::Work { call, index } => self.work.get(&call)?.items.get(index),
        }
    }

    /// The agent an item at `place` belongs to: the subagent for its work, the main
    /// agent's otherwise.
    pub fn agent_at(&self, place: Place) -> &str {
        match place {
            Place::Work { call, .. } => self
                .work
                .get(&call)
                .map_or(DEFAULT_AGENT_NAME, |work| work.agent.as_str()),
            Place::Main(_) => DEFAULT_AGENT_NAME,
        }
    }

    /// Moves the reply arriving now into the conversation.
    pub fn finish_stream(&mut self) {
        let text = std::mem::take(&mut self.streaming);
        if !text.trim().is_empty() {
            self.items.push(LiveItem::Assistant(text));
        }
    }

    /// The reply arriving now broke off and is asked for again: what came of it is
    /// shown as withdrawn, never as a reply.
    pub fn withdraw_stream(&mut self) {
        self.arriving.clear();
        let text = std::mem::take(&mut self.streaming);
        if !text.trim().is_empty() {
            self.items.push(LiveItem::Notice(format!(
                "{} … (withdrawn: this reply broke off and is asked for again)",
                text.trim_end()
            )));
        }
    }

    /// Says that a model call is tried again: in place of the line about the
    /// previous attempt when nothing came between (a server that cannot be
    /// reached fails every attempt the same way).
    pub fn retrying(&mut self, line: &str) {
        let is_retry = |text: &str| text.contains("(retrying, attempt ");
        match self.items.last_mut() {
            Some(LiveItem::Notice(last)) if is_retry(last) => *last = line.to_owned(),
            _ => self.items.push(LiveItem::Notice(line.to_owned())),
        }
    }

    /// Records a tool's result on its open call `id`, and says where that is.
    pub fn tool_result(&mut self, id: &str, result: ToolResultView) -> Option<usize> {
        record_result(&mut self.items, id, result)
    }

    /// A subagent took up the task of call `call_id`: its work goes under that call.
    pub fn subagent_task(&mut self, agent: &str, call_id: &str) {
        let index = self.items.iter().rposition(|item| {
            matches!(item, LiveItem::Tool(tool)
                if tool.id == call_id && tool.name == agent && tool.result.is_none())
        });
        if let Some(index) = index {
            self.working.insert(agent.to_owned(), index);
            self.work.entry(index).or_insert_with(|| SubagentWork {
                agent: agent.to_owned(),
                ..SubagentWork::default()
            });
        }
    }

    /// The main agent's call `id` returned: a subagent working for it is done.
    pub fn subagent_done(&mut self, id: &str) {
        let Some(index) = self.items.iter().rposition(
            |item| matches!(item, LiveItem::Tool(tool) if tool.id == id && tool.result.is_some()),
        ) else {
            return;
        };
        self.working.retain(|_, working| *working != index);
        if let Some(work) = self.work.get_mut(&index) {
            // A reply cut off by a stop is not kept, as the main agent's is not.
            work.streaming.clear();
        }
    }

    /// Whether a call waits for its result, or a subagent works.
    pub fn is_open(&self) -> bool {
        !self.working.is_empty()
            || self
                .items
                .iter()
                .any(|item| matches!(item, LiveItem::Tool(tool) if tool.result.is_none()))
    }

    /// Empties the conversation (a `/resume` redraws another).
    pub fn clear_items(&mut self) {
        self.items.clear();
        self.work.clear();
        self.working.clear();
    }

    /// Folds one of the agent's events into the items: arguments and results are
    /// redacted with `redactor`; a subagent's work goes under the call it works for.
    /// Says what changed.
    pub fn apply(&mut self, event: &AgentEvent, redactor: &Redactor) -> Vec<Change> {
        let main = event.agent() == DEFAULT_AGENT_NAME;
        if !main && let Some(changes) = self.apply_to_work(event, redactor) {
            return changes;
        }
        let mut changes = Vec::new();
        if let AgentEvent::CallResumed {
            agent,
            name,
            action,
            ..
        } = event
        {
            let line = crate::session::resumed_call_line(agent, name, *action);
            changes.push(self.push_line(LiveItem::Notice(line)));
        }
        // Said where it happened; nothing shown before it is taken away.
        if let Some(line) = compaction_line(event) {
            changes.push(self.push_line(LiveItem::Notice(line)));
        }
        match event {
            AgentEvent::TextDelta { text, .. } if main => {
                self.streaming.push_str(text);
                changes.push(Change::Streamed(text.clone()));
            }
            AgentEvent::TextDelta { agent, text } => changes.push(Change::SubagentText {
                agent: agent.clone(),
                text: text.clone(),
            }),
            AgentEvent::MessageRecorded { message, .. }
                if main && message.role == Role::Assistant =>
            {
                self.finish_stream();
                self.arriving.clear();
                changes.push(Change::ReplyDone);
            }
            AgentEvent::MessageRecorded { agent, .. } if !main => {
                changes.push(Change::SubagentReplyDone {
                    agent: agent.clone(),
                });
            }
            _ if let Some(call) = event.started_call() => {
                if main {
                    self.finish_stream();
                    self.arriving.clear();
                }
                let agent = if main { "" } else { call.agent };
                let view = ToolView::started(call, agent, redactor);
                self.items.push(LiveItem::Tool(view));
                changes.push(Change::CallStarted(Place::Main(self.items.len() - 1)));
            }
            AgentEvent::ToolCallFinished {
                agent,
                id,
                name,
                output,
                denied,
            } => {
                let (index, orphan) = finish_call(&mut self.items, id, output, redactor);
                let place = index.map(Place::Main);
                if main {
                    self.subagent_done(id);
                }
                changes.push(Change::CallFinished {
                    place,
                    agent: agent.clone(),
                    name: name.clone(),
                    orphan,
                    denied: *denied,
                });
            }
            AgentEvent::Usage { usage, .. } => {
                // The session's running totals: every model call, subagents' and
                // summaries' too, added to what its entries recorded before.
                let totals = self.usage.get_or_insert_with(Default::default);
                totals.prompt_tokens += usage.prompt_tokens;
                totals.completion_tokens += usage.completion_tokens;
                totals.total_tokens += usage.total_tokens;
            }
            AgentEvent::Retrying {
                agent,
                attempt,
                reason,
                ..
            } => {
                if main {
                    self.withdraw_stream();
                }
                self.retrying(&format!(
                    "{}(retrying, attempt {attempt}: {reason})",
                    subagent_prefix(agent)
                ));
                changes.push(Change::Retrying {
                    agent: agent.clone(),
                    attempt: *attempt,
                    reason: reason.clone(),
                });
            }
            AgentEvent::ReplyCutOff { agent, max_tokens } => {
                if main {
                    self.finish_stream();
                }
                let line = cut_off_line(agent, *max_tokens);
                changes.push(self.push_line(LiveItem::Warning(line)));
            }
            AgentEvent::SummaryCutOff { agent, max_tokens } => {
                let line = crate::text::summary_cut_off_line(agent, *max_tokens);
                changes.push(self.push_line(LiveItem::Warning(line)));
            }
            AgentEvent::ToolCallStreaming { name, .. } if main => {
                self.finish_stream();
                self.arriving.push(name.clone());
            }
            _ => {}
        }
        changes
    }

    fn push_line(&mut self, item: LiveItem) -> Change {
        self.items.push(item);
        Change::Line(Place::Main(self.items.len() - 1))
    }

    /// A subagent's event, folded under the call it works for; `None` when no call
    /// is known for it (then it is folded as the main agent's would be).
    fn apply_to_work(&mut self, event: &AgentEvent, redactor: &Redactor) -> Option<Vec<Change>> {
        if let AgentEvent::SubagentTask { agent, call_id } = event {
            self.subagent_task(agent, call_id);
            return Some(Vec::new());
        }
        let agent = event.agent().to_owned();
        let call = *self.working.get(&agent)?;
        let work = self.work.get_mut(&call)?;
        let mut changes = Vec::new();
        if let AgentEvent::CallResumed { name, action, .. } = event {
            let line = crate::session::resumed_call_line(&agent, name, *action);
            changes.push(Change::Aside(LiveItem::Notice(line)));
        }
        if let Some(line) = compaction_line(event) {
            changes.push(Change::Aside(LiveItem::Notice(line)));
        }
        let at = |work: &SubagentWork| Place::Work {
            call,
            index: work.items.len() - 1,
        };
        match event {
            AgentEvent::TextDelta { text, .. } => {
                work.streaming.push_str(text);
                changes.push(Change::SubagentText {
                    agent,
                    text: text.clone(),
                });
            }
            AgentEvent::MessageRecorded { message, .. } => {
                if message.role == Role::Assistant {
                    work.finish_stream();
                }
                changes.push(Change::SubagentReplyDone { agent });
            }
            _ if let Some(call) = event.started_call() => {
                work.finish_stream();
                let view = ToolView::started(call, "", redactor);
                work.items.push(LiveItem::Tool(view));
                changes.push(Change::CallStarted(at(work)));
            }
            AgentEvent::ToolCallFinished {
                id,
                name,
                output,
                denied,
                ..
            } => {
                let (index, orphan) = finish_call(&mut work.items, id, output, redactor);
                let place = index.map(|index| Place::Work { call, index });
                changes.push(Change::CallFinished {
                    place,
                    agent,
                    name: name.clone(),
                    orphan,
                    denied: *denied,
                });
            }
            AgentEvent::Retrying {
                attempt, reason, ..
            } => {
                work.streaming.clear();
                work.items.push(LiveItem::Notice(format!(
                    "(retrying, attempt {attempt}: {reason})"
                )));
                changes.push(Change::Retrying {
                    agent,
                    attempt: *attempt,
                    reason: reason.clone(),
                });
            }
            AgentEvent::ReplyCutOff { max_tokens, .. } => {
                work.finish_stream();
                work.items
                    .push(LiveItem::Warning(cut_off_note(*max_tokens)));
                changes.push(Change::Line(at(work)));
            }
            AgentEvent::SummaryCutOff { max_tokens, .. } => {
                let line = crate::text::summary_cut_off_line(&agent, *max_tokens);
                changes.push(Change::Aside(LiveItem::Warning(line)));
            }
            _ => {}
        }
        Some(changes)
    }
}

/// Puts `result` on the latest open call (no result yet) with id `id`, and says
/// where that is.
fn record_result(items: &mut [LiveItem], id: &str, result: ToolResultView) -> Option<usize> {
    let index = items.iter().rposition(
        |item| matches!(item, LiveItem::Tool(tool) if tool.id == id && tool.result.is_none()),
    )?;
    if let Some(LiveItem::Tool(tool)) = items.get_mut(index) {
        tool.result = Some(result);
    }
    Some(index)
}

/// Puts a call's result, redacted, on its open call in `items`: says where that is,
/// or gives the result back when no call had its id.
fn finish_call(
    items: &mut [LiveItem],
    id: &str,
    output: &ToolOutput,
    redactor: &Redactor,
) -> (Option<usize>, Option<ToolResultView>) {
    let result = ToolResultView {
        content: redactor.redact(&output.content).into_owned(),
        is_error: output.is_error,
        folded_lines: 0,
    };
    let index = record_result(items, id, result.clone());
    (index, index.is_none().then_some(result))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn started(agent: &str, id: &str, name: &str) -> AgentEvent {
        AgentEvent::ToolCallStarted {
            agent: agent.into(),
            id: id.into(),
            name: name.into(),
            arguments: "{}".into(),
        }
    }

    fn finished(agent: &str, id: &str, content: &str) -> AgentEvent {
        AgentEvent::ToolCallFinished {
            agent: agent.into(),
            id: id.into(),
            name: "t".into(),
            output: ToolOutput::ok(content),
            denied: false,
        }
    }

    #[test]
    fn results_land_on_their_call_and_a_subagent_s_work_under_its_call() {
        let redactor = Redactor::new();
        let mut live = LiveView::default();
        let main = DEFAULT_AGENT_NAME;
        let mut changes = Vec::new();
        for event in [
            started(main, "c1", "read_file"),
            started(main, "c2", "scout"),
            finished(main, "c1", "hello"),
            AgentEvent::SubagentTask {
                agent: "scout".into(),
                call_id: "c2".into(),
            },
            started("scout", "s1", "list"),
            finished("scout", "s1", "a\nb"),
        ] {
            changes.extend(live.apply(&event, &redactor));
        }
        assert!(live.is_open(), "the subagent works on");
        let LiveItem::Tool(read) = &live.items[0] else {
            panic!("{live:?}")
        };
        assert_eq!(
            read.result.as_ref().map(|r| r.content.as_str()),
            Some("hello")
        );
        let work = &live.work[&1];
        let LiveItem::Tool(list) = &work.items[0] else {
            panic!("{work:?}")
        };
        assert_eq!(
            list.result.as_ref().map(|r| r.content.as_str()),
            Some("a\nb")
        );
        let nested = Place::Work { call: 1, index: 0 };
        assert_eq!(live.agent_at(nested), "scout");
        assert!(changes.contains(&Change::CallStarted(nested)));
        live.apply(&finished(main, "c2", "found it"), &redactor);
        assert!(!live.is_open(), "the call returned: its subagent is done");
    }
}
