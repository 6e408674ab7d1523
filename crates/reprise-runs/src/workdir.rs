//! `workdir.json`: the working folder of a run, where its tools work and whose
//! checkpoints its `checkpoints/` folder keeps.
//!
//! Written when the run's first checkpoint is taken, and by a fork with its files
//! (the folder the files were written into). A run without the file works in the
//! folder the chat is started in.
//!
//! A run folder can be planted (a repository can hold a runs folder), so the path
//! alone is not trusted to send a run's tools elsewhere: the file also records the
//! folder's device and inode when reprise writes it, and the path is taken only
//! while it still names that same folder. Nobody outside the machine can know
//! those numbers for a folder of yours.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::RunError;
use crate::fs::{read_beneath, run_file_root};
use crate::labels::write_json_file;

/// The file name of a run's working folder.
pub const WORKDIR_JSON: &str = "workdir.json";

#[derive(Serialize, Deserialize)]
struct WorkdirFile {
    workdir: PathBuf,
    /// The folder's device and inode when the file was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    identity: Option<(u64, u64)>,
}

/// The working folder recorded for the run in `dir`; `None` when none is recorded
/// or the file cannot be read as one (an absolute path).
/// [`RunError::WorkdirNotVerified`] when the folder at that path is not the one
/// recorded (or no identity was recorded).
pub fn read_workdir(dir: &Path) -> Result<Option<PathBuf>, RunError> {
    let path = dir.join(WORKDIR_JSON);
    let Some(bytes) = read_beneath(run_file_root(&path), &path)? else {
        return Ok(None);
    };
    let Some(file) = serde_json::from_slice::<WorkdirFile>(&bytes)
        .ok()
        .filter(|file| file.workdir.is_absolute())
    else {
        return Ok(None);
    };
    let refused = |reason: &str| RunError::WorkdirNotVerified {
        workdir: file.workdir.clone(),
        reason: reason.to_owned(),
    };
    let Some(recorded) = file.identity else {
        return Err(refused("its identity was not recorded"));
    };
    match identity_of(&file.workdir) {
        Ok(found) if found == recorded => Ok(Some(file.workdir)),
        Ok(_) => Err(refused("another folder has its name now")),
        Err(_) => Err(refused("it is gone")),
    }
}

/// Records `workdir` (an absolute path to an existing folder) as the working folder
/// of the run in `dir`, with the folder's identity (atomically, synced).
pub fn write_workdir(dir: &Path, workdir: &Path) -> Result<(), RunError> {
    let identity = identity_of(workdir)
        .map_err(|source| RunError::Io(reprise_session::IoError::new("read", workdir, source)))?;
    let file = WorkdirFile {
        workdir: workdir.to_path_buf(),
        identity: Some(identity),
    };
    write_json_file(&dir.join(WORKDIR_JSON), serde_json::to_vec(&file))
}

/// The device and inode of the folder at `path`.
fn identity_of(path: &Path) -> std::io::Result<(u64, u64)> {
    let metadata = std::fs::metadata(path)?;
    if !metadata.is_dir() {
        return Err(std::io::Error::other("not a folder"));
    }
    Ok((metadata.dev(), metadata.ino()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_working_folder_reads_back_and_a_relative_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let work = work.path().join("a b");
        std::fs::create_dir(&work).unwrap();
        assert_eq!(read_workdir(dir.path()).unwrap(), None);
        write_workdir(dir.path(), &work).unwrap();
        assert_eq!(read_workdir(dir.path()).unwrap(), Some(work.clone()));
        std::fs::write(dir.path().join(WORKDIR_JSON), r#"{"workdir":"x"}"#).unwrap();
        assert_eq!(read_workdir(dir.path()).unwrap(), None);
        // A folder that does not exist cannot be recorded.
        assert!(write_workdir(dir.path(), &work.join("missing")).is_err());
    }

    #[test]
    fn a_path_is_taken_only_while_it_names_the_folder_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let folder = work.path().join("attempt");
        std::fs::create_dir(&folder).unwrap();
        write_workdir(dir.path(), &folder).unwrap();
        // Replaced by another folder of the same name.
        std::fs::remove_dir(&folder).unwrap();
        std::fs::create_dir(work.path().join("other")).unwrap();
        std::fs::create_dir(&folder).unwrap();
        let refused = read_workdir(dir.path()).unwrap_err();
        assert!(
            matches!(refused, RunError::WorkdirNotVerified { .. }),
            "{refused}"
        );
        assert!(
            refused.to_string().contains("another folder has its name"),
            "{refused}"
        );
        // Gone.
        std::fs::remove_dir(&folder).unwrap();
        assert!(read_workdir(dir.path()).is_err());
        // Planted: a path with no identity, or another folder's.
        let home = std::env::temp_dir();
        std::fs::write(
            dir.path().join(WORKDIR_JSON),
            serde_json::json!({ "workdir": home }).to_string(),
        )
        .unwrap();
        assert!(read_workdir(dir.path()).is_err());
        std::fs::write(
            dir.path().join(WORKDIR_JSON),
            serde_json::json!({ "workdir": home, "identity": [1, 2] }).to_string(),
        )
        .unwrap();
        assert!(read_workdir(dir.path()).is_err());
    }
}
