//! An error as one line of text with its causes, as `anyhow`'s `{:#}` prints it.
//!
//! The library errors keep the operating system's error as their source rather than
//! in their own text, so printing only an error's `Display` would drop the reason
//! (`write /runs/x/session.log` without `No space left on device`).

/// `error: cause: cause…`, each error of the source chain once; a path through a
/// held runs folder is named by its real path (`reprise_runs::held`).
pub fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
    reprise_runs::held::shown(&reprise_runs::error_chain(error)).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_run_folder_names_the_path_and_the_os_error_once() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        std::fs::write(&file, "x").unwrap();
        // A runs directory under a regular file: the OS refuses.
        let error = reprise_runs::create_run_folder(&file.join("runs")).unwrap_err();
        let reprise_runs::RunError::Io(io) = &error else {
            panic!("not an I/O error: {error:?}");
        };
        let os_text = io.source.to_string();
        for shown in [
            with_causes(&error),
            format!(
                "{:#}",
                anyhow::Error::from(error).context("cannot start a run")
            ),
        ] {
            assert_eq!(shown.matches(&os_text).count(), 1, "{shown}");
            assert!(shown.contains(&file.display().to_string()), "{shown}");
        }
    }

    #[test]
    fn a_store_failure_inside_an_agent_error_shows_its_os_error_once() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        std::fs::write(&file, "x").unwrap();
        let store = reprise_session::FileSessionStore::new(file.join("sessions"));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let error = runtime
            .block_on(reprise_session::SessionStore::lock(&store, "s"))
            .unwrap_err();
        let reprise_session::StoreError::Io(io) = &error else {
            panic!("not an I/O error: {error:?}");
        };
        let os_text = io.source.to_string();
        let error = reprise_agent::AgentError::from(error);
        let shown = format!(
            "{:#}",
            anyhow::Error::from(error).context("cannot open run")
        );
        assert_eq!(shown.matches(&os_text).count(), 1, "{shown}");
        assert_eq!(
            with_causes(&reprise_agent::AgentError::Cancelled),
            "cancelled by the user"
        );
    }
}
