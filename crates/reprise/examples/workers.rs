//! Agents as a service: worker processes take conversations from a queue table in
//! PostgreSQL and continue them with the agent; the sessions are in the same database
//! (`reprise-postgres`), so any worker on any machine may continue any conversation.
//!
//! ```text
//! DB=postgres://app@db.internal/agents
//! cargo run -p reprise --example workers -- --database-url $DB enqueue quest-1 "Where is the key?"
//! cargo run -p reprise --example workers -- --database-url $DB run --workers 4 --until-idle
//! cargo run -p reprise --example workers -- --database-url $DB show quest-1
//! ```
//!
//! How a message is neither lost nor doubled when a worker dies mid-turn:
//!
//! - A job is one message for one conversation, numbered in its conversation (`turn`).
//!   A worker claims the oldest open job whose conversation has no older open job,
//!   with `FOR UPDATE SKIP LOCKED` in a short transaction of its own, and marks it
//!   taken until a deadline. No transaction stays open while the model thinks.
//! - The claim is only a hint. What guards the conversation is the session's writer
//!   lease: building the agent takes it, and every message the agent stores checks it.
//!   A worker that stalls past its lease and is taken over cannot store anything more.
//! - Each job's message has an id (`prompt_id`), and the worker runs it as a
//!   [`Prompt`] with that id: if the conversation does not hold it, it is stored and
//!   sent; if it holds it unanswered (the last worker died after storing it), the
//!   model answers what is stored, without the message being sent twice; if it is
//!   answered, that answer is returned. Then the worker marks the job done and closes
//!   the agent, which lets go of the lease before the next job.
//! - A killed worker's claim and lease expire (`--lease`); another worker then takes
//!   the job and finishes the conversation.
#![allow(clippy::unwrap_used, clippy::expect_used)] // an example: a panic is the error report

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use reprise::Uuid;
use reprise::postgres::{PgSessionStore, PgStoreOptions};
use reprise::prelude::*;
use sqlx::PgPool;

#[derive(Parser)]
#[command(about = "Worker processes that continue conversations from a queue table")]
struct Args {
    /// The PostgreSQL database of the queue and the sessions.
    #[arg(long, env = "REPRISE_DATABASE_URL")]
    database_url: String,
    /// The OpenAI-compatible API root.
    #[arg(long, default_value = reprise::provider::DEFAULT_BASE_URL)]
    base_url: String,
    /// The model name.
    #[arg(long, default_value = "llama3.1")]
    model: String,
    /// How long a claim and a writer lease last without renewal: how soon a dead
    /// worker's conversation is taken over (30s, 2s, 500ms).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    lease: Duration,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Queue a message for a conversation.
    Enqueue {
        /// The conversation (a session id).
        conversation: String,
        /// The message.
        message: String,
    },
    /// Start worker processes and wait for them.
    Run {
        /// How many.
        #[arg(long, default_value_t = 2)]
        workers: usize,
        /// Stop once no job is left open.
        #[arg(long)]
        until_idle: bool,
    },
    /// Be one worker (what `run` starts).
    Work {
        /// Stop once no job is left open.
        #[arg(long)]
        until_idle: bool,
    },
    /// Print a conversation.
    Show {
        /// The conversation.
        conversation: String,
    },
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = text
        .find(|c: char| !c.is_ascii_digit())
        .map_or((text, "s"), |at| text.split_at(at));
    let n: u64 = number
        .parse()
        .map_err(|_| format!("not a duration: {text}"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        _ => Err(format!("not a duration: {text} (use ms, s or m)")),
    }
}

/// The queue. `turn` numbers a conversation's messages; `prompt_id` is the id the
/// message is stored under in the conversation, the same on every attempt.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS worker_jobs (
    id           bigserial PRIMARY KEY,
    conversation text        NOT NULL,
    turn         integer     NOT NULL,
    message      text        NOT NULL,
    prompt_id    uuid        NOT NULL DEFAULT gen_random_uuid(),
    taken_until  timestamptz,
    taken_by     integer,
    attempts     integer     NOT NULL DEFAULT 0,
    done_at      timestamptz,
    answer       text,
    UNIQUE (conversation, turn)
);
CREATE INDEX IF NOT EXISTS worker_jobs_open ON worker_jobs (id) WHERE done_at IS NULL;
";

/// A claimed job.
struct Job {
    id: i64,
    conversation: String,
    turn: i32,
    message: String,
    prompt_id: Uuid,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let options = PgStoreOptions {
        lease: args.lease,
        ..PgStoreOptions::default()
    };
    let store = PgSessionStore::connect(&args.database_url, options).await?;
    let pool = store.pool().clone();
    sqlx::raw_sql(SCHEMA).execute(&pool).await?;
    match &args.command {
        Command::Enqueue {
            conversation,
            message,
        } => {
            let turn: i32 = sqlx::query_scalar(
                "INSERT INTO worker_jobs (conversation, turn, message) \
                 SELECT $1, coalesce(max(turn), 0) + 1, $2 FROM worker_jobs \
                 WHERE conversation = $1 RETURNING turn",
            )
            .bind(conversation)
            .bind(message)
            .fetch_one(&pool)
            .await?;
            println!("queued message {turn} of {conversation}");
        }
        Command::Run {
            workers,
            until_idle,
        } => supervise(*workers, *until_idle).await?,
        Command::Work { until_idle } => work(&args, &store, &pool, *until_idle).await?,
        Command::Show { conversation } => {
            let key = reprise::session::SessionKey::session(conversation)?;
            let loaded = store.load(&key).await?.unwrap_or_default();
            for entry in loaded.entries {
                if let Some(message) = entry.message {
                    println!("{}: {}", message.role.as_str(), message.text());
                }
            }
        }
    }
    store.close().await?;
    Ok(())
}

/// Starts `count` workers (this program, `work`) and waits for them all.
async fn supervise(count: usize, until_idle: bool) -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let at = args.iter().position(|arg| arg == "run").expect("run");
    args.truncate(at);
    args.push("work".into());
    if until_idle {
        args.push("--until-idle".into());
    }
    let mut children = Vec::new();
    for _ in 0..count {
        let child = tokio::process::Command::new(std::env::current_exe()?)
            .args(&args)
            .stdin(Stdio::null())
            .spawn()?;
        println!("started worker {}", child.id().unwrap_or(0));
        children.push(child);
    }
    for mut child in children {
        let pid = child.id().unwrap_or(0);
        let status = child.wait().await?;
        println!("worker {pid} ended: {status}");
    }
    Ok(())
}

/// One worker: claim a job, continue its conversation, mark it done; again.
async fn work(
    args: &Args,
    store: &PgSessionStore,
    pool: &PgPool,
    until_idle: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut config = OpenAiConfig::new(args.model.clone()).base_url(args.base_url.clone());
    if let Ok(key) = std::env::var("OPENAI_API_KEY") {
        config = config.api_key(key);
    }
    let provider: Arc<dyn Provider> = Arc::new(OpenAiProvider::new(config)?);
    let pid = std::process::id();
    let lease_ms = i64::try_from(args.lease.as_millis())?;
    loop {
        let Some(job) = claim(pool, pid, lease_ms).await? else {
            if until_idle && open_jobs(pool).await? == 0 {
                return Ok(());
            }
            // Nothing to take now: open jobs are claimed by others (alive or not).
            tokio::time::sleep(args.lease / 4).await;
            continue;
        };
        match continue_conversation(&provider, store, &job).await {
            Ok(Some(agent_answer)) => {
                // Marked done while the lease is still held: a worker that takes the
                // conversation next sees the job closed.
                let (agent, answer) = agent_answer;
                sqlx::query("UPDATE worker_jobs SET done_at = now(), answer = $2 WHERE id = $1")
                    .bind(job.id)
                    .bind(&answer)
                    .execute(pool)
                    .await?;
                agent.close().await?;
                println!(
                    "worker {pid}: {} message {}: {answer}",
                    job.conversation, job.turn
                );
            }
            // Another worker holds the conversation (one that died holds it until its
            // lease expires): try again soon.
            Ok(None) => {
                sqlx::query(
                    "UPDATE worker_jobs SET taken_until = now() + $2 * interval '1 millisecond' \
                     WHERE id = $1",
                )
                .bind(job.id)
                .bind(lease_ms / 4)
                .execute(pool)
                .await?;
            }
            // The model or the database failed: the claim runs out and the job is
            // taken again.
            Err(error) => eprintln!("worker {pid}: {}: {error}", job.conversation),
        }
    }
}

/// Claims the oldest open job whose conversation has no older open job.
async fn claim(pool: &PgPool, pid: u32, lease_ms: i64) -> Result<Option<Job>, sqlx::Error> {
    let row: Option<(i64, String, i32, String, Uuid)> = sqlx::query_as(
        "UPDATE worker_jobs SET taken_until = now() + $2 * interval '1 millisecond', \
             taken_by = $1, attempts = attempts + 1 \
         WHERE id = ( \
             SELECT j.id FROM worker_jobs j \
             WHERE j.done_at IS NULL AND (j.taken_until IS NULL OR j.taken_until < now()) \
               AND NOT EXISTS (SELECT 1 FROM worker_jobs o WHERE o.conversation = j.conversation \
                               AND o.done_at IS NULL AND o.id < j.id) \
             ORDER BY j.id FOR UPDATE SKIP LOCKED LIMIT 1) \
         RETURNING id, conversation, turn, message, prompt_id",
    )
    .bind(i32::try_from(pid).unwrap_or(i32::MAX))
    .bind(lease_ms)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|(id, conversation, turn, message, prompt_id)| Job {
        id,
        conversation,
        turn,
        message,
        prompt_id,
    }))
}

async fn open_jobs(pool: &PgPool) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT count(*) FROM worker_jobs WHERE done_at IS NULL")
        .fetch_one(pool)
        .await
}

/// Takes the conversation's lease and brings it to the end of the job's message:
/// the agent (still holding the lease) and the answer, or `None` when another
/// worker holds the conversation.
async fn continue_conversation(
    provider: &Arc<dyn Provider>,
    store: &PgSessionStore,
    job: &Job,
) -> Result<Option<(Agent, String)>, Box<dyn std::error::Error>> {
    let built = Agent::builder(Arc::clone(provider))
        .system("You are a helpful assistant.")
        .store(Arc::new(store.clone()))
        .session_id(job.conversation.clone())
        .build()
        .await;
    let mut agent = match built {
        Ok(agent) => agent,
        Err(error) if error.is_locked() => return Ok(None),
        Err(error) => return Err(error.into()),
    };
    // Stored and sent once, whichever worker runs it and however often.
    let prompt = Prompt::new(job.message.clone()).with_id(job.prompt_id);
    let answer = agent.run(prompt).await?;
    Ok(Some((agent, answer)))
}
