//! Tools made from an async function (`tool(name, description, execute)`), with the
//! schema derived from the argument type.

use std::fmt::Display;
use std::future::Future;
use std::marker::PhantomData;

use async_trait::async_trait;
use reprise_provider::ToolSpec;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::schema::parameters_schema;
use crate::tool::{OnUnknown, Tool, ToolContext, ToolEffects, ToolInvocation, ToolOutput};

/// A tool whose arguments deserialize into `A` and whose work is the function `F`.
/// Made by [`tool`].
pub struct FnTool<A, F> {
    name: String,
    description: String,
    parameters: Value,
    effects: ToolEffects,
    on_unknown: Option<OnUnknown>,
    execute: F,
    _args: PhantomData<fn(A)>,
}

/// What the function of a [`tool`] returns: a future that ends in what the model
/// is told (anything that becomes a [`ToolOutput`]) or an error whose message it is
/// told instead. Every such `Send` future is one.
pub trait ToolFuture: Future<Output = Result<Self::Value, Self::Error>> + Send + 'static {
    /// What a call that worked returns.
    type Value: Into<ToolOutput>;
    /// Why a call failed.
    type Error: Display;
}

impl<T, R, E> ToolFuture for T
where
    T: Future<Output = Result<R, E>> + Send + 'static,
    R: Into<ToolOutput>,
    E: Display,
{
    type Value = R;
    type Error = E;
}

/// Makes a tool from a name, a description and an async function of its arguments
/// and the call's [`ToolContext`] (session id, agent, call id, idempotency key,
/// cancellation token).
///
/// The argument type gives the JSON Schema offered to the model (inlined, as
/// OpenAI-compatible servers want it). Arguments the model sends that do not
/// deserialize into `A` never reach the function: the model gets an error result
/// naming the problem. An `Err` from the function is returned to the model as an
/// error result carrying its message.
///
/// ```
/// use reprise_agent::tool;
/// use schemars::JsonSchema;
/// use serde::Deserialize;
///
/// #[derive(Deserialize, JsonSchema)]
/// struct TalkTo {
///     /// Who to talk to.
///     npc: String,
/// }
///
/// let talk_to = tool("talk_to", "Talk to someone in town.", |args: TalkTo, call| async move {
///     // The same key on every attempt of this call: for a service that de-duplicates.
///     let _key = call.idempotency_key;
///     Ok::<_, std::convert::Infallible>(format!("{} nods.", args.npc))
/// });
/// # let _ = talk_to;
/// ```
pub fn tool<A, F, Fut>(
    name: impl Into<String>,
    description: impl Into<String>,
    execute: F,
) -> FnTool<A, F>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    F: Fn(A, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: ToolFuture,
{
    FnTool {
        name: name.into(),
        description: description.into(),
        parameters: parameters_schema::<A>(),
        effects: ToolEffects::Changes,
        on_unknown: None,
        execute,
        _args: PhantomData,
    }
}

impl<A, F> FnTool<A, F> {
    /// Replaces the derived schema (for hand-tuned descriptions or constraints).
    pub fn with_parameters(mut self, parameters: Value) -> Self {
        self.parameters = parameters;
        self
    }

    /// Declares that the tool only reads: a call a crash may have cut is run again.
    pub fn read_only(mut self) -> Self {
        self.effects = ToolEffects::ReadOnly;
        self
    }

    /// Declares that a second call with the same idempotency key changes nothing
    /// more: a call a crash may have cut is run again with its key.
    pub fn idempotent(mut self) -> Self {
        self.effects = ToolEffects::Idempotent;
        self
    }

    /// What to do with a call that a crash cut after it started (by default
    /// [`OnUnknown::default_for`] the tool's effects).
    pub fn on_unknown(mut self, on_unknown: OnUnknown) -> Self {
        self.on_unknown = Some(on_unknown);
        self
    }
}

impl From<String> for ToolOutput {
    fn from(content: String) -> Self {
        ToolOutput::ok(content)
    }
}

impl From<&str> for ToolOutput {
    fn from(content: &str) -> Self {
        ToolOutput::ok(content)
    }
}

/// Parses a tool's arguments, naming the problem for the model when they are wrong.
pub fn parse_arguments<A: DeserializeOwned>(tool: &str, arguments: &str) -> Result<A, ToolOutput> {
    // Some servers send no arguments at all for a tool that takes none.
    let text = if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    };
    serde_json::from_str(text).map_err(|error| {
        ToolOutput::error(format!(
            "invalid arguments for {tool}: {error}. Call it again with arguments that match its schema."
        ))
    })
}

#[async_trait]
impl<A, F, Fut> Tool for FnTool<A, F>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    F: Fn(A, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: ToolFuture,
{
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: self.parameters.clone(),
        }
    }

    fn effects(&self) -> ToolEffects {
        self.effects
    }

    fn on_unknown(&self) -> OnUnknown {
        self.on_unknown
            .unwrap_or_else(|| OnUnknown::default_for(self.effects))
    }

    async fn call(&self, invocation: ToolInvocation) -> ToolOutput {
        let args = match parse_arguments::<A>(&self.name, &invocation.arguments) {
            Ok(args) => args,
            Err(output) => return output,
        };
        match (self.execute)(args, invocation.context).await {
            Ok(result) => result.into(),
            Err(error) => ToolOutput::error(format!("{} failed: {error}", self.name)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use tokio_util::sync::CancellationToken;

    #[derive(Deserialize, JsonSchema)]
    struct Buy {
        item: String,
        qty: u32,
    }

    fn invocation(arguments: &str) -> ToolInvocation {
        ToolInvocation {
            name: "buy".into(),
            arguments: arguments.into(),
            context: ToolContext {
                session_id: "s1".into(),
                agent: "main".into(),
                subagent: false,
                call_id: "call_1".into(),
                idempotency_key: "key_1".into(),
                cancel: CancellationToken::new(),
            },
        }
    }

    fn buy_tool() -> impl Tool {
        tool("buy", "Buy an item.", |args: Buy, _| async move {
            if args.item == "dragon" {
                return Err("not for sale");
            }
            Ok(format!("{} x{}", args.item, args.qty))
        })
    }

    async fn buy(arguments: &str) -> ToolOutput {
        buy_tool().call(invocation(arguments)).await
    }

    #[test]
    fn a_tool_changes_things_unless_declared_otherwise_and_an_arc_says_the_same() {
        assert_eq!(buy_tool().effects(), ToolEffects::Changes);
        let declared = |effects| {
            let buy = tool("buy", "Buy an item.", |_: Buy, _| async {
                Ok::<_, String>("bought")
            });
            match effects {
                ToolEffects::ReadOnly => buy.read_only(),
                _ => buy.idempotent(),
            }
        };
        assert_eq!(
            declared(ToolEffects::ReadOnly).effects(),
            ToolEffects::ReadOnly
        );
        let shared: std::sync::Arc<dyn Tool> =
            std::sync::Arc::new(declared(ToolEffects::Idempotent));
        assert_eq!(shared.effects(), ToolEffects::Idempotent);
        assert_eq!(
            std::sync::Arc::new(shared).effects(),
            ToolEffects::Idempotent
        );
    }

    #[tokio::test]
    async fn valid_arguments_reach_the_function_and_its_error_becomes_an_error_result() {
        let output = buy(r#"{"item":"torch","qty":2}"#).await;
        assert_eq!(output, ToolOutput::ok("torch x2"));
        let output = buy(r#"{"item":"dragon","qty":1}"#).await;
        assert_eq!(output, ToolOutput::error("buy failed: not for sale"));
    }

    #[tokio::test]
    async fn a_missing_field_is_named_in_an_error_result() {
        let output = buy(r#"{"item":"torch"}"#).await;
        assert!(output.is_error);
        assert!(
            output.content.contains("invalid arguments for buy"),
            "{}",
            output.content
        );
        assert!(output.content.contains("qty"), "{}", output.content);
    }

    #[tokio::test]
    async fn a_wrong_type_and_broken_json_are_error_results() {
        let wrong = buy(r#"{"item":"torch","qty":"two"}"#).await;
        assert!(
            wrong.is_error && wrong.content.contains("invalid type"),
            "{}",
            wrong.content
        );
        let broken = buy(r#"{"item":"tor"#).await;
        assert!(
            broken.is_error && broken.content.contains("EOF"),
            "{}",
            broken.content
        );
    }

    #[tokio::test]
    async fn empty_arguments_mean_an_empty_object() {
        #[derive(Deserialize, JsonSchema)]
        struct NoArgs {}
        let look = tool("look", "Look around.", |_: NoArgs, _| async move {
            Ok::<_, String>("a square")
        });
        assert_eq!(look.call(invocation("")).await, ToolOutput::ok("a square"));
    }

    #[tokio::test]
    async fn the_function_gets_the_call_context() {
        #[derive(Deserialize, JsonSchema)]
        struct NoArgs {}
        let whoami = tool(
            "whoami",
            "Who calls.",
            |_: NoArgs, call: ToolContext| async move {
                Ok::<_, String>(format!(
                    "{} {} {} {} {}",
                    call.session_id, call.agent, call.subagent, call.call_id, call.idempotency_key
                ))
            },
        );
        assert_eq!(
            whoami.call(invocation("{}")).await,
            ToolOutput::ok("s1 main false call_1 key_1")
        );
    }

    #[test]
    fn the_spec_carries_the_derived_schema() {
        let spec = buy_tool().spec();
        assert_eq!(spec.name, "buy");
        assert_eq!(spec.parameters["type"], "object");
        assert_eq!(
            spec.parameters["required"],
            serde_json::json!(["item", "qty"])
        );
    }
}
