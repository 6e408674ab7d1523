//! The SSE decoder on any bytes, split anywhere: it never panics, and what it
//! returns does not depend on where the body was split.
//!
//! The input's first byte says how many cuts follow (its value mod 16), each as two
//! bytes (a big-endian position in the body, mod its length + 1); the rest is the
//! body. `decode_sse` reads the body in one piece, cut at those positions, and (up
//! to 512 bytes) one byte at a time; the results (the completion, or the error's text) and the
//! stream events sent must be the same (ids the accumulator invents for calls sent
//! without one are random, and compared as a fixed text).
#![no_main]

use futures::stream;
use libfuzzer_sys::fuzz_target;
use reprise_provider::{ProviderError, StreamEvent, decode_sse};

/// The longest body also read a byte at a time.
const BYTEWISE_MAX: usize = 512;

/// `id` with an id the accumulator invented for a call the server sent without one
/// (`call_<index>_<16 random hex digits>`) replaced by a fixed text, since the random
/// part differs on every decoding.
fn without_invented_id(id: &mut String) {
    let invented = id
        .strip_prefix("call_")
        .and_then(|rest| rest.split_once('_'))
        .is_some_and(|(index, random)| {
            !index.is_empty()
                && index.bytes().all(|b| b.is_ascii_digit())
                && random.len() == 16
                && random.bytes().all(|b| b.is_ascii_hexdigit())
        });
    if invented {
        *id = "call_<invented>".to_owned();
    }
}

/// What one decoding gave: the completion or the error's text, and the events sent.
fn decode(pieces: Vec<&[u8]>) -> (Result<String, String>, Vec<StreamEvent>) {
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let items = pieces.into_iter().map(Ok::<_, ProviderError>);
    let result = futures::executor::block_on(decode_sse(stream::iter(items), Some(&sender)))
        .map(|mut completion| {
            for call in completion.message.tool_calls.iter_mut().flatten() {
                without_invented_id(&mut call.id);
            }
            format!("{completion:?}")
        })
        .map_err(|error| error.to_string());
    drop(sender);
    let mut events = Vec::new();
    while let Ok(mut event) = receiver.try_recv() {
        if let StreamEvent::ToolCallStarted { id, .. } = &mut event {
            without_invented_id(id);
        }
        events.push(event);
    }
    (result, events)
}

fuzz_target!(|data: &[u8]| {
    let Some((&count, rest)) = data.split_first() else {
        return;
    };
    let cuts_len = usize::from(count % 16) * 2;
    if rest.len() < cuts_len {
        return;
    }
    let (cuts, body) = rest.split_at(cuts_len);
    let mut positions: Vec<usize> = cuts
        .chunks_exact(2)
        .map(|pair| usize::from(u16::from_be_bytes([pair[0], pair[1]])) % (body.len() + 1))
        .collect();
    positions.sort_unstable();
    let mut pieces = Vec::new();
    let mut from = 0;
    for at in positions {
        pieces.push(&body[from..at]);
        from = at;
    }
    pieces.push(&body[from..]);

    let whole = decode(vec![body]);
    let cut = decode(pieces);
    assert_eq!(whole, cut, "cutting the body changed the result");
    // A byte at a time costs a poll per byte: only on short bodies, to keep the
    // fuzzer's pace.
    if body.len() <= BYTEWISE_MAX {
        let bytes = decode(body.chunks(1).collect());
        assert_eq!(
            whole, bytes,
            "reading the body a byte at a time changed the result"
        );
    }
});
