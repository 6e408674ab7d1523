//! Helpers: a folder's state as a map, and writing files.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use sha2::{Digest, Sha256};

/// Every file and link below `root` but `.git` and `.run`: path → `f <sha256>`,
/// `x <sha256>` (executable) or `l <target>`.
pub fn state(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let walk = walkdir::WalkDir::new(root)
        .min_depth(1)
        .into_iter()
        .filter_entry(|entry| {
            let name = entry.file_name();
            !(entry.depth() >= 1 && (name == ".git" || (entry.depth() == 1 && name == ".run")))
        });
    for entry in walk {
        let entry = entry.unwrap();
        let rel = entry
            .path()
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let kind = entry.file_type();
        if kind.is_symlink() {
            let target = std::fs::read_link(entry.path()).unwrap();
            out.insert(rel, format!("l {}", target.display()));
        } else if kind.is_file() {
            let bytes = std::fs::read(entry.path()).unwrap();
            let exec = entry.metadata().unwrap().permissions().mode() & 0o100 != 0;
            let hash = Sha256::digest(&bytes);
            let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
            out.insert(rel, format!("{} {hex}", if exec { "x" } else { "f" }));
        } else if kind.is_dir() && std::fs::read_dir(entry.path()).unwrap().next().is_none() {
            out.insert(rel, "empty dir".to_owned());
        }
    }
    out
}

/// The same, without the paths `skip` (ignored or large files a test left on purpose).
pub fn state_without(root: &Path, skip: &[&str]) -> BTreeMap<String, String> {
    let mut all = state(root);
    all.retain(|path, _| {
        !skip
            .iter()
            .any(|s| path == s || path.starts_with(&format!("{s}/")))
    });
    all
}

/// Every file below `dir` with its bytes and its modification time: to tell that
/// nothing wrote there.
pub fn snapshot_bytes(dir: &Path) -> BTreeMap<String, (Vec<u8>, std::time::SystemTime)> {
    let mut out = BTreeMap::new();
    for entry in walkdir::WalkDir::new(dir) {
        let entry = entry.unwrap();
        let rel = entry
            .path()
            .strip_prefix(dir)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let meta = entry.path().symlink_metadata().unwrap();
        let bytes = if meta.is_file() {
            std::fs::read(entry.path()).unwrap()
        } else {
            Vec::new()
        };
        out.insert(rel, (bytes, meta.modified().unwrap()));
    }
    out
}

/// Writes `content` to `root/rel`, creating its folders.
pub fn write(root: &Path, rel: &str, content: impl AsRef<[u8]>) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

/// Runs a program in `dir`, failing the test when it fails.
pub fn run(dir: &Path, program: &str, args: &[&str]) {
    let status = std::process::Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .status()
        .unwrap();
    assert!(status.success(), "{program} {args:?} failed");
}
