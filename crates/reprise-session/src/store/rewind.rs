//! Rewind entries: the conversation taken back to before one of the person's
//! messages, and the working folder's files with it, without rewriting the file.
//!
//! A rewind is one entry, `{"uuid","ts","kind":"rewind","to","files","undo"}`,
//! appended at the end. `to` names the first entry that leaves the model's view:
//! every entry from it up to the rewind entry is kept in the file (for people,
//! `reprise show`, exports) and left out of the model view ([`visible_entries`]).
//! `files` names the checkpoint of the working folder the rewind restored and `undo`
//! the checkpoint taken just before it (restoring it undoes the file part). An undo
//! is a rewind entry too, with `undoes` naming the rewind it takes back: that
//! rewind's messages come back into view.

use std::collections::HashSet;

use reprise_message::Entry;
use serde_json::{Map, Value};
use uuid::Uuid;

/// The `kind` of a rewind entry.
pub const REWIND_KIND: &str = "rewind";

/// What a rewind entry holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rewind {
    /// The first entry taken out of the model's view (the person's message rewound
    /// to); `None` when only the files were rewound.
    pub to: Option<Uuid>,
    /// The checkpoint the working folder was restored to; `None` when the files were
    /// left as they were.
    pub files: Option<String>,
    /// The checkpoint of the folder taken just before the restore.
    pub undo: Option<String>,
    /// The rewind this entry takes back (its messages come back into view).
    pub undoes: Option<Uuid>,
}

impl Rewind {
    /// The entry to append (a fresh uuid and the current time).
    pub fn to_entry(&self) -> Entry {
        let mut fields = Map::new();
        let mut put = |name: &str, value: Option<String>| {
            if let Some(value) = value {
                fields.insert(name.to_owned(), Value::String(value));
            }
        };
        put("to", self.to.map(|uuid| uuid.to_string()));
        put("files", self.files.clone());
        put("undo", self.undo.clone());
        put("undoes", self.undoes.map(|uuid| uuid.to_string()));
        Entry::other(REWIND_KIND, fields)
    }

    /// The rewind an entry holds: `None` for other kinds. Fields that cannot be read
    /// are left out (a rewind without a readable `to` hides nothing).
    pub fn from_entry(entry: &Entry) -> Option<Rewind> {
        if entry.kind.as_deref() != Some(REWIND_KIND) {
            return None;
        }
        let text = |name: &str| entry.extra.get(name)?.as_str().map(str::to_owned);
        let uuid = |name: &str| text(name)?.parse().ok();
        Some(Rewind {
            to: uuid("to"),
            files: text("files"),
            undo: text("undo"),
            undoes: uuid("undoes"),
        })
    }
}

/// For each entry, whether a rewind took it out of the model's view: it lies between
/// a rewind's `to` entry (included) and the rewind entry, and no later entry undoes
/// that rewind. Rewinds whose `to` names no earlier entry hide nothing.
pub fn rewound(entries: &[Entry]) -> Vec<bool> {
    let mut hidden = vec![false; entries.len()];
    let rewinds: Vec<(usize, Rewind)> = entries
        .iter()
        .enumerate()
        .filter_map(|(at, entry)| Some((at, Rewind::from_entry(entry)?)))
        .collect();
    if rewinds.is_empty() {
        return hidden;
    }
    let undone: HashSet<Uuid> = rewinds
        .iter()
        .filter_map(|(_, rewind)| rewind.undoes)
        .collect();
    for (at, rewind) in &rewinds {
        if undone.contains(&entries[*at].uuid) {
            continue;
        }
        let Some(to) = rewind.to else { continue };
        if let Some(start) = entries[..*at].iter().position(|entry| entry.uuid == to) {
            hidden[start..*at].fill(true);
        }
    }
    hidden
}

/// The entries the model's view is built from: `entries` without those a rewind
/// took out of view ([`rewound`]). The file keeps them all.
pub fn visible_entries(entries: Vec<Entry>) -> Vec<Entry> {
    let hidden = rewound(&entries);
    if !hidden.contains(&true) {
        return entries;
    }
    entries
        .into_iter()
        .zip(hidden)
        .filter_map(|(entry, hidden)| (!hidden).then_some(entry))
        .collect()
}

/// The latest rewind of `entries` that no later entry undoes, with its entry's
/// uuid: what an undo takes back.
pub fn last_rewind(entries: &[Entry]) -> Option<(Uuid, Rewind)> {
    let mut undone = HashSet::new();
    for entry in entries.iter().rev() {
        let Some(rewind) = Rewind::from_entry(entry) else {
            continue;
        };
        if let Some(target) = rewind.undoes {
            undone.insert(target);
            continue;
        }
        if !undone.contains(&entry.uuid) {
            return Some((entry.uuid, rewind));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use reprise_message::Message;

    fn texts(entries: &[Entry]) -> Vec<String> {
        entries
            .iter()
            .filter_map(Entry::as_message)
            .map(Message::text)
            .collect()
    }

    #[test]
    fn a_rewind_hides_its_range_and_an_undo_brings_it_back() {
        let mut entries: Vec<Entry> = ["one", "two", "three"]
            .iter()
            .map(|text| Entry::message(Message::user(*text)))
            .collect();
        let rewind = Rewind {
            to: Some(entries[1].uuid),
            files: Some("abc".to_owned()),
            undo: Some("def".to_owned()),
            undoes: None,
        };
        let entry = rewind.to_entry();
        let line = serde_json::to_string(&entry).unwrap();
        assert!(line.contains(r#""kind":"rewind""#), "{line}");
        let back: Entry = serde_json::from_str(&line).unwrap();
        assert_eq!(Rewind::from_entry(&back), Some(rewind));
        entries.push(back.clone());
        entries.push(Entry::message(Message::user("four")));
        assert_eq!(texts(&visible_entries(entries.clone())), ["one", "four"]);
        assert_eq!(last_rewind(&entries).map(|(uuid, _)| uuid), Some(back.uuid));

        entries.push(
            Rewind {
                undoes: Some(back.uuid),
                ..Rewind::default()
            }
            .to_entry(),
        );
        assert_eq!(
            texts(&visible_entries(entries.clone())),
            ["one", "two", "three", "four"]
        );
        assert_eq!(last_rewind(&entries), None);
    }

    #[test]
    fn a_rewind_naming_no_earlier_entry_hides_nothing() {
        let mut entries = vec![Entry::message(Message::user("one"))];
        entries.push(
            Rewind {
                to: Some(Uuid::now_v7()),
                ..Rewind::default()
            }
            .to_entry(),
        );
        assert_eq!(texts(&visible_entries(entries)), ["one"]);
    }
}
