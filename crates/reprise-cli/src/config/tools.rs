//! The `[tools."NAME"]` tables: settings of one tool, named as the model sees it
//! (`read_file`, `server__tool`). Unknown keys are refused like everywhere in the
//! config.

use serde::Deserialize;

/// One `[tools."NAME"]` table.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ToolTable {
    /// What to do, after a crash, with a call of this tool that had started and has
    /// no result: `rerun`, `ask` or `skip` (unset: `rerun` for a tool marked
    /// idempotent, `ask` for the others).
    pub on_unknown: Option<OnUnknownValue>,
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
