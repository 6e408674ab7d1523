//! Whether a process group is gone: for tests that kill a command and everything it
//! started.

use std::time::Duration;

use crate::A_MINUTE;

/// The `/proc/PID/stat` lines of the processes of group `group` still alive (a
/// zombie waiting for its parent to reap it counts as dead).
pub fn alive_in_group(group: i32) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let group = group.to_string();
    let mut alive = Vec::new();
    for entry in entries.flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // After the command name in parentheses: state, parent, group.
        let Some((_, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let fields: Vec<&str> = rest.split(' ').collect();
        if fields.len() > 2 && fields[2] == group && fields[0] != "Z" {
            alive.push(stat);
        }
    }
    alive
}

/// Waits until no process of `group` is alive; panics, naming the ones left, when
/// some still are after [`A_MINUTE`].
pub async fn group_dies(group: i32) {
    let deadline = tokio::time::Instant::now() + A_MINUTE;
    loop {
        let alive = alive_in_group(group);
        if alive.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still alive in group {group}: {alive:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The pid a command wrote to `path` (`echo $$ > path`), once the whole line is
/// there; panics when it is not after [`A_MINUTE`].
pub async fn pid_written(path: &std::path::Path) -> i32 {
    let deadline = tokio::time::Instant::now() + A_MINUTE;
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && text.ends_with('\n')
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} never held a pid",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
