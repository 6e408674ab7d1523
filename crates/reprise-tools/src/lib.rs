//! Built-in tools for reprise agents: files under a working folder, and shell
//! commands in a sandbox.
//!
//! - `read_file {path}` and `list_dir {path?}` only read
//!   ([`ToolEffects::ReadOnly`](reprise_agent::ToolEffects::ReadOnly));
//! - `write_file {path, content}` writes a file whole, atomically (a temporary file
//!   in the same folder, then a rename), keeping an existing file's permissions and
//!   creating missing folders; the content is unescaped from the call's arguments
//!   into the temporary file piece by piece ([`json_string`]), never decoded whole;
//! - `edit_file {path, old, new}` replaces a piece of text that occurs exactly once;
//! - `run_command {command, timeout?}` runs `sh -c COMMAND` in the working folder,
//!   in its own process group, which is killed whole when the command ends, times
//!   out or is cancelled (with the trampoline, in a PID namespace whose processes
//!   all end with the call); stdout and stderr are kept within a bound, processes
//!   and memory within [`Limits`].
//!
//! The file tools stay inside the [`Workspace`]: a path is relative (or an absolute
//! path inside the folder), never goes up with `..`, is opened with
//! `openat2(RESOLVE_BENEATH)` so that no symbolic link leads out, and never reaches a
//! protected folder (the runs folder). Errors name the path as it was given.
//!
//! On Linux with Landlock, a command may write only in the working folder, the
//! temporary folder, `/dev/null` and the folders of
//! [`SandboxSettings::writable`], never in a protected folder, and (Landlock ABI 4
//! or later) opens no TCP connection unless [`SandboxSettings::network`] is set.
//! [`SandboxSupport::detect`] tells what the running kernel confines. Reads are not
//! confined. No file a command makes carries a set-id bit or file capabilities (a
//! seccomp filter and the bounding set).
//!
//! A protected folder inside the working folder (the runs folder `.run`) is kept
//! out by a mount namespace where it is read-only, made for each command by a
//! trampoline program: a binary that calls [`run_trampoline_if_asked`] first thing
//! in `main` and is named in [`SandboxSettings::trampoline`]. Without one, the
//! working folder's entries are allowed one by one instead, and a command cannot
//! create or remove entries at its top ([`Protection`]).
//!
//! ```no_run
//! use reprise_tools::{CommandSettings, Workspace, builtin_tools};
//!
//! let workspace = Workspace::new("/srv/checkout").protect(".run");
//! let tools = builtin_tools(workspace, CommandSettings::default());
//! assert_eq!(tools.len(), 5);
//! ```

pub mod command;
mod error;
pub mod files;
pub mod json_string;
mod output;
mod privileges;
mod protection;
mod sandbox;
mod tools;
mod trampoline;
mod workspace;
mod write_tool;

pub use command::CommandSettings;
pub use error::{CommandError, EscapeError, FileError, SandboxError, UnescapeError};
pub use output::CappedOutput;
pub use protection::Protection;
pub use sandbox::{
    DEFAULT_MAX_MEMORY, DEFAULT_MAX_PROCESSES, Limits, SandboxSettings, SandboxSupport,
};
pub use tools::{
    BUILTIN_TOOL_NAMES, builtin_tools, edit_file_tool, list_dir_tool, read_file_tool,
    run_command_tool, write_file_tool,
};
pub use trampoline::{run_trampoline_if_asked, this_binary};
pub use workspace::Workspace;
