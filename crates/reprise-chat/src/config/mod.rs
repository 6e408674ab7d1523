//! Settings: flags win over environment variables, which win over the config file,
//! which wins over the defaults.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use reprise_provider::Generation;
use serde::Deserialize;
use serde_json::{Map, Value};

pub mod builtin;
pub mod duration;
mod error;
mod message;
pub mod prices;
pub mod telemetry;
pub mod tools;
pub mod values;

#[macro_use]
mod keys;

pub use error::ConfigError;
use keys::Sampling;

/// Ollama's OpenAI-compatible endpoint: what most people run locally.
pub const DEFAULT_BASE_URL: &str = "http://localhost:11434/v1";
/// The model asked for when nothing says otherwise.
pub const DEFAULT_MODEL: &str = "llama3.2";
/// Where the API key is read from when nothing says otherwise.
pub const DEFAULT_API_KEY_ENV: &str = "OPENAI_API_KEY";
/// The runs directory when nothing says otherwise.
pub const DEFAULT_RUNS_DIR: &str = ".run";
/// How long a writer's lease in the database lasts when nothing says otherwise.
pub const DEFAULT_DATABASE_LEASE: Duration = Duration::from_secs(30);
/// The shortest lease: it is renewed every third of it.
const MIN_DATABASE_LEASE: Duration = Duration::from_secs(1);

config_table! {
    /// The config file, as written. Unknown keys are refused so a typo is not silently
    /// ignored.
    #[derive(Debug, Default, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct FileConfig {
        /// The OpenAI-compatible endpoint.
        pub base_url: Option<String>,
        /// The model.
        pub model: Option<String>,
        /// The variable holding the API key.
        pub api_key_env: Option<String>,
        /// Where run folders live (relative paths are relative to the working directory).
        pub runs_dir: Option<PathBuf>,
        /// A PostgreSQL database that keeps the conversations (`postgres://…`).
        pub database_url: Option<String>,
        /// How long a chat's hold on a conversation in the database lasts unless
        /// renewed.
        pub database_lease: Option<values::DurationValue>,
        /// The system prompt.
        pub system_prompt: Option<String>,
        @model_keys
        /// Settings for one model, over the ones above (`[models."qwen2.5:7b"]`).
        pub models: Option<BTreeMap<String, ModelConfig>>,
        /// MCP servers (`[mcp]`, `[mcp.servers.<name>]`).
        pub mcp: Option<reprise_mcp::McpConfig>,
        /// The step gate's policy (`[gate]`: `allow`, `deny` patterns).
        pub gate: Option<reprise_mcp::GateConfig>,
        /// Subagents (`[agents.NAME]`), each offered to the model as a tool.
        pub agents: Option<BTreeMap<String, toml::Spanned<AgentTable>>>,
        /// The built-in tools offered to the model; all by default.
        pub builtin_tools: Option<builtin::BuiltinToolNames>,
        /// Settings of single tools (`[tools."NAME"]`, `[tools.run_command]`).
        pub tools: Option<BTreeMap<String, toml::Spanned<tools::ToolTable>>>,
        /// Files larger than this many bytes are left out of the working folder's
        /// checkpoints.
        pub checkpoint_max_file_size: Option<u64>,
        /// What models cost (`[[prices]]`), for `reprise usage`.
        pub prices: Option<Vec<toml::Spanned<prices::PriceEntry>>>,
        /// OpenTelemetry export (`[telemetry]`).
        pub telemetry: Option<toml::Spanned<telemetry::TelemetryTable>>,
    }
}

config_table! {
    /// One subagent as the config writes it (`[agents.NAME]`). A sampling key left
    /// out is the chat's.
    #[derive(Debug, Clone, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct AgentTable {
        /// What the main agent reads to decide when to hand it a task.
        pub description: String,
        /// Its instructions; by default a short one built from the description.
        pub system_prompt: Option<String>,
        /// Patterns (`*` matches any run of characters) over the chat's and the MCP
        /// servers' tools: the tools it may call. None by default.
        #[serde(default)]
        pub tools: Vec<String>,
        /// Another model for it; by default the chat's.
        pub model: Option<String>,
        /// Another OpenAI-compatible endpoint for it; by default the chat's.
        pub base_url: Option<String>,
        @sampling_keys
        /// The most model calls one task may make.
        pub max_turns: Option<u32>,
    }
}

/// A subagent, resolved: what the chat builds it from.
#[derive(Debug, Clone)]
pub struct AgentSettings {
    /// Its name: its tool's name and its transcript's (`subagents/<name>.jsonl`).
    pub name: String,
    /// Its tool's description.
    pub description: String,
    /// Its system prompt.
    pub system_prompt: String,
    /// The patterns naming the tools it may call.
    pub tools: Vec<reprise_mcp::gate::Pattern>,
    /// Its model, when it has its own.
    pub model: Option<String>,
    /// Its endpoint, when it has its own.
    pub base_url: Option<String>,
    /// Its generation settings: its own keys over the chat's.
    pub generation: Generation,
    /// Whether it needs a model client of its own (another model or settings).
    pub own_provider: bool,
    /// The most model calls one task may make.
    pub max_turns: usize,
}

impl AgentSettings {
    /// Whether the subagent may call the tool named `name`.
    pub fn may_use(&self, name: &str) -> bool {
        self.tools.iter().any(|pattern| pattern.matches(name))
    }
}

/// Whether `name` can be a subagent's name: a tool name every server takes
/// (letters, digits, `_`, `-`, at most 64) that is also a file name.
fn valid_agent_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && name.len() <= 64
}

/// What is wrong with one `[agents.NAME]` table, if anything.
fn check_agent(name: &str, table: &AgentTable) -> Result<(), String> {
    if !valid_agent_name(name) {
        return Err(format!(
            "{:?} cannot be a subagent's name: use letters, digits, _ and - (at most 64, \
             starting with a letter or digit)",
            message::short(name)
        ));
    }
    if reprise_tools::BUILTIN_TOOL_NAMES.contains(&name) {
        return Err(format!("{name:?} is the name of a built-in tool"));
    }
    if table.description.trim().is_empty() {
        return Err(
            "description is empty: the main agent reads it to decide when to \
                    delegate"
                .to_owned(),
        );
    }
    if table
        .system_prompt
        .as_deref()
        .is_some_and(|s| s.trim().is_empty())
    {
        return Err("system_prompt is empty".to_owned());
    }
    if table.model.as_deref().is_some_and(|m| m.trim().is_empty()) {
        return Err("model is empty".to_owned());
    }
    if table
        .base_url
        .as_deref()
        .is_some_and(|u| u.trim().is_empty())
    {
        return Err("base_url is empty".to_owned());
    }
    if table.max_turns == Some(0) {
        return Err("max_turns must be at least 1".to_owned());
    }
    for pattern in &table.tools {
        reprise_mcp::gate::Pattern::new(pattern).map_err(|error| format!("tools: {error}"))?;
    }
    Ok(())
}

/// The subagents of the config, resolved over the chat's generation settings.
fn resolve_agents(
    agents: Option<&BTreeMap<String, toml::Spanned<AgentTable>>>,
    generation: &Generation,
) -> Vec<AgentSettings> {
    let Some(agents) = agents else {
        return Vec::new();
    };
    agents
        .iter()
        .map(|(name, table)| {
            let table = table.get_ref();
            let mut own = generation.clone();
            // The chat's tool_choice names the main agent's tools, which are not the
            // subagent's: a subagent lets its model choose.
            own.tool_choice = None;
            table.sampling().set_in(&mut own);
            AgentSettings {
                name: name.clone(),
                description: table.description.trim().to_owned(),
                system_prompt: table.system_prompt.clone().unwrap_or_else(|| {
                    format!(
                        "You are {name}, a helper agent. {} Do the task you are given \
                         with the tools you have, then answer with what you found or did.",
                        table.description.trim()
                    )
                }),
                // Checked when the file was read.
                tools: table
                    .tools
                    .iter()
                    .filter_map(|p| reprise_mcp::gate::Pattern::new(p).ok())
                    .collect(),
                model: table.model.clone(),
                base_url: table.base_url.clone(),
                own_provider: table.model.is_some()
                    || table.base_url.is_some()
                    || own != *generation,
                generation: own,
                max_turns: table
                    .max_turns
                    .map_or(reprise_agent::DEFAULT_SUBAGENT_MAX_TURNS, |n| n as usize),
            }
        })
        .collect()
}

config_table! {
    /// Settings for one model (`[models."NAME"]`): each key set here wins over the
    /// same key at the top of the file.
    #[derive(Debug, Default, Clone, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct ModelConfig {
        @model_keys
    }
}

/// Reads a duration such as `30`, `30s`, `500ms`, `10m` or `1.5h` (a bare number is
/// seconds; see [`duration`]).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let duration = duration::parse_duration(text, duration::BareUnit::Seconds)?;
    // Never negative: refused above.
    Ok(duration.unsigned_abs())
}

/// A `tool_choice` as the API takes it: the words `auto`, `none` and `required` as
/// they are, any other word as the name of the function to call.
pub fn tool_choice_value(text: &str) -> Value {
    match text {
        "auto" | "none" | "required" => Value::String(text.to_owned()),
        name => serde_json::json!({"type": "function", "function": {"name": name}}),
    }
}

/// A TOML value as JSON (dates become their text).
fn toml_to_json(value: &toml::Value) -> Value {
    match value {
        toml::Value::String(text) => Value::String(text.clone()),
        toml::Value::Integer(number) => Value::from(*number),
        toml::Value::Float(number) => Value::from(*number),
        toml::Value::Boolean(flag) => Value::Bool(*flag),
        toml::Value::Datetime(date) => Value::String(date.to_string()),
        toml::Value::Array(items) => Value::Array(items.iter().map(toml_to_json).collect()),
        toml::Value::Table(table) => Value::Object(
            table
                .iter()
                .map(|(key, value)| (key.clone(), toml_to_json(value)))
                .collect(),
        ),
    }
}

/// Everything the chat and the run commands need, resolved.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The endpoint.
    pub base_url: String,
    /// The model.
    pub model: String,
    /// The variable the API key was read from.
    pub api_key_env: String,
    /// The API key, when that variable is set and not empty.
    pub api_key: Option<String>,
    /// The runs directory.
    pub runs_dir: PathBuf,
    /// The PostgreSQL database that keeps the conversations, if any.
    pub database_url: Option<String>,
    /// How long a writer's lease on a conversation in the database lasts unless
    /// renewed (renewed every third of it while the chat runs).
    pub database_lease: Duration,
    /// The system prompt.
    pub system_prompt: String,
    /// The most model calls one turn may make.
    pub max_turns: u32,
    /// `max_tokens`, `temperature`, … for every request.
    pub generation: Generation,
    /// Fields sent as they are in every request body.
    pub extra_body: Map<String, Value>,
    /// The wait for the first byte of an answer (`None`: no limit).
    pub request_timeout: Option<Duration>,
    /// The longest silence inside a streamed answer (`None`: no limit).
    pub idle_timeout: Option<Duration>,
    /// The wall-clock budget of one turn (`None`: no budget).
    pub turn_timeout: Option<Duration>,
    /// The context window set by the flag or the config (`None`: asked of the
    /// server, else [`reprise_agent::FALLBACK_CONTEXT_WINDOW`]).
    pub context_window: Option<u32>,
    /// The share of the window a request may fill before compacting.
    pub compact_threshold: f64,
    /// The most tokens a summary of the older history may have (unset: the agent's
    /// default).
    pub summary_max_tokens: Option<u32>,
    /// Run tool calls without asking.
    pub yes: bool,
    /// Set when no one can answer the gate's questions (plain mode, stdin not a
    /// terminal): why, as the model is told after "no one could approve: " (the
    /// approval module's `NOT_A_TERMINAL`). The calls it would ask about are not
    /// run. Never set by the config: the screen knows.
    pub unattended: Option<String>,
    /// The config file that was read, if any.
    pub config_file: Option<PathBuf>,
    /// The `[mcp]` section of the config.
    pub mcp: Option<reprise_mcp::McpConfig>,
    /// The `[gate]` section of the config.
    pub gate: Option<reprise_mcp::GateConfig>,
    /// The subagents (`[agents.NAME]`), by name.
    pub agents: Vec<AgentSettings>,
    /// The built-in tools offered to the model.
    pub builtin_tools: Vec<String>,
    /// Whether `--builtin-tools` or the config file (`builtin_tools`) names the
    /// built-in tools, rather than leaving them to the default (`--local` offers none
    /// by default).
    pub builtin_tools_configured: bool,
    /// How `run_command` runs commands.
    pub run_command: reprise_tools::CommandSettings,
    /// Settings of single tools (`[tools."NAME"]`), by the tool's name.
    pub tools: BTreeMap<String, tools::ToolTable>,
    /// Files larger than this many bytes are left out of checkpoints.
    pub checkpoint_max_file_size: u64,
    /// What models cost (`[[prices]]`).
    pub prices: reprise_runs::PriceTable,
    /// OpenTelemetry export (`[telemetry]`), before the `OTEL_*` variables.
    pub telemetry: reprise_telemetry::TelemetryConfig,
}

/// The system prompt when the config gives none.
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are a helpful assistant in a terminal chat. \
Answer concisely; use Markdown when it helps. Use the tools you are given when a task needs them.";

/// Where the config file is looked for: `--config`, `REPRISE_CONFIG`, then the XDG
/// config dir. The second value says whether the person named it (then it must exist).
pub fn config_path(
    flag: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<(PathBuf, bool)> {
    if let Some(path) = flag {
        return Some((path.to_path_buf(), true));
    }
    if let Some(path) = env("REPRISE_CONFIG").filter(|p| !p.is_empty()) {
        return Some((PathBuf::from(path), true));
    }
    // XDG_CONFIG_HOME is read through `env` (not the process) so tests can point it
    // anywhere; etcetera supplies the home-based default.
    let base = match env("XDG_CONFIG_HOME").filter(|p| Path::new(p).is_absolute()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            use etcetera::BaseStrategy;
            etcetera::base_strategy::Xdg::new().ok()?.config_dir()
        }
    };
    Some((base.join("reprise").join("config.toml"), false))
}

/// The longest config file read, in bytes.
pub const MAX_CONFIG_BYTES: u64 = 4 << 20;

/// Reads and parses a config file. A parse error names the file, line and column.
/// Only a regular file of at most [`MAX_CONFIG_BYTES`] is read: a FIFO or a device
/// named as the config is refused, never waited on.
pub fn read_config(path: &Path) -> Result<FileConfig, ConfigError> {
    let bytes =
        reprise_session::fs::read_regular_file(path, MAX_CONFIG_BYTES).map_err(|error| {
            ConfigError::Read {
                path: path.to_path_buf(),
                source: error.source,
            }
        })?;
    let text = String::from_utf8(bytes).map_err(|error| ConfigError::NotUtf8 {
        path: path.to_path_buf(),
        source: error.utf8_error(),
    })?;
    parse_config(path, &text)
}

/// Parses config text; errors name the file and the line.
pub fn parse_config(path: &Path, text: &str) -> Result<FileConfig, ConfigError> {
    match toml::from_str::<FileConfig>(text) {
        Ok(config) => {
            if let Some(mcp) = &config.mcp {
                mcp.validate().map_err(|source| ConfigError::Section {
                    path: path.to_path_buf(),
                    section: "mcp",
                    source: Box::new(source),
                })?;
            }
            if let Some(gate) = &config.gate {
                reprise_mcp::GatePolicy::from_config(gate).map_err(|source| {
                    ConfigError::Section {
                        path: path.to_path_buf(),
                        section: "gate",
                        source: Box::new(source),
                    }
                })?;
            }
            for (name, table) in config.agents.iter().flatten() {
                check_agent(name, table.get_ref()).map_err(|problem| {
                    let (line, _) = line_col(text, table.span().start);
                    ConfigError::Table {
                        path: path.to_path_buf(),
                        line,
                        table: format!("agents.{}", message::short(name)),
                        problem,
                    }
                })?;
            }
            if let Some(entries) = &config.prices {
                let tables: Vec<_> = entries.iter().map(|e| e.get_ref().clone()).collect();
                prices::price_table(&tables).map_err(|(index, problem)| {
                    let (line, _) = line_col(text, entries[index].span().start);
                    ConfigError::Table {
                        path: path.to_path_buf(),
                        line,
                        table: "prices".to_owned(),
                        problem,
                    }
                })?;
            }
            if let Some(table) = &config.telemetry {
                table.get_ref().config().map_err(|problem| {
                    let (line, _) = line_col(text, table.span().start);
                    ConfigError::Table {
                        path: path.to_path_buf(),
                        line,
                        table: "telemetry".to_owned(),
                        problem,
                    }
                })?;
            }
            for (name, table) in config.tools.iter().flatten() {
                table.get_ref().check(name).map_err(|problem| {
                    let (line, _) = line_col(text, table.span().start);
                    ConfigError::Table {
                        path: path.to_path_buf(),
                        line,
                        table: format!("tools.{}", message::short(name)),
                        problem,
                    }
                })?;
            }
            Ok(config)
        }
        Err(error) => {
            let position = error
                .span()
                .map(|span| line_col(text, span.start))
                .map(|(line, col)| format!(":{line}:{col}"))
                .unwrap_or_default();
            let key = error
                .span()
                .and_then(|span| key_before(text, span.start))
                .map(|key| format!("{}: ", message::short(key)))
                .unwrap_or_default();
            Err(ConfigError::Syntax {
                path: path.to_path_buf(),
                position,
                key,
                message: message::readable(error.message()),
            })
        }
    }
}

/// The key of the `key = value` line whose value starts at `offset`, if it is one.
fn key_before(text: &str, offset: usize) -> Option<&str> {
    let before = text.get(..offset)?;
    let line = before.rsplit('\n').next()?;
    let (key, _) = line.split_once('=')?;
    Some(key.trim()).filter(|key| !key.is_empty())
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// The flags settings are resolved from (unset: not given).
#[derive(Debug, Clone, Default)]
pub struct Flags {
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `--base-url`.
    pub base_url: Option<String>,
    /// `--model`.
    pub model: Option<String>,
    /// `--api-key-env`.
    pub api_key_env: Option<String>,
    /// `--runs-dir`.
    pub runs_dir: Option<PathBuf>,
    /// `--database-url`.
    pub database_url: Option<String>,
    /// `--database-lease`.
    pub database_lease: Option<Duration>,
    /// `--yes`.
    pub yes: bool,
    /// `--max-tokens`.
    pub max_tokens: Option<u32>,
    /// `--temperature`.
    pub temperature: Option<f64>,
    /// `--top-p`.
    pub top_p: Option<f64>,
    /// `--seed`.
    pub seed: Option<i64>,
    /// `--tool-choice`.
    pub tool_choice: Option<String>,
    /// `--parallel-tool-calls`.
    pub parallel_tool_calls: Option<bool>,
    /// `--request-timeout`.
    pub request_timeout: Option<Duration>,
    /// `--idle-timeout`.
    pub idle_timeout: Option<Duration>,
    /// `--turn-timeout`.
    pub turn_timeout: Option<Duration>,
    /// `--context-window`.
    pub context_window: Option<u32>,
    /// `--builtin-tools`.
    pub builtin_tools: Option<builtin::BuiltinToolNames>,
}

impl Flags {
    /// The sampling keys the flags set.
    fn sampling(&self) -> Sampling {
        Sampling {
            max_tokens: self.max_tokens,
            temperature: self.temperature,
            top_p: self.top_p,
            seed: self.seed,
        }
    }
}

/// Resolves settings from flags, the environment (`env`) and the config file.
pub fn resolve(
    flags: impl Into<Flags>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Settings, ConfigError> {
    let args: Flags = flags.into();
    let (file, config_file) = match config_path(args.config.as_deref(), env) {
        Some((path, named)) if named || path.exists() => (read_config(&path)?, Some(path)),
        _ => (FileConfig::default(), None),
    };
    // Read before the keys taken out of `file` below.
    let top_sampling = file.sampling();
    let env_nonempty = |name: &str| env(name).filter(|v| !v.is_empty());
    let base_url = args
        .base_url
        .clone()
        .or_else(|| env_nonempty("REPRISE_BASE_URL"))
        .or(file.base_url)
        .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
    let model = args
        .model
        .clone()
        .or_else(|| env_nonempty("REPRISE_MODEL"))
        .or(file.model)
        .unwrap_or_else(|| DEFAULT_MODEL.to_owned());
    let api_key_env = args
        .api_key_env
        .clone()
        .or_else(|| env_nonempty("REPRISE_API_KEY_ENV"))
        .or(file.api_key_env)
        .unwrap_or_else(|| DEFAULT_API_KEY_ENV.to_owned());
    let runs_dir = args
        .runs_dir
        .clone()
        .or_else(|| env_nonempty("REPRISE_RUNS_DIR").map(PathBuf::from))
        .or(file.runs_dir)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_RUNS_DIR));
    let database_url = args
        .database_url
        .clone()
        .or_else(|| env_nonempty("REPRISE_DATABASE_URL"))
        .or(file.database_url);
    let database_lease = match (args.database_lease, &file.database_lease) {
        (Some(flag), _) => flag,
        (None, Some(value)) => value.0,
        (None, None) => DEFAULT_DATABASE_LEASE,
    };
    if database_lease < MIN_DATABASE_LEASE {
        return Err(ConfigError::LeaseTooShort {
            lease: database_lease,
            shortest: MIN_DATABASE_LEASE,
        });
    }
    let system_prompt = env_nonempty("REPRISE_SYSTEM_PROMPT")
        .or(file.system_prompt)
        .unwrap_or_else(|| DEFAULT_SYSTEM_PROMPT.to_owned());
    let api_key = env_nonempty(&api_key_env);
    let per_model = file
        .models
        .as_ref()
        .and_then(|models| models.get(&model))
        .cloned()
        .unwrap_or_default();
    // Flag, then this model's table, then the top of the file.
    macro_rules! pick {
        ($flag:expr, $key:ident) => {
            $flag.or(per_model.$key.clone()).or(file.$key.clone())
        };
    }
    // The flag, else this model's table, else the top of the file; 0 is no limit,
    // for every timeout.
    let limit = |flag: Option<Duration>,
                 model: Option<values::DurationValue>,
                 top: Option<values::DurationValue>|
     -> Option<Option<Duration>> {
        let duration = flag.or(model.or(top).map(|value| value.0))?;
        Some((!duration.is_zero()).then_some(duration))
    };
    let tool_choice = match &args.tool_choice {
        Some(text) => Some(tool_choice_value(text)),
        None => per_model
            .tool_choice
            .as_ref()
            .or(file.tool_choice.as_ref())
            .map(|value| match &value.0 {
                toml::Value::String(text) => tool_choice_value(text),
                other => toml_to_json(other),
            }),
    };
    // Unset everywhere: the default reply bound, the rest left to the server.
    let mut generation = Generation {
        tool_choice,
        parallel_tool_calls: pick!(args.parallel_tool_calls, parallel_tool_calls),
        ..Generation::default()
    };
    args.sampling()
        .over(per_model.sampling())
        .over(top_sampling)
        .set_in(&mut generation);
    let mut extra_body = Map::new();
    for table in [file.extra_body.as_ref(), per_model.extra_body.as_ref()]
        .into_iter()
        .flatten()
    {
        for (key, value) in &table.0 {
            extra_body.insert(key.clone(), toml_to_json(value));
        }
    }
    let request_timeout = limit(
        args.request_timeout,
        per_model.request_timeout,
        file.request_timeout,
    )
    .unwrap_or(Some(reprise_provider::DEFAULT_REQUEST_TIMEOUT));
    let idle_timeout = limit(args.idle_timeout, per_model.idle_timeout, file.idle_timeout)
        .unwrap_or(Some(reprise_provider::DEFAULT_IDLE_TIMEOUT));
    let turn_timeout = limit(args.turn_timeout, per_model.turn_timeout, file.turn_timeout)
        .unwrap_or(Some(reprise_agent::DEFAULT_TURN_TIMEOUT));
    let max_turns = per_model.max_turns.or(file.max_turns).unwrap_or(25);
    let price_entries: Vec<_> = file
        .prices
        .iter()
        .flatten()
        .map(|entry| entry.get_ref().clone())
        .collect();
    // Checked when the file was parsed; a table that fails here fails the same way.
    let prices =
        prices::price_table(&price_entries).map_err(|(_, problem)| ConfigError::Table {
            path: config_file.clone().unwrap_or_default(),
            line: 0,
            table: "prices".to_owned(),
            problem,
        })?;
    // Checked when the file was parsed, as the prices are.
    let telemetry = match &file.telemetry {
        None => reprise_telemetry::TelemetryConfig::default(),
        Some(table) => table
            .get_ref()
            .config()
            .map_err(|problem| ConfigError::Table {
                path: config_file.clone().unwrap_or_default(),
                line: 0,
                table: "telemetry".to_owned(),
                problem,
            })?,
    };
    let agents = resolve_agents(file.agents.as_ref(), &generation);
    let named_tools = args.builtin_tools.as_ref().or(file.builtin_tools.as_ref());
    let builtin_tools = builtin::offered(named_tools);
    let builtin_tools_configured = named_tools.is_some();
    let command_table = file
        .tools
        .as_ref()
        .and_then(|tools| tools.get(tools::RUN_COMMAND))
        .map(|table| table.get_ref());
    let mut run_command = builtin::command_settings(command_table);
    // A command has no use for the API key, and must not be able to send it anywhere.
    run_command.hidden_env.push(api_key_env.clone());
    let context_window = pick!(args.context_window, context_window).filter(|n| *n > 0);
    let summary_max_tokens = per_model.summary_max_tokens.or(file.summary_max_tokens);
    let compact_threshold = per_model
        .compact_threshold
        .or(file.compact_threshold)
        .map_or(reprise_agent::DEFAULT_COMPACT_THRESHOLD, |share| share.0);
    Ok(Settings {
        base_url,
        model,
        api_key_env,
        api_key,
        runs_dir,
        database_url,
        database_lease,
        system_prompt,
        max_turns,
        generation,
        extra_body,
        request_timeout,
        idle_timeout,
        turn_timeout,
        context_window,
        compact_threshold,
        summary_max_tokens,
        yes: args.yes,
        unattended: None,
        config_file,
        mcp: file.mcp,
        gate: file.gate,
        agents,
        builtin_tools,
        builtin_tools_configured,
        run_command,
        checkpoint_max_file_size: file
            .checkpoint_max_file_size
            .unwrap_or(reprise_checkpoint::DEFAULT_MAX_FILE_SIZE),
        prices,
        telemetry,
        tools: file
            .tools
            .unwrap_or_default()
            .into_iter()
            .map(|(name, table)| (name, table.into_inner()))
            .collect(),
    })
}

/// Reads a variable from the process environment.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn flags_win_over_env_which_wins_over_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(
            &file,
            "base_url = \"http://file/v1\"\nmodel = \"file-model\"\nruns_dir = \"file-runs\"\n",
        )
        .unwrap();
        let args = Flags {
            config: Some(file.clone()),
            model: Some("flag-model".into()),
            ..Flags::default()
        };
        let env = env_of(&[
            ("REPRISE_BASE_URL", "http://env/v1"),
            ("REPRISE_MODEL", "env-model"),
        ]);
        let settings = resolve(args.clone(), &env).unwrap();
        assert_eq!(settings.model, "flag-model");
        assert_eq!(settings.base_url, "http://env/v1");
        assert_eq!(settings.runs_dir, PathBuf::from("file-runs"));
        assert_eq!(settings.config_file, Some(file));
    }

    #[test]
    fn the_database_lease_comes_from_the_flag_then_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        let args = |flag: Option<Duration>| Flags {
            config: Some(file.clone()),
            database_lease: flag,
            ..Flags::default()
        };
        let lease = |flag| resolve(args(flag), &env_of(&[])).map(|s| s.database_lease);
        std::fs::write(&file, "").unwrap();
        assert_eq!(lease(None).unwrap(), DEFAULT_DATABASE_LEASE);
        std::fs::write(&file, "database_lease = \"2m\"\n").unwrap();
        assert_eq!(lease(None).unwrap(), Duration::from_secs(120));
        assert_eq!(
            lease(Some(Duration::from_secs(5))).unwrap(),
            Duration::from_secs(5)
        );
        std::fs::write(&file, "database_lease = \"100ms\"\n").unwrap();
        let error = lease(None).unwrap_err().to_string();
        assert!(
            error.contains("database_lease") && error.contains("at least"),
            "{error}"
        );
    }

    #[test]
    fn the_database_url_comes_from_the_flag_then_the_env_then_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(&file, "database_url = \"postgres://file/db\"\n").unwrap();
        let args = |flag: Option<&str>| Flags {
            config: Some(file.clone()),
            database_url: flag.map(str::to_owned),
            ..Flags::default()
        };
        let env = env_of(&[("REPRISE_DATABASE_URL", "postgres://env/db")]);
        let none = env_of(&[]);
        let resolved = |flag, env: &dyn Fn(&str) -> Option<String>| {
            resolve(args(flag), env).unwrap().database_url
        };
        assert_eq!(
            resolved(Some("postgres://flag/db"), &env).as_deref(),
            Some("postgres://flag/db")
        );
        assert_eq!(resolved(None, &env).as_deref(), Some("postgres://env/db"));
        assert_eq!(resolved(None, &none).as_deref(), Some("postgres://file/db"));
        std::fs::write(&file, "").unwrap();
        assert_eq!(resolved(None, &none), None);
    }

    #[test]
    fn defaults_apply_and_the_key_comes_from_the_named_variable() {
        let dir = tempfile::tempdir().unwrap();
        let args = Flags {
            config: None,
            api_key_env: Some("MY_KEY".into()),
            ..Flags::default()
        };
        let xdg = dir.path().to_string_lossy().to_string();
        let env = env_of(&[("MY_KEY", "sk-test-123456789"), ("XDG_CONFIG_HOME", &xdg)]);
        let settings = resolve(args.clone(), &env).unwrap();
        assert_eq!(settings.base_url, DEFAULT_BASE_URL);
        assert_eq!(settings.api_key.as_deref(), Some("sk-test-123456789"));
        assert_eq!(settings.runs_dir, PathBuf::from(".run"));
    }

    #[test]
    fn a_bad_config_names_file_and_line() {
        let error = parse_config(Path::new("/x/config.toml"), "model = \"a\"\nbase_url = 3\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("/x/config.toml:2:"), "{error}");
        let error = parse_config(Path::new("c.toml"), "model = \"a\"\n\nmodle = \"b\"\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("c.toml:3:"), "{error}");
        assert!(error.contains("modle"), "{error}");
    }

    #[test]
    fn a_bad_value_names_file_line_and_what_is_expected() {
        let cases = [
            (
                "model = \"m\"\nrequest_timeout = \"-5s\"\n",
                2,
                "cannot be negative",
            ),
            (
                "idle_timeout = \"1y\"\n",
                1,
                "not a duration of fixed length",
            ),
            ("\nturn_timeout = 99999999999999999999\n", 2, "too long"),
            ("turn_timeout = \"99999999999999999999s\"\n", 1, "too long"),
            ("request_timeout = 1e300\n", 1, "too long"),
            (
                "request_timeout = true\n",
                1,
                "expected a duration: a number of seconds",
            ),
            (
                "request_timeout = \"soon\"\n",
                1,
                "request_timeout: \"soon\" is not a duration",
            ),
            ("compact_threshold = 5.0\n", 1, "between 0.1 and 1"),
            (
                "max_tokens = 99999999999999999999\n",
                1,
                "a whole number from 0 to",
            ),
            ("\n[models.m]\ntop_p = inf\n", 3, "not a finite number"),
            ("temperature = nan\n", 1, "not a finite number"),
            (
                "tool_choice = { penalty = nan }\n",
                1,
                "penalty: NaN is not a finite number",
            ),
            (
                "\n[extra_body]\nmessages = []\n",
                2,
                "\"messages\" is written by reprise",
            ),
            (
                "[models.m]\nextra_body = { model = \"x\" }\n",
                2,
                "\"model\" is written",
            ),
        ];
        for (text, line, words) in cases {
            let error = parse_config(Path::new("c.toml"), text)
                .unwrap_err()
                .to_string();
            assert!(
                error.contains(&format!("c.toml:{line}:")),
                "{text:?}: {error}"
            );
            assert!(error.contains(words), "{text:?}: {error}");
            for serde_words in ["untagged", "i128", "u32"] {
                assert!(!error.contains(serde_words), "{text:?}: {error}");
            }
        }
    }

    #[test]
    fn a_huge_unknown_key_is_not_echoed_whole() {
        let key = "k".repeat(10 * 1024 * 1024);
        let error = parse_config(Path::new("c.toml"), &format!("{key} = 1\n"))
            .unwrap_err()
            .to_string();
        assert!(error.len() < 2000, "{} bytes", error.len());
        assert!(
            error.contains("c.toml:1:1: unknown field `kkkk"),
            "{error:.200}"
        );
        let error = parse_config(
            Path::new("c.toml"),
            &format!("[agents.{key}]\ndescription = \"x\"\n"),
        )
        .unwrap_err()
        .to_string();
        assert!(error.len() < 2000, "{} bytes", error.len());
    }

    #[test]
    fn the_summary_limit_comes_from_the_models_table_then_the_top() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        let settings = |text: &str| {
            std::fs::write(&file, text).unwrap();
            let args = Flags {
                config: Some(file.clone()),
                model: Some("small".into()),
                ..Flags::default()
            };
            resolve(args.clone(), &env_of(&[]))
                .unwrap()
                .summary_max_tokens
        };
        assert_eq!(settings(""), None);
        assert_eq!(settings("summary_max_tokens = 300\n"), Some(300));
        assert_eq!(
            settings("summary_max_tokens = 300\n[models.small]\nsummary_max_tokens = 40\n"),
            Some(40)
        );
    }

    #[test]
    fn zero_is_no_limit_for_every_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(
            &file,
            "request_timeout = \"0\"\nidle_timeout = 0\nturn_timeout = \"0s\"\n",
        )
        .unwrap();
        let args = Flags {
            config: Some(file.clone()),
            ..Flags::default()
        };
        let settings = resolve(args.clone(), &env_of(&[])).unwrap();
        assert_eq!(settings.request_timeout, None);
        assert_eq!(settings.idle_timeout, None);
        assert_eq!(settings.turn_timeout, None);
        std::fs::write(&file, "").unwrap();
        let args = Flags {
            config: Some(file),
            request_timeout: Some(Duration::ZERO),
            idle_timeout: Some(Duration::ZERO),
            ..Flags::default()
        };
        let settings = resolve(args.clone(), &env_of(&[])).unwrap();
        assert_eq!(settings.request_timeout, None);
        assert_eq!(settings.idle_timeout, None);
    }

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("45s"), Ok(Duration::from_secs(45)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5 parsecs").is_err());
    }

    #[test]
    fn per_model_settings_win_over_the_top_of_the_file_and_flags_over_both() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(
            &file,
            "model = \"qwen2.5:7b\"\nmax_tokens = 100\nturn_timeout = \"5m\"\n\
             request_timeout = 20\n\n[models.\"qwen2.5:7b\"]\nmax_tokens = 300\n\
             idle_timeout = \"2m\"\nmax_turns = 7\n",
        )
        .unwrap();
        let args = Flags {
            config: Some(file.clone()),
            ..Flags::default()
        };
        let settings = resolve(args.clone(), &env_of(&[])).unwrap();
        assert_eq!(settings.generation.max_tokens, Some(300));
        assert_eq!(settings.idle_timeout, Some(Duration::from_secs(120)));
        assert_eq!(settings.request_timeout, Some(Duration::from_secs(20)));
        assert_eq!(settings.turn_timeout, Some(Duration::from_secs(300)));
        assert_eq!(settings.max_turns, 7);
        let args = Flags {
            config: Some(file),
            max_tokens: Some(0),
            turn_timeout: Some(Duration::ZERO),
            ..Flags::default()
        };
        let settings = resolve(args.clone(), &env_of(&[])).unwrap();
        assert_eq!(settings.generation.max_tokens, None, "0 sends none");
        assert_eq!(settings.turn_timeout, None, "0 is no budget");
    }

    #[test]
    fn the_defaults_bound_a_reply_and_a_turn() {
        let dir = tempfile::tempdir().unwrap();
        let xdg = dir.path().to_string_lossy().to_string();
        let settings = resolve(Flags::default(), &env_of(&[("XDG_CONFIG_HOME", &xdg)])).unwrap();
        assert_eq!(
            settings.generation.max_tokens,
            Some(reprise_provider::DEFAULT_MAX_TOKENS)
        );
        assert_eq!(
            settings.turn_timeout,
            Some(reprise_agent::DEFAULT_TURN_TIMEOUT)
        );
        assert_eq!(
            settings.request_timeout,
            Some(reprise_provider::DEFAULT_REQUEST_TIMEOUT)
        );
    }

    #[test]
    fn a_named_config_that_does_not_exist_is_an_error() {
        let args = Flags {
            config: Some(PathBuf::from("/nonexistent/reprise.toml")),
            ..Flags::default()
        };
        let error = resolve(args.clone(), &env_of(&[])).unwrap_err().to_string();
        assert!(error.contains("/nonexistent/reprise.toml"), "{error}");
    }

    #[test]
    fn agent_tables_become_subagents_over_the_chat_settings() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(
            &file,
            "model = \"main-model\"\ntemperature = 0.5\n\n[agents.scout]\n\
             description = \"Looks around the files.\"\ntools = [\"read_*\", \"list_dir\"]\n\
             max_turns = 4\n\n[agents.poet]\ndescription = \"Writes verse.\"\n\
             system_prompt = \"You write verse.\"\nmodel = \"poet-model\"\nmax_tokens = 0\n",
        )
        .unwrap();
        let args = Flags {
            config: Some(file),
            ..Flags::default()
        };
        let settings = resolve(args.clone(), &env_of(&[])).unwrap();
        let names: Vec<&str> = settings.agents.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["poet", "scout"]);
        let (poet, scout) = (&settings.agents[0], &settings.agents[1]);
        assert!(scout.may_use("read_file") && scout.may_use("list_dir"));
        assert!(!scout.may_use("ev__echo"));
        assert!(!poet.may_use("read_file"), "no tools unless named");
        assert_eq!(scout.max_turns, 4);
        assert_eq!(poet.max_turns, reprise_agent::DEFAULT_SUBAGENT_MAX_TURNS);
        assert!(scout.system_prompt.contains("Looks around the files."));
        assert_eq!(poet.system_prompt, "You write verse.");
        assert!(
            !scout.own_provider,
            "same model and settings: the chat's client"
        );
        assert!(poet.own_provider);
        assert_eq!(poet.model.as_deref(), Some("poet-model"));
        assert_eq!(poet.generation.max_tokens, None);
        assert_eq!(
            poet.generation.temperature,
            Some(0.5),
            "the chat's, inherited"
        );
    }

    #[test]
    fn a_bad_agent_table_names_its_line() {
        let cases = [
            (
                "[agents.scout]\ndescription = \"x\"\ntoolz = []\n",
                3,
                "toolz",
            ),
            (
                "model = \"m\"\n\n[agents.scout]\ntools = [\"a\"]\n",
                3,
                "description",
            ),
            (
                "[agents.scout]\ndescription = \"  \"\n",
                1,
                "description is empty",
            ),
            (
                "\n[agents.\"a b\"]\ndescription = \"x\"\n",
                2,
                "cannot be a subagent",
            ),
            (
                "[agents.read_file]\ndescription = \"x\"\n",
                1,
                "built-in tool",
            ),
            (
                "[agents.s]\ndescription = \"x\"\nmax_turns = 0\n",
                1,
                "max_turns",
            ),
            (
                "[agents.s]\ndescription = \"x\"\ntools = [\"a b\"]\n",
                1,
                "tools",
            ),
            (
                "[agents.s]\ndescription = \"x\"\nmax_turns = \"many\"\n",
                3,
                "expected a whole number from 0 to 4294967295",
            ),
        ];
        for (text, line, words) in cases {
            let error = parse_config(Path::new("c.toml"), text)
                .unwrap_err()
                .to_string();
            assert!(
                error.contains(&format!("c.toml:{line}")),
                "{text:?}: {error}"
            );
            assert!(error.contains(words), "{text:?}: {error}");
        }
    }
}
