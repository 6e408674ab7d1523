//! Names of objects and checkpoints: the SHA-256 of their bytes.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest, Sha256};

/// What the name of an object stored compressed (a zstd frame) ends with.
pub(crate) const COMPRESSED_SUFFIX: &str = ".zst";

/// The name of an object in the store: the SHA-256 of its bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ObjectId(pub(crate) [u8; 32]);

impl ObjectId {
    /// The id of an entry that has no object (one not captured).
    pub(crate) const NONE: Self = Self([0; 32]);

    /// The id of `bytes`.
    pub(crate) fn of(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }

    /// The object's path below the objects folder: `ab/cdef…`, as git fans them out.
    pub(crate) fn rel_path(&self) -> String {
        let hex = self.to_string();
        format!("{}/{}", &hex[..2], &hex[2..])
    }

    /// The path below the objects folder of the object stored compressed:
    /// `ab/cdef….zst`.
    pub(crate) fn rel_path_compressed(&self) -> String {
        format!("{}{COMPRESSED_SUFFIX}", self.rel_path())
    }

    /// Parses 64 hexadecimal digits; `None` for anything else.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let bytes = text.as_bytes();
        if bytes.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, pair) in bytes.chunks_exact(2).enumerate() {
            let high = hex_value(pair[0])?;
            let low = hex_value(pair[1])?;
            out[i] = high << 4 | low;
        }
        Some(Self(out))
    }
}

fn hex_value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        _ => None,
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectId({self})")
    }
}

impl serde::Serialize for ObjectId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for ObjectId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Self::parse(&text).ok_or_else(|| serde::de::Error::custom("not 64 lowercase hex digits"))
    }
}

/// The id of a checkpoint: the SHA-256 of its record, 64 lowercase hexadecimal digits
/// when written (`Display`, serde) and parsed (`FromStr`).
#[derive(
    Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct CheckpointId(pub(crate) ObjectId);

impl fmt::Display for CheckpointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Debug for CheckpointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CheckpointId({})", self.0)
    }
}

/// A text that is not a checkpoint id.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a checkpoint id: {text:?} (a checkpoint id is 64 hexadecimal digits)")]
pub struct InvalidCheckpointId {
    /// The text given.
    pub text: String,
}

impl FromStr for CheckpointId {
    type Err = InvalidCheckpointId;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        ObjectId::parse(text)
            .map(Self)
            .ok_or_else(|| InvalidCheckpointId {
                text: text.to_owned(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_text_and_refuse_other_text() {
        let id = ObjectId::of(b"hello");
        assert_eq!(
            id.to_string(),
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        assert_eq!(ObjectId::parse(&id.to_string()), Some(id));
        assert_eq!(id.rel_path()[..3], *"2c/");
        for bad in [
            "",
            "2CF24DBA5FB0A30E26E83B2AC5B9E29E1B161E5C1FA7425E73043362938B9824",
            "../x",
            "2cf2",
        ] {
            assert!(bad.parse::<CheckpointId>().is_err(), "{bad}");
        }
    }
}
