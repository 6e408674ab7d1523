//! What `reprise show` marks of rewinds: the messages a rewind took out of the
//! model's view (a line before each stretch of them, a mark on each), and a line
//! where each rewind entry is, saying what it did.

use std::collections::HashMap;
use std::io::Read;

use reprise_runs::{CONVERSATION_JSONL, RunFolder};
use reprise_session::{Entry, Rewind, Role, rewound};

use crate::display::text::{one_line, shorten};

/// The bytes every rewind entry's line holds (the JSON of `"kind":"rewind"` as the
/// store writes it; quotes inside texts are escaped, so a message cannot).
const REWIND_BYTES: &[u8] = br#""kind":"rewind""#;

/// Whether the conversation of `run` may hold a rewind: its file scanned for a
/// rewind entry's bytes, far faster than reading it. A run kept elsewhere than in
/// its folder is read whole anyway: `true`.
pub fn may_hold_rewinds(run: &RunFolder) -> bool {
    let path = run.dir.join(CONVERSATION_JSONL);
    let Ok(mut file) = std::fs::File::open(&path) else {
        return true;
    };
    let finder = memchr::memmem::Finder::new(REWIND_BYTES);
    let keep = REWIND_BYTES.len() - 1;
    let mut buffer = vec![0u8; 1 << 20];
    let mut held = 0;
    loop {
        let read = match file.read(&mut buffer[held..]) {
            Ok(0) => return false,
            Ok(read) => read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            // Read whole, the file says what is wrong with it.
            Err(_) => return true,
        };
        let filled = held + read;
        if finder.find(&buffer[..filled]).is_some() {
            return true;
        }
        // The pattern may straddle two reads: its possible start is kept.
        held = keep.min(filled);
        buffer.copy_within(filled - held..filled, 0);
    }
}

/// The marks of a conversation's entries, by position.
#[derive(Debug, Default)]
pub struct RewoundMarks {
    /// For each entry, whether a rewind took it out of the model's view.
    pub hidden: Vec<bool>,
    /// The line before each stretch of rewound entries, at its first entry.
    pub before: HashMap<usize, String>,
    /// The line of each rewind entry.
    pub at: HashMap<usize, String>,
}

/// A message `show` prints: the person's or the agent's, with text.
fn is_shown(entry: &Entry) -> bool {
    entry.as_message().is_some_and(|message| {
        matches!(message.role, Role::User | Role::Assistant) && !message.text().trim().is_empty()
    })
}

impl RewoundMarks {
    /// The marks of `entries`.
    pub fn of(entries: &[Entry]) -> RewoundMarks {
        let hidden = rewound(entries);
        let mut before = HashMap::new();
        let mut at = 0;
        while at < entries.len() {
            if !hidden[at] {
                at += 1;
                continue;
            }
            let start = at;
            while at < entries.len() && hidden[at] {
                at += 1;
            }
            let count = entries[start..at].iter().filter(|e| is_shown(e)).count();
            before.insert(
                start,
                format!("── rewound: the {count} messages below left the model's view ──"),
            );
        }
        let at = entries
            .iter()
            .enumerate()
            .filter_map(|(index, entry)| {
                Some((index, rewind_line(&Rewind::from_entry(entry)?, entries)))
            })
            .collect();
        RewoundMarks { hidden, before, at }
    }
}

/// What a rewind entry did, in a line.
fn rewind_line(rewind: &Rewind, entries: &[Entry]) -> String {
    if rewind.undoes.is_some() {
        let files = if rewind.files.is_some() {
            "; the files went back too"
        } else {
            ""
        };
        return format!(
            "── undo of the last rewind: its messages are back in the model's view{files} ──"
        );
    }
    let files = if rewind.files.is_some() {
        "the conversation and the files"
    } else {
        "the conversation only"
    };
    let message = rewind.to.and_then(|to| {
        let entry = entries.iter().find(|entry| entry.uuid == to)?;
        Some(entry.as_message()?.text())
    });
    match message {
        Some(text) => format!(
            "── rewind to just before “{}”: {files} ──",
            shorten(&one_line(&text), 60)
        ),
        None if rewind.files.is_some() => {
            "── rewind of the files only: the conversation stays ──".to_owned()
        }
        None => "── rewind (its message is not in the conversation) ──".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn the_scan_finds_a_rewind_across_two_reads_and_nothing_in_a_text() {
        let dir = tempfile::tempdir().unwrap();
        let folder = reprise_runs::create_run_folder(dir.path()).unwrap();
        let path = folder.dir.join(CONVERSATION_JSONL);
        let mut file = std::fs::File::create(&path).unwrap();
        // A message quoting the bytes has its quotes escaped.
        writeln!(file, r#"{{"text":"say \"kind\":\"rewind\""}}"#).unwrap();
        file.write_all(&vec![b'x'; (1 << 20) - 10]).unwrap();
        assert!(!may_hold_rewinds(&folder));
        file.write_all(REWIND_BYTES).unwrap();
        assert!(may_hold_rewinds(&folder));
    }
}
