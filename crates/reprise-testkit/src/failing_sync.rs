//! A disk whose syncs fail, for a real binary: a library preloaded into it
//! (`LD_PRELOAD`) makes `fsync` and `fdatasync` of chosen files fail with `EIO`, as a
//! failing disk makes them, while every other call goes to the C library's. The
//! library is built from its C source with the system's `cc` (the one Rust links
//! with) into a folder the test owns.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The library's C source.
const SOURCE: &str = include_str!("failing_sync.c");

/// The environment variable holding the pattern of the paths whose syncs fail: an
/// `fnmatch(3)` pattern matched against the whole path, where `*` also matches `/`.
pub const PATTERN_VAR: &str = "REPRISE_TEST_FAIL_SYNC";

/// The environment variable saying which matching call fails (1 for the first); when
/// unset, every matching call fails.
pub const NTH_VAR: &str = "REPRISE_TEST_FAIL_SYNC_NTH";

/// The preload library, built into `dir`.
#[derive(Clone, Debug)]
pub struct FailingSync {
    library: PathBuf,
}

impl FailingSync {
    /// Builds the library into `dir`.
    pub fn build(dir: &Path) -> std::io::Result<FailingSync> {
        let source = dir.join("failing_sync.c");
        let library = dir.join("libfailing_sync.so");
        std::fs::write(&source, SOURCE)?;
        let status = Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&library)
            .arg(&source)
            .arg("-ldl")
            .status()?;
        if !status.success() {
            return Err(std::io::Error::other(format!(
                "cc could not build {} ({status})",
                library.display()
            )));
        }
        Ok(FailingSync { library })
    }

    /// The environment that makes the syncs of the paths matching `pattern` fail:
    /// the `nth` matching one (1 for the first), or every one when `nth` is `None`.
    pub fn env(&self, pattern: &str, nth: Option<usize>) -> Vec<(String, String)> {
        let mut env = vec![
            ("LD_PRELOAD".to_owned(), self.library.display().to_string()),
            (PATTERN_VAR.to_owned(), pattern.to_owned()),
        ];
        if let Some(nth) = nth {
            env.push((NTH_VAR.to_owned(), nth.to_string()));
        }
        env
    }
}
