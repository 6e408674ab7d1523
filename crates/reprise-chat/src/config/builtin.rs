//! The config keys of the chat's built-in tools: `builtin_tools`, which of them are
//! offered, and `[tools.run_command]`, where commands may write, whether they may
//! use the network, and how long they may run.

use reprise_tools::{BUILTIN_TOOL_NAMES, CommandSettings};
use serde::Deserialize;
use serde::de::{self, Deserializer};

use super::message::short;
use super::tools::ToolTable;

/// `builtin_tools`: names of built-in tools, each checked while the file is read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BuiltinToolNames(pub Vec<String>);

impl<'de> Deserialize<'de> for BuiltinToolNames {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let names = Vec::<String>::deserialize(deserializer)?;
        if let Some(unknown) = names
            .iter()
            .find(|name| !BUILTIN_TOOL_NAMES.contains(&name.as_str()))
        {
            return Err(de::Error::custom(format!(
                "{:?} is not a built-in tool (they are {})",
                short(unknown),
                BUILTIN_TOOL_NAMES.join(", ")
            )));
        }
        Ok(BuiltinToolNames(names))
    }
}

/// `--builtin-tools`: names separated by commas; `none` (or nothing) for none.
pub fn parse_builtin_tools(text: &str) -> Result<BuiltinToolNames, String> {
    let names: Vec<String> = text
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty() && *name != "none")
        .map(str::to_owned)
        .collect();
    match names
        .iter()
        .find(|name| !BUILTIN_TOOL_NAMES.contains(&name.as_str()))
    {
        Some(unknown) => Err(format!(
            "{:?} is not a built-in tool (they are {}, or none)",
            short(unknown),
            BUILTIN_TOOL_NAMES.join(", ")
        )),
        None => Ok(BuiltinToolNames(names)),
    }
}

/// The built-in tools offered: the ones `builtin_tools` names, else all.
pub fn offered(names: Option<&BuiltinToolNames>) -> Vec<String> {
    match names {
        Some(names) => BUILTIN_TOOL_NAMES
            .iter()
            .filter(|name| names.0.iter().any(|given| given == *name))
            .map(|name| (*name).to_owned())
            .collect(),
        None => BUILTIN_TOOL_NAMES
            .iter()
            .map(|name| (*name).to_owned())
            .collect(),
    }
}

/// How `run_command` runs commands, from `[tools.run_command]` (relative folders
/// are taken from the directory reprise was started in).
pub fn command_settings(table: Option<&ToolTable>) -> CommandSettings {
    let mut settings = CommandSettings::default();
    if let Some(table) = table {
        (settings.default_timeout, settings.max_timeout) = table.command_timeouts();
        settings.sandbox.network = table.network.unwrap_or(false);
        settings.sandbox.writable = table
            .writable
            .iter()
            .map(|dir| std::path::absolute(dir).unwrap_or_else(|_| dir.clone()))
            .collect();
        if let Some(max) = table.max_processes {
            settings.sandbox.limits.max_processes = max;
        }
        if let Some(max) = table.max_memory {
            settings.sandbox.limits.max_memory = max;
        }
    }
    settings
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::time::Duration;

    use super::*;
    use crate::config::parse_config;

    #[test]
    fn the_tools_offered_are_all_unless_named() {
        assert_eq!(offered(None), BUILTIN_TOOL_NAMES);
        let config = parse_config(
            Path::new("c.toml"),
            "builtin_tools = [\"list_dir\", \"read_file\"]\n",
        )
        .unwrap();
        assert_eq!(
            offered(config.builtin_tools.as_ref()),
            ["read_file", "list_dir"]
        );
        let config = parse_config(Path::new("c.toml"), "builtin_tools = []\n").unwrap();
        assert!(offered(config.builtin_tools.as_ref()).is_empty());

        assert_eq!(
            parse_builtin_tools("read_file, list_dir").unwrap().0,
            ["read_file", "list_dir"]
        );
        assert!(parse_builtin_tools("none").unwrap().0.is_empty());
        assert!(parse_builtin_tools("").unwrap().0.is_empty());
        let error = parse_builtin_tools("read_file,grep").unwrap_err();
        assert!(error.contains("\"grep\" is not a built-in tool"), "{error}");
    }

    #[test]
    fn run_command_settings_come_from_its_table() {
        let config = parse_config(
            Path::new("c.toml"),
            "[tools.run_command]\nwritable = [\"/srv/cache\", \"out\"]\nnetwork = true\n\
             timeout = \"30s\"\nmax_timeout = \"5m\"\nmax_processes = 64\n\
             max_memory = 1000000\n",
        )
        .unwrap();
        let table = config.tools.unwrap()["run_command"].get_ref().clone();
        let settings = command_settings(Some(&table));
        assert_eq!(settings.sandbox.limits.max_processes, 64);
        assert_eq!(settings.sandbox.limits.max_memory, 1_000_000);
        assert_eq!(
            command_settings(None).sandbox.limits,
            reprise_tools::Limits::default()
        );
        assert!(settings.sandbox.network);
        assert_eq!(settings.default_timeout, Duration::from_secs(30));
        assert_eq!(settings.max_timeout, Duration::from_secs(300));
        assert_eq!(settings.sandbox.writable[0], PathBuf::from("/srv/cache"));
        assert!(settings.sandbox.writable[1].is_absolute());
        let defaults = command_settings(None);
        assert!(!defaults.sandbox.network);
        assert_eq!(
            defaults.default_timeout,
            reprise_tools::command::DEFAULT_TIMEOUT
        );
        let short_cap = parse_config(
            Path::new("c.toml"),
            "[tools.run_command]\nmax_timeout = \"1m\"\n",
        )
        .unwrap();
        let table = short_cap.tools.unwrap()["run_command"].get_ref().clone();
        assert_eq!(
            command_settings(Some(&table)).default_timeout,
            Duration::from_secs(60),
            "the default timeout is cut to a shorter maximum"
        );
    }

    #[test]
    fn bad_values_name_their_line() {
        let cases = [
            (
                "builtin_tools = [\"read_file\", \"grep\"]\n",
                "c.toml:1:",
                "\"grep\" is not a built-in tool",
            ),
            (
                "builtin_tools = \"read_file\"\n",
                "c.toml:1:",
                "expected a list",
            ),
            (
                "\n[tools.run_command]\nnetwork = \"yes\"\n",
                "c.toml:3:",
                "network",
            ),
            (
                "[tools.run_command]\nwritable = \"/tmp\"\n",
                "c.toml:2:",
                "expected a list",
            ),
            (
                "[tools.run_command]\nwriteable = []\n",
                "c.toml:2:",
                "unknown field `writeable`",
            ),
            (
                "[tools.grep]\nnetwork = true\n",
                "c.toml:1: [tools.grep]:",
                "keys of [tools.run_command] only",
            ),
            (
                "[tools.run_command]\ntimeout = \"soon\"\n",
                "c.toml:2:",
                "not a duration",
            ),
            (
                "\n[tools.run_command]\ntimeout = \"10m\"\nmax_timeout = \"1m\"\n",
                "c.toml:2: [tools.run_command]:",
                "timeout (600 s) is longer than max_timeout (60 s)",
            ),
            (
                "[tools.run_command]\ntimeout = 0\n",
                "c.toml:1: [tools.run_command]:",
                "cannot be 0",
            ),
            (
                "[tools.run_command]\nmax_processes = 0\n",
                "c.toml:1: [tools.run_command]:",
                "max_processes cannot be 0",
            ),
            (
                "[tools.run_command]\nmax_memory = -1\n",
                "c.toml:2:",
                "max_memory",
            ),
            (
                "[tools.read_file]\nmax_memory = 10\n",
                "c.toml:1: [tools.read_file]:",
                "keys of [tools.run_command] only",
            ),
            (
                "[tools.run_command]\nmax_size = 10\n",
                "c.toml:1: [tools.run_command]:",
                "max_size is a key of [tools.write_file] only",
            ),
            (
                "[tools.write_file]\nmax_size = 0\n",
                "c.toml:1: [tools.write_file]:",
                "max_size cannot be 0",
            ),
            (
                "[tools.run_command]\nwritable = [\"\"]\n",
                "c.toml:1: [tools.run_command]:",
                "empty",
            ),
        ];
        for (text, place, words) in cases {
            let error = parse_config(Path::new("c.toml"), text)
                .unwrap_err()
                .to_string();
            assert!(error.contains(place), "{text:?}: {error}");
            assert!(error.contains(words), "{text:?}: {error}");
        }
    }
}
