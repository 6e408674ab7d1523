//! Reading entry lines: two decoders that return the same entries.
//!
//! - **serde's**: the `Deserialize` impls derived on [`Entry`] and the message types.
//!   It reads entries from anything serde reads (a [`serde_json::Value`], a line
//!   found by the fork's uuid search, a bare-message line), and every line the fast
//!   decoder leaves.
//! - **the fast one** ([`fast`]): reads a line of bytes in one pass. The loader
//!   ([`crate::jsonl`]) tries it first on every line and hands serde's decoder what
//!   it refuses: a line that is not an entry, or one it cannot vouch for.
//!
//! Why two: loading is the one place where decoding speed shows (a session is read
//! whole on resume), and serde's decoder alone loads a session at about two thirds of
//! the speed. The storage benchmark (`cargo bench -p reprise-session --bench storage
//! -- load`) loads a 100 MB session of coding-agent turns in fresh processes, with
//! each decoder in turn; two runs on a shared 2-core machine, busy with other builds
//! (every figure is low; the ratios within a run are what compare), printed:
//!
//! FIGURES
//!
//! Hand-written `Deserialize` impls (known keys matched without allocating, each value
//! read once: no buffering for `flatten` and the untagged `Content`) were measured as
//! well, as serde's decoder alone in the same benchmark: 176–263 MB/s against the fast
//! decoder's 251–422 MB/s in the same runs (0.62–0.70x best against best). On one
//! thread, in CPU time, they read these entries at 1.03–1.07x the derived impls'
//! speed and bare-message lines at 0.89–0.95x: most of the time is serde_json's own
//! string decoding (escape by escape, into a buffer that starts empty on every line,
//! then copied out), which no impl changes. So the types keep derived impls, and the
//! fast decoder does what serde_json cannot: it unescapes 8 bytes at a time into a
//! buffer kept between lines, checks UTF-8 with SIMD, reads the timestamps this crate
//! writes without a general parser and finds the line's end while decoding.
//!
//! How the two are kept equal: the fast decoder gives up on anything serde's decoder
//! refuses, and the property tests in [`fast`] generate lines of every shape (any key
//! order, unknown fields at every level, whitespace, duplicate and escaped keys, every
//! type for every field, odd strings, truncated lines) and check that it returns
//! serde's entry, or none only when serde refuses the line too, and that it takes
//! every line serde accepts. A field added to the types is added to the fast decoder
//! and to the tests' line generator too.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::entry::Entry;

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
