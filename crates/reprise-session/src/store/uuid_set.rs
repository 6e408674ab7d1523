//! The uuids of a transcript's entries, to skip a line that repeats one: a load
//! holds every entry's uuid, so they are kept in 16 bytes each where they can be.
//!
//! The uuids the chat writes (v7) grow with time, so in a file's order each is
//! larger than the one before: those go at the end of a sorted list, checked by
//! comparing with its last. The others (an imported session's random uuids, a
//! clock set back) go to a hash set, seeded: files come from anyone.

use std::collections::HashSet;

use uuid::Uuid;

/// A set of entry uuids; see the module documentation.
#[derive(Clone, Debug, Default)]
pub(crate) struct UuidSet {
    /// Uuids that came in increasing order.
    ordered: Vec<u128>,
    /// The others: each smaller than the last of `ordered` when it came.
    others: HashSet<Uuid, foldhash::fast::RandomState>,
}

impl UuidSet {
    /// Adds `uuid`; `false` when the set held it already.
    pub(crate) fn insert(&mut self, uuid: Uuid) -> bool {
        let value = uuid.as_u128();
        match self.ordered.last() {
            // Larger than every uuid of `ordered`, and so than every one of
            // `others`: new.
            Some(&last) if value <= last => {
                self.ordered.binary_search(&value).is_err() && self.others.insert(uuid)
            }
            _ => {
                self.ordered.push(value);
                true
            }
        }
    }

    /// Whether the set holds `uuid`.
    pub(crate) fn contains(&self, uuid: &Uuid) -> bool {
        self.ordered.binary_search(&uuid.as_u128()).is_ok() || self.others.contains(uuid)
    }

    /// Makes room for `additional` more uuids in increasing order.
    pub(crate) fn reserve(&mut self, additional: usize) {
        self.ordered.reserve(additional);
    }
}

impl Extend<Uuid> for UuidSet {
    /// Adds the uuids in increasing order, so that new ones go to the sorted list.
    fn extend<I: IntoIterator<Item = Uuid>>(&mut self, uuids: I) {
        let mut uuids: Vec<Uuid> = uuids.into_iter().collect();
        uuids.sort_unstable();
        for uuid in uuids {
            self.insert(uuid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn it_holds_what_a_hash_set_holds(values in prop::collection::vec(0u128..64, 0..200)) {
            let mut set = UuidSet::default();
            let mut reference = HashSet::new();
            for value in values {
                let uuid = Uuid::from_u128(value);
                prop_assert_eq!(set.insert(uuid), reference.insert(uuid));
                prop_assert!(set.contains(&uuid));
            }
            for value in 0u128..64 {
                let uuid = Uuid::from_u128(value);
                prop_assert_eq!(set.contains(&uuid), reference.contains(&uuid));
            }
        }
    }

    #[test]
    fn uuids_in_increasing_order_take_sixteen_bytes_each() {
        let mut set = UuidSet::default();
        for _ in 0..1000 {
            assert!(set.insert(Uuid::now_v7()));
        }
        assert_eq!(set.ordered.len(), 1000);
        assert!(set.others.is_empty());
    }
}
