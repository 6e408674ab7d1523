//! Tree objects: one per folder, listing its entries' names, kinds and object ids.
//!
//! The format (docs/format.md, "Checkpoints of the working folder") is the magic line
//! `reprise-tree 1\n`, then one record per entry, sorted by name bytes: a kind byte
//! (`f` file, `x` executable file, `l` symbolic link, `d` folder, `u` not captured:
//! a file or folder that could not be read), the 32 bytes of the entry's object id
//! (zeros for `u`), the name's bytes and a NUL.

use std::collections::HashMap;
use std::path::PathBuf;

use crate::id::ObjectId;

/// Every captured path and its object.
pub(crate) type Flat = HashMap<PathBuf, (Kind, ObjectId)>;

const MAGIC: &[u8] = b"reprise-tree 1\n";

/// What an entry of a tree is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A regular file without the executable bit.
    File,
    /// A regular file with the owner's executable bit.
    Exec,
    /// A symbolic link; its object holds the link's target text.
    Link,
    /// A folder; its object is a tree.
    Dir,
    /// A file or folder that could not be read when the checkpoint was taken (no
    /// permission): not captured, and left as it is by every restore. Its id is
    /// [`ObjectId::NONE`].
    Unreadable,
}

impl Kind {
    fn byte(self) -> u8 {
        match self {
            Kind::File => b'f',
            Kind::Exec => b'x',
            Kind::Link => b'l',
            Kind::Dir => b'd',
            Kind::Unreadable => b'u',
        }
    }

    fn from_byte(byte: u8) -> Option<Self> {
        match byte {
            b'f' => Some(Kind::File),
            b'x' => Some(Kind::Exec),
            b'l' => Some(Kind::Link),
            b'd' => Some(Kind::Dir),
            b'u' => Some(Kind::Unreadable),
            _ => None,
        }
    }
}

/// One entry of a tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TreeEntry {
    /// The entry's name within its folder: no `/`, no NUL, not `.` or `..`.
    pub(crate) name: Vec<u8>,
    /// What it is.
    pub(crate) kind: Kind,
    /// The object holding its content (a tree for a folder).
    pub(crate) id: ObjectId,
}

/// Whether `name` can be an entry's name.
pub(crate) fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name != b"." && name != b".." && !name.contains(&b'/') && !name.contains(&0)
}

/// The bytes of the tree holding `entries`, which are sorted by name here.
pub(crate) fn encode(entries: &mut [TreeEntry]) -> Vec<u8> {
    entries.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    let size = entries
        .iter()
        .map(|entry| entry.name.len() + 34)
        .sum::<usize>();
    let mut out = Vec::with_capacity(MAGIC.len() + size);
    out.extend_from_slice(MAGIC);
    for entry in entries.iter() {
        out.push(entry.kind.byte());
        out.extend_from_slice(&entry.id.0);
        out.extend_from_slice(&entry.name);
        out.push(0);
    }
    out
}

/// The entries of the tree `bytes`; an error saying what is wrong for anything that
/// [`encode`] does not write (unsorted or repeated names included).
pub(crate) fn decode(bytes: &[u8]) -> Result<Vec<TreeEntry>, &'static str> {
    let mut rest = bytes.strip_prefix(MAGIC).ok_or("not a tree")?;
    let mut entries: Vec<TreeEntry> = Vec::new();
    while let Some((&kind, after)) = rest.split_first() {
        let kind = Kind::from_byte(kind).ok_or("unknown entry kind")?;
        if after.len() < 32 {
            return Err("truncated entry");
        }
        let (id, after) = after.split_at(32);
        let end = after
            .iter()
            .position(|&b| b == 0)
            .ok_or("unterminated name")?;
        let name = &after[..end];
        if !valid_name(name) {
            return Err("invalid name");
        }
        if entries
            .last()
            .is_some_and(|last| last.name.as_slice() >= name)
        {
            return Err("names out of order");
        }
        let mut raw = [0u8; 32];
        raw.copy_from_slice(id);
        entries.push(TreeEntry {
            name: name.to_vec(),
            kind,
            id: ObjectId(raw),
        });
        rest = &after[end + 1..];
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn entry_strategy() -> impl Strategy<Value = TreeEntry> {
        (
            proptest::collection::vec(1u8..=255, 1..20),
            0..4u8,
            any::<[u8; 32]>(),
        )
            .prop_filter_map("a valid name", |(name, kind, id)| {
                valid_name(&name).then(|| TreeEntry {
                    name,
                    kind: [Kind::File, Kind::Exec, Kind::Link, Kind::Dir][usize::from(kind)],
                    id: ObjectId(id),
                })
            })
    }

    proptest! {
        #[test]
        fn trees_decode_to_what_was_encoded(entries in proptest::collection::vec(entry_strategy(), 0..30)) {
            let mut unique = entries;
            unique.sort_by(|a, b| a.name.cmp(&b.name));
            unique.dedup_by(|a, b| a.name == b.name);
            let mut shuffled = unique.clone();
            shuffled.reverse();
            let bytes = encode(&mut shuffled);
            prop_assert_eq!(decode(&bytes).unwrap(), unique);
        }

        #[test]
        fn decoding_any_bytes_never_panics(tail in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut bytes = MAGIC.to_vec();
            bytes.extend_from_slice(&tail);
            let _ = decode(&bytes);
        }
    }

    #[test]
    fn damaged_trees_are_refused() {
        let id = ObjectId::of(b"x");
        let mut entries = vec![
            TreeEntry {
                name: b"b".to_vec(),
                kind: Kind::File,
                id,
            },
            TreeEntry {
                name: b"a".to_vec(),
                kind: Kind::Dir,
                id,
            },
        ];
        let good = encode(&mut entries);
        assert_eq!(decode(&good).unwrap(), entries);
        assert_eq!(decode(b"reprise-tree 2\n"), Err("not a tree"));
        assert_eq!(decode(&good[..good.len() - 1]), Err("unterminated name"));
        let mut unsorted = good.clone();
        let second = MAGIC.len() + 34 + 1;
        unsorted.swap(MAGIC.len() + 33, second + 33);
        assert!(decode(&unsorted).is_err());
        let mut slash = good;
        slash[MAGIC.len() + 33] = b'/';
        assert_eq!(decode(&slash), Err("invalid name"));
    }
}
