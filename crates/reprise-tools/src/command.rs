//! `run_command`'s work: `sh -c COMMAND` in the working folder, in its own process
//! group and in the sandbox, its output captured within a bound, the whole group
//! killed when the command ends, times out or is cancelled.

use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::process::{Pid, Signal};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::sync::CancellationToken;

use crate::error::{CommandError, SandboxError};
use crate::output::CappedOutput;
use crate::privileges;
use crate::protection::{self, Launch};
use crate::sandbox::{self, Limits, SandboxSettings, SandboxSupport};
use crate::trampoline;
use crate::workspace::Workspace;

/// How long a command may run when the call names no timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// The longest timeout a call may ask for.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// The most bytes kept of each of stdout and stderr.
pub const OUTPUT_CAP: usize = 32 * 1024;
/// How long the output is still read once the command's group was killed (a
/// process that left the group may hold the pipe open).
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// How commands are run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandSettings {
    /// How long a command may run when the call names no timeout.
    pub default_timeout: Duration,
    /// The longest timeout a call may ask for; longer ones are cut to it.
    pub max_timeout: Duration,
    /// The most bytes kept of each of stdout and stderr (half from the start, half
    /// from the end).
    pub output_cap: usize,
    /// Where commands may write and whether they may use the network.
    pub sandbox: SandboxSettings,
    /// Environment variables a command does not get (the one holding the API key).
    pub hidden_env: Vec<String>,
}

impl Default for CommandSettings {
    fn default() -> Self {
        CommandSettings {
            default_timeout: DEFAULT_TIMEOUT,
            max_timeout: MAX_TIMEOUT,
            output_cap: OUTPUT_CAP,
            sandbox: SandboxSettings::default(),
            hidden_env: Vec::new(),
        }
    }
}

/// How a command ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommandEnd {
    /// The shell exited with this status.
    Exited(i32),
    /// The shell was killed by this signal.
    Signalled(i32),
    /// The timeout ran out; the group was killed.
    TimedOut(Duration),
    /// The call was cancelled; the group was killed.
    Cancelled,
}

/// What a command did.
#[derive(Debug)]
pub struct CommandOutcome {
    /// How it ended.
    pub end: CommandEnd,
    /// What it wrote to stdout (within the cap).
    pub stdout: CappedOutput,
    /// What it wrote to stderr (within the cap).
    pub stderr: CappedOutput,
    /// Whether Landlock confined it.
    pub confined: bool,
}

impl CommandOutcome {
    /// The result shown to the model: how the command ended on the first line, then
    /// its stdout and its stderr.
    pub fn text(&self) -> String {
        let mut text = match self.end {
            CommandEnd::Exited(code) => format!("exit status {code}"),
            CommandEnd::Signalled(signal) => match signal_name(signal) {
                Some(name) => format!("killed by signal {signal} ({name})"),
                None => format!("killed by signal {signal}"),
            },
            CommandEnd::TimedOut(after) => format!(
                "timed out after {} s: the command and the processes it started were killed",
                after.as_secs_f64()
            ),
            CommandEnd::Cancelled => {
                "cancelled: the command and the processes it started were killed".to_owned()
            }
        };
        for (name, output) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            if output.total() > 0 {
                text.push_str(&format!("\n--- {name} ---\n"));
                text.push_str(output.text().trim_end_matches('\n'));
            }
        }
        if self.stdout.total() == 0 && self.stderr.total() == 0 {
            text.push_str("\n(no output)");
        }
        text
    }
}

fn signal_name(signal: i32) -> Option<&'static str> {
    Some(match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        6 => "SIGABRT",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => return None,
    })
}

/// Kills the whole process group when dropped: whatever way the call ends,
/// dropped by a cancelled turn included, no process of the command outlives it.
struct GroupGuard(Option<Pid>);

impl GroupGuard {
    fn kill(&mut self) {
        if let Some(group) = self.0.take() {
            // ESRCH: the group is already gone.
            let _ = rustix::process::kill_process_group(group, Signal::KILL);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A command just started: its process group is killed when this is dropped, also
/// before the call received it (a call dropped while the command starts).
struct Started {
    group: GroupGuard,
    child: tokio::process::Child,
    /// Whether Landlock confines it.
    confined: bool,
}

impl Started {
    fn new(child: tokio::process::Child, confined: bool) -> Started {
        let group = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(Pid::from_raw);
        Started {
            group: GroupGuard(group),
            child,
            confined,
        }
    }
}

/// Runs `command` with `sh -c` in the working folder, in the sandbox, for at most
/// `timeout` (else the settings' default; never more than their maximum), until it
/// ends or `cancel` fires. In every case the command's whole process group is
/// killed once it is done: nothing it started in the background outlives it.
pub async fn run_command(
    workspace: &Workspace,
    settings: &CommandSettings,
    command: &str,
    timeout: Option<Duration>,
    cancel: CancellationToken,
) -> Result<CommandOutcome, CommandError> {
    if command.trim().is_empty() {
        return Err(CommandError::Empty);
    }
    if command.contains('\0') {
        return Err(CommandError::Nul);
    }
    let shell = Shell {
        command: command.to_owned(),
        workspace: workspace.clone(),
        hidden_env: settings.hidden_env.clone(),
        limits: settings.sandbox.limits,
    };
    let Started {
        mut group,
        mut child,
        confined,
    } = spawn_sandboxed(shell, &settings.sandbox).await?;
    let stdout = capture(child.stdout.take(), settings.output_cap);
    let stderr = capture(child.stderr.take(), settings.output_cap);
    let limit = timeout
        .unwrap_or(settings.default_timeout)
        .min(settings.max_timeout);
    let end = tokio::select! {
        status = child.wait() => status.map_or(CommandEnd::Signalled(9), end_of),
        () = tokio::time::sleep(limit) => CommandEnd::TimedOut(limit),
        () = cancel.cancelled() => CommandEnd::Cancelled,
    };
    group.kill();
    if matches!(end, CommandEnd::TimedOut(_) | CommandEnd::Cancelled) {
        let _ = child.wait().await;
    }
    Ok(CommandOutcome {
        end,
        stdout: stdout.finish().await,
        stderr: stderr.finish().await,
        confined,
    })
}

/// What a command is run as: `sh -c command` in the working folder, in a process
/// group of its own, without the hidden variables.
struct Shell {
    command: String,
    workspace: Workspace,
    hidden_env: Vec<String>,
    limits: Limits,
}

impl Shell {
    /// `started` (the shell, or the trampoline that becomes it) set up to run the
    /// command.
    fn prepare(&self, mut started: tokio::process::Command) -> tokio::process::Command {
        started
            .current_dir(self.workspace.root())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        for name in &self.hidden_env {
            started.env_remove(name);
        }
        started
    }

    /// Starts the command as `launch` says, on the calling thread (which a
    /// [`Launch::Restricted`] restricts).
    fn start(&self, launch: Launch) -> Result<Started, CommandError> {
        match launch {
            Launch::Restricted(confinement) => {
                let confined = sandbox::restrict(sandbox::rules(&confinement)?)?;
                privileges::drop_privileges()?;
                let mut shell = tokio::process::Command::new("sh");
                shell.arg("-c").arg(&self.command);
                let child = self
                    .prepare(shell)
                    .spawn()
                    .map_err(|source| CommandError::Spawn { source })?;
                let started = Started::new(child, confined);
                // Without the trampoline the limits can only be set once the shell
                // runs (setting them here would set the chat's).
                if let Some(pid) = started.group.0 {
                    self.limits.apply(Some(pid), false)?;
                }
                Ok(started)
            }
            Launch::Trampoline {
                program,
                mounts,
                confinement,
            } => {
                let started = trampoline::command_for(
                    &program,
                    &mounts,
                    &confinement,
                    self.limits,
                    &self.command,
                );
                let child =
                    self.prepare(started)
                        .spawn()
                        .map_err(|source| SandboxError::Trampoline {
                            program: program.display().to_string(),
                            source,
                        })?;
                Ok(Started::new(child, SandboxSupport::detect().files))
            }
        }
    }
}

/// Starts `shell` from a thread that first plans the sandbox (reading the folders,
/// off the async threads) and then starts the command: the thread restricts
/// itself, so that the shell inherits the restriction, or starts the trampoline,
/// which restricts itself. The thread ends right after.
async fn spawn_sandboxed(
    shell: Shell,
    settings: &SandboxSettings,
) -> Result<Started, CommandError> {
    let runtime = tokio::runtime::Handle::current();
    let (sender, receiver) = tokio::sync::oneshot::channel();
    let settings = settings.clone();
    std::thread::Builder::new()
        .name("reprise-sandbox".to_owned())
        .spawn(move || {
            let _runtime = runtime.enter();
            let (_, launch) = protection::plan(&shell.workspace, &settings);
            let _ = sender.send(shell.start(launch));
        })
        .map_err(|source| SandboxError::Thread { source })?;
    receiver.await.map_err(|_| SandboxError::Thread {
        source: std::io::Error::other("the thread ended without starting the command"),
    })?
}

fn end_of(status: ExitStatus) -> CommandEnd {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => CommandEnd::Exited(code),
        (None, Some(signal)) => CommandEnd::Signalled(signal),
        (None, None) => CommandEnd::Exited(-1),
    }
}

/// One output stream being read into a [`CappedOutput`].
struct Capture {
    kept: Arc<Mutex<CappedOutput>>,
    task: tokio::task::JoinHandle<()>,
}

fn capture(stream: Option<impl AsyncRead + Unpin + Send + 'static>, cap: usize) -> Capture {
    let kept = Arc::new(Mutex::new(CappedOutput::new(cap)));
    let into = Arc::clone(&kept);
    let task = tokio::spawn(async move {
        let Some(mut stream) = stream else { return };
        let mut buffer = vec![0; 8192];
        while let Ok(read) = stream.read(&mut buffer).await {
            if read == 0 {
                break;
            }
            into.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(&buffer[..read]);
        }
    });
    Capture { kept, task }
}

impl Capture {
    /// What was read, once the stream ended or [`DRAIN_LIMIT`] passed.
    async fn finish(mut self) -> CappedOutput {
        if tokio::time::timeout(DRAIN_LIMIT, &mut self.task)
            .await
            .is_err()
        {
            self.task.abort();
        }
        let mut kept = self
            .kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        std::mem::replace(&mut *kept, CappedOutput::new(0))
    }
}
