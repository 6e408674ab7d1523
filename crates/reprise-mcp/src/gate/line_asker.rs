//! The plain mode's asker: the question on one writer, the answer from one line.

use async_trait::async_trait;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::Mutex;

use super::step_gate::{GateAnswer, GateAsker, GateRequest};

/// Longest argument text shown in a question.
const SHOWN_ARGUMENTS: usize = 500;

/// Asks on `output`, reads the answer from `input` (a terminal, a pipe, a test's
/// in-memory stream). `y`/`yes`, `n`/`no`, `a`/`always`; anything else is asked
/// again; the end of the input answers no.
pub struct LineAsker<R, W> {
    io: Mutex<(R, W)>,
}

impl<R, W> LineAsker<R, W>
where
    R: AsyncBufRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send,
{
    /// An asker over this input and output.
    pub fn new(input: R, output: W) -> Self {
        LineAsker {
            io: Mutex::new((input, output)),
        }
    }

    /// Gives the streams back.
    pub fn into_inner(self) -> (R, W) {
        self.io.into_inner()
    }
}

/// The question's text: the tool, who calls it, the arguments (cut when long).
pub fn question(request: &GateRequest) -> String {
    let mut arguments: String = request
        .arguments
        .trim()
        .chars()
        .take(SHOWN_ARGUMENTS)
        .collect();
    if request.arguments.trim().chars().count() > SHOWN_ARGUMENTS {
        arguments.push('…');
    }
    if arguments.is_empty() {
        arguments = "(none)".to_string();
    }
    format!(
        "Run the tool {} (agent {}, call {})?\n  arguments: {arguments}\n",
        request.tool, request.agent, request.call_id
    )
}

/// Reads one answer; `None` for an answer that is not one.
pub fn parse_answer(line: &str) -> Option<GateAnswer> {
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Some(GateAnswer::Yes),
        "n" | "no" => Some(GateAnswer::No),
        "a" | "always" => Some(GateAnswer::AlwaysForThisRun),
        _ => None,
    }
}

#[async_trait]
impl<R, W> GateAsker for LineAsker<R, W>
where
    R: AsyncBufRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send,
{
    async fn ask(&self, request: &GateRequest) -> GateAnswer {
        let mut io = self.io.lock().await;
        let (input, output) = &mut *io;
        let mut prompt = question(request);
        loop {
            prompt.push_str("[y]es / [n]o / [a]lways for this run: ");
            if output.write_all(prompt.as_bytes()).await.is_err() || output.flush().await.is_err() {
                return GateAnswer::No;
            }
            let mut line = String::new();
            match input.read_line(&mut line).await {
                Ok(0) | Err(_) => {
                    let _ = output
                        .write_all(b"\n(no answer: the input ended; the tool is not run)\n")
                        .await;
                    let _ = output.flush().await;
                    return GateAnswer::No;
                }
                Ok(_) => {
                    if let Some(answer) = parse_answer(&line) {
                        return answer;
                    }
                    prompt = "Please answer y, n or a.\n".to_string();
                }
            }
        }
    }
}
