//! The Landlock sandbox of `run_command`: a command may read everywhere, write only
//! in the working folder, the temporary folder, `/dev/null` and the folders the
//! settings add, never in a protected folder (the runs folder), and, unless the
//! settings allow the network, neither connect nor listen on TCP.
//!
//! Landlock restricts the thread that asks and everything it starts afterwards. The
//! command is started from a thread of its own that restricts itself first and ends
//! once the command is started, or by the trampoline, which restricts itself
//! before it becomes the shell: no `unsafe` code runs between `fork` and `exec`,
//! and the rest of the program stays unrestricted.
//!
//! Landlock adds rights; it cannot take a folder out of a tree it allows. When a
//! protected folder lies inside a writable tree and no mount namespace can keep it
//! out ([`Protection`](crate::Protection)), the tree's entries are allowed one by
//! one, all but the one that leads to the protected folder (and so on down to it): a
//! command can then change what lies in those entries, but not add or remove
//! entries directly in the folders on the way to the protected one.

use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
};
use rustix::fd::OwnedFd;
use rustix::fs::{FileType, Mode, OFlags};

use crate::error::SandboxError;
use crate::workspace::{Workspace, real};

/// The Landlock version whose rights the rules are written in: the file rights up
/// to device ioctls, TCP ports, and the scopes of signals and abstract sockets.
const RULES_ABI: ABI = ABI::V6;

/// What a command may do beyond the working folder and the temporary folder.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SandboxSettings {
    /// More folders a command may write in.
    pub writable: Vec<PathBuf>,
    /// Whether a command may open TCP connections and listen on TCP ports (and reach
    /// abstract Unix sockets outside the sandbox).
    pub network: bool,
    /// The temporary folder a command may write in; by default
    /// [`std::env::temp_dir`].
    pub temp_dir: Option<PathBuf>,
    /// The program that starts each command in a mount namespace where the
    /// protected folders are read-only, so that the folders holding them can be
    /// allowed whole: a binary that calls
    /// [`run_trampoline_if_asked`](crate::run_trampoline_if_asked) first thing in
    /// `main`, usually the program itself (`std::env::current_exe()`). Without
    /// one, or where the system does not let it make namespaces, a protected folder
    /// inside a writable one is kept out entry by entry
    /// ([`Protection::EntryByEntry`](crate::Protection::EntryByEntry)).
    pub trampoline: Option<PathBuf>,
    /// What one call's processes may use.
    pub limits: Limits,
}

/// The most processes and memory one call may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The most processes and threads a call may have at once. Past it, a new one
    /// fails to start (`RLIMIT_NPROC`, which the kernel does not apply to root),
    /// and the call is ended with all its processes (which holds for root too,
    /// where the trampoline runs the command in a PID namespace).
    pub max_processes: u32,
    /// The most memory one process of a call may allocate, in bytes
    /// (`RLIMIT_DATA`: its heap and private writable mappings); past it an
    /// allocation fails.
    pub max_memory: u64,
}

/// [`Limits::max_processes`] by default.
pub const DEFAULT_MAX_PROCESSES: u32 = 4096;
/// [`Limits::max_memory`] by default: 4 GiB.
pub const DEFAULT_MAX_MEMORY: u64 = 4 << 30;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_processes: DEFAULT_MAX_PROCESSES,
            max_memory: DEFAULT_MAX_MEMORY,
        }
    }
}

impl Limits {
    /// Sets the resource limits of the calling process (and so of all it starts
    /// afterwards), or of the process `pid`. `RLIMIT_NPROC` only `in_namespace`:
    /// in a user namespace of the call's own it counts the call's processes, out of
    /// one it would count all the user's.
    pub(crate) fn apply(
        &self,
        pid: Option<rustix::process::Pid>,
        in_namespace: bool,
    ) -> Result<(), SandboxError> {
        use rustix::process::{Resource, Rlimit};
        let processes = (Resource::Nproc, u64::from(self.max_processes));
        let memory = (Resource::Data, self.max_memory);
        let limits = if in_namespace {
            vec![processes, memory]
        } else {
            vec![memory]
        };
        for (resource, value) in limits {
            // Never above the hard limit the chat was given itself.
            let hard = rustix::process::getrlimit(resource).maximum;
            let value = hard.map_or(value, |hard| hard.min(value));
            let limit = Rlimit {
                current: Some(value),
                maximum: Some(value),
            };
            rustix::process::prlimit(pid, resource, limit).map_err(|errno| {
                SandboxError::Limits {
                    source: errno.into(),
                }
            })?;
        }
        Ok(())
    }
}

/// What the running kernel lets the sandbox confine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SandboxSupport {
    /// Writes are confined (Landlock is there, ABI 1 or later).
    pub files: bool,
    /// TCP connections and listening are confined (Landlock ABI 4 or later).
    pub network: bool,
}

impl SandboxSupport {
    /// What this machine's kernel supports. Asks the kernel by creating (and
    /// dropping) rulesets; nothing is restricted.
    pub fn detect() -> SandboxSupport {
        let supported = |ruleset: Result<Ruleset, landlock::RulesetError>| {
            ruleset.and_then(Ruleset::create).is_ok()
        };
        SandboxSupport {
            files: supported(
                Ruleset::default()
                    .set_compatibility(CompatLevel::HardRequirement)
                    .handle_access(AccessFs::from_all(ABI::V1)),
            ),
            network: supported(
                Ruleset::default()
                    .set_compatibility(CompatLevel::HardRequirement)
                    .handle_access(AccessNet::from_all(ABI::V4)),
            ),
        }
    }
}

/// What one command may change: the paths Landlock allows it to write (a folder
/// with everything in it, a file alone), and whether it may use the network.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Confinement {
    /// The folders and files a command may write.
    pub writable: Vec<PathBuf>,
    /// Whether it may open TCP connections and reach abstract sockets.
    pub network: bool,
}

/// The trees a command may write as they lie on the machine: the working folder,
/// the temporary folder and the settings' folders.
pub(crate) fn writable_trees(workspace: &Workspace, settings: &SandboxSettings) -> Vec<PathBuf> {
    let temp = settings.temp_dir.clone().unwrap_or_else(std::env::temp_dir);
    [workspace.root_now(), real(&temp)]
        .into_iter()
        .chain(settings.writable.iter().map(|dir| real(dir)))
        .collect()
}

/// What a command may change when Landlock alone must keep it out of `keep_out`:
/// every tree whole, but those holding a folder of `keep_out`, whose entries are
/// allowed one by one ([`writable_parts`]).
pub(crate) fn confinement(
    trees: &[PathBuf],
    keep_out: &[PathBuf],
    settings: &SandboxSettings,
) -> Confinement {
    Confinement {
        writable: trees
            .iter()
            .flat_map(|tree| writable_parts(tree, keep_out))
            .collect(),
        network: settings.network,
    }
}

/// The rules for one command, built before it starts (opening the paths they
/// name).
pub(crate) fn rules(confinement: &Confinement) -> Result<RulesetCreated, SandboxError> {
    let mut ruleset = Ruleset::default().handle_access(AccessFs::from_all(RULES_ABI))?;
    if !confinement.network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(RULES_ABI))?
            .scope(Scope::AbstractUnixSocket)?;
    }
    // A command may not signal the chat (or anything else outside its sandbox).
    ruleset = ruleset.scope(Scope::Signal)?;
    let mut rules = ruleset.create()?;
    let root = open_path(Path::new("/"))?;
    rules = rules.add_rule(PathBeneath::new(root, AccessFs::from_read(RULES_ABI)))?;
    let null = open_path(Path::new("/dev/null"))?;
    rules = rules.add_rule(PathBeneath::new(null, AccessFs::from_file(RULES_ABI)))?;
    for path in &confinement.writable {
        // A path gone since it was listed is not allowed.
        let Ok(fd) = open_path(path) else { continue };
        let access = if is_dir(&fd) {
            AccessFs::from_all(RULES_ABI)
        } else {
            AccessFs::from_file(RULES_ABI)
        };
        rules = rules.add_rule(PathBeneath::new(fd, access))?;
    }
    Ok(rules)
}

/// Restricts the calling thread with `rules`; whether Landlock enforced them.
pub(crate) fn restrict(rules: RulesetCreated) -> Result<bool, SandboxError> {
    let status = rules.restrict_self()?;
    Ok(status.ruleset != RulesetStatus::NotEnforced)
}

/// The paths to allow so that everything in `tree` is writable but the protected
/// folders: `tree` itself when none lies inside it; else its entries but the one
/// leading to a protected folder, whose own entries are looked at in turn. Links are
/// never allowed (they would allow where they point).
pub(crate) fn writable_parts(tree: &Path, protected: &[PathBuf]) -> Vec<PathBuf> {
    if protected.iter().any(|dir| tree.starts_with(dir)) {
        return Vec::new();
    }
    if !protected.iter().any(|dir| dir.starts_with(tree)) {
        return vec![tree.to_path_buf()];
    }
    let Ok(entries) = std::fs::read_dir(tree) else {
        return Vec::new();
    };
    let mut parts = Vec::new();
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|kind| kind.is_symlink()) {
            continue;
        }
        // Down the way to a protected folder only: as deep as its path.
        parts.extend(writable_parts(&entry.path(), protected));
    }
    parts
}

/// A path-only handle on `path`, not following a link at its end.
fn open_path(path: &Path) -> Result<OwnedFd, SandboxError> {
    rustix::fs::open(
        path,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|errno| SandboxError::Folder {
        path: path.display().to_string(),
        source: errno.into(),
    })
}

fn is_dir(fd: &OwnedFd) -> bool {
    rustix::fs::fstat(fd)
        .is_ok_and(|stat| FileType::from_raw_mode(stat.st_mode) == FileType::Directory)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_protected_folder_inside_a_tree_is_left_out_of_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for path in ["src", "deep/runs/x", "deep/other"] {
            std::fs::create_dir_all(root.join(path)).unwrap();
        }
        std::fs::write(root.join("notes.txt"), "x").unwrap();
        std::os::unix::fs::symlink("/", root.join("everything")).unwrap();
        let protected = [root.join("deep/runs")];
        let mut parts = writable_parts(&root, &protected);
        parts.sort();
        assert_eq!(
            parts,
            [
                root.join("deep/other"),
                root.join("notes.txt"),
                root.join("src")
            ]
        );
        assert_eq!(
            writable_parts(&root.join("src"), &protected),
            [root.join("src")]
        );
        assert!(writable_parts(&root.join("deep/runs/x"), &protected).is_empty());
    }
}
