//! A literal search ignoring ASCII case at the speed of one respecting it.
//!
//! Aho-Corasick ignoring case can only look for the needles' first or rarest bytes in
//! both cases (`m` or `M`: every few bytes of text), where respecting case it finds
//! whole needles with SIMD. On a history of few hits, where every byte is searched,
//! that made a search ignoring case (the default for a query in lower case) several
//! times slower than one respecting it. So the text is read in blocks of whole lines,
//! each block is copied with its ASCII letters in lower case (a loop the compiler
//! turns into vector instructions), and the needles, in lower case, are looked for
//! in the copy with case.

use std::io::Read;
use std::path::Path;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};

/// Bytes read at a time (more for a longer line).
const BLOCK: usize = 256 * 1024;
/// Bytes read first; each read after it reads twice as many, up to [`BLOCK`]. A
/// search that stops at a run's first hits (the default view of a frequent query)
/// finds them in the first few kilobytes, and reading the whole of a short file was
/// a fifth of its time.
const FIRST_READ: usize = 16 * 1024;

/// ASCII needles found ignoring ASCII case.
#[derive(Clone, Debug)]
pub(crate) struct FoldedNeedles {
    /// The needles in lower case, looked for with case.
    automaton: AhoCorasick,
}

/// `src` with its ASCII letters in lower case, into `dst` (as long as `src`).
fn fold_into(src: &[u8], dst: &mut [u8]) {
    for (to, &from) in dst.iter_mut().zip(src) {
        *to = from | (u8::from(from.wrapping_sub(b'A') < 26) << 5);
    }
}

impl FoldedNeedles {
    /// `None` when a needle is not ASCII (folding ASCII letters alone would not
    /// match what it matches) or empty.
    pub(crate) fn new(needles: &[String]) -> Option<FoldedNeedles> {
        if needles
            .iter()
            .any(|needle| needle.is_empty() || !needle.is_ascii())
        {
            return None;
        }
        let folded: Vec<String> = needles.iter().map(|n| n.to_ascii_lowercase()).collect();
        AhoCorasickBuilder::new()
            .match_kind(MatchKind::LeftmostFirst)
            .build(folded)
            .ok()
            .map(|automaton| FoldedNeedles { automaton })
    }

    /// The first needle in `haystack` from `at` on, ignoring ASCII case.
    pub(crate) fn find_at(&self, haystack: &[u8], at: usize) -> Option<(usize, usize)> {
        let rest = haystack.get(at..)?;
        let mut folded = vec![0; rest.len()];
        fold_into(rest, &mut folded);
        self.automaton
            .find(&folded[..])
            .map(|found| (at + found.start(), at + found.end()))
    }

    /// Whether `line` holds a needle, ignoring ASCII case.
    pub(crate) fn holds(&self, line: &[u8]) -> bool {
        self.find_at(line, 0).is_some()
    }

    /// Hands each line of the file at `path` that holds a needle (with its `\n`) to
    /// `on_line`, in order, until it returns false. `buffers` are kept between
    /// files by the caller.
    pub(crate) fn search_file(
        &self,
        path: &Path,
        buffers: &mut FoldBuffers,
        on_line: &mut dyn FnMut(&[u8]) -> bool,
    ) -> std::io::Result<()> {
        let mut file = std::fs::File::open(path)?;
        let FoldBuffers { text, folded } = buffers;
        // `text[..filled]` holds what was read and not yet searched, from a line's
        // start on.
        let mut filled = 0;
        let mut want = FIRST_READ;
        loop {
            if text.len() < filled + want {
                text.resize(filled + want, 0);
            }
            let read = match file.read(&mut text[filled..filled + want]) {
                Ok(read) => read,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(error) => return Err(error),
            };
            filled += read;
            want = (want * 2).min(BLOCK);
            // The whole lines read; at the end, the rest too.
            let end = if read == 0 {
                filled
            } else {
                match memchr::memrchr(b'\n', &text[..filled]) {
                    Some(last) => last + 1,
                    None => continue,
                }
            };
            if folded.len() < end {
                folded.resize(end, 0);
            }
            fold_into(&text[..end], &mut folded[..end]);
            let mut from = 0;
            while let Some(found) = self.automaton.find(&folded[from..end]) {
                let at = from + found.start();
                let start = memchr::memrchr(b'\n', &text[..at]).map_or(0, |newline| newline + 1);
                let line_end =
                    memchr::memchr(b'\n', &text[at..end]).map_or(end, |newline| at + newline + 1);
                if !on_line(&text[start..line_end]) {
                    return Ok(());
                }
                from = line_end;
            }
            if read == 0 {
                return Ok(());
            }
            text.copy_within(end..filled, 0);
            filled -= end;
        }
    }
}

/// The buffers of [`FoldedNeedles::search_file`], kept by each searching thread.
#[derive(Default)]
pub(crate) struct FoldBuffers {
    text: Vec<u8>,
    folded: Vec<u8>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folded_needles_find_what_aho_corasick_ignoring_case_finds() {
        let needle_sets: [&[&str]; 4] = [
            &[" on tab"],
            &["plit", "migration plan", "\\\"quoted\\\""],
            &["abc"],
            &["xy-1", "zzzz"],
        ];
        // Texts cut from a small alphabet, so that the needles and near misses of
        // them come often, in every case; with the bytes next to the letters.
        let alphabet = b" aAbBcCnNoOtTpPlLiIxXyYzZ-1@[`{\\\"\n";
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for needles in needle_sets {
            let needles: Vec<String> = needles.iter().map(|n| (*n).to_owned()).collect();
            let folded = FoldedNeedles::new(&needles).unwrap();
            let reference = AhoCorasickBuilder::new()
                .match_kind(MatchKind::LeftmostFirst)
                .ascii_case_insensitive(true)
                .build(&needles)
                .unwrap();
            let mut found = 0;
            for round in 0..3_000_u32 {
                let len = (next() % 200) as usize;
                let mut text: Vec<u8> = (0..len)
                    .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                    .collect();
                // Half the texts hold a needle somewhere, in a random case.
                if round.is_multiple_of(2) {
                    let needle = needles[(next() % needles.len() as u64) as usize].as_bytes();
                    let at = (next() as usize) % (text.len() + 1);
                    let cased: Vec<u8> = needle
                        .iter()
                        .map(|b| {
                            if next().is_multiple_of(2) {
                                b.to_ascii_uppercase()
                            } else {
                                *b
                            }
                        })
                        .collect();
                    text.splice(at..at, cased);
                }
                let at = (next() as usize) % (text.len() + 1);
                let ours = folded.find_at(&text, at);
                let input = aho_corasick::Input::new(&text).span(at..text.len());
                let theirs = reference.find(input).map(|m| (m.start(), m.end()));
                assert_eq!(
                    ours,
                    theirs,
                    "{needles:?} in {:?}",
                    String::from_utf8_lossy(&text)
                );
                found += usize::from(ours.is_some());
            }
            assert!(found > 500, "{needles:?}: {found}");
        }
    }

    #[test]
    fn a_file_gives_each_line_that_holds_a_needle_once_across_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lines.jsonl");
        let mut text = String::new();
        let mut expected = Vec::new();
        for n in 0..20_000_usize {
            // Lines long and short, some longer than a block.
            let filler = "x".repeat(if n.is_multiple_of(997) {
                BLOCK + 10
            } else {
                n % 300
            });
            let line = if n.is_multiple_of(7) {
                format!("{n} {filler} the Migration PLAN twice: migration plan\n")
            } else {
                format!("{n} {filler} migration pla\n")
            };
            if n.is_multiple_of(7) {
                expected.push(line.clone());
            }
            text.push_str(&line);
        }
        // The last line without its newline holds a needle too.
        text.push_str("last MIGRATION plan");
        expected.push("last MIGRATION plan".to_owned());
        std::fs::write(&path, &text).unwrap();
        let folded = FoldedNeedles::new(&["migration plan".to_owned()]).unwrap();
        let mut seen = Vec::new();
        let mut buffers = FoldBuffers::default();
        folded
            .search_file(&path, &mut buffers, &mut |line| {
                seen.push(String::from_utf8(line.to_vec()).unwrap());
                true
            })
            .unwrap();
        assert_eq!(seen, expected);
        // Stopped by the caller after two lines.
        let mut count = 0;
        folded
            .search_file(&path, &mut buffers, &mut |_| {
                count += 1;
                count < 2
            })
            .unwrap();
        assert_eq!(count, 2);
    }
}
