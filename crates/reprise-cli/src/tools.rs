//! The chat's own tools: reading files and listing folders under the directory the
//! chat was started in. They only read; MCP servers bring everything else.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use reprise_agent::{Tool, tool};
use schemars::JsonSchema;
use serde::Deserialize;

/// The most bytes `read_file` returns.
const MAX_READ: usize = 64 * 1024;
/// The most entries `list_dir` returns.
const MAX_ENTRIES: usize = 500;

#[derive(Deserialize, JsonSchema)]
struct ReadFile {
    /// The file, relative to the working directory.
    path: String,
}

#[derive(Deserialize, JsonSchema)]
struct ListDir {
    /// The folder, relative to the working directory (`.` for the working directory).
    #[serde(default)]
    path: Option<String>,
}

/// The names of the built-in tools.
pub const BUILTIN_TOOL_NAMES: [&str; 2] = ["read_file", "list_dir"];

/// Resolves `path` under `root`, refusing anything that would leave it.
fn inside(root: &Path, path: &str) -> Result<PathBuf, String> {
    let relative = Path::new(path);
    if relative.is_absolute() {
        return Err(format!(
            "{path}: give a path relative to the working directory"
        ));
    }
    if relative
        .components()
        .any(|c| matches!(c, Component::ParentDir | Component::Prefix(_)))
    {
        return Err(format!("{path}: paths may not go up with .."));
    }
    Ok(root.join(relative))
}

/// The built-in tools, working under `root`.
pub fn builtin_tools(root: PathBuf) -> Vec<Arc<dyn Tool>> {
    let read_root = root.clone();
    let read = tool(
        "read_file",
        "Read a text file under the working directory (at most 64 KiB).",
        move |args: ReadFile, _| {
            let root = read_root.clone();
            async move {
                let path = inside(&root, &args.path)?;
                let bytes = tokio::fs::read(&path)
                    .await
                    .map_err(|e| format!("{}: {e}", args.path))?;
                let cut = bytes.len() > MAX_READ;
                let mut text =
                    String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_READ)]).into_owned();
                if cut {
                    text.push_str(&format!("\n[… cut: the file has {} bytes]", bytes.len()));
                }
                Ok::<_, String>(text)
            }
        },
    );
    let list = tool(
        "list_dir",
        "List the entries of a folder under the working directory.",
        move |args: ListDir, _| {
            let root = root.clone();
            async move {
                let asked = args.path.as_deref().unwrap_or(".");
                let path = inside(&root, asked)?;
                // Named as the model gave it, as read_file names its path: the
                // absolute path would tell the model (and the log) about the machine.
                let mut entries = tokio::fs::read_dir(&path)
                    .await
                    .map_err(|e| format!("{asked}: {e}"))?;
                let mut names = Vec::new();
                while let Some(entry) = entries
                    .next_entry()
                    .await
                    .map_err(|e| format!("{asked}: {e}"))?
                {
                    let mut name = entry.file_name().to_string_lossy().into_owned();
                    if entry.file_type().await.is_ok_and(|t| t.is_dir()) {
                        name.push('/');
                    }
                    names.push(name);
                }
                names.sort();
                let total = names.len();
                names.truncate(MAX_ENTRIES);
                let mut text = names.join("\n");
                if total > MAX_ENTRIES {
                    text.push_str(&format!("\n[… {} more]", total - MAX_ENTRIES));
                }
                Ok::<_, String>(text)
            }
        },
    );
    vec![Arc::new(read.read_only()), Arc::new(list.read_only())]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn both_tools_name_a_missing_path_as_it_was_given() {
        let dir = tempfile::tempdir().unwrap();
        let tools = builtin_tools(dir.path().to_path_buf());
        for tool in &tools {
            let output = tool
                .call(reprise_agent::ToolInvocation {
                    name: tool.spec().name,
                    arguments: r#"{"path":"gone/here"}"#.into(),
                    context: reprise_agent::ToolContext {
                        session_id: "s".into(),
                        agent: "main".into(),
                        subagent: false,
                        call_id: "c".into(),
                        idempotency_key: "k".into(),
                        cancel: Default::default(),
                    },
                })
                .await;
            assert!(output.is_error, "{}", output.content);
            let (_, shown) = output.content.split_once(" failed: ").unwrap();
            assert!(shown.starts_with("gone/here: "), "{}", output.content);
            assert!(
                !output.content.contains(&dir.path().display().to_string()),
                "{}",
                output.content
            );
        }
    }

    #[test]
    fn the_built_in_tools_only_read() {
        for tool in builtin_tools(PathBuf::from(".")) {
            assert_eq!(tool.effects(), reprise_agent::ToolEffects::ReadOnly);
        }
    }

    #[test]
    fn paths_stay_under_the_root() {
        let root = Path::new("/work/here");
        assert_eq!(
            inside(root, "a/b.txt").unwrap(),
            PathBuf::from("/work/here/a/b.txt")
        );
        assert!(inside(root, "../etc/passwd").is_err());
        assert!(inside(root, "a/../../x").is_err());
        assert!(inside(root, "/etc/passwd").is_err());
    }
}
