//! A working folder in a temporary folder, and calls of the tools as an agent makes
//! them.

use std::path::PathBuf;

use reprise_agent::{Tool, ToolContext, ToolInvocation, ToolOutput};
use tokio_util::sync::CancellationToken;

/// A temporary folder holding `work/` (the working folder, with `src/`, and `.run/`
/// protected), `tmp/` (the commands' temporary folder) and `outside/`.
pub struct Folders {
    pub base: tempfile::TempDir,
}

impl Folders {
    pub fn new() -> Folders {
        let base = tempfile::tempdir().unwrap();
        for dir in ["work/.run", "work/src", "tmp", "outside"] {
            std::fs::create_dir_all(base.path().join(dir)).unwrap();
        }
        Folders { base }
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.base.path().join(relative)
    }

    pub fn workspace(&self) -> reprise_tools::Workspace {
        reprise_tools::Workspace::new(self.path("work")).protect(".run")
    }

    pub fn settings(&self) -> reprise_tools::CommandSettings {
        let mut settings = reprise_tools::CommandSettings::default();
        settings.sandbox.temp_dir = Some(self.path("tmp"));
        settings
    }
}

/// Calls `tool` as the agent would, with `arguments` as JSON text.
pub async fn call(tool: &dyn Tool, arguments: &str) -> ToolOutput {
    call_cancellable(tool, arguments, CancellationToken::new()).await
}

/// Calls `tool` with a cancellation token of the caller's.
pub async fn call_cancellable(
    tool: &dyn Tool,
    arguments: &str,
    cancel: CancellationToken,
) -> ToolOutput {
    tool.call(ToolInvocation {
        name: tool.spec().name,
        arguments: arguments.into(),
        context: ToolContext {
            session_id: "s".into(),
            agent: "main".into(),
            subagent: false,
            call_id: "c".into(),
            idempotency_key: "k".into(),
            cancel,
        },
    })
    .await
}
