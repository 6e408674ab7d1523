//! Helpers shared by the capture tests.

use futures::executor::block_on;
use futures::stream;
use reprise_provider::{Completion, ProviderError, decode_sse};

/// Decodes a stream whose bytes arrive in the given pieces.
pub fn decode_pieces(pieces: Vec<Vec<u8>>) -> Result<Completion, ProviderError> {
    block_on(decode_sse(
        stream::iter(pieces.into_iter().map(Ok::<_, ProviderError>)),
        None,
    ))
}
