//! The list cache read as `docs/format.md` lays it out, for tests that look into it.

use std::path::Path;

use reprise_runs::LIST_CACHE;

/// One run as the cache file holds it: its folder name and last message.
pub struct CachedEntry {
    pub name: String,
    pub last_message: Option<String>,
}

struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn take(&mut self, len: usize) -> &[u8] {
        let (taken, rest) = self.0.split_at(len);
        self.0 = rest;
        taken
    }

    fn int<const N: usize>(&mut self) -> u64 {
        let mut word = [0; 8];
        word[..N].copy_from_slice(self.take(N));
        u64::from_le_bytes(word)
    }

    fn text<const N: usize>(&mut self) -> String {
        let len = self.int::<N>() as usize;
        String::from_utf8(self.take(len).to_vec()).unwrap()
    }
}

/// The entries of the list cache of `runs_dir`, in the file's order.
pub fn cached_entries(runs_dir: &Path) -> Vec<CachedEntry> {
    let file = std::fs::read(runs_dir.join(LIST_CACHE)).unwrap();
    let mut bytes = Bytes(&file);
    assert_eq!(bytes.take(19), b"reprise list cache\n");
    assert_eq!(bytes.int::<4>(), 3, "format");
    assert_eq!(bytes.text::<1>(), env!("CARGO_PKG_VERSION"));
    let count = bytes.int::<4>();
    let _checksum = bytes.int::<8>();
    let entries = (0..count)
        .map(|_| {
            let name = bytes.text::<2>();
            let flags = bytes.int::<1>();
            bytes.take(56);
            if flags & 1 != 0 {
                bytes.take(56);
            }
            if flags & 2 != 0 {
                bytes.take(8);
            }
            // Updated at (seconds, nanoseconds), message count, session id.
            bytes.take(8 + 4 + 8);
            bytes.text::<2>();
            let mut optional = |flag| (flags & flag != 0).then(|| bytes.text::<4>());
            let last_message = optional(4);
            let _first = optional(8);
            let _title = optional(16);
            for _ in 0..bytes.int::<2>() {
                bytes.text::<2>();
            }
            CachedEntry { name, last_message }
        })
        .collect();
    assert!(bytes.0.is_empty(), "bytes after the last entry");
    entries
}

/// The run names the list cache of `runs_dir` holds, sorted.
pub fn cached_names(runs_dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = cached_entries(runs_dir)
        .into_iter()
        .map(|entry| entry.name)
        .collect();
    names.sort();
    names
}
