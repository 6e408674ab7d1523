//! Decoding entry lines. [`fast`] walks a line once and gives what `Entry`'s derived
//! `Deserialize` gives; the derived decoder is the fallback for anything it declines.

pub(crate) mod fast;
