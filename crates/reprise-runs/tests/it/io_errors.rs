//! A failed file operation names what was done and to which path; the operating
//! system's reason is the error's source, so a report of the whole chain shows it once.

use std::error::Error;

use reprise_runs::{RunError, create_run_folder};
use reprise_session::{FileSessionStore, SessionStore, StoreError};

/// Every error of the chain, as a report that prints causes joins them.
fn chain(error: &(dyn Error + 'static)) -> Vec<String> {
    let mut texts = vec![error.to_string()];
    let mut source = error.source();
    while let Some(cause) = source {
        texts.push(cause.to_string());
        source = cause.source();
    }
    texts
}

/// A regular file, to put a directory under (the OS refuses).
fn not_a_dir(dir: &tempfile::TempDir) -> std::path::PathBuf {
    let file = dir.path().join("plain-file");
    std::fs::write(&file, "x").unwrap();
    file
}

#[test]
fn a_run_folder_error_shows_the_os_reason_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = not_a_dir(&dir);
    let error = create_run_folder(&file.join("runs")).unwrap_err();
    let RunError::Io(io) = &error else {
        panic!("not an I/O error: {error:?}");
    };
    let os_text = io.source.to_string();
    let texts = chain(&error);
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(texts[0].contains(&file.display().to_string()), "{texts:?}");
    assert!(!texts[0].contains(&os_text), "{texts:?}");
    assert_eq!(texts[1], os_text);
}

#[tokio::test]
async fn a_store_error_shows_the_os_reason_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = not_a_dir(&dir);
    let store = FileSessionStore::new(file.join("sessions"));
    let error = store.lock("s").await.unwrap_err();
    let StoreError::Io(io) = &error else {
        panic!("not an I/O error: {error:?}");
    };
    let os_text = io.source.to_string();
    let joined = chain(&error).join(": ");
    assert_eq!(joined.matches(&os_text).count(), 1, "{joined}");
    assert!(joined.starts_with("create directory "), "{joined}");
}
