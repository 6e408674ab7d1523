//! The `reprise` chat's logic, below any screen: what the terminal chat does, for a
//! program that draws its own interface.
//!
//! An [`Opener`](session::Opener) holds the settings, the model client, the redactor
//! and the [`RunCatalog`](reprise_runs::RunCatalog) of runs; it opens the
//! [`ChatSession`](session::ChatSession) of a run (its agent, tools, gate, checkpoints,
//! `session.log` and `transcript.jsonl`). A screen hands each typed line to
//! [`dispatch`](commands::dispatch), which understands the slash commands and says
//! what comes next as an [`Outcome`](commands::Outcome); it runs turns with
//! [`ChatSession::turn`](session::ChatSession::turn) and shows the
//! [`UiEvent`](events::UiEvent)s the session sends, answering the gate's questions
//! ([`Ask`](events::Ask)). Which run to start with and `/resume` are in [`start`];
//! forks (with or without the files) in [`fork`]; rewinds in [`rewind`] (the plan,
//! preview and carrying out), [`rewind_steps`] (`/rewind` in an open chat) and
//! [`rewind_run`] (a run rewound from a command). [`catalog`] chooses where the runs
//! are kept (folders or PostgreSQL), [`config`] resolves the settings, and
//! [`answers`] reads the answer to a yes-or-no question. [`view`] is the view model
//! of a conversation: its entries as the items `reprise show`, the exports and the
//! screens' redraw draw.
//!
//! Modules, with imports pointing down the list: [`commands`], [`start`],
//! [`rewind_run`] use [`session`], [`rewind_steps`] and [`fork`], which use
//! [`checkpoints`], [`rewind`], [`approval`], [`events`], [`builtins`],
//! [`provider`], [`view`] and [`subagents`]; all of them use [`config`] (the
//! settings), [`text`] (shared wording), [`error`] and [`error_text`].

pub mod answers;
pub mod approval;
pub mod builtins;
pub mod catalog;
pub mod checkpoints;
pub mod commands;
pub mod config;
pub mod context_window;
pub mod error;
pub mod error_text;
pub mod events;
pub mod fork;
mod fork_checkpoints;
mod fork_files;
pub mod local_pins;
pub mod provider;
pub mod rewind;
pub mod rewind_run;
pub mod rewind_steps;
pub mod server_error;
pub mod session;
pub mod start;
pub mod subagents;
pub mod text;
pub mod tool_settings;
pub mod turn_clock;
pub mod view;

pub use error::ChatError;
