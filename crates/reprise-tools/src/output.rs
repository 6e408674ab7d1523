//! A command's output, kept within a bound: its beginning and its end, and how many
//! bytes between them were dropped.

use std::collections::VecDeque;

/// What is kept of one output stream: at most `cap` bytes, half from its start and
/// half from its end.
#[derive(Debug)]
pub struct CappedOutput {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    half: usize,
    total: u64,
}

impl CappedOutput {
    /// Keeps at most `cap` bytes.
    pub fn new(cap: usize) -> CappedOutput {
        let half = cap / 2;
        CappedOutput {
            head: Vec::new(),
            tail: VecDeque::new(),
            half,
            total: 0,
        }
    }

    /// Takes the next bytes of the stream.
    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = self.half.saturating_sub(self.head.len());
        let into_head = room.min(bytes.len());
        self.head.extend_from_slice(&bytes[..into_head]);
        bytes = &bytes[into_head..];
        if bytes.len() >= self.half {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.half..]);
            return;
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.half);
        self.tail.drain(..overflow);
        self.tail.extend(bytes);
    }

    /// How many bytes the stream had.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The text kept, with a line saying how many bytes were cut from its middle.
    pub fn text(&self) -> String {
        let kept = self.head.len() + self.tail.len();
        let cut = self.total - kept as u64;
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        if cut > 0 {
            if !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!("[… {cut} bytes cut …]\n"));
        }
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        text.push_str(&String::from_utf8_lossy(&tail));
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_kept_whole() {
        let mut output = CappedOutput::new(16);
        output.push(b"hello ");
        output.push(b"world");
        assert_eq!(output.text(), "hello world");
        assert_eq!(output.total(), 11);
    }

    #[test]
    fn long_output_keeps_its_start_and_end_and_says_what_was_cut() {
        let mut output = CappedOutput::new(8);
        for chunk in [&b"abc"[..], b"defgh", b"ijklmnop", b"qr", b"stuvwxyz"] {
            output.push(chunk);
        }
        assert_eq!(output.text(), "abcd\n[… 18 bytes cut …]\nwxyz");
        let mut output = CappedOutput::new(8);
        output.push(b"0123456789abcdefghij");
        assert_eq!(output.text(), "0123\n[… 12 bytes cut …]\nghij");
    }
}
