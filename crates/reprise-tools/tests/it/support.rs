//! A working folder in a temporary folder, and calls of the tools as an agent makes
//! them.

use std::path::{Path, PathBuf};

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

    /// Settings whose commands start through this crate's trampoline binary.
    pub fn settings(&self) -> reprise_tools::CommandSettings {
        let mut settings = self.settings_without_trampoline();
        settings.sandbox.trampoline = Some(env!("CARGO_BIN_EXE_reprise-sandbox").into());
        settings
    }

    pub fn settings_without_trampoline(&self) -> reprise_tools::CommandSettings {
        let mut settings = reprise_tools::CommandSettings::default();
        settings.sandbox.temp_dir = Some(self.path("tmp"));
        settings
    }
}

/// Every path under `dir` with its content (files) or `None` (folders), sorted.
pub fn tree(dir: &Path) -> Vec<(PathBuf, Option<Vec<u8>>)> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                found.push((path.clone(), None));
                pending.push(path);
            } else {
                found.push((path.clone(), Some(std::fs::read(&path).unwrap())));
            }
        }
    }
    found.sort();
    found
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
