//! The `[tools."NAME"]` tables: settings of one tool, named as the model sees it
//! (`read_file`, `server__tool`). Unknown keys are refused like everywhere in the
//! config; the keys of `[tools.run_command]` and `[tools.write_file]` are refused
//! on other tools.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::values::DurationValue;

/// The built-in tool whose table takes the command keys.
pub const RUN_COMMAND: &str = "run_command";
/// The built-in tool whose table takes `max_size`.
pub const WRITE_FILE: &str = "write_file";

/// One `[tools."NAME"]` table.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ToolTable {
    /// What to do, after a crash, with a call of this tool that had started and has
    /// no result: `rerun`, `ask` or `skip` (unset: `rerun` for a tool marked
    /// idempotent, `ask` for the others).
    pub on_unknown: Option<OnUnknownValue>,
    /// `run_command` only: folders a command may write in besides the working
    /// folder and the temporary folder.
    #[serde(default)]
    pub writable: Vec<PathBuf>,
    /// `run_command` only: whether commands may open TCP connections.
    pub network: Option<bool>,
    /// `run_command` only: how long a command may run when the model names no
    /// timeout.
    pub timeout: Option<DurationValue>,
    /// `run_command` only: the longest timeout the model may ask for.
    pub max_timeout: Option<DurationValue>,
    /// `run_command` only: the most processes and threads one call may have at once.
    pub max_processes: Option<u32>,
    /// `run_command` only: the most memory, in bytes, one process of a call may
    /// allocate.
    pub max_memory: Option<u64>,
    /// `write_file` only: the largest content, in bytes, it writes.
    pub max_size: Option<u64>,
}

impl ToolTable {
    /// The timeout and the longest timeout of `[tools.run_command]`, resolved over
    /// the defaults.
    pub(crate) fn command_timeouts(&self) -> (Duration, Duration) {
        let max = self
            .max_timeout
            .map_or(reprise_tools::command::MAX_TIMEOUT, |value| value.0);
        let default = self
            .timeout
            .map_or(reprise_tools::command::DEFAULT_TIMEOUT.min(max), |value| {
                value.0
            });
        (default, max)
    }

    /// What is wrong with the keys of `[tools.run_command]`, if anything.
    fn check_command_keys(&self) -> Result<(), String> {
        if self.writable.iter().any(|dir| dir.as_os_str().is_empty()) {
            return Err("writable: a folder is empty".to_owned());
        }
        if self.timeout.is_some_and(|value| value.0.is_zero())
            || self.max_timeout.is_some_and(|value| value.0.is_zero())
        {
            return Err("a command's timeout cannot be 0".to_owned());
        }
        if self.max_processes == Some(0) {
            return Err("max_processes cannot be 0".to_owned());
        }
        if self.max_memory == Some(0) {
            return Err("max_memory cannot be 0".to_owned());
        }
        let (default, max) = self.command_timeouts();
        if default > max {
            return Err(format!(
                "timeout ({}) is longer than max_timeout ({})",
                seconds(default),
                seconds(max)
            ));
        }
        Ok(())
    }

    /// What is wrong with the table of the tool `name`, if anything.
    pub fn check(&self, name: &str) -> Result<(), String> {
        if name == WRITE_FILE {
            if self.max_size == Some(0) {
                return Err("max_size cannot be 0".to_owned());
            }
        } else if self.max_size.is_some() {
            return Err(format!("max_size is a key of [tools.{WRITE_FILE}] only"));
        }
        if name == RUN_COMMAND {
            return self.check_command_keys();
        }
        let command_keys = !self.writable.is_empty()
            || self.network.is_some()
            || self.timeout.is_some()
            || self.max_timeout.is_some()
            || self.max_processes.is_some()
            || self.max_memory.is_some();
        if command_keys {
            return Err(format!(
                "writable, network, timeout, max_timeout, max_processes and max_memory are keys \
                 of [tools.{RUN_COMMAND}] only"
            ));
        }
        Ok(())
    }
}

fn seconds(duration: Duration) -> String {
    format!("{} s", duration.as_secs_f64())
}

/// `on_unknown` as the config writes it.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum OnUnknownValue {
    /// Run it again, with the same idempotency key.
    Rerun,
    /// Ask the person (without a terminal: skip).
    Ask,
    /// Tell the model it was interrupted.
    Skip,
}

impl From<OnUnknownValue> for reprise_agent::OnUnknown {
    fn from(value: OnUnknownValue) -> Self {
        match value {
            OnUnknownValue::Rerun => reprise_agent::OnUnknown::Rerun,
            OnUnknownValue::Ask => reprise_agent::OnUnknown::Ask,
            OnUnknownValue::Skip => reprise_agent::OnUnknown::Skip,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[derive(Deserialize)]
    struct File {
        tools: BTreeMap<String, ToolTable>,
    }

    #[test]
    fn on_unknown_reads_its_three_values_and_nothing_else() {
        let file: File = toml::from_str(
            "[tools.\"pay\"]\non_unknown = \"skip\"\n[tools.look]\non_unknown = \"rerun\"\n\
             [tools.x]\n",
        )
        .unwrap();
        assert_eq!(file.tools["pay"].on_unknown, Some(OnUnknownValue::Skip));
        assert_eq!(file.tools["look"].on_unknown, Some(OnUnknownValue::Rerun));
        assert_eq!(file.tools["x"].on_unknown, None);
        let error = toml::from_str::<File>("[tools.pay]\non_unknown = \"twice\"\n")
            .err()
            .unwrap()
            .to_string();
        assert!(
            error.contains("twice") && error.contains("rerun"),
            "{error}"
        );
        let error = toml::from_str::<File>("[tools.pay]\non_unknwn = \"ask\"\n")
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("unknown field `on_unknwn`"), "{error}");
    }
}
