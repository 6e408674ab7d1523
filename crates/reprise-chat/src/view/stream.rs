//! The items of a conversation read as it goes: the entries of a second reading
//! handed over in order, each drawn as soon as what its item needs has come (its
//! calls' results, a few entries on), so that only those few are held.

use std::collections::VecDeque;

use reprise_session::Entry;

use super::{Facts, Item, Walk};

/// Draws the items of entries handed over in order ([`ItemStream::push`]), from the
/// facts of a first reading of the same entries.
pub struct ItemStream<'f> {
    walk: Walk<'f>,
    facts: &'f Facts,
    /// The entries not drawn yet, from position `first` on.
    held: VecDeque<Entry>,
    first: usize,
}

impl<'f> ItemStream<'f> {
    /// A stream over the entries `facts` were read from.
    pub fn new(facts: &'f Facts) -> Self {
        ItemStream {
            walk: Walk::new(facts),
            facts,
            held: VecDeque::new(),
            first: 0,
        }
    }

    /// Takes the next entry and hands every item that can be drawn now to `emit`.
    pub fn push(&mut self, entry: Entry, emit: &mut dyn FnMut(Item<'_>)) {
        self.held.push_back(entry);
        let last = self.first + self.held.len() - 1;
        while !self.held.is_empty() && self.facts.needs_until(self.first) <= last {
            self.draw_first(emit);
        }
    }

    /// Hands the items of what is still held to `emit`.
    pub fn finish(mut self, emit: &mut dyn FnMut(Item<'_>)) {
        while !self.held.is_empty() {
            self.draw_first(emit);
        }
    }

    fn draw_first(&mut self, emit: &mut dyn FnMut(Item<'_>)) {
        let first = self.first;
        if let Some(entry) = self.held.front() {
            let held = &self.held;
            let entry_at = |at: usize| held.get(at.checked_sub(first)?);
            self.walk.items_at(first, entry, &entry_at, emit);
        }
        self.held.pop_front();
        self.first += 1;
    }
}
