//! Provider errors.

use std::time::Duration;

/// Why a model call failed.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// No connection could be made to the server.
    #[error("could not connect to {url}: {message}")]
    Connect {
        /// The URL tried.
        url: String,
        /// What failed.
        message: String,
    },
    /// The server answered with an error status that retrying cannot fix.
    #[error("{url} answered {status}: {message}")]
    Status {
        /// The URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The server's message.
        message: String,
    },
    /// Retries ran out.
    #[error("gave up after {attempts} attempts: {last}")]
    RetriesExhausted {
        /// How many attempts were made.
        attempts: u32,
        /// The last failure.
        last: Box<ProviderError>,
    },
    /// No response, or no new chunk, within the configured time.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The stream ended before the response was complete.
    #[error("the response stream was cut off: {0}")]
    StreamCut(String),
    /// A chunk or body could not be understood.
    #[error("malformed response: {0}")]
    Malformed(String),
    /// The call was cancelled.
    #[error("cancelled")]
    Cancelled,
    /// The configuration is unusable (bad URL, bad header).
    #[error("invalid provider configuration: {0}")]
    Config(String),
}
