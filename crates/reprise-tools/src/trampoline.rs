//! The sandbox trampoline: the program `run_command` starts in place of `sh`
//! wherever the system lets it make namespaces.
//!
//! Landlock cannot take a folder out of a tree it allows; a mount namespace can.
//! And a process group cannot hold a process that leaves it (`setsid`); a PID
//! namespace can. The trampoline enters a user, a mount and a PID namespace of its
//! own (mapping the caller's user and group to themselves), mounts each protected
//! folder read-only over itself, restricts itself with the Landlock rules (Landlock
//! refuses mounts once it restricts, so they come last), the set-id filter
//! ([`privileges`](crate::privileges)) and the limits, and starts itself again as
//! the namespace's first process, its init. The init starts `sh -c COMMAND`, reaps
//! whatever ends in the namespace, and exits when the shell does: the kernel then
//! kills every process left in the namespace, however it left its group. The init
//! tells the trampoline how the shell ended, and the trampoline ends the same way.
//! The trampoline and the init stay in the process group the caller kills whole
//! (nothing in the namespace can signal its init), so a timeout ends them all too.
//!
//! Only a single-threaded process may enter a new user namespace, so this is a
//! program of its own rather than a thread of the caller: a binary becomes the
//! trampoline by calling [`run_trampoline_if_asked`] first thing in `main`, and is
//! named in [`SandboxSettings::trampoline`](crate::SandboxSettings::trampoline). It
//! is told to act by its `argv[0]` and given its work as arguments, paths as bytes,
//! never through a shell.

use std::convert::Infallible;
use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rustix::io::Errno;
use rustix::mount::{MountFlags, MountPropagationFlags};
use rustix::process::{Pid, Signal, WaitOptions, WaitStatus};
use rustix::thread::UnshareFlags;

use crate::error::SandboxError;
use crate::privileges;
use crate::sandbox::{self, Confinement, Limits};

/// The `argv[0]` that makes a binary act as the trampoline.
const ARG0: &str = "reprise-sandbox-trampoline";
/// The `argv[0]` of the trampoline started again as the PID namespace's init.
const INIT_ARG0: &str = "reprise-sandbox-init";
/// How often the init counts the processes of the namespace.
const COUNT_EVERY: Duration = Duration::from_millis(10);
/// The argument asking the trampoline only to enter the namespaces and say so.
const PROBE: &str = "--probe";
/// What a probe prints once it is in its namespaces.
const READY: &str = "reprise sandbox trampoline ready";
/// The exit status of a trampoline that could not set the sandbox up: the command
/// did not run.
const SETUP_FAILED: i32 = 125;

/// The mounts made in the command's namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Mounts {
    /// Folders mounted over themselves as they are: a mount point can be neither
    /// renamed nor removed, so the way to a protected folder stays where it is.
    pub pinned: Vec<PathBuf>,
    /// Folders mounted read-only over themselves: the protected folders.
    pub read_only: Vec<PathBuf>,
}

/// What the trampoline was asked to do.
#[derive(Debug, PartialEq, Eq)]
enum Task {
    /// Enter the namespaces, print [`READY`] and exit.
    Probe,
    /// Set the sandbox up and run `sh -c command` under an init of its own.
    Run {
        mounts: Mounts,
        confinement: Confinement,
        limits: Limits,
        command: OsString,
    },
    /// Be the PID namespace's init: run `sh -c command` and report how it ended.
    Init {
        max_processes: u32,
        command: OsString,
    },
}

/// Acts as `run_command`'s sandbox trampoline when this process was started as one,
/// and never returns then; returns at once otherwise.
///
/// A binary named in [`SandboxSettings::trampoline`](crate::SandboxSettings::trampoline)
/// calls it first thing in `main`, before it starts a thread or an async runtime:
/// a process with more than one thread cannot enter a user namespace.
///
/// ```no_run
/// use reprise_tools::{CommandSettings, run_trampoline_if_asked};
///
/// // First thing in `main`:
/// run_trampoline_if_asked();
/// // Then the program as usual, which names itself as the trampoline.
/// let mut commands = CommandSettings::default();
/// commands.sandbox.trampoline = reprise_tools::this_binary();
/// ```
pub fn run_trampoline_if_asked() {
    let mut args = std::env::args_os();
    let arg0 = args.next();
    if arg0.as_deref() == Some(OsStr::new(INIT_ARG0)) {
        init_main(args);
    }
    if arg0.as_deref() != Some(OsStr::new(ARG0)) {
        return;
    }
    let failure = match parse(args) {
        Ok(Task::Probe) => match enter_namespaces() {
            Ok(()) => {
                print!("{READY}");
                std::process::exit(0);
            }
            Err(error) => error,
        },
        Ok(Task::Run {
            mounts,
            confinement,
            limits,
            command,
        }) => match run(&mounts, &confinement, limits, &command) {
            Ok(never) => match never {},
            Err(error) => error,
        },
        Ok(Task::Init { .. }) => SandboxError::TrampolineArguments {
            message: "--max-processes is for the init".to_owned(),
        },
        Err(error) => error,
    };
    eprintln!("reprise sandbox: {failure}");
    std::process::exit(SETUP_FAILED);
}

/// The trampoline `program` started to run `command` with `mounts` and
/// `confinement`; the caller adds the working folder, the standard streams and the
/// process group.
pub(crate) fn command_for(
    program: &Path,
    mounts: &Mounts,
    confinement: &Confinement,
    limits: Limits,
    command: &str,
) -> tokio::process::Command {
    let mut started = std::process::Command::new(program);
    started
        .arg0(ARG0)
        .args(arguments(mounts, confinement, limits, command));
    tokio::process::Command::from(started)
}

/// The file this process runs, to name as the trampoline of the commands it
/// starts ([`SandboxSettings::trampoline`](crate::SandboxSettings::trampoline)).
/// `/proc/self/exe` names that very file even when its path was replaced since
/// (an upgrade while the program runs) or lies in folders the user may not search
/// (a binary started through another user's path); the path is the fallback
/// without `/proc`.
pub fn this_binary() -> Option<PathBuf> {
    let proc_exe = Path::new("/proc/self/exe");
    if proc_exe.exists() {
        return Some(proc_exe.to_path_buf());
    }
    std::env::current_exe().ok()
}

/// Whether `program` works as the trampoline here: whether it is one, and the
/// system lets it enter a user and a mount namespace (Ubuntu's AppArmor and many
/// containers do not). Learnt by starting it once; remembered for the process's
/// life.
pub(crate) fn works(program: &Path) -> bool {
    static PROBED: Mutex<Vec<(PathBuf, bool)>> = Mutex::new(Vec::new());
    let mut probed = PROBED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, works)) = probed.iter().find(|(probed, _)| probed == program) {
        return *works;
    }
    let works = std::process::Command::new(program)
        .arg0(ARG0)
        .arg(PROBE)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .is_ok_and(|output| output.status.success() && output.stdout == READY.as_bytes());
    probed.push((program.to_path_buf(), works));
    works
}

/// The arguments after `argv[0]` that ask for `mounts`, `confinement` and
/// `command`.
fn arguments(
    mounts: &Mounts,
    confinement: &Confinement,
    limits: Limits,
    command: &str,
) -> Vec<OsString> {
    let mut arguments = vec![
        "--max-processes".into(),
        limits.max_processes.to_string().into(),
        "--max-memory".into(),
        limits.max_memory.to_string().into(),
    ];
    let lists = [
        ("--pin", &mounts.pinned),
        ("--read-only", &mounts.read_only),
        ("--write", &confinement.writable),
    ];
    for (flag, paths) in lists {
        for path in paths {
            arguments.push(OsString::from(flag));
            arguments.push(path.as_os_str().to_owned());
        }
    }
    if confinement.network {
        arguments.push("--network".into());
    }
    arguments.push("--".into());
    arguments.push(command.into());
    arguments
}

fn parse(mut args: impl Iterator<Item = OsString>) -> Result<Task, SandboxError> {
    let wrong = |message: String| SandboxError::TrampolineArguments { message };
    let mut mounts = Mounts::default();
    let mut confinement = Confinement::default();
    let mut limits = Limits::default();
    let mut init = false;
    while let Some(arg) = args.next() {
        let list = match arg.to_str() {
            Some(PROBE) => return Ok(Task::Probe),
            Some("--network") => {
                confinement.network = true;
                continue;
            }
            Some("--init") => {
                init = true;
                continue;
            }
            Some(flag @ ("--max-processes" | "--max-memory")) => {
                let number = args
                    .next()
                    .and_then(|value| value.to_str()?.parse::<u64>().ok())
                    .ok_or_else(|| wrong(format!("{flag} without a number")))?;
                if flag == "--max-memory" {
                    limits.max_memory = number;
                } else {
                    limits.max_processes = u32::try_from(number)
                        .map_err(|_| wrong(format!("{flag} {number} is too large")))?;
                }
                continue;
            }
            Some("--") => {
                let command = args
                    .next()
                    .ok_or_else(|| wrong("no command after --".to_owned()))?;
                if args.next().is_some() {
                    return Err(wrong("more than one command after --".to_owned()));
                }
                if init {
                    return Ok(Task::Init {
                        max_processes: limits.max_processes,
                        command,
                    });
                }
                return Ok(Task::Run {
                    mounts,
                    confinement,
                    limits,
                    command,
                });
            }
            Some("--pin") => &mut mounts.pinned,
            Some("--read-only") => &mut mounts.read_only,
            Some("--write") => &mut confinement.writable,
            _ => {
                return Err(wrong(format!("unknown argument {}", arg.to_string_lossy())));
            }
        };
        let path = args
            .next()
            .ok_or_else(|| wrong(format!("{} without a path", arg.to_string_lossy())))?;
        list.push(PathBuf::from(path));
    }
    Err(wrong("no command".to_owned()))
}

/// Sets the sandbox up, runs `sh -c command` under an init in a PID namespace and
/// ends as the shell ended; returns only on failure.
fn run(
    mounts: &Mounts,
    confinement: &Confinement,
    limits: Limits,
    command: &OsStr,
) -> Result<Infallible, SandboxError> {
    enter_namespaces()?;
    for path in &mounts.pinned {
        mount_over_itself(path, false)?;
    }
    for path in &mounts.read_only {
        mount_over_itself(path, true)?;
    }
    // The working folder was entered before the mounts: when one now covers it,
    // its paths would still lead below the mounts, past the read-only ones.
    std::env::current_dir()
        .and_then(|here| std::env::set_current_dir(&here))
        .map_err(|source| SandboxError::Namespace {
            step: "cannot enter the working folder again".to_owned(),
            source,
        })?;
    sandbox::restrict(sandbox::rules(confinement)?)?;
    privileges::drop_privileges()?;
    // In the user namespace just made, RLIMIT_NPROC counts this call's processes.
    limits.apply(None, true)?;
    let failed = |step: &str| {
        let step = step.to_owned();
        move |source: std::io::Error| SandboxError::Namespace { step, source }
    };
    // The init reports on its standard input, the command's being /dev/null.
    let (report, report_to) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|errno| failed("cannot make a pipe")(errno.into()))?;
    let mut started = std::process::Command::new("/proc/self/exe");
    started
        .arg0(INIT_ARG0)
        .arg("--init")
        .arg("--max-processes")
        .arg(limits.max_processes.to_string())
        .arg("--")
        .arg(command)
        .stdin(Stdio::from(report_to));
    let mut init = started
        .spawn()
        .map_err(failed("cannot start the sandbox's init"))?;
    // The command holds the pipe's other end until dropped: the report would
    // never end.
    drop(started);
    let mut said = String::new();
    let _ = std::fs::File::from(report)
        .take(64)
        .read_to_string(&mut said);
    let status = init
        .wait()
        .map_err(failed("cannot wait for the sandbox's init"))?;
    let end = match said.split_once(' ') {
        Some(("exit", code)) => code.parse().ok().map(End::Exit),
        Some(("signal", signal)) => signal.parse().ok().map(End::Signal),
        Some(("processes", cap)) => cap.parse().ok().map(End::TooManyProcesses),
        _ => None,
    };
    use std::os::unix::process::ExitStatusExt;
    let end = end.unwrap_or_else(|| match (status.code(), status.signal()) {
        (Some(code), _) => End::Exit(code),
        (None, Some(signal)) => End::Signal(signal),
        (None, None) => End::Exit(SETUP_FAILED),
    });
    end_as(end)
}

/// How the command ended, as the init tells it.
enum End {
    /// The shell exited with this status.
    Exit(i32),
    /// The shell was killed by this signal.
    Signal(i32),
    /// The namespace held more processes than this at once; the init ended them.
    TooManyProcesses(u32),
}

/// Ends this process as the command ended: with its exit status, or killed by
/// its signal (without leaving a core file behind).
fn end_as(end: End) -> ! {
    let signal = match end {
        End::Exit(code) => std::process::exit(code),
        End::Signal(signal) => signal,
        End::TooManyProcesses(cap) => {
            eprintln!(
                "reprise sandbox: the command had more than {cap} processes and threads at once \
                 (max_processes): it was ended, with every process it started"
            );
            9
        }
    };
    let no_core = rustix::process::Rlimit {
        current: Some(0),
        maximum: Some(0),
    };
    let _ = rustix::process::setrlimit(rustix::process::Resource::Core, no_core);
    if let Some(named) = Signal::from_named_raw(signal) {
        let _ = rustix::process::kill_process(rustix::process::getpid(), named);
    }
    // A signal this process ignores: said as a shell says it.
    std::process::exit(128 + signal)
}

/// The init's `main`: runs `sh -c COMMAND`, reaps every process that ends in the
/// namespace, and reports how the shell ended on its standard input (a pipe to
/// the trampoline). Its exit ends every process left in the namespace.
fn init_main(args: impl Iterator<Item = OsString>) -> ! {
    let said = match parse(args) {
        Ok(Task::Init {
            max_processes,
            command,
        }) => match init(max_processes, &command) {
            Ok(said) => said,
            Err(error) => {
                eprintln!("reprise sandbox: {error}");
                format!("exit {SETUP_FAILED}")
            }
        },
        Ok(_) => {
            eprintln!("reprise sandbox: the init is started with --init");
            format!("exit {SETUP_FAILED}")
        }
        Err(error) => {
            eprintln!("reprise sandbox: {error}");
            format!("exit {SETUP_FAILED}")
        }
    };
    let _ = rustix::io::write(rustix::stdio::stdin(), said.as_bytes());
    std::process::exit(0)
}

/// Runs the shell as the init's child; what to report once it ended, or once the
/// namespace held more than `max_processes` processes and threads.
fn init(max_processes: u32, command: &OsStr) -> Result<String, SandboxError> {
    let shell = std::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .spawn()
        .map_err(|source| SandboxError::Namespace {
            step: "cannot start sh".to_owned(),
            source,
        })?;
    let shell = i32::try_from(shell.id()).unwrap_or(0);
    loop {
        match rustix::process::wait(WaitOptions::NOHANG) {
            Ok(Some((pid, status))) if pid.as_raw_pid() == shell => return Ok(said(status)),
            // An orphan of the namespace, reaped.
            Ok(Some(_)) | Err(Errno::INTR) => continue,
            Ok(None) => {}
            Err(errno) => {
                return Err(SandboxError::Namespace {
                    step: "cannot wait for sh".to_owned(),
                    source: errno.into(),
                });
            }
        }
        if more_tasks_than(max_processes) {
            return Ok(format!("processes {max_processes}"));
        }
        std::thread::sleep(COUNT_EVERY);
    }
}

fn said(status: WaitStatus) -> String {
    match (status.exit_status(), status.terminating_signal()) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(signal)) => format!("signal {signal}"),
        (None, None) => format!("exit {SETUP_FAILED}"),
    }
}

/// Whether this process and its descendants (every process of the namespace, of
/// which it is the init) have more than `cap` threads in all. Read from `/proc`,
/// stopping as soon as the count passes the cap.
fn more_tasks_than(cap: u32) -> bool {
    let mut pending = vec![rustix::process::getpid()];
    let mut count: u64 = 0;
    while let Some(pid) = pending.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", pid.as_raw_pid())) else {
            continue;
        };
        for task in tasks.flatten() {
            count += 1;
            if count > u64::from(cap) {
                return true;
            }
            let children = std::fs::read_to_string(task.path().join("children"));
            pending.extend(
                children
                    .iter()
                    .flat_map(|list| list.split_whitespace())
                    .filter_map(|pid| pid.parse().ok())
                    .filter_map(Pid::from_raw),
            );
        }
    }
    false
}

/// Enters a user namespace where this process's user and group are themselves, a
/// mount namespace whose mounts change nothing outside it, and a PID namespace
/// that the next process it starts is the init of.
fn enter_namespaces() -> Result<(), SandboxError> {
    let step = |step: &str| {
        let step = step.to_owned();
        move |source: std::io::Error| SandboxError::Namespace { step, source }
    };
    let uid = rustix::process::getuid().as_raw();
    let gid = rustix::process::getgid().as_raw();
    // `unshare` is deprecated for CLONE_FILES only (a file table one thread stops
    // sharing with the others); this process is single-threaded and keeps its table.
    #[allow(deprecated)]
    rustix::thread::unshare(UnshareFlags::NEWUSER | UnshareFlags::NEWNS | UnshareFlags::NEWPID)
        .map_err(|errno| step("cannot enter a user, mount and PID namespace")(errno.into()))?;
    // Without the right to change its groups, the process keeps the ones it has.
    std::fs::write("/proc/self/setgroups", "deny")
        .map_err(step("cannot write /proc/self/setgroups"))?;
    std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1\n"))
        .map_err(step("cannot map the user"))?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1\n"))
        .map_err(step("cannot map the group"))?;
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )
    .map_err(|errno| step("cannot make the mounts private")(errno.into()))
}

/// Mounts `path` over itself (with what is mounted below it), read-only when asked.
fn mount_over_itself(path: &Path, read_only: bool) -> Result<(), SandboxError> {
    let failed = |errno: rustix::io::Errno| SandboxError::Namespace {
        step: format!("cannot mount {} over itself", path.display()),
        source: errno.into(),
    };
    rustix::mount::mount_bind_recursive(path, path).map_err(failed)?;
    if !read_only {
        return Ok(());
    }
    // A remount in a user namespace must keep the flags the mount was locked with.
    let kept = rustix::fs::statvfs(path).map_err(failed)?.f_flag;
    // Nothing on it runs set-id, whatever it holds.
    let mut flags = MountFlags::BIND | MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV;
    for (had, keep) in [
        (rustix::fs::StatVfsMountFlags::NOSUID, MountFlags::NOSUID),
        (rustix::fs::StatVfsMountFlags::NODEV, MountFlags::NODEV),
        (rustix::fs::StatVfsMountFlags::NOEXEC, MountFlags::NOEXEC),
        (rustix::fs::StatVfsMountFlags::NOATIME, MountFlags::NOATIME),
        (
            rustix::fs::StatVfsMountFlags::NODIRATIME,
            MountFlags::NODIRATIME,
        ),
        (
            rustix::fs::StatVfsMountFlags::RELATIME,
            MountFlags::RELATIME,
        ),
    ] {
        if kept.contains(had) {
            flags |= keep;
        }
    }
    rustix::mount::mount_remount(path, flags, "").map_err(failed)
}

#[cfg(test)]
mod tests {
    use std::os::unix::ffi::OsStrExt;

    use super::*;

    #[test]
    fn the_arguments_carry_any_path_and_command_unchanged() {
        let odd = PathBuf::from(OsStr::from_bytes(b"/w/\xff not utf-8/--network"));
        let mounts = Mounts {
            pinned: vec![PathBuf::from("/w/deep")],
            read_only: vec![odd.clone(), PathBuf::from("--")],
        };
        let confinement = Confinement {
            writable: vec![PathBuf::from("/w"), odd],
            network: true,
        };
        let command = "echo '$HOME' \"; rm -rf /\" -- --probe";
        let limits = Limits {
            max_processes: 7,
            max_memory: 1 << 40,
        };
        let given = arguments(&mounts, &confinement, limits, command);
        assert_eq!(
            parse(given.into_iter()).unwrap(),
            Task::Run {
                mounts,
                confinement,
                limits,
                command: command.into(),
            }
        );
        let no_network = arguments(
            &Mounts::default(),
            &Confinement::default(),
            Limits::default(),
            "true",
        );
        assert!(!no_network.contains(&OsString::from("--network")));
    }

    #[test]
    fn arguments_it_does_not_understand_are_refused() {
        let parse = |args: &[&str]| parse(args.iter().map(OsString::from));
        assert_eq!(parse(&["--probe"]).unwrap(), Task::Probe);
        for wrong in [
            &["--write"][..],
            &["--write", "/w"],
            &["--", "a", "b"],
            &["--shell", "bash", "--", "true"],
            &["--max-processes", "-1", "--", "true"],
            &["--max-memory", "lots", "--", "true"],
        ] {
            assert!(
                matches!(parse(wrong), Err(SandboxError::TrampolineArguments { .. })),
                "{wrong:?}"
            );
        }
    }
}
