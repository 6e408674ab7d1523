//! The sandbox trampoline: the program `run_command` starts in place of `sh` when a
//! protected folder (the runs folder) lies inside a folder a command may write.
//!
//! Landlock cannot take a folder out of a tree it allows; a mount namespace can.
//! The trampoline enters a user and a mount namespace of its own (mapping the
//! caller's user and group to themselves), mounts each protected folder read-only
//! over itself, restricts itself with the Landlock rules (Landlock refuses mounts
//! once it restricts, so they come last) and becomes `sh -c COMMAND`: the same
//! process, so the same process group, which the caller kills whole.
//!
//! Only a single-threaded process may enter a new user namespace, so this is a
//! program of its own rather than a thread of the caller: a binary becomes the
//! trampoline by calling [`run_trampoline_if_asked`] first thing in `main`, and is
//! named in [`SandboxSettings::trampoline`](crate::SandboxSettings::trampoline). It
//! is told to act by its `argv[0]` and given its work as arguments, paths as bytes,
//! never through a shell.

use std::convert::Infallible;
use std::ffi::{OsStr, OsString};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Mutex, PoisonError};

use rustix::mount::{MountFlags, MountPropagationFlags};
use rustix::thread::UnshareFlags;

use crate::error::SandboxError;
use crate::sandbox::{self, Confinement};

/// The `argv[0]` that makes a binary act as the trampoline.
const ARG0: &str = "reprise-sandbox-trampoline";
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
    /// Set the sandbox up and become `sh -c command`.
    Run {
        mounts: Mounts,
        confinement: Confinement,
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
/// commands.sandbox.trampoline = std::env::current_exe().ok();
/// ```
pub fn run_trampoline_if_asked() {
    let mut args = std::env::args_os();
    if args.next().as_deref() != Some(OsStr::new(ARG0)) {
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
            command,
        }) => match run(&mounts, &confinement, &command) {
            Ok(never) => match never {},
            Err(error) => error,
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
    command: &str,
) -> tokio::process::Command {
    let mut started = std::process::Command::new(program);
    started
        .arg0(ARG0)
        .args(arguments(mounts, confinement, command));
    tokio::process::Command::from(started)
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
fn arguments(mounts: &Mounts, confinement: &Confinement, command: &str) -> Vec<OsString> {
    let mut arguments = Vec::new();
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
    while let Some(arg) = args.next() {
        let list = match arg.to_str() {
            Some(PROBE) => return Ok(Task::Probe),
            Some("--network") => {
                confinement.network = true;
                continue;
            }
            Some("--") => {
                let command = args
                    .next()
                    .ok_or_else(|| wrong("no command after --".to_owned()))?;
                if args.next().is_some() {
                    return Err(wrong("more than one command after --".to_owned()));
                }
                return Ok(Task::Run {
                    mounts,
                    confinement,
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

/// Sets the sandbox up and becomes `sh -c command`; returns only on failure.
fn run(
    mounts: &Mounts,
    confinement: &Confinement,
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
    let error = std::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .exec();
    Err(SandboxError::Namespace {
        step: "cannot start sh".to_owned(),
        source: error,
    })
}

/// Enters a user namespace where this process's user and group are themselves,
/// and a mount namespace whose mounts change nothing outside it.
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
    rustix::thread::unshare(UnshareFlags::NEWUSER | UnshareFlags::NEWNS)
        .map_err(|errno| step("cannot enter a user and mount namespace")(errno.into()))?;
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
    let mut flags = MountFlags::BIND | MountFlags::RDONLY;
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
        let given = arguments(&mounts, &confinement, command);
        assert_eq!(
            parse(given.into_iter()).unwrap(),
            Task::Run {
                mounts,
                confinement,
                command: command.into(),
            }
        );
        let no_network = arguments(&Mounts::default(), &Confinement::default(), "true");
        assert_eq!(no_network, [OsString::from("--"), OsString::from("true")]);
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
        ] {
            assert!(
                matches!(parse(wrong), Err(SandboxError::TrampolineArguments { .. })),
                "{wrong:?}"
            );
        }
    }
}
