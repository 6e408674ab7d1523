//! Reading entry lines: two decoders that return the same entries.
//!
//! - **serde's**: the `Deserialize` impls derived on [`Entry`] and the message types.
//!   It reads entries from anything serde reads (a [`serde_json::Value`], a line
//!   found by the fork's uuid search, a bare-message line), and every line the fast
//!   decoder leaves.
//! - **the fast one** ([`fast`]): reads a line of bytes in one pass. The loader
//!   (`store::jsonl`) tries it first on every line and hands serde's decoder what
//!   it refuses: a line that is not an entry, or one it cannot vouch for.
//!
//! Why two: loading is where decoding speed shows (a session is read whole on
//! resume), and serde's decoder alone loads a session at well under the fast one's
//! speed, with more memory. Hand-written `Deserialize` impls (known keys matched
//! without allocating, each value read once: no buffering for `flatten` and the
//! untagged `Content`) were measured too: alone they came close to the fast decoder,
//! but in the loader serde's decoder only sees the lines the fast one refuses, and on
//! those (bare-message lines) they were no faster than the derived impls. Most of
//! serde's time is serde_json's own string decoding (escape by escape, into a buffer
//! that starts empty on every line, then copied out), which no impl changes.
//! So the types keep derived impls, and the fast decoder does what serde_json cannot:
//! it unescapes 8 bytes at a time into a buffer kept between lines, checks UTF-8 with
//! SIMD, reads the timestamps reprise writes without a general parser, and finds
//! the line's end while decoding. The figures, and how to measure them again
//! (`cargo bench -p reprise-runs --bench storage -- load`), are in
//! `docs/benchmarks.md` of the repository.
//!
//! How the two are kept equal: the fast decoder gives up on anything serde's decoder
//! refuses, and the property tests in [`fast`] generate lines of every shape (any key
//! order, unknown fields at every level, whitespace, duplicate and escaped keys, every
//! type for every field, odd strings, truncated lines) and check that it returns
//! serde's entry, or none only when serde refuses the line too, and that it takes
//! every line serde accepts. A field added to the types is added to the fast decoder
//! and to the tests' line generator too.

use std::sync::atomic::{AtomicBool, Ordering};

use reprise_message::Entry;

mod fast;

pub(crate) use fast::EntryDecoder;

/// Whether lines are decoded by serde alone (the fast decoder skipped).
static SERDE_ONLY: AtomicBool = AtomicBool::new(false);

/// Decodes entry lines with serde's decoder alone (`true`), or with the fast decoder
/// first (`false`, the default), for the rest of the process: the storage benchmark
/// compares the two in one run.
pub fn decode_with_serde_only(serde_only: bool) {
    SERDE_ONLY.store(serde_only, Ordering::Relaxed);
}

/// The fast decoder on its own, without the loader's fallback to serde's: for the
/// fuzz targets (`fuzz/` in the repository), which check it against serde's decoder.
#[doc(hidden)]
#[derive(Default)]
pub struct FastEntryDecoder(EntryDecoder);

impl FastEntryDecoder {
    /// The entry on the line that starts at `bytes[start]` and ends at the next `\n`
    /// (or the end of `bytes`), and where that line ends; `None` where the loader
    /// would hand the line to serde's decoder. Like the loader, it keeps its buffer
    /// between lines.
    pub fn decode_line(&mut self, bytes: &[u8], start: usize) -> Option<(Entry, usize)> {
        self.0.decode_line(bytes, start)
    }
}

/// Decodes entry lines one at a time as the file loader does: the fast decoder
/// first, serde's decoder for what it leaves. For stores that keep each entry's line
/// on its own (a database row); it keeps its buffer between lines.
#[derive(Default)]
pub struct EntryLineDecoder(EntryDecoder);

impl EntryLineDecoder {
    /// The entry on `line` (one line, without its `\n`), or serde's error for it.
    pub fn decode(&mut self, line: &[u8]) -> Result<Entry, serde_json::Error> {
        if let Some((entry, end)) = self.0.decode_line_if_fast(line, 0)
            && end == line.len()
        {
            return Ok(entry);
        }
        serde_json::from_slice(line)
    }
}

impl EntryDecoder {
    /// The fast decoder's [`EntryDecoder::decode_line`], unless the process decodes
    /// with serde alone (then `None`: the caller uses serde's decoder).
    pub(crate) fn decode_line_if_fast(
        &mut self,
        bytes: &[u8],
        start: usize,
    ) -> Option<(Entry, usize)> {
        if SERDE_ONLY.load(Ordering::Relaxed) {
            return None;
        }
        self.decode_line(bytes, start)
    }
}

#[cfg(test)]
mod line_decoder_tests {
    #![allow(clippy::unwrap_used)]

    use super::EntryLineDecoder;
    use reprise_message::{Entry, Message};

    #[test]
    fn lines_decode_to_what_serde_reads_and_bad_lines_give_serdes_error() {
        let mut decoder = EntryLineDecoder::default();
        let entry = Entry::message(Message::user("tab\there, quote \" and é"));
        let line = serde_json::to_string(&entry).unwrap();
        assert_eq!(decoder.decode(line.as_bytes()).unwrap(), entry);
        // Whitespace the fast decoder leaves to serde's.
        let spaced = line.replacen(':', " : ", 1);
        assert_eq!(decoder.decode(spaced.as_bytes()).unwrap(), entry);
        let error = decoder.decode(b"{\"uuid\": 3}").unwrap_err();
        assert!(error.to_string().contains("UUID"), "{error}");
        assert!(decoder.decode(&line.as_bytes()[..line.len() - 1]).is_err());
    }
}
