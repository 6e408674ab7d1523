//! What the chat is told about its servers, as it happens.

use std::fmt;

use serde::Serialize;
use tokio::sync::mpsc::UnboundedSender;

/// What happened to a server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NoticeKind {
    /// It started and listed its tools.
    Started,
    /// It could not be started (or restarted).
    StartFailed,
    /// It died, timed out or broke its connection; it will be restarted on the next call.
    Failed,
    /// A call got an error answer (the server is still up).
    CallError,
    /// It is being restarted.
    Restarting,
    /// It was restarted.
    Restarted,
    /// Its restart budget is spent; it stays down for the rest of the run.
    GaveUp,
    /// Something about its tools (a name clash, a skipped tool).
    Tools,
}

/// One event about one server, for the chat to show.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct McpNotice {
    /// The server's name.
    pub server: String,
    /// What happened.
    pub kind: NoticeKind,
    /// What happened, in words.
    pub message: String,
}

impl fmt::Display for McpNotice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MCP server {:?}: {}", self.server, self.message)
    }
}

/// Where notices go: a channel, and the log.
#[derive(Clone, Default)]
pub(crate) struct Notifier {
    sender: Option<UnboundedSender<McpNotice>>,
}

impl Notifier {
    pub(crate) fn new(sender: Option<UnboundedSender<McpNotice>>) -> Self {
        Notifier { sender }
    }

    pub(crate) fn send(&self, server: &str, kind: NoticeKind, message: impl Into<String>) {
        let notice = McpNotice {
            server: server.to_string(),
            kind,
            message: message.into(),
        };
        match kind {
            NoticeKind::Started | NoticeKind::Restarted | NoticeKind::Restarting => {
                tracing::info!("{notice}")
            }
            _ => tracing::warn!("{notice}"),
        }
        if let Some(sender) = &self.sender {
            // A chat that stopped listening must not stop the tools.
            let _ = sender.send(notice);
        }
    }
}
