//! Settings: flags win over environment variables, which win over the config file,
//! which wins over the defaults.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use crate::cli::ChatArgs;

/// Ollama's OpenAI-compatible endpoint: what most people run locally.
pub const DEFAULT_BASE_URL: &str = "http://localhost:11434/v1";
/// The model asked for when nothing says otherwise.
pub const DEFAULT_MODEL: &str = "llama3.2";
/// Where the API key is read from when nothing says otherwise.
pub const DEFAULT_API_KEY_ENV: &str = "OPENAI_API_KEY";
/// The runs directory when nothing says otherwise.
pub const DEFAULT_RUNS_DIR: &str = ".run";

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
    /// The system prompt.
    pub system_prompt: Option<String>,
    /// The most model calls one turn may make.
    pub max_turns: Option<u32>,
    /// MCP servers (`[mcp]`, `[mcp.servers.<name>]`).
    pub mcp: Option<reprise_mcp::McpConfig>,
    /// The step gate's policy (`[gate]`: `allow`, `deny` patterns).
    pub gate: Option<reprise_mcp::GateConfig>,
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
    /// The system prompt.
    pub system_prompt: String,
    /// The most model calls one turn may make.
    pub max_turns: u32,
    /// Run tool calls without asking.
    pub yes: bool,
    /// The config file that was read, if any.
    pub config_file: Option<PathBuf>,
    /// The `[mcp]` section of the config.
    pub mcp: Option<reprise_mcp::McpConfig>,
    /// The `[gate]` section of the config.
    pub gate: Option<reprise_mcp::GateConfig>,
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

/// Reads and parses a config file. A parse error names the file, line and column.
pub fn read_config(path: &Path) -> Result<FileConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the config file {}", path.display()))?;
    parse_config(path, &text)
}

/// Parses config text; errors name the file and the line.
pub fn parse_config(path: &Path, text: &str) -> Result<FileConfig> {
    match toml::from_str::<FileConfig>(text) {
        Ok(config) => {
            if let Some(mcp) = &config.mcp {
                mcp.validate().map_err(|error| {
                    anyhow::anyhow!("bad config file {}: [mcp]: {error}", path.display())
                })?;
            }
            if let Some(gate) = &config.gate {
                reprise_mcp::GatePolicy::from_config(gate).map_err(|error| {
                    anyhow::anyhow!("bad config file {}: [gate]: {error}", path.display())
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
            bail!(
                "bad config file {}{position}: {}",
                path.display(),
                error.message()
            )
        }
    }
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// Resolves settings from flags, the environment (`env`) and the config file.
pub fn resolve(args: &ChatArgs, env: &dyn Fn(&str) -> Option<String>) -> Result<Settings> {
    let (file, config_file) = match config_path(args.config.as_deref(), env) {
        Some((path, named)) if named || path.exists() => (read_config(&path)?, Some(path)),
        _ => (FileConfig::default(), None),
    };
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
    let system_prompt = env_nonempty("REPRISE_SYSTEM_PROMPT")
        .or(file.system_prompt)
        .unwrap_or_else(|| DEFAULT_SYSTEM_PROMPT.to_owned());
    let api_key = env_nonempty(&api_key_env);
    Ok(Settings {
        base_url,
        model,
        api_key_env,
        api_key,
        runs_dir,
        system_prompt,
        max_turns: file.max_turns.unwrap_or(25),
        yes: args.yes,
        config_file,
        mcp: file.mcp,
        gate: file.gate,
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
        let args = ChatArgs {
            config: Some(file.clone()),
            model: Some("flag-model".into()),
            ..ChatArgs::default()
        };
        let env = env_of(&[
            ("REPRISE_BASE_URL", "http://env/v1"),
            ("REPRISE_MODEL", "env-model"),
        ]);
        let settings = resolve(&args, &env).unwrap();
        assert_eq!(settings.model, "flag-model");
        assert_eq!(settings.base_url, "http://env/v1");
        assert_eq!(settings.runs_dir, PathBuf::from("file-runs"));
        assert_eq!(settings.config_file, Some(file));
    }

    #[test]
    fn defaults_apply_and_the_key_comes_from_the_named_variable() {
        let dir = tempfile::tempdir().unwrap();
        let args = ChatArgs {
            config: None,
            api_key_env: Some("MY_KEY".into()),
            ..ChatArgs::default()
        };
        let xdg = dir.path().to_string_lossy().to_string();
        let env = env_of(&[("MY_KEY", "sk-test-123456789"), ("XDG_CONFIG_HOME", &xdg)]);
        let settings = resolve(&args, &env).unwrap();
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
    fn a_named_config_that_does_not_exist_is_an_error() {
        let args = ChatArgs {
            config: Some(PathBuf::from("/nonexistent/reprise.toml")),
            ..ChatArgs::default()
        };
        let error = resolve(&args, &env_of(&[])).unwrap_err().to_string();
        assert!(error.contains("/nonexistent/reprise.toml"), "{error}");
    }
}
