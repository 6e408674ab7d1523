//! reprise-redact
#![deny(missing_docs)]
