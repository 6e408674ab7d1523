//! Integration tests of reprise-redact: the secret corpus and properties.
//!
//! One test binary for the crate (each binary links the whole dependency tree);
//! one module per area.

mod corpus;
mod properties;
