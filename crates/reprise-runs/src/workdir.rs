//! `workdir.json`: the working folder of a run, where its tools work and whose
//! checkpoints its `checkpoints/` folder keeps.
//!
//! Written when the run's first checkpoint is taken, and by a fork with its files
//! (the folder the files were written into). A run without the file works in the
//! folder the chat is started in.

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
}

/// The working folder recorded for the run in `dir`; `None` when none is recorded
/// or the file cannot be read as one (an absolute path).
pub fn read_workdir(dir: &Path) -> Result<Option<PathBuf>, RunError> {
    let path = dir.join(WORKDIR_JSON);
    let Some(bytes) = read_beneath(run_file_root(&path), &path)? else {
        return Ok(None);
    };
    Ok(serde_json::from_slice::<WorkdirFile>(&bytes)
        .ok()
        .map(|file| file.workdir)
        .filter(|workdir| workdir.is_absolute()))
}

/// Records `workdir` (an absolute path) as the working folder of the run in `dir`
/// (atomically, synced).
pub fn write_workdir(dir: &Path, workdir: &Path) -> Result<(), RunError> {
    let file = WorkdirFile {
        workdir: workdir.to_path_buf(),
    };
    write_json_file(&dir.join(WORKDIR_JSON), serde_json::to_vec(&file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_working_folder_reads_back_and_a_relative_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_workdir(dir.path()).unwrap(), None);
        write_workdir(dir.path(), Path::new("/work/a b")).unwrap();
        assert_eq!(
            read_workdir(dir.path()).unwrap(),
            Some(PathBuf::from("/work/a b"))
        );
        std::fs::write(dir.path().join(WORKDIR_JSON), r#"{"workdir":"x"}"#).unwrap();
        assert_eq!(read_workdir(dir.path()).unwrap(), None);
    }
}
