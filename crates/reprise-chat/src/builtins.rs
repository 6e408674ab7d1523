//! The chat's built-in tools (reprise-tools): the ones the config offers, working
//! in the directory the chat was started in, never in its runs folder; and what the
//! chat says when the kernel cannot confine `run_command`.

use std::path::PathBuf;
use std::sync::Arc;

use reprise_agent::Tool;
use reprise_tools::{Protection, SandboxSupport, Workspace, builtin_tools};

use crate::config::Settings;

/// The built-in tools the config offers, working under `root`.
pub fn chat_tools(settings: &Settings, root: PathBuf) -> Vec<Arc<dyn Tool>> {
    builtin_tools(workspace(settings, root), settings.run_command.clone())
        .into_iter()
        .filter(|tool| settings.builtin_tools.contains(&tool.spec().name))
        .collect()
}

/// The tools' working folder `root`, without the runs folder, with the largest
/// write `[tools.write_file] max_size` sets.
fn workspace(settings: &Settings, root: PathBuf) -> Workspace {
    let workspace = Workspace::new(root).protect(&settings.runs_dir);
    match settings
        .tools
        .get(crate::config::tools::WRITE_FILE)
        .and_then(|table| table.max_size)
    {
        Some(max) => workspace.max_write(max),
        None => workspace,
    }
}

/// How `run_command` keeps commands run in `root` out of the runs folder.
pub fn protection(settings: &Settings, root: PathBuf) -> Protection {
    Protection::detect(&workspace(settings, root), &settings.run_command.sandbox)
}

/// The warning the chat shows once at start when `run_command` is offered and the
/// system cannot confine it as the config says, or can keep it out of the runs
/// folder only at a cost; `None` when it can.
pub fn sandbox_warning(
    settings: &Settings,
    support: SandboxSupport,
    protection: Protection,
) -> Option<String> {
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
    let mut limits = Vec::new();
    if !support.network && !settings.run_command.sandbox.network {
        limits.push(
            "run_command cannot keep commands off the network: this kernel's Landlock is older \
             than ABI 4 (writes are confined)",
        );
    }
    if protection == Protection::EntryByEntry {
        limits.push(
            "run_command cannot create or remove entries at the top of the working folder: \
             the runs folder lies inside it, and this system does not let reprise make it \
             read-only in a user namespace, so Landlock allows the other entries one by one",
        );
    }
    (!limits.is_empty()).then(|| limits.join("; "))
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
        let mounted = Protection::MountNamespace;
        let degraded = Protection::EntryByEntry;
        let warning = |settings, support, protection| {
            sandbox_warning(settings, support, protection).unwrap_or_default()
        };
        assert!(warning(&all, none, degraded).contains("unconfined"));
        assert!(!warning(&all, none, degraded).contains("top of the working folder"));
        assert!(warning(&all, files_only, mounted).contains("network"));
        assert!(!warning(&all, files_only, mounted).contains("top of the working folder"));
        let both_limits = warning(&all, files_only, degraded);
        assert!(
            both_limits.contains("network") && both_limits.contains("top of the working folder"),
            "{both_limits}"
        );
        assert!(warning(&all, both, degraded).contains("top of the working folder"));
        assert_eq!(sandbox_warning(&all, both, mounted), None);
        assert_eq!(sandbox_warning(&all, both, Protection::Unneeded), None);
        let networked = settings("[tools.run_command]\nnetwork = true\n");
        assert_eq!(sandbox_warning(&networked, files_only, mounted), None);
        let no_commands = settings("builtin_tools = [\"read_file\"]\n");
        assert_eq!(sandbox_warning(&no_commands, none, degraded), None);
    }
}
