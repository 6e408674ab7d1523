//! The chat's built-in tools (reprise-tools): the ones the config offers, working
//! in the directory the chat was started in, never in its runs folder; and what the
//! chat says when the kernel cannot confine `run_command`.

use std::path::PathBuf;
use std::sync::Arc;

use reprise_agent::Tool;
use reprise_tools::{SandboxSupport, Workspace, builtin_tools};

use crate::config::Settings;

/// The built-in tools the config offers, working under `root`.
pub fn chat_tools(settings: &Settings, root: PathBuf) -> Vec<Arc<dyn Tool>> {
    let workspace = Workspace::new(root).protect(&settings.runs_dir);
    builtin_tools(workspace, settings.run_command.clone())
        .into_iter()
        .filter(|tool| settings.builtin_tools.contains(&tool.spec().name))
        .collect()
}

/// The warning the chat shows once at start when `run_command` is offered and the
/// kernel cannot confine it as the config says; `None` when it can.
pub fn sandbox_warning(settings: &Settings, support: SandboxSupport) -> Option<String> {
    if !settings
        .builtin_tools
        .iter()
        .any(|name| name == "run_command")
    {
        return None;
    }
    if !support.files {
        return Some(
            "run_command runs commands unconfined: this kernel has no Landlock, so a command \
             can write wherever you can and use the network"
                .to_owned(),
        );
    }
    if !support.network && !settings.run_command.sandbox.network {
        return Some(
            "run_command cannot keep commands off the network: this kernel's Landlock is older \
             than ABI 4 (writes are confined)"
                .to_owned(),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Flags;

    fn settings(config: &str) -> Settings {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(&file, config).unwrap();
        let args = Flags {
            config: Some(file),
            ..Flags::default()
        };
        crate::config::resolve(args, &|_| None).unwrap()
    }

    #[test]
    fn the_config_chooses_the_tools_offered() {
        let names = |settings: &Settings| -> Vec<String> {
            chat_tools(settings, PathBuf::from("."))
                .iter()
                .map(|tool| tool.spec().name)
                .collect()
        };
        assert_eq!(names(&settings("")), reprise_tools::BUILTIN_TOOL_NAMES);
        assert_eq!(
            names(&settings(
                "builtin_tools = [\"run_command\", \"read_file\"]\n"
            )),
            ["read_file", "run_command"]
        );
    }

    #[test]
    fn the_warning_says_what_the_kernel_cannot_confine() {
        let all = settings("");
        let none = SandboxSupport {
            files: false,
            network: false,
        };
        let files_only = SandboxSupport {
            files: true,
            network: false,
        };
        let both = SandboxSupport {
            files: true,
            network: true,
        };
        assert!(sandbox_warning(&all, none).unwrap().contains("unconfined"));
        assert!(
            sandbox_warning(&all, files_only)
                .unwrap()
                .contains("network")
        );
        assert_eq!(sandbox_warning(&all, both), None);
        let networked = settings("[tools.run_command]\nnetwork = true\n");
        assert_eq!(sandbox_warning(&networked, files_only), None);
        let no_commands = settings("builtin_tools = [\"read_file\"]\n");
        assert_eq!(sandbox_warning(&no_commands, none), None);
    }
}
