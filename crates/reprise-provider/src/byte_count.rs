//! A writer that only counts what it is given: the length of an encoding without
//! keeping it.

use std::io::Write;

/// A writer that keeps nothing and counts the bytes written to it.
#[derive(Debug, Default)]
pub struct ByteCounter {
    /// The bytes written so far.
    pub bytes: u64,
}

impl Write for ByteCounter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.bytes += bytes.len() as u64;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
