//! Whether a reader needs a run's whole conversation to mark rewinds: a quick scan
//! of its file for a rewind entry.

use std::io::Read;

use crate::{CONVERSATION_JSONL, RunFolder};

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn the_scan_finds_a_rewind_across_two_reads_and_nothing_in_a_text() {
        let dir = tempfile::tempdir().unwrap();
        let folder = crate::create_run_folder(dir.path()).unwrap();
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
