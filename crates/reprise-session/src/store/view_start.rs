//! Where a transcript's model view starts, found from the end of the file: the line
//! of the latest compaction's `through`, so that a resume reads what the model sees
//! and not the history the summary replaced.
//!
//! Nothing here is trusted over the file: the offset found is only where reading
//! starts, and [`covers_the_view`] checks what was read from there against the rules
//! a whole load follows (the latest visible compaction, its `through`, every rewind's
//! target). When anything there needs the earlier history, the caller reads the
//! whole file instead.

use std::fs::File;
use std::os::unix::fs::FileExt;

use reprise_message::Entry;
use uuid::Uuid;

use crate::store::compaction::{COMPACTION_KIND, Compaction, compacted_tail};
use crate::store::rewind::{Rewind, rewound};

/// How far back from the end the latest compaction and its `through` are looked
/// for. A session whose last compaction is further back than this is read whole:
/// the search must cost little next to a whole read when there is no compaction.
pub const VIEW_SEARCH_LIMIT: u64 = 64 << 20;

/// How much is read at a time, going backwards.
const STEP: u64 = 1 << 20;

/// The needle that any line holding a compaction entry contains.
const COMPACTION_NEEDLE: &[u8] = b"\"compaction\"";

/// Where reading starts for the model view of a transcript.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ViewStart {
    /// The offset of the line of the latest compaction's `through` entry.
    pub offset: u64,
    /// The latest compaction entry's uuid.
    pub compaction: Uuid,
    /// The uuid its `through` names.
    pub through: Uuid,
}

/// The start of the line holding the latest compaction's `through` entry, in the
/// first `len` bytes of `file`, searched for backwards from the end over at most
/// [`VIEW_SEARCH_LIMIT`] bytes. `None` when there is none within that reach, or when
/// the latest compaction there cannot be read (a whole load then decides).
pub fn find_view_start(file: &File, len: u64) -> std::io::Result<Option<ViewStart>> {
    let floor = len.saturating_sub(VIEW_SEARCH_LIMIT);
    let mut found: Option<(Uuid, Uuid)> = None;
    let mut lines = BackwardLines::new(file, len, floor);
    while let Some((offset, line)) = lines.next_line()? {
        match found {
            None => {
                if memchr::memmem::find(line, COMPACTION_NEEDLE).is_none() {
                    continue;
                }
                let Ok(entry) = serde_json::from_slice::<Entry>(line) else {
                    continue;
                };
                if entry.kind.as_deref() != Some(COMPACTION_KIND) {
                    continue;
                }
                // The latest compaction decides; one that cannot be read leaves the
                // choice to a whole load.
                let Some(compaction) = Compaction::from_entry(&entry) else {
                    return Ok(None);
                };
                found = Some((entry.uuid, compaction.through));
            }
            Some((compaction, through)) => {
                let needle = through.to_string();
                if memchr::memmem::find(line, needle.as_bytes()).is_none() {
                    continue;
                }
                if serde_json::from_slice::<Entry>(line).is_ok_and(|entry| entry.uuid == through) {
                    return Ok(Some(ViewStart {
                        offset,
                        compaction,
                        through,
                    }));
                }
            }
        }
    }
    Ok(None)
}

/// Whether `entries`, read from a [`ViewStart`] to the end of the file, hold the
/// whole model view as a whole load would build it: the first entry is the
/// compaction's `through`, that compaction is the latest one no rewind hides, and
/// every rewind among them rewinds to an entry among them.
pub fn covers_the_view(entries: &[Entry], start: &ViewStart) -> bool {
    if entries.first().map(|entry| entry.uuid) != Some(start.through) {
        return false;
    }
    for (at, entry) in entries.iter().enumerate() {
        let Some(rewind) = Rewind::from_entry(entry) else {
            continue;
        };
        if let Some(to) = rewind.to
            && !entries[..at].iter().any(|earlier| earlier.uuid == to)
        {
            return false;
        }
    }
    let hidden = rewound(entries);
    let visible: Vec<&Entry> = entries
        .iter()
        .zip(&hidden)
        .filter_map(|(entry, hidden)| (!hidden).then_some(entry))
        .collect();
    let latest = visible
        .iter()
        .rev()
        .find(|entry| entry.kind.as_deref() == Some(COMPACTION_KIND));
    if latest.map(|entry| entry.uuid) != Some(start.compaction) {
        return false;
    }
    let owned: Vec<Entry> = visible.iter().map(|entry| (*entry).clone()).collect();
    matches!(compacted_tail(&owned), Some((compaction, 1)) if compaction.through == start.through)
}

/// How many lines the first `len` bytes of `file` hold, read a step at a time.
pub fn count_lines(file: &File, len: u64) -> std::io::Result<usize> {
    let mut buf = vec![0u8; STEP as usize];
    let mut at = 0;
    let mut lines = 0;
    while at < len {
        let want = (len - at).min(STEP) as usize;
        let read = file.read_at(&mut buf[..want], at)?;
        if read == 0 {
            break;
        }
        lines += memchr::memchr_iter(b'\n', &buf[..read]).count();
        at += read as u64;
    }
    Ok(lines)
}

/// The complete lines of a file, last first, down to a floor.
struct BackwardLines<'f> {
    file: &'f File,
    /// Bytes below this offset are not read yet.
    low: u64,
    floor: u64,
    /// The bytes from `low` on that are not handed out yet (complete lines, the
    /// first one perhaps cut at `low`).
    buf: Vec<u8>,
    /// Whether the torn tail (bytes after the last newline) was dropped yet.
    started: bool,
    /// The line handed out last.
    held: Vec<u8>,
}

impl<'f> BackwardLines<'f> {
    fn new(file: &'f File, len: u64, floor: u64) -> Self {
        BackwardLines {
            file,
            low: len,
            floor,
            buf: Vec::new(),
            started: false,
            held: Vec::new(),
        }
    }

    /// The next line back (without its newline) and its offset; `None` below the
    /// floor or at the start of the file.
    fn next_line(&mut self) -> std::io::Result<Option<(u64, &[u8])>> {
        loop {
            if !self.started {
                if self.low == 0 {
                    return Ok(None);
                }
                self.read_more()?;
                // A last line without its newline is a torn write: not an entry.
                match memchr::memrchr(b'\n', &self.buf) {
                    Some(end) => {
                        self.buf.truncate(end + 1);
                        self.started = true;
                    }
                    None if self.low == 0 || self.low <= self.floor => return Ok(None),
                    None => {
                        // The whole step is one torn line: keep looking back.
                        self.buf.clear();
                        continue;
                    }
                }
            }
            // `buf` ends with a newline (or is empty); the line before it starts
            // after the previous newline, if that is in `buf`.
            let body_end = self.buf.len().saturating_sub(1);
            if self.buf.is_empty() {
                if self.low == 0 || self.low <= self.floor {
                    return Ok(None);
                }
                self.read_more()?;
                continue;
            }
            match memchr::memrchr(b'\n', &self.buf[..body_end]) {
                Some(newline) => {
                    let start = newline + 1;
                    let offset = self.low + start as u64;
                    let line = self.buf.split_off(start);
                    return Ok(Some((offset, self.keep(line, body_end - start))));
                }
                None if self.low == 0 => {
                    let line = std::mem::take(&mut self.buf);
                    return Ok(Some((0, self.keep(line, body_end))));
                }
                None if self.low <= self.floor => return Ok(None),
                None => self.read_more()?,
            }
        }
    }

    /// Holds `line` (its newline cut off at `len`) until the next call.
    fn keep(&mut self, mut line: Vec<u8>, len: usize) -> &[u8] {
        line.truncate(len);
        self.held = line;
        &self.held
    }

    /// Reads the step below `low` in front of `buf`.
    fn read_more(&mut self) -> std::io::Result<()> {
        let from = self.low.saturating_sub(STEP);
        let mut chunk = vec![0u8; (self.low - from) as usize];
        self.file.read_exact_at(&mut chunk, from)?;
        chunk.extend_from_slice(&self.buf);
        self.buf = chunk;
        self.low = from;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reprise_message::Message;
    use std::io::Write;

    fn file_of(lines: &[String], torn: &str) -> File {
        let mut file = tempfile::tempfile().unwrap();
        for line in lines {
            writeln!(file, "{line}").unwrap();
        }
        file.write_all(torn.as_bytes()).unwrap();
        file
    }

    fn line(entry: &Entry) -> String {
        serde_json::to_string(entry).unwrap()
    }

    /// A compaction entry whose summary replaces everything up to `through`.
    fn compaction_through(summary: &str, through: Uuid) -> Entry {
        Compaction {
            summary: summary.into(),
            through,
            tokens_before: 1,
            tokens_after: 1,
        }
        .to_entry()
    }

    #[test]
    fn lines_come_back_last_first_across_steps_and_without_a_torn_tail() {
        // Lines of many lengths, some longer than a step, over several steps.
        let lines: Vec<String> = (0..400)
            .map(|i| "x".repeat((i * 7919) % 40_000 + if i % 97 == 0 { 1_500_000 } else { 0 }))
            .collect();
        let file = file_of(&lines, "{\"torn");
        let len = file.metadata().unwrap().len();
        let mut back = BackwardLines::new(&file, len, 0);
        let mut seen = Vec::new();
        while let Some((offset, line)) = back.next_line().unwrap() {
            seen.push((offset, line.to_vec()));
        }
        seen.reverse();
        let mut offset = 0u64;
        assert_eq!(seen.len(), lines.len());
        for ((at, got), want) in seen.iter().zip(&lines) {
            assert_eq!(*at, offset);
            assert_eq!(got, want.as_bytes());
            offset += want.len() as u64 + 1;
        }
    }

    #[test]
    fn the_start_is_the_line_of_the_latest_compactions_through() {
        let entries: Vec<Entry> = (0..50)
            .map(|i| Entry::message(Message::user(format!("m{i} \"compaction\""))))
            .collect();
        let old = compaction_through("old", entries[10].uuid);
        let latest = compaction_through("new", entries[40].uuid);
        let mut lines: Vec<String> = entries[..30].iter().map(line).collect();
        lines.push(line(&old));
        lines.extend(entries[30..].iter().map(line));
        lines.push(line(&latest));
        let file = file_of(&lines, "");
        let len = file.metadata().unwrap().len();
        let start = find_view_start(&file, len).unwrap().unwrap();
        let offset: usize = lines[..41].iter().map(|l| l.len() + 1).sum();
        assert_eq!(start.offset, offset as u64);
        assert_eq!(start.through, entries[40].uuid);
        assert_eq!(start.compaction, latest.uuid);
        let mut read: Vec<Entry> = entries[40..].to_vec();
        read.push(latest.clone());
        assert!(covers_the_view(&read, &start));
        // A rewind to before what was read: the whole file decides.
        read.push(
            Rewind {
                to: Some(entries[5].uuid),
                files: None,
                undo: None,
                undoes: None,
            }
            .to_entry(),
        );
        assert!(!covers_the_view(&read, &start));
    }

    #[test]
    fn no_start_without_a_compaction_or_with_a_through_not_found() {
        let entries: Vec<Entry> = (0..5)
            .map(|i| Entry::message(Message::user(format!("m{i}"))))
            .collect();
        let lines: Vec<String> = entries.iter().map(line).collect();
        let file = file_of(&lines, "");
        let len = file.metadata().unwrap().len();
        assert_eq!(find_view_start(&file, len).unwrap(), None);
        let mut lines = lines;
        lines.push(line(&compaction_through("s", Uuid::now_v7())));
        let file = file_of(&lines, "");
        let len = file.metadata().unwrap().len();
        assert_eq!(find_view_start(&file, len).unwrap(), None);
        assert_eq!(count_lines(&file, len).unwrap(), 6);
    }
}
