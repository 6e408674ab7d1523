//! What the items of a conversation need to know from further on in its file:
//! which result answers each call, what the start and approval records say of a
//! call, and which stretches a rewind took out of the model's view. A first
//! reading gathers these small facts, so that a second one can draw the items as
//! the entries come, whatever the conversation's length.
//!
//! The entries are handed over in order to [`FactsReader::push`]. A conversation
//! with rewinds needs one more reading ([`Facts::wants_targets`],
//! [`Facts::push_target`]): a rewind names the entry it went back to, which comes
//! before it.

use std::collections::{HashMap, HashSet, VecDeque};

use reprise_session::{
    CallDecision, Compaction, Entry, Rewind, Role, StartedCall, awaiting_calls, decided_call,
    started_calls,
};
use uuid::Uuid;

use crate::text::{one_line, shorten};

/// Whether `entry` counts as one message of those a rewind takes out of the
/// model's view: every message (the person's, replies, tool calls and results),
/// as the model is sent them. The chat's preview, its line after a rewind and
/// `reprise show` count with this.
pub fn counts_as_message(entry: &Entry) -> bool {
    entry.as_message().is_some()
}

/// A call paired with its result: the reply's position, the call's place among
/// the reply's calls, the result's position.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Pair {
    reply: usize,
    call: usize,
    result: usize,
}

/// A stretch of entries a rewind took out of the model's view: positions
/// `start..end`, holding `messages` messages ([`counts_as_message`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stretch {
    /// The first entry out of view.
    pub start: usize,
    /// The position after the last.
    pub end: usize,
    /// How many messages it holds.
    pub messages: usize,
}

/// Reads the facts of a conversation from its entries, handed over in order.
#[derive(Default)]
pub struct FactsReader {
    /// Position of the next entry.
    index: usize,
    /// For each call id, the calls still waiting for a result, oldest first.
    pending: HashMap<String, VecDeque<(usize, usize)>>,
    pairs: Vec<Pair>,
    records: CallRecords,
    /// Each rewind's position, entry uuid and what it holds.
    rewinds: Vec<(usize, Uuid, Rewind)>,
    /// The entries compactions summarised through.
    throughs: HashSet<Uuid>,
}

impl FactsReader {
    /// Takes in the next entry.
    pub fn push(&mut self, entry: &Entry) {
        let index = self.index;
        self.index += 1;
        let Some(message) = entry.as_message() else {
            self.records.add(entry);
            if let Some(compaction) = Compaction::from_entry(entry) {
                self.throughs.insert(compaction.through);
            }
            if let Some(rewind) = Rewind::from_entry(entry) {
                self.rewinds.push((index, entry.uuid, rewind));
            }
            return;
        };
        match message.role {
            // The first result after a call that answers its id, each result
            // answering one call: the oldest call still waiting gets it.
            Role::Tool => {
                if let Some(id) = message.tool_call_id.as_deref()
                    && let Some(waiting) = self.pending.get_mut(id)
                    && let Some((reply, call)) = waiting.pop_front()
                {
                    if waiting.is_empty() {
                        self.pending.remove(id);
                    }
                    self.pairs.push(Pair {
                        reply,
                        call,
                        result: index,
                    });
                }
            }
            Role::Assistant => {
                for (call, tool_call) in message.calls().iter().enumerate() {
                    self.pending
                        .entry(tool_call.id.clone())
                        .or_default()
                        .push_back((index, call));
                }
            }
            _ => {}
        }
    }

    /// The facts read.
    pub fn finish(self) -> Facts {
        // Results came in order: the list of those used is sorted already.
        let used = self.pairs.iter().map(|pair| pair.result).collect();
        let mut pairs = self.pairs;
        pairs.sort_unstable();
        let undone: HashSet<Uuid> = self
            .rewinds
            .iter()
            .filter_map(|(_, _, rewind)| rewind.undoes)
            .collect();
        // Rewinds that take something out of view, by the entry they went back to.
        let rewinds: Vec<(usize, Uuid)> = self
            .rewinds
            .iter()
            .filter(|(_, uuid, _)| !undone.contains(uuid))
            .filter_map(|(at, _, rewind)| Some((*at, rewind.to?)))
            .collect();
        let rewinds_at = rewinds.iter().map(|(at, _)| *at).collect();
        let targets = self
            .rewinds
            .iter()
            .filter_map(|(_, _, rewind)| Some((rewind.to?, None)))
            .collect();
        Facts {
            throughs: self.throughs,
            pairs,
            used,
            records: self.records,
            targets,
            rewinds,
            found: HashMap::new(),
            stretches: Vec::new(),
            target_index: 0,
            target_messages: 0,
            prefix: HashMap::new(),
            ends: rewinds_at,
        }
    }
}

/// What the items of a conversation need to know from further on in its file.
#[derive(Default)]
pub struct Facts {
    /// The entries compactions summarised through.
    throughs: HashSet<Uuid>,
    /// Calls with their results, by reply and call.
    pairs: Vec<Pair>,
    /// The positions of the results that are shown beside their calls, in order.
    used: Vec<usize>,
    records: CallRecords,
    /// Each entry a rewind went back to, with its text shortened to a line when it
    /// is a message ([`Facts::push_target`]).
    targets: HashMap<Uuid, Option<Option<String>>>,
    /// The rewinds that take something out of view: position, entry gone back to.
    rewinds: Vec<(usize, Uuid)>,
    /// Where each entry gone back to first is.
    found: HashMap<Uuid, usize>,
    /// The stretches out of view, in order, apart from each other.
    stretches: Vec<Stretch>,
    /// Position of the next entry [`Facts::push_target`] takes.
    target_index: usize,
    /// Messages [`Facts::push_target`] has seen.
    target_messages: usize,
    /// Messages before each position where a stretch may start or end.
    prefix: HashMap<usize, usize>,
    /// The positions of the rewinds in `rewinds`.
    ends: HashSet<usize>,
}

impl Facts {
    /// The facts of a conversation held whole.
    pub fn of(entries: &[Entry]) -> Facts {
        let mut reader = FactsReader::default();
        for entry in entries {
            reader.push(entry);
        }
        let mut facts = reader.finish();
        if facts.wants_targets() {
            for entry in entries {
                facts.push_target(entry);
            }
            facts.end_targets();
        }
        facts
    }

    /// Whether the conversation holds a rewind, whose marks need a second reading
    /// of its entries through [`Facts::push_target`], then [`Facts::end_targets`].
    pub fn wants_targets(&self) -> bool {
        !self.targets.is_empty()
    }

    /// Takes in the next entry of the second reading.
    pub fn push_target(&mut self, entry: &Entry) {
        let index = self.target_index;
        self.target_index += 1;
        if self.ends.contains(&index) {
            self.prefix.insert(index, self.target_messages);
        }
        if let Some(target) = self.targets.get_mut(&entry.uuid)
            && target.is_none()
        {
            *target = Some(
                entry
                    .as_message()
                    .map(|message| shorten(&one_line(&message.text()), 60)),
            );
            self.found.insert(entry.uuid, index);
            self.prefix.insert(index, self.target_messages);
        }
        if counts_as_message(entry) {
            self.target_messages += 1;
        }
    }

    /// Ends the second reading: the stretches out of view are known.
    pub fn end_targets(&mut self) {
        let mut ranges: Vec<(usize, usize)> = self
            .rewinds
            .iter()
            .filter_map(|(at, to)| {
                let start = *self.found.get(to)?;
                (start < *at).then_some((start, *at))
            })
            .collect();
        ranges.sort_unstable();
        let mut merged: Vec<(usize, usize)> = Vec::new();
        for (start, end) in ranges {
            match merged.last_mut() {
                // Touching stretches are one: nothing in view between them.
                Some(last) if start <= last.1 => last.1 = last.1.max(end),
                _ => merged.push((start, end)),
            }
        }
        let prefix = |at: usize| self.prefix.get(&at).copied().unwrap_or_default();
        self.stretches = merged
            .into_iter()
            .map(|(start, end)| Stretch {
                start,
                end,
                messages: prefix(end) - prefix(start),
            })
            .collect();
    }

    /// The stretches a rewind took out of the model's view, in order.
    pub fn stretches(&self) -> &[Stretch] {
        &self.stretches
    }

    /// The line of the message a rewind went back to, when it is a message.
    pub fn target_text(&self, to: Uuid) -> Option<&str> {
        self.targets.get(&to)?.as_ref()?.as_deref()
    }

    /// The positions of the results shown beside their calls, in order.
    pub fn used(&self) -> &[usize] {
        &self.used
    }

    /// The results of the calls of the reply at `reply`: the call's place and the
    /// result's position, in the calls' order.
    pub fn results_of(&self, reply: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        let start = self.pairs.partition_point(|pair| pair.reply < reply);
        self.pairs[start..]
            .iter()
            .take_while(move |pair| pair.reply == reply)
            .map(|pair| (pair.call, pair.result))
    }

    /// The last position the item of the entry at `index` needs: its calls'
    /// results come after it.
    pub fn needs_until(&self, index: usize) -> usize {
        self.results_of(index)
            .map(|(_, result)| result)
            .max()
            .unwrap_or(index)
    }

    /// The entries compactions summarised through.
    pub fn compaction_throughs(&self) -> &HashSet<Uuid> {
        &self.throughs
    }

    /// What the records say of the calls.
    pub(crate) fn records(&self) -> &CallRecords {
        &self.records
    }
}

/// The start, approval and decision records of a conversation, by call.
#[derive(Default)]
pub(crate) struct CallRecords {
    pub(crate) started: HashMap<(Uuid, String), StartedCall>,
    pub(crate) checkpoints: HashMap<(Uuid, String), String>,
    pub(crate) waited: HashSet<(Uuid, String)>,
    pub(crate) decided: HashMap<(Uuid, String), CallDecision>,
}

impl CallRecords {
    /// Takes in the records an entry without a message holds.
    pub(crate) fn add(&mut self, entry: &Entry) {
        let checkpoint = reprise_session::checkpoint_of(entry).map(str::to_owned);
        for call in started_calls(entry) {
            let key = (call.entry, call.tool_call_id.clone());
            if let Some(checkpoint) = &checkpoint {
                self.checkpoints.insert(key.clone(), checkpoint.clone());
            }
            self.started.insert(key, call);
        }
        for call in awaiting_calls(entry) {
            self.waited.insert((call.entry, call.tool_call_id));
        }
        if let Some(decided) = decided_call(entry) {
            self.decided
                .insert((decided.entry, decided.tool_call_id), decided.decision);
        }
    }
}
