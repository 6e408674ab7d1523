//! Runs folders held open for the life of the process, so that the files of a run
//! are reached through a handle on its runs folder rather than through the folders
//! above it.
//!
//! A command the model runs may change the modes or the names of the folders the
//! runs folder lies in (`chmod 000 .` in the working folder that holds it, `mv` of a
//! folder above it). A path from `/` (or from the current folder) then no longer
//! leads to the run, and whatever the chat writes next would be lost. So the chat
//! opens the runs folder once and names the files of its run through
//! `/proc/self/fd/<n>/<run>/…` ([`through_held`]): the kernel starts that lookup at
//! the held folder itself, whatever happened above it, and every file helper (the
//! stores' `openat2` beneath a root, the atomic writes, the checkpoint store) works
//! unchanged on such paths. Commands cannot change the runs folder itself: it is
//! read-only in their mount namespace (see `reprise-tools`).
//!
//! A runs folder is opened once per process, and its handle is never closed: a path
//! through a closed descriptor would lead to whatever the process opens next under
//! that number. So for the rest of the process the held folder is the runs folder,
//! even where another folder later takes its path. Errors name such paths by the
//! real ones again ([`shown`]).

use std::borrow::Cow;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use rustix::fs::{Mode, OFlags};

/// A runs folder held open: the path it was opened by, and the path through its
/// handle.
struct Held {
    real: PathBuf,
    through: PathBuf,
    /// Kept open until the process ends (see the module documentation).
    _handle: OwnedFd,
}

static HELD: Mutex<Vec<Held>> = Mutex::new(Vec::new());

/// The path of `entry` (an entry of a runs folder, `<runs>/<name>`: a run folder,
/// `history.jsonl`) through a handle on that runs folder, which this opens on first
/// use and holds until the process ends. `entry` itself when the handle cannot be
/// used: the runs folder cannot be opened, or `/proc` is not mounted (then the files
/// are reached by their paths).
pub fn through_held(entry: &Path) -> PathBuf {
    let (Some(runs), Some(name)) = (entry.parent(), entry.file_name()) else {
        return entry.to_path_buf();
    };
    let runs = if runs.as_os_str().is_empty() {
        Path::new(".")
    } else {
        runs
    };
    let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(found) = held.iter().find(|held| held.real == runs) {
        return found.through.join(name);
    }
    match hold(runs) {
        Some(new) => {
            let path = new.through.join(name);
            held.push(new);
            path
        }
        None => entry.to_path_buf(),
    }
}

/// Opens `runs` (a link the person named is followed, as everywhere for the runs
/// folder) and checks that `/proc/self/fd/<n>` leads to it.
fn hold(runs: &Path) -> Option<Held> {
    let handle = rustix::fs::open(
        runs,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let through = PathBuf::from(format!("/proc/self/fd/{}", handle.as_fd().as_raw_fd()));
    let opened = rustix::fs::fstat(&handle).ok()?;
    let reached = rustix::fs::stat(&through).ok()?;
    if (opened.st_dev, opened.st_ino) != (reached.st_dev, reached.st_ino) {
        return None;
    }
    Some(Held {
        real: runs.to_path_buf(),
        through,
        _handle: handle,
    })
}

/// `text` (an error message, a warning) with every path through a held runs folder
/// named by the folder's real path again.
pub fn shown(text: &str) -> Cow<'_, str> {
    if !text.contains("/proc/self/fd/") {
        return Cow::Borrowed(text);
    }
    let held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
    let mut text = text.to_owned();
    for held in held.iter() {
        let through = held.through.to_string_lossy();
        let real = held.real.to_string_lossy();
        let mut out = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some(at) = rest.find(through.as_ref()) {
            let after = &rest[at + through.len()..];
            out.push_str(&rest[..at]);
            // `/proc/self/fd/1` is not the start of `/proc/self/fd/12`.
            if after.starts_with(|c: char| c.is_ascii_digit()) {
                out.push_str(&through);
            } else {
                out.push_str(&real);
            }
            rest = after;
        }
        out.push_str(rest);
        text = out;
    }
    Cow::Owned(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_reached_through_its_held_runs_folder_after_the_folders_above_change() {
        let dir = tempfile::tempdir().unwrap();
        let runs = dir.path().join("above/runs");
        std::fs::create_dir_all(runs.join("run-1")).unwrap();
        let through = through_held(&runs.join("run-1"));
        assert!(
            through.starts_with("/proc/self/fd/"),
            "{}",
            through.display()
        );
        assert_eq!(through_held(&runs.join("run-2")).parent(), through.parent());

        std::fs::rename(dir.path().join("above"), dir.path().join("moved")).unwrap();
        std::fs::write(through.join("note"), "kept").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("moved/runs/run-1/note")).unwrap(),
            "kept"
        );

        let held = through.parent().unwrap().display().to_string();
        let error = format!("write {}/run-1/note: denied; refuse {held}", held);
        assert_eq!(
            shown(&error),
            format!(
                "write {}: denied; refuse {}",
                runs.join("run-1/note").display(),
                runs.display()
            )
        );
        assert_eq!(shown(&format!("{held}1/x")), format!("{held}1/x"));
    }
}
