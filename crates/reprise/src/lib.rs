//! reprise
#![deny(missing_docs)]
