//! What killed processes leave in a runs directory: the hidden staging folders of
//! forks (`.<run>.fork-<pid>-<n>`) and temporary files of atomic writes
//! (`.<file>.tmp-<pid>-<n>`, `.list-cache.<pid>.<n>.tmp`). Each name carries
//! the pid of the process that made it; once that process is gone, the next listing
//! or run start removes it (and opening a run folder, those inside it). A live
//! process's leftovers (a fork in progress) are never touched.

use std::fs;
use std::path::Path;

/// A leftover's name, and the pid that owns it.
pub(crate) struct Leftover {
    name: String,
    pid: u32,
}

/// The pid in a leftover's name, when `name` is one.
fn owner(name: &str) -> Option<u32> {
    if !name.starts_with('.') {
        return None;
    }
    // `.list-cache.<pid>.<n>.tmp`, and `.list-cache.json.<pid>.<n>.tmp` of earlier
    // versions.
    if let Some(rest) = name
        .strip_prefix(".list-cache.json.")
        .or_else(|| name.strip_prefix(".list-cache."))
    {
        let rest = rest.strip_suffix(".tmp")?;
        let (pid, n) = rest.split_once('.')?;
        n.parse::<u64>().ok()?;
        return pid.parse().ok();
    }
    // `.<name>.<what>-<pid>-<n>` with `what` one of fork, tmp.
    let (head, n) = name.rsplit_once('-')?;
    n.parse::<u64>().ok()?;
    let (head, pid) = head.rsplit_once('-')?;
    let pid = pid.parse().ok()?;
    (head.ends_with(".fork") || head.ends_with(".tmp")).then_some(pid)
}

/// Whether process `pid` is alive (or cannot be told apart from one).
fn alive(pid: u32) -> bool {
    pid == std::process::id() || Path::new("/proc").join(pid.to_string()).exists()
}

/// Notes the directory entry `entry` when it is a leftover.
pub(crate) fn note(entry: &fs::DirEntry, leftovers: &mut Vec<Leftover>) {
    let Ok(name) = entry.file_name().into_string() else {
        return;
    };
    if let Some(pid) = owner(&name) {
        leftovers.push(Leftover { name, pid });
    }
}

/// Removes those of `leftovers` (in `runs_dir`) whose process is gone. Failures are
/// logged, not returned: a leftover never stops a listing or a start.
pub(crate) fn remove(runs_dir: &Path, leftovers: Vec<Leftover>) {
    for leftover in leftovers {
        if alive(leftover.pid) {
            continue;
        }
        let path = runs_dir.join(&leftover.name);
        // Never through a link: a link is removed itself, a folder with its contents.
        let removed = match fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => fs::remove_dir_all(&path),
            Ok(_) => fs::remove_file(&path),
            Err(error) => Err(error),
        };
        match removed {
            Ok(()) => tracing::info!(path = %path.display(), "removed what a killed process left"),
            Err(error) => tracing::debug!(path = %path.display(), %error, "leftover not removed"),
        }
    }
}

/// Lists `runs_dir` and removes the leftovers of dead processes (see [`remove`]).
pub(crate) fn remove_dead_leftovers(runs_dir: &Path) {
    let Ok(entries) = fs::read_dir(runs_dir) else {
        return;
    };
    let mut leftovers = Vec::new();
    for entry in entries.flatten() {
        note(&entry, &mut leftovers);
    }
    remove(runs_dir, leftovers);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leftover_names_carry_their_pid() {
        assert_eq!(owner(".2026-09-29T10-15-00-000Z.fork-4242-0"), Some(4242));
        assert_eq!(owner(".session.json.tmp-17-3"), Some(17));
        assert_eq!(owner(".list-cache.99.1.tmp"), Some(99));
        assert_eq!(owner(".list-cache.json.98.1.tmp"), Some(98));
        assert_eq!(owner("2026-09-29T10-15-00-000Z"), None);
        assert_eq!(owner(".list-cache"), None);
        assert_eq!(owner(".list-cache.json"), None);
        assert_eq!(owner(".lock"), None);
        assert_eq!(owner(".summary.json"), None);
    }
}
