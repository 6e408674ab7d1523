//! The reprise agent: a model, tools and a session store, with every message written
//! the moment it exists.
#![deny(missing_docs)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod tool;

pub use tool::{Approval, Tool, ToolApprover, ToolInvocation, ToolOutput};
