//! Property test of the JSONL transcript against a model: random appends (with
//! repeated uuids), truncation at any byte, and corrupt lines written by someone else.
//! Every complete entry is read back, in order, never duplicated.

use std::collections::HashSet;
use std::io::Write;

use proptest::prelude::*;
use reprise_session::{Durability, Entry, Message};
use reprise_session::{JsonlWriter, load_file};
use uuid::Uuid;

#[derive(Clone, Debug)]
enum Op {
    /// Append entries picked from a small pool (so uuids repeat).
    Append(Vec<usize>),
    /// Cut the file at this fraction (per mille) of its length: any byte.
    Truncate(u16),
    /// Another writer adds a complete line that is not an entry.
    Corrupt(usize),
}

const GARBAGE: [&str; 4] = [
    "{\"uuid\": oops",
    "not json at all",
    "[1,2,3]",
    "{\"uuid\":\"0193c0de-0000-7000-8000-00000000zzzz\",\"ts\":\"x\"}",
];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => prop::collection::vec(0usize..12, 0..5).prop_map(Op::Append),
        1 => (0u16..=1000).prop_map(Op::Truncate),
        1 => (0usize..GARBAGE.len()).prop_map(Op::Corrupt),
    ]
}

/// A pool of entries; some with long text, some with characters that need escaping.
fn pool() -> Vec<Entry> {
    (0..12)
        .map(|i| {
            let text = match i % 3 {
                0 => format!("short {i}"),
                1 => format!("line\nbreaks \"quotes\" ünïcode 🎉 {i}"),
                _ => "long ".repeat(50 + i),
            };
            let mut entry = Entry::message(Message::user(text));
            entry.uuid = Uuid::from_u128(0x0193_c0de_0000_7000_8000_0000_0000_0000 + i as u128);
            entry
        })
        .collect()
}

/// The model: the file's lines, each a known entry or garbage, plus a torn tail.
#[derive(Default)]
struct Model {
    /// (end offset, entry or None for garbage)
    lines: Vec<(u64, Option<Entry>)>,
    torn: bool,
}

impl Model {
    fn len(&self) -> u64 {
        self.lines.last().map_or(0, |line| line.0)
    }
    fn uuids(&self) -> HashSet<Uuid> {
        self.lines
            .iter()
            .filter_map(|(_, entry)| entry.as_ref().map(|e| e.uuid))
            .collect()
    }
    fn entries(&self) -> Vec<Entry> {
        self.lines.iter().filter_map(|(_, e)| e.clone()).collect()
    }
}

fn encoded_len(entry: &Entry) -> u64 {
    serde_json::to_vec(entry).unwrap().len() as u64 + 1
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn transcript_matches_the_model(ops in prop::collection::vec(op(), 1..24)) {
        let pool = pool();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut writer = JsonlWriter::new(&path, "s", Durability::None);
        let mut model = Model::default();
        for op in ops {
            match op {
                Op::Append(picks) => {
                    let batch: Vec<Entry> = picks.iter().map(|&i| pool[i].clone()).collect();
                    let (report, warnings) = writer.append(&batch).unwrap();
                    // The writer cuts a torn tail, and says so, before appending.
                    // (Its first read also reports corrupt lines; only the cut counts here.)
                    let cuts = warnings.iter().filter(|w| w.message.contains("cut off")).count();
                    prop_assert_eq!(cuts, usize::from(model.torn));
                    model.torn = false;
                    let mut have = model.uuids();
                    let mut written = 0;
                    for entry in batch {
                        if have.insert(entry.uuid) {
                            let end = model.len() + encoded_len(&entry);
                            model.lines.push((end, Some(entry)));
                            written += 1;
                        }
                    }
                    prop_assert_eq!(report.written, written);
                    prop_assert_eq!(report.written + report.skipped, picks.len());
                }
                Op::Truncate(per_mille) => {
                    let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                    let at = len * u64::from(per_mille) / 1000;
                    if len > 0 {
                        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(at).unwrap();
                    }
                    model.lines.retain(|(end, _)| *end <= at);
                    model.torn = at > model.len();
                }
                Op::Corrupt(which) => {
                    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&path).unwrap();
                    file.write_all(GARBAGE[which].as_bytes()).unwrap();
                    file.write_all(b"\n").unwrap();
                    // A torn fragment and the garbage become one (bad) line.
                    let len = std::fs::metadata(&path).unwrap().len();
                    model.lines.push((len, None));
                    model.torn = false;
                }
            }
            // A reader sees exactly the model's entries, in order, no duplicates.
            let loaded = load_file(&path, "s").unwrap().unwrap_or_default();
            prop_assert_eq!(&loaded.entries, &model.entries());
            let garbage = model.lines.iter().filter(|(_, e)| e.is_none()).count();
            prop_assert_eq!(loaded.warnings.len(), garbage + usize::from(model.torn));
            let unique: HashSet<Uuid> = loaded.entries.iter().map(|e| e.uuid).collect();
            prop_assert_eq!(unique.len(), loaded.entries.len());
        }
    }
}
