//! Running a program as a user without privileges.
//!
//! Root ignores file modes: a folder made `000` stays open to it, so a test of what
//! a mode refuses proves nothing when the suite runs as root, as CI does. When this
//! process is root, [`command`] runs the program as `nobody` (uid and gid 65534, no
//! supplementary groups) through util-linux's `setpriv`, and [`hand_over`] gives that
//! user the folders the program works in. Otherwise both leave things as they are:
//! the suite already runs unprivileged.
//!
//! ```no_run
//! let dir = std::env::temp_dir().join("reprise-example");
//! std::fs::create_dir_all(&dir).unwrap();
//! reprise_testkit::unprivileged::hand_over(&dir).unwrap();
//! let status = reprise_testkit::unprivileged::command("touch")
//!     .arg(dir.join("made-by-nobody"))
//!     .status()
//!     .unwrap();
//! assert!(status.success());
//! ```

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::Path;
use std::process::Command;

/// The uid and gid a root suite runs programs as: `nobody` on Debian.
pub const NOBODY: u32 = 65534;

/// Whether [`command`] drops privileges: this process runs as root.
pub fn drops() -> bool {
    // Read from /proc: calling geteuid would need unsafe code, which is denied.
    effective_uid() == Some(0)
}

/// The effective uid of this process, from `/proc/self/status`.
fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("Uid:"))?;
    // Real, effective, saved, file system.
    line.split_whitespace().nth(2)?.parse().ok()
}

/// The program and arguments that run `program` unprivileged: `setpriv … --
/// program` when this process is root, `program` alone otherwise. For launchers
/// that take a program and arguments (a pseudo-terminal's command builder).
pub fn argv(program: impl AsRef<OsStr>) -> Vec<OsString> {
    let program = program.as_ref().to_owned();
    if !drops() {
        return vec![program];
    }
    let id = NOBODY.to_string();
    vec![
        "setpriv".into(),
        "--reuid".into(),
        id.clone().into(),
        "--regid".into(),
        id.into(),
        "--clear-groups".into(),
        "--".into(),
        program,
    ]
}

/// A command that runs `program` as a user without privileges (see the module
/// documentation); add its arguments as usual.
pub fn command(program: impl AsRef<OsStr>) -> Command {
    let argv = argv(program);
    let mut command = Command::new(&argv[0]);
    command.args(&argv[1..]);
    command
}

/// Gives `path` and everything below it to the user [`command`] runs as, when this
/// process is root (links are changed themselves, never followed); does nothing
/// otherwise. The folders above `path` must let that user pass: a temporary folder
/// under `/tmp` does.
pub fn hand_over(path: &Path) -> io::Result<()> {
    if !drops() {
        return Ok(());
    }
    std::os::unix::fs::lchown(path, Some(NOBODY), Some(NOBODY))?;
    let metadata = std::fs::symlink_metadata(path)?;
    if metadata.is_dir() {
        for entry in std::fs::read_dir(path)? {
            hand_over(&entry?.path())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_command_is_refused_what_a_mode_refuses() {
        let dir = tempfile_dir();
        hand_over(&dir).unwrap();
        let closed = dir.join("closed");
        std::fs::create_dir(&closed).unwrap();
        hand_over(&closed).unwrap();
        std::fs::set_permissions(&closed, std::os::unix::fs::PermissionsExt::from_mode(0o000))
            .unwrap();
        let status = command("touch")
            .arg(closed.join("x"))
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        std::fs::set_permissions(&closed, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(!status.success(), "a folder of mode 000 let the command in");
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "reprise-testkit-unprivileged-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
