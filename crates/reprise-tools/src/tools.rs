//! The built-in tools as agent tools: each a [`tool()`](reprise_agent::tool()) over
//! one function of [`files`](crate::files) or [`command`](crate::command), declared
//! with what it does besides answering.

use std::sync::Arc;
use std::time::Duration;

use reprise_agent::{Tool, ToolEffects, tool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::command::{self, CommandSettings};
use crate::error::FileError;
use crate::files;
use crate::workspace::Workspace;
use crate::write_tool::WriteFileTool;

/// The names of the built-in tools, in the order [`builtin_tools`] gives them.
pub const BUILTIN_TOOL_NAMES: [&str; 5] = [
    "read_file",
    "list_dir",
    "write_file",
    "edit_file",
    "run_command",
];

#[derive(Deserialize, JsonSchema)]
struct ReadFileArgs {
    /// The file, relative to the working folder.
    path: String,
}

#[derive(Deserialize, JsonSchema)]
struct ListDirArgs {
    /// The folder, relative to the working folder (`.` for the working folder).
    #[serde(default)]
    path: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
struct EditFileArgs {
    /// The file, relative to the working folder.
    path: String,
    /// The text to replace: it must occur exactly once in the file.
    old: String,
    /// The text to put in its place.
    new: String,
}

#[derive(Deserialize, JsonSchema)]
struct RunCommandArgs {
    /// The command, run by `sh -c` in the working folder.
    command: String,
    /// Seconds the command may run before it is killed.
    #[serde(default)]
    timeout: Option<u64>,
}

/// A tool over one file function, run on a blocking thread.
fn file_tool<A>(
    name: &'static str,
    description: &'static str,
    workspace: Workspace,
    effects: ToolEffects,
    work: fn(&Workspace, A) -> Result<String, FileError>,
) -> impl Tool
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
{
    let made = tool(name, description, move |args: A, _| {
        let workspace = workspace.clone();
        async move {
            tokio::task::spawn_blocking(move || work(&workspace, args))
                .await
                .unwrap_or_else(|error| Err(FileError::io(".", std::io::Error::other(error))))
        }
    });
    match effects {
        ToolEffects::ReadOnly => made.read_only(),
        _ => made,
    }
}

/// `read_file {path}`: a text file under the working folder, at most
/// [`files::MAX_READ`] bytes. Read-only.
pub fn read_file_tool(workspace: Workspace) -> impl Tool {
    file_tool(
        "read_file",
        "Read a text file under the working folder (at most 64 KiB).",
        workspace,
        ToolEffects::ReadOnly,
        |workspace, args: ReadFileArgs| files::read_file(workspace, &args.path),
    )
}

/// `list_dir {path?}`: the entries of a folder under the working folder.
/// Read-only.
pub fn list_dir_tool(workspace: Workspace) -> impl Tool {
    file_tool(
        "list_dir",
        "List the entries of a folder under the working folder.",
        workspace,
        ToolEffects::ReadOnly,
        |workspace, args: ListDirArgs| {
            files::list_dir(workspace, args.path.as_deref().unwrap_or("."))
        },
    )
}

/// `write_file {path, content}`: writes a file under the working folder whole,
/// creating missing folders, its content never decoded whole in memory. Changes
/// things.
pub fn write_file_tool(workspace: Workspace) -> impl Tool {
    WriteFileTool::new(workspace)
}

/// `edit_file {path, old, new}`: replaces the one occurrence of `old` in a file
/// under the working folder. Changes things.
pub fn edit_file_tool(workspace: Workspace) -> impl Tool {
    file_tool(
        "edit_file",
        "Replace a piece of text in a file under the working folder; the text to replace \
         (old) must occur exactly once.",
        workspace,
        ToolEffects::Changes,
        |workspace, args: EditFileArgs| {
            files::edit_file(workspace, &args.path, &args.old, &args.new)
        },
    )
}

/// `run_command {command, timeout?}`: a shell command in the working folder, in the
/// sandbox. Changes things.
pub fn run_command_tool(workspace: Workspace, settings: CommandSettings) -> impl Tool {
    let description = format!(
        "Run a shell command (sh -c) in the working folder and return its exit status, \
         stdout and stderr (each cut to {} KiB). It is killed after timeout seconds \
         (default {}, at most {}), with every process it started.",
        settings.output_cap / 1024,
        settings.default_timeout.as_secs(),
        settings.max_timeout.as_secs()
    );
    let settings = Arc::new(settings);
    tool(
        "run_command",
        description,
        move |args: RunCommandArgs, context| {
            let workspace = workspace.clone();
            let settings = Arc::clone(&settings);
            async move {
                let outcome = command::run_command(
                    &workspace,
                    &settings,
                    &args.command,
                    args.timeout.map(Duration::from_secs),
                    context.cancel,
                )
                .await?;
                Ok::<_, crate::error::CommandError>(outcome.text())
            }
        },
    )
}

/// All the built-in tools, in the order of [`BUILTIN_TOOL_NAMES`].
pub fn builtin_tools(workspace: Workspace, settings: CommandSettings) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(read_file_tool(workspace.clone())),
        Arc::new(list_dir_tool(workspace.clone())),
        Arc::new(write_file_tool(workspace.clone())),
        Arc::new(edit_file_tool(workspace.clone())),
        Arc::new(run_command_tool(workspace, settings)),
    ]
}
