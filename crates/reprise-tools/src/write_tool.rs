//! `write_file` as an agent tool that never holds its content decoded whole: the
//! content is taken as the raw JSON literal inside the call's arguments, checked
//! and measured in one pass, then unescaped piece by piece into the temporary file.

use async_trait::async_trait;
use reprise_agent::schema::parameters_schema;
use reprise_agent::{Tool, ToolEffects, ToolInvocation, ToolOutput};
use reprise_provider::ToolSpec;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::files;
use crate::json_string;
use crate::workspace::Workspace;

/// The tool's name.
const NAME: &str = "write_file";

// The arguments as the model is told them (the schema). Not a doc comment: schemars
// would send it to the model as the schema's description.
#[derive(JsonSchema)]
#[allow(dead_code)] // only its schema is used: the arguments are read as `RawArgs`
struct WriteFileArgs {
    /// The file, relative to the working folder.
    path: String,
    /// The file's whole new content.
    content: String,
}

/// The arguments as they are read: the content left as JSON text, borrowed from
/// the call's arguments.
#[derive(Deserialize)]
struct RawArgs<'a> {
    path: String,
    #[serde(borrow)]
    content: &'a RawValue,
}

/// `write_file {path, content}`.
pub struct WriteFileTool {
    workspace: Workspace,
}

impl WriteFileTool {
    /// The tool, writing beneath `workspace`.
    pub fn new(workspace: Workspace) -> Self {
        WriteFileTool { workspace }
    }
}

#[async_trait]
impl Tool for WriteFileTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.to_owned(),
            description: "Write a file under the working folder, replacing it whole (missing \
                          folders are created)."
                .to_owned(),
            parameters: parameters_schema::<WriteFileArgs>(),
        }
    }

    fn effects(&self) -> ToolEffects {
        ToolEffects::Changes
    }

    async fn call(&self, invocation: ToolInvocation) -> ToolOutput {
        let workspace = self.workspace.clone();
        let arguments = invocation.arguments;
        tokio::task::spawn_blocking(move || write(&workspace, &arguments))
            .await
            .unwrap_or_else(|error| ToolOutput::error(format!("{NAME} failed: {error}")))
    }
}

/// Reads the arguments and writes the file; what the model is told.
fn write(workspace: &Workspace, arguments: &str) -> ToolOutput {
    let invalid = |problem: &dyn std::fmt::Display| {
        ToolOutput::error(format!(
            "invalid arguments for {NAME}: {problem}. Call it again with arguments that \
             match its schema."
        ))
    };
    // Some servers send no arguments at all for a tool that takes none.
    let text = if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    };
    let args: RawArgs<'_> = match serde_json::from_str(text) {
        Ok(args) => args,
        Err(error) => return invalid(&error),
    };
    let Some(body) = args
        .content
        .get()
        .strip_prefix('"')
        .and_then(|rest| rest.strip_suffix('"'))
    else {
        return invalid(&"content must be a string");
    };
    let size = match json_string::unescaped_len(body) {
        Ok(size) => size,
        Err(error) => return invalid(&format_args!("content: {error}")),
    };
    let written = files::write_file_with(workspace, &args.path, size, |file| {
        json_string::unescape_to(body, file)
            .map(|_| ())
            .map_err(std::io::Error::other)
    });
    match written {
        Ok(said) => ToolOutput::ok(said),
        Err(error) => ToolOutput::error(format!("{NAME} failed: {error}")),
    }
}
