//! A run folder is untrusted input: no write and no read goes through a symbolic
//! link inside a runs directory. Each test puts a link where one of reprise's files
//! should be, pointing at a file outside, and checks that the outside file is
//! untouched and that the error names the link.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use reprise_redact::Redactor;
use reprise_runs::{
    RunFolder, SessionLog, Transcript, TranscriptRecord, append_history, create_run_folder,
    create_run_store, fork_run, list_runs, read_conversation_with_warnings, read_history,
};
use reprise_session::{Entry, Message, SessionKey, SessionStore};

const PRECIOUS: &str = "precious: must stay as it is\n";

/// A runs directory and, outside it, a file that no operation may change.
struct Setup {
    runs: tempfile::TempDir,
    outside: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let setup = Setup {
            runs: tempfile::tempdir().unwrap(),
            outside: tempfile::tempdir().unwrap(),
        };
        fs::write(setup.victim(), PRECIOUS).unwrap();
        setup
    }

    fn runs(&self) -> &Path {
        self.runs.path()
    }

    fn victim(&self) -> PathBuf {
        self.outside.path().join("victim")
    }

    /// Replaces `path` (if any) with a link to the victim.
    fn link_at(&self, path: &Path) {
        let _ = fs::remove_file(path);
        symlink(self.victim(), path).unwrap();
    }

    fn assert_victim_untouched(&self) {
        assert_eq!(fs::read_to_string(self.victim()).unwrap(), PRECIOUS);
        assert_eq!(fs::read_dir(self.outside.path()).unwrap().count(), 1);
    }

    /// A run folder with a two-message conversation; its folder and session key.
    async fn run_with_conversation(&self) -> (PathBuf, SessionKey) {
        let folder = create_run_folder(self.runs()).unwrap();
        let key = SessionKey::session("sess-1").unwrap();
        create_run_store(&folder.dir)
            .append(&key, &two_messages())
            .await
            .unwrap();
        (folder.dir, key)
    }
}

fn two_messages() -> Vec<Entry> {
    vec![
        Entry::message(Message::user("hello")),
        Entry::message(Message::assistant("hi")),
    ]
}

fn one_more() -> Vec<Entry> {
    vec![Entry::message(Message::user("more"))]
}

/// The error's whole chain as one line.
fn text(error: &(dyn std::error::Error + 'static)) -> String {
    reprise_runs::error_chain(error)
}

fn assert_refuses(error: &(dyn std::error::Error + 'static), link: &Path) {
    let shown = text(error);
    assert!(shown.contains(&link.display().to_string()), "{shown}");
    assert!(shown.contains("symbolic link"), "{shown}");
}

#[tokio::test]
async fn a_lock_file_link_is_refused_by_lock_and_append() {
    let setup = Setup::new();
    let (dir, key) = setup.run_with_conversation().await;
    let lock = dir.join(".lock");
    setup.link_at(&lock);
    let store = create_run_store(&dir);
    let error = store.lock("sess-1").await.unwrap_err();
    assert_refuses(&error, &lock);
    let error = store.append(&key, &one_more()).await.unwrap_err();
    assert_refuses(&error, &lock);
    setup.assert_victim_untouched();
}

#[tokio::test]
async fn a_summary_link_is_refused_by_the_next_append() {
    let setup = Setup::new();
    let (dir, key) = setup.run_with_conversation().await;
    let summary = dir.join(".summary.json");
    setup.link_at(&summary);
    let error = create_run_store(&dir)
        .append(&key, &one_more())
        .await
        .unwrap_err();
    assert_refuses(&error, &summary);
    setup.assert_victim_untouched();
    // Nor is it read by a listing: the run is left out with a warning naming it.
    let list = list_runs(setup.runs()).unwrap();
    assert!(list.runs.is_empty(), "{list:?}");
    assert_eq!(list.warnings[0].path, summary);
}

#[tokio::test]
async fn a_conversation_link_is_refused_by_append_load_and_show() {
    let setup = Setup::new();
    let (dir, key) = setup.run_with_conversation().await;
    let conversation = dir.join("conversation.jsonl");
    setup.link_at(&conversation);
    let store = create_run_store(&dir);
    let error = store.append(&key, &one_more()).await.unwrap_err();
    assert_refuses(&error, &conversation);
    let error = store.load(&key).await.unwrap_err();
    assert_refuses(&error, &conversation);
    let error = read_conversation_with_warnings(&dir).unwrap_err();
    assert_refuses(&error, &conversation);
    setup.assert_victim_untouched();
}

#[tokio::test]
async fn a_conversation_swapped_for_a_link_while_the_store_is_open_is_refused() {
    let setup = Setup::new();
    let folder = create_run_folder(setup.runs()).unwrap();
    let key = SessionKey::session("sess-1").unwrap();
    let store = create_run_store(&folder.dir);
    let _lock = store.lock("sess-1").await.unwrap();
    store.append(&key, &two_messages()).await.unwrap();
    // The store keeps conversation.jsonl open; the link replaces it meanwhile.
    let conversation = folder.dir.join("conversation.jsonl");
    fs::rename(&conversation, folder.dir.join("moved.jsonl")).unwrap();
    setup.link_at(&conversation);
    let error = store.append(&key, &one_more()).await.unwrap_err();
    assert_refuses(&error, &conversation);
    setup.assert_victim_untouched();
    // The moved file is as it was: nothing was written to the old descriptor either.
    let moved = fs::read_to_string(folder.dir.join("moved.jsonl")).unwrap();
    assert_eq!(moved.lines().count(), 2);
}

#[tokio::test]
async fn a_subagent_transcript_link_is_refused() {
    let setup = Setup::new();
    let (dir, key) = setup.run_with_conversation().await;
    let helper = SessionKey::subagent(key.session_id(), "helper").unwrap();
    create_run_store(&dir)
        .append(&helper, &two_messages())
        .await
        .unwrap();
    let path = dir.join("subagents/helper.jsonl");
    setup.link_at(&path);
    let error = create_run_store(&dir)
        .append(&helper, &one_more())
        .await
        .unwrap_err();
    assert_refuses(&error, &path);
    setup.assert_victim_untouched();
}

#[tokio::test]
async fn a_subagents_folder_link_is_refused() {
    let setup = Setup::new();
    let (dir, key) = setup.run_with_conversation().await;
    let outside_dir = setup.outside.path().join("agents");
    fs::create_dir(&outside_dir).unwrap();
    symlink(&outside_dir, dir.join("subagents")).unwrap();
    let helper = SessionKey::subagent(key.session_id(), "helper").unwrap();
    let error = create_run_store(&dir)
        .append(&helper, &one_more())
        .await
        .unwrap_err();
    assert_refuses(&error, &dir.join("subagents"));
    assert_eq!(fs::read_dir(&outside_dir).unwrap().count(), 0);
}

#[tokio::test]
async fn a_session_json_link_is_replaced_never_written_through() {
    let setup = Setup::new();
    let (dir, key) = setup.run_with_conversation().await;
    let meta = dir.join("session.json");
    setup.link_at(&meta);
    // Opening the run treats the link as damage: rebuilt in place of the link.
    let folder = RunFolder::open(&dir).unwrap();
    assert_eq!(folder.session_id.as_deref(), Some("sess-1"));
    assert_eq!(folder.warnings[0].path, meta);
    assert!(fs::symlink_metadata(&meta).unwrap().is_file());
    // A subagent's registration rewrites session.json: a link there is replaced too.
    setup.link_at(&meta);
    let store = create_run_store(&dir);
    let error = store.append(&key, &one_more()).await.unwrap_err();
    assert_refuses(&error, &meta);
    setup.assert_victim_untouched();
}

#[test]
fn session_log_and_transcript_links_are_refused() {
    let setup = Setup::new();
    let folder = create_run_folder(setup.runs()).unwrap();
    let log = folder.dir.join("session.log");
    setup.link_at(&log);
    let error = SessionLog::open(&folder.dir).unwrap_err();
    assert_refuses(&error, &log);

    // A link found at open is refused there; one swapped in later, at the next record.
    let transcript = Transcript::open(&folder.dir, Redactor::new()).unwrap();
    let transcript_path = folder.dir.join("transcript.jsonl");
    setup.link_at(&transcript_path);
    let error = Transcript::open(&folder.dir, Redactor::new()).unwrap_err();
    assert_refuses(&error, &transcript_path);
    let error = transcript
        .record(&TranscriptRecord::tool_call("main", "c1", "bash", "{}"))
        .unwrap_err();
    assert_refuses(&error, &transcript_path);
    setup.assert_victim_untouched();
}

#[test]
fn a_history_link_is_neither_appended_to_nor_read() {
    let setup = Setup::new();
    let history = setup.runs().join("history.jsonl");
    setup.link_at(&history);
    let error = append_history(&history, "a prompt", "run").unwrap_err();
    assert_refuses(&error, &history);
    let error = read_history(&history).unwrap_err();
    assert_refuses(&error, &history);
    setup.assert_victim_untouched();
}

#[tokio::test]
async fn a_list_cache_link_is_replaced_never_written_through() {
    let setup = Setup::new();
    let (dir, _key) = setup.run_with_conversation().await;
    let cache = setup.runs().join(reprise_runs::LIST_CACHE);
    setup.link_at(&cache);
    let list = list_runs(setup.runs()).unwrap();
    assert_eq!(list.runs.len(), 1);
    assert_eq!(list.runs[0].dir, dir);
    setup.assert_victim_untouched();
}

#[tokio::test]
async fn a_linked_run_folder_is_skipped_by_listings_and_refused_by_everything_else() {
    let setup = Setup::new();
    let (dir, key) = setup.run_with_conversation().await;
    // The real run moves outside; a link to it takes its place.
    let outside_run = setup.outside.path().join("run");
    fs::rename(&dir, &outside_run).unwrap();
    symlink(&outside_run, &dir).unwrap();
    let before = fs::read(outside_run.join("conversation.jsonl")).unwrap();

    let list = list_runs(setup.runs()).unwrap();
    assert!(list.runs.is_empty());
    assert_eq!(list.warnings.len(), 1);
    assert_eq!(list.warnings[0].path, dir);
    assert!(list.warnings[0].message.contains("symbolic link"));

    let error = RunFolder::open(&dir).unwrap_err();
    assert_refuses(&error, &dir);
    let error = create_run_store(&dir)
        .append(&key, &one_more())
        .await
        .unwrap_err();
    assert_refuses(&error, &dir);
    let error = read_conversation_with_warnings(&dir).unwrap_err();
    assert_refuses(&error, &dir);
    let error = fork_run(&dir, &setup.runs().join("copy"), None).unwrap_err();
    assert_refuses(&error, &dir);
    assert_eq!(
        fs::read(outside_run.join("conversation.jsonl")).unwrap(),
        before
    );
}

#[tokio::test]
async fn a_fork_into_a_linked_target_is_refused() {
    let setup = Setup::new();
    let (dir, _key) = setup.run_with_conversation().await;
    let outside_dir = setup.outside.path().join("target");
    fs::create_dir(&outside_dir).unwrap();
    let target = setup.runs().join("2030-01-01T00-00-00-000Z");
    symlink(&outside_dir, &target).unwrap();
    let error = fork_run(&dir, &target, None).unwrap_err();
    assert_refuses(&error, &target);
    assert_eq!(fs::read_dir(&outside_dir).unwrap().count(), 0);
    // The link was not replaced by the fork either.
    assert!(
        fs::symlink_metadata(&target)
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn a_runs_dir_that_is_a_link_is_followed() {
    let setup = Setup::new();
    let real = setup.outside.path().join("real-runs");
    fs::create_dir(&real).unwrap();
    let linked = setup.runs().join("runs");
    symlink(&real, &linked).unwrap();
    let folder = create_run_folder(&linked).unwrap();
    let name = folder.name().to_owned();
    assert!(real.join(&name).join("session.log").is_file());
    assert!(RunFolder::open(linked.join(&name)).is_ok());
}

#[tokio::test]
async fn a_link_at_a_fork_staging_name_is_never_filled() {
    let setup = Setup::new();
    let (dir, _key) = setup.run_with_conversation().await;
    let outside_dir = setup.outside.path().join("staging");
    fs::create_dir(&outside_dir).unwrap();
    // Links at the staging names a fork into `target` may use next.
    let target = setup.runs().join("2030-01-01T00-00-00-000Z");
    let pid = std::process::id();
    for n in 0..2000 {
        symlink(
            &outside_dir,
            setup
                .runs()
                .join(format!(".2030-01-01T00-00-00-000Z.fork-{pid}-{n}")),
        )
        .unwrap();
    }
    let result = fork_run(&dir, &target, None);
    assert_eq!(fs::read_dir(&outside_dir).unwrap().count(), 0);
    match result {
        // The staging name was a link: refused, naming it.
        Err(error) => assert!(text(&error).contains("symbolic link"), "{error:?}"),
        // The counter had moved past every link: a real staging folder was used.
        Ok(forked) => {
            drop(forked);
            assert!(fs::symlink_metadata(&target).unwrap().is_dir());
        }
    }
}
