//! The config's `[tools."NAME"]` settings laid over the tools offered to the model.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use reprise_agent::{OnUnknown, Tool, ToolEffects, ToolInvocation, ToolOutput};
use reprise_provider::ToolSpec;

use crate::config::tools::ToolTable;

/// A tool with what the config says about it over what it says itself.
struct ConfiguredTool {
    tool: Arc<dyn Tool>,
    on_unknown: OnUnknown,
}

#[async_trait]
impl Tool for ConfiguredTool {
    fn spec(&self) -> ToolSpec {
        self.tool.spec()
    }

    async fn call(&self, invocation: ToolInvocation) -> ToolOutput {
        self.tool.call(invocation).await
    }

    fn effects(&self) -> ToolEffects {
        self.tool.effects()
    }

    fn on_unknown(&self) -> OnUnknown {
        self.on_unknown
    }
}

/// `tools`, each with its `[tools."NAME"]` settings applied (a tool the config does
/// not name is as it was).
pub fn with_settings(
    tools: Vec<Arc<dyn Tool>>,
    settings: &BTreeMap<String, ToolTable>,
) -> Vec<Arc<dyn Tool>> {
    tools
        .into_iter()
        .map(|tool| {
            let configured = settings
                .get(&tool.spec().name)
                .and_then(|table| table.on_unknown);
            match configured {
                Some(on_unknown) => Arc::new(ConfiguredTool {
                    tool,
                    on_unknown: on_unknown.into(),
                }) as Arc<dyn Tool>,
                None => tool,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tools::OnUnknownValue;

    #[test]
    fn the_config_decides_what_a_cut_call_does() {
        #[derive(serde::Deserialize, schemars::JsonSchema)]
        struct Nothing {}
        let pay = reprise_agent::tool("pay", "Pays.", |_: Nothing, _| async move {
            Ok::<_, String>("paid")
        });
        let look = reprise_agent::tool("look", "Looks.", |_: Nothing, _| async move {
            Ok::<_, String>("seen")
        })
        .idempotent();
        let settings = BTreeMap::from([(
            "pay".to_owned(),
            ToolTable {
                on_unknown: Some(OnUnknownValue::Skip),
                ..ToolTable::default()
            },
        )]);
        let tools = with_settings(vec![Arc::new(pay), Arc::new(look)], &settings);
        assert_eq!(tools[0].on_unknown(), OnUnknown::Skip);
        assert_eq!(tools[0].effects(), ToolEffects::Changes);
        assert_eq!(tools[1].on_unknown(), OnUnknown::Rerun);
    }
}
