//! How a command is kept out of the protected folders (the runs folder): by
//! Landlock alone when none lies inside a folder it may write; else by a mount
//! namespace where they are read-only, when the trampoline can make one; else, with
//! a cost, by Landlock rules that allow the writable folder entry by entry.

use std::path::{Path, PathBuf};

use crate::sandbox::{self, Confinement, SandboxSettings};
use crate::trampoline::{self, Mounts};
use crate::workspace::Workspace;

/// How commands are kept out of the protected folders that lie inside a folder
/// they may write (the runs folder `.run` in the working folder).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protection {
    /// No protected folder lies inside a writable folder: Landlock allows the
    /// writable folders whole and keeps commands out of the protected ones.
    Unneeded,
    /// Each command runs in a mount namespace of its own where the protected
    /// folders are read-only (made by [`SandboxSettings::trampoline`]); the writable
    /// folders are allowed whole.
    MountNamespace,
    /// No trampoline is set, or the system does not let it make namespaces: the
    /// writable folder's entries are allowed one by one, all but the way to the
    /// protected folder, so a command cannot create, remove or rename entries
    /// directly in the folders on that way (`touch new.txt` at the top of the
    /// working folder fails).
    EntryByEntry,
}

impl Protection {
    /// How commands run with `settings` in `workspace` are kept out of its
    /// protected folders. Starts the trampoline once to learn whether the system
    /// lets it make namespaces (remembered for the process's life).
    pub fn detect(workspace: &Workspace, settings: &SandboxSettings) -> Protection {
        plan(workspace, settings).0
    }
}

/// How one command is started.
pub(crate) enum Launch {
    /// From a thread restricted with this confinement, as `sh` itself.
    Restricted(Confinement),
    /// Through the trampoline `program`, which makes `mounts` and restricts itself,
    /// in namespaces of the call's own.
    Trampoline {
        program: PathBuf,
        mounts: Mounts,
        confinement: Confinement,
    },
}

/// How the next command is kept out of the protected folders, and how it is
/// started. Reads the folders as they are now (a blocking call).
pub(crate) fn plan(workspace: &Workspace, settings: &SandboxSettings) -> (Protection, Launch) {
    let trees = sandbox::writable_trees(workspace, settings);
    let protected = workspace.protected_now();
    let inside = |dir: &PathBuf| {
        trees
            .iter()
            .any(|tree| dir.starts_with(tree) && dir != tree)
    };
    // The trampoline also ends every process of a call with it (a PID namespace):
    // wherever it works, every command starts through it.
    let program = settings
        .trampoline
        .as_ref()
        .filter(|program| trampoline::works(program));
    if !protected.iter().any(inside) {
        let confinement = sandbox::confinement(&trees, &protected, settings);
        let launch = match program {
            Some(program) => Launch::Trampoline {
                program: program.clone(),
                mounts: Mounts::default(),
                confinement,
            },
            None => Launch::Restricted(confinement),
        };
        return (Protection::Unneeded, launch);
    }
    let Some(program) = program else {
        let confinement = sandbox::confinement(&trees, &protected, settings);
        return (Protection::EntryByEntry, Launch::Restricted(confinement));
    };
    // A folder that is not there yet cannot be mounted over: Landlock keeps the
    // command from making it, as without the trampoline.
    let (read_only, keep_out): (Vec<PathBuf>, Vec<PathBuf>) = protected
        .into_iter()
        .partition(|dir| inside(dir) && is_real_dir(dir));
    let mounts = Mounts {
        pinned: ways_to(&read_only, &trees),
        read_only,
    };
    let launch = Launch::Trampoline {
        program: program.clone(),
        confinement: sandbox::confinement(&trees, &keep_out, settings),
        mounts,
    };
    (Protection::MountNamespace, launch)
}

/// The folders between a writable tree and a protected folder inside it, outer
/// ones first: renaming one would move the protected folder away from its path.
fn ways_to(protected: &[PathBuf], trees: &[PathBuf]) -> Vec<PathBuf> {
    let mut ways: Vec<PathBuf> = Vec::new();
    for dir in protected {
        for tree in trees.iter().filter(|tree| dir.starts_with(tree)) {
            let between = dir
                .ancestors()
                .skip(1)
                .take_while(|ancestor| *ancestor != tree.as_path());
            for ancestor in between {
                if !ways.iter().any(|way| way == ancestor) {
                    ways.push(ancestor.to_path_buf());
                }
            }
        }
    }
    ways.sort_by_key(|way| way.components().count());
    ways
}

/// Whether `path` is a folder, not a link to one.
fn is_real_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|meta| meta.is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_folders_on_the_way_to_a_protected_folder_are_pinned_outer_first() {
        let trees = [PathBuf::from("/w"), PathBuf::from("/w/a/tmp")];
        let protected = [PathBuf::from("/w/a/tmp/b/runs"), PathBuf::from("/w/.run")];
        assert_eq!(
            ways_to(&protected, &trees),
            [
                PathBuf::from("/w/a"),
                PathBuf::from("/w/a/tmp"),
                PathBuf::from("/w/a/tmp/b")
            ]
        );
    }
}
