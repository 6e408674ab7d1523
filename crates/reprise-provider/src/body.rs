//! A request body encoded while it is sent: measured first (for its
//! `Content-Length`), then encoded again by a thread in pieces that go out as they
//! are made, so that a history holding large tool-call arguments is never copied
//! whole into a body.

use std::io::Write;

use bytes::Bytes;
use serde::Serialize;
use tokio::sync::mpsc;

use crate::byte_count::ByteCounter;

/// The size of the pieces the body is sent in.
const PIECE: usize = 64 * 1024;
/// How many pieces may wait to be sent: the most of the body in memory at once.
const WAITING: usize = 4;

/// A body for `reqwest` and its length in bytes.
pub(crate) struct StreamedBody {
    /// Its length, for `Content-Length`.
    pub length: u64,
    /// The body, encoded as it is read.
    pub body: reqwest::Body,
}

/// `value` as a JSON body, encoded while it is sent. Fails when `value` cannot be
/// encoded or the encoding thread cannot start.
pub(crate) fn streamed<T>(value: T) -> std::io::Result<StreamedBody>
where
    T: Serialize + Send + 'static,
{
    let mut counter = ByteCounter::default();
    serde_json::to_writer(&mut counter, &value)?;
    let (pieces, receiver) = mpsc::channel(WAITING);
    std::thread::Builder::new()
        .name("request-body".to_owned())
        .spawn(move || {
            let mut writer = PieceWriter {
                pieces,
                buffer: Vec::with_capacity(PIECE),
            };
            // A failure (the request dropped) ends the body short of its length,
            // which the HTTP client reports as a failed send.
            if serde_json::to_writer(&mut writer, &value).is_ok() {
                let _ = writer.flush();
            }
        })?;
    let stream = futures::stream::unfold(receiver, |mut receiver| async move {
        let piece = receiver.recv().await?;
        Some((Ok::<Bytes, std::io::Error>(piece), receiver))
    });
    Ok(StreamedBody {
        length: counter.bytes,
        body: reqwest::Body::wrap_stream(stream),
    })
}

/// A writer that sends what it is given in pieces of [`PIECE`] bytes, waiting
/// while [`WAITING`] pieces are unsent.
struct PieceWriter {
    pieces: mpsc::Sender<Bytes>,
    buffer: Vec<u8>,
}

impl PieceWriter {
    fn send(&mut self) -> std::io::Result<()> {
        let piece = std::mem::replace(&mut self.buffer, Vec::with_capacity(PIECE));
        self.pieces
            .blocking_send(Bytes::from(piece))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "request dropped"))
    }
}

impl Write for PieceWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        // Taken a piece's room at a time, so that a long run of text never makes
        // the buffer grow past a piece.
        let taken = bytes.len().min(PIECE - self.buffer.len());
        self.buffer.extend_from_slice(&bytes[..taken]);
        if self.buffer.len() == PIECE {
            self.send()?;
        }
        Ok(taken)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        self.send()
    }
}
