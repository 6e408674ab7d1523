//! Approvals that outlive the process: a payment waits for a person's decision,
//! the process exits, and a later process (on any machine, with PostgreSQL)
//! approves or refuses it and finishes the turn.
//!
//! ```text
//! cargo run -p reprise --example approvals -- --sessions ./sessions ask bill-7 "Pay the smith 5 gold."
//! cargo run -p reprise --example approvals -- --sessions ./sessions pending bill-7
//! cargo run -p reprise --example approvals -- --sessions ./sessions approve bill-7 call_1
//! cargo run -p reprise --example approvals -- --sessions ./sessions deny bill-7 call_1 "over budget"
//! ```
//!
//! With `--database-url postgres://…` (or `REPRISE_DATABASE_URL`) instead of
//! `--sessions`, the session lives in PostgreSQL and any machine can decide.
//!
//! - `ask` runs a turn. The approver answers "not now" for every `pay` call: the
//!   agent records the waiting calls in the session and the run ends with
//!   `AgentError::AwaitingDecision`, listing them. The process exits; nothing is
//!   held.
//! - `approve` and `deny` open the session, record the decision for one call
//!   (bound to the hash of its arguments: `--hash` refuses a decision made after
//!   looking at other arguments; a call is decided once) and continue the turn: the
//!   payment runs (once) or the model is told why not, and the model answers.
#![allow(clippy::unwrap_used, clippy::expect_used)] // an example: a panic is the error report

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use reprise::agent::PendingCall;
use reprise::postgres::{PgSessionStore, PgStoreOptions};
use reprise::prelude::*;
use reprise::session::CallDecision;

#[derive(Parser)]
#[command(about = "A payment that waits for a person's decision, across processes")]
struct Args {
    /// A folder of sessions.
    #[arg(long, conflicts_with = "database_url")]
    sessions: Option<PathBuf>,
    /// A PostgreSQL database holding the sessions.
    #[arg(long, env = "REPRISE_DATABASE_URL")]
    database_url: Option<String>,
    /// The OpenAI-compatible API root.
    #[arg(long, default_value = reprise::provider::DEFAULT_BASE_URL)]
    base_url: String,
    /// The model name.
    #[arg(long, default_value = "llama3.1")]
    model: String,
    /// Where payments are written, one line each.
    #[arg(long, default_value = "./ledger.txt")]
    ledger: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a turn; payments wait for a decision.
    Ask {
        /// The session.
        session: String,
        /// The request.
        prompt: String,
    },
    /// List the calls that wait for a decision.
    Pending {
        /// The session.
        session: String,
    },
    /// Allow a waiting call and finish the turn.
    Approve {
        /// The session.
        session: String,
        /// The call's id.
        call: String,
        /// The hash of the arguments the decision is for (as `pending` shows it).
        #[arg(long)]
        hash: Option<String>,
    },
    /// Refuse a waiting call and finish the turn.
    Deny {
        /// The session.
        session: String,
        /// The call's id.
        call: String,
        /// Why: the model is told.
        reason: String,
        /// The hash of the arguments the decision is for (as `pending` shows it).
        #[arg(long)]
        hash: Option<String>,
    },
}

#[derive(serde::Deserialize, JsonSchema)]
struct Pay {
    /// Who is paid.
    to: String,
    /// How much gold.
    amount: u32,
}

/// Every payment waits for a person; everything else runs.
struct PaymentsWait;

#[async_trait]
impl ToolApprover for PaymentsWait {
    async fn approve(&self, call: &ToolInvocation) -> Approval {
        if call.name == "pay" {
            Approval::Defer
        } else {
            Approval::Allow
        }
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run(Args::parse()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let store: Arc<dyn SessionStore> = match (&args.sessions, &args.database_url) {
        (Some(dir), _) => Arc::new(FileSessionStore::new(dir)),
        (None, Some(url)) => {
            Arc::new(PgSessionStore::connect(url, PgStoreOptions::default()).await?)
        }
        (None, None) => return Err("give --sessions DIR or --database-url URL".into()),
    };
    let ledger = args.ledger.clone();
    let pay = tool("pay", "Pay someone.", move |pay: Pay, call| {
        let ledger = ledger.clone();
        async move {
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&ledger)
                .map_err(|error| error.to_string())?;
            // The idempotency key lets a payment service drop a repeated request.
            writeln!(file, "{} {} {}", pay.to, pay.amount, call.idempotency_key)
                .map_err(|error| error.to_string())?;
            Ok::<_, String>(format!("paid {} gold to {}", pay.amount, pay.to))
        }
    });
    let mut config = OpenAiConfig::new(args.model.clone()).base_url(args.base_url.clone());
    if let Ok(key) = std::env::var("OPENAI_API_KEY") {
        config = config.api_key(key);
    }
    let provider = Arc::new(OpenAiProvider::new(config)?);
    let agents = Agent::builder(provider)
        .system("You are the town's treasurer. Pay bills with the pay tool.")
        .tool(pay)
        .approver(Arc::new(PaymentsWait))
        .store(Arc::clone(&store));

    let result = match &args.command {
        Command::Ask { session, prompt } => {
            let mut agent = agents.open(session).await?;
            let outcome = agent.run(prompt.as_str()).await;
            agent.close().await?;
            match outcome {
                Ok(answer) => println!("answer: {answer}"),
                Err(AgentError::AwaitingDecision { calls }) => calls.iter().for_each(show),
                Err(error) => return Err(error.into()),
            }
            Ok(())
        }
        Command::Pending { session } => {
            let agent = agents.open(session).await?;
            agent.pending_calls().iter().for_each(show);
            agent.close().await?;
            Ok(())
        }
        Command::Approve {
            session,
            call,
            hash,
        } => decide(&agents, session, call, hash, CallDecision::Allow).await,
        Command::Deny {
            session,
            call,
            reason,
            hash,
        } => {
            let decision = CallDecision::Deny {
                reason: reason.clone(),
            };
            decide(&agents, session, call, hash, decision).await
        }
    };
    store.close().await?;
    result
}

/// One line per waiting call: its id, tool, arguments and their hash.
fn show(call: &PendingCall) {
    println!(
        "waiting: {} {} {} {}",
        call.call_id, call.tool, call.arguments, call.arguments_hash
    );
}

/// Records the decision about `call_id` and finishes the turn.
async fn decide(
    agents: &AgentBuilder,
    session: &str,
    call_id: &str,
    hash: &Option<String>,
    decision: CallDecision,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut agent = agents.open(session).await?;
    let outcome = async {
        // The decision names the call as the session holds it (the latest call with
        // that id); the hash, when given, is the one of the arguments the person
        // looked at.
        let found = agent.entries().iter().rev().find_map(|entry| {
            let message = entry.as_message()?;
            let call = message.calls().iter().find(|call| call.id == call_id)?;
            Some(PendingCall::of(entry.uuid, call))
        });
        let Some(mut call) = found else {
            let error = format!("the session holds no tool call {call_id}");
            return Err(Box::<dyn std::error::Error>::from(error));
        };
        if let Some(hash) = hash {
            call.arguments_hash = hash.clone();
        }
        agent
            .decide(&call, decision, "the approvals example")
            .await?;
        match agent.resume_turn(None, CancellationToken::new()).await {
            Ok(answer) => println!("answer: {}", answer.unwrap_or_default()),
            Err(AgentError::AwaitingDecision { calls }) => calls.iter().for_each(show),
            Err(error) => return Err(error.into()),
        }
        Ok(())
    }
    .await;
    agent.close().await?;
    outcome
}
