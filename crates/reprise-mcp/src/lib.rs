//! reprise-mcp
#![deny(missing_docs)]
