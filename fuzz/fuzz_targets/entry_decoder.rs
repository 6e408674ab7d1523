//! The fast entry decoder against serde's, on every line of the input.
//!
//! The input is a JSONL file. Its lines are decoded in order by one
//! `FastEntryDecoder` (which keeps its buffer between lines, as the loader's does),
//! each from its offset in the whole input, and by serde's derived decoder from the
//! line alone. Checked on every line:
//!
//! - an entry from the fast decoder is serde's entry, and its line ends where the
//!   line's `\n` (or the input) ends;
//! - the fast decoder refuses a line only when serde's decoder refuses it too, except
//!   for values nested past its limit (100 levels, every `{` and `[` counted), which
//!   it leaves to serde's by design.
#![no_main]

use libfuzzer_sys::fuzz_target;
use reprise_session::{Entry, FastEntryDecoder};

/// Lines with at least this many `{` and `[` may be left to serde's decoder (the fast
/// decoder's nesting limit, counted as an upper bound over the whole line).
const NESTING_LIMIT: usize = 100;

fuzz_target!(|data: &[u8]| {
    let mut decoder = FastEntryDecoder::default();
    let mut start = 0;
    loop {
        let end = memchr::memchr(b'\n', &data[start..]).map_or(data.len(), |at| start + at);
        let line = &data[start..end];
        let slow = serde_json::from_slice::<Entry>(line).ok();
        match decoder.decode_line(data, start) {
            Some((fast, fast_end)) => {
                assert_eq!(
                    fast_end,
                    end,
                    "the fast decoder ended the line elsewhere: {}",
                    String::from_utf8_lossy(line)
                );
                assert_eq!(
                    Some(&fast),
                    slow.as_ref(),
                    "the decoders differ on: {}",
                    String::from_utf8_lossy(line)
                );
            }
            None => {
                let brackets = line.iter().filter(|b| matches!(b, b'{' | b'[')).count();
                assert!(
                    slow.is_none() || brackets >= NESTING_LIMIT,
                    "the fast decoder refused an entry serde reads: {}",
                    String::from_utf8_lossy(line)
                );
            }
        }
        if end == data.len() {
            break;
        }
        start = end + 1;
    }
});
