//! The conformance suite every [`RunCatalog`] passes, written once.
//!
//! Enabled by the `conformance` cargo feature. A catalog runs it from one of its own
//! tests, with a factory of fresh, empty catalogs (each with its own runs directory):
//!
//! ```text
//! use reprise_runs::conformance::run_all;
//!
//! #[tokio::test]
//! async fn my_catalog_conforms() {
//!     run_all(&|| Box::pin(async { Arc::new(MyCatalog::connect(fresh_db()).await) as _ })).await;
//! }
//! ```
//!
//! A catalog passes on a current-thread runtime as on a multi-threaded one. Each
//! check takes a fresh catalog and panics (with the check's name) when the catalog
//! does not behave as [`RunCatalog`] documents.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use reprise_redact::Redactor;
use reprise_session::{Entry, Message, SessionKey, SessionStore};

use crate::{
    LAST_RUN, RunCatalog, RunFolder, RunFork, TagChange, create_run_folder, create_run_store,
};

mod search;
mod sizes;

/// A fresh, empty catalog, made.
pub type Fresh<'a> = Pin<Box<dyn Future<Output = Arc<dyn RunCatalog>> + Send + 'a>>;

/// Makes a fresh, empty catalog.
pub type Factory<'a> = &'a (dyn Fn() -> Fresh<'a> + Send + Sync);

/// Runs every check, each on a fresh catalog from `make`.
pub async fn run_all(make: Factory<'_>) {
    an_empty_catalog_lists_nothing_and_has_no_last_run(make().await).await;
    a_run_written_through_its_store_is_listed_found_and_read(make().await).await;
    titles_and_tags_are_kept_and_a_title_finds_its_run(make().await).await;
    a_fork_copies_the_conversation_into_a_new_run(make().await).await;
    a_deleted_run_is_gone(make().await).await;
    the_newest_runs_come_first_and_say_whether_there_are_more(make().await).await;
    a_run_is_read_whole_with_its_subagents(make().await).await;
    each_transcript_of_a_run_is_read_by_name(make().await).await;
    a_run_folder_an_import_wrote_is_taken_in(make().await).await;
    search::run_all(make).await;
    sizes::run_all(make).await;
}

/// Starts a run and writes `texts` into it as the person's messages.
async fn start_run(catalog: &dyn RunCatalog, texts: &[&str]) -> RunFolder {
    let entries: Vec<Entry> = texts
        .iter()
        .map(|text| Entry::message(Message::user(*text)))
        .collect();
    start_run_with(catalog, &entries, &[]).await
}

/// Starts a run and writes `entries` into its conversation, and each subagent's
/// entries into that subagent's transcript.
async fn start_run_with(
    catalog: &dyn RunCatalog,
    entries: &[Entry],
    subagents: &[(&str, Vec<Entry>)],
) -> RunFolder {
    let mut folder = create_run_folder(catalog.runs_dir()).unwrap();
    catalog.ensure_local_folder(&folder).await.unwrap();
    let id = catalog.new_session_id(&folder).await.unwrap();
    let store = catalog.store_for(&folder, &Redactor::new());
    let _lock = store.lock(&id).await.unwrap();
    store
        .append(&SessionKey::session(&id).unwrap(), entries)
        .await
        .unwrap();
    for (name, entries) in subagents {
        store
            .append(&SessionKey::subagent(&id, name).unwrap(), entries)
            .await
            .unwrap();
    }
    folder.session_id = Some(id);
    catalog.reopen(&folder).await.unwrap()
}

async fn texts(catalog: &dyn RunCatalog, folder: &RunFolder) -> Vec<String> {
    catalog
        .conversation(folder)
        .await
        .unwrap()
        .messages
        .into_iter()
        .map(|message| message.text)
        .collect()
}

async fn an_empty_catalog_lists_nothing_and_has_no_last_run(catalog: Arc<dyn RunCatalog>) {
    let check = "an empty catalog lists nothing and has no last run";
    assert!(catalog.list().await.unwrap().runs.is_empty(), "{check}");
    let (list, more) = catalog.list_newest(5).await.unwrap();
    assert!(list.runs.is_empty() && !more, "{check}");
    assert!(catalog.find(LAST_RUN).await.is_err(), "{check}");
    assert!(catalog.find("2026").await.is_err(), "{check}");
    catalog.close().await;
}

async fn a_run_written_through_its_store_is_listed_found_and_read(catalog: Arc<dyn RunCatalog>) {
    let check = "a run written through its store is listed, found and read";
    let run = start_run(&*catalog, &["first question", "second question"]).await;
    assert!(
        run.session_id.is_some(),
        "{check}: reopened without a session"
    );
    let list = catalog.list().await.unwrap();
    assert_eq!(list.runs.len(), 1, "{check}");
    let listed = &list.runs[0];
    assert_eq!(listed.name(), run.name(), "{check}");
    assert_eq!(listed.message_count, 2, "{check}");
    assert_eq!(
        listed.last_message.as_deref(),
        Some("second question"),
        "{check}"
    );
    assert_eq!(
        catalog.find(LAST_RUN).await.unwrap().name(),
        run.name(),
        "{check}"
    );
    assert_eq!(
        catalog.find(run.name()).await.unwrap().name(),
        run.name(),
        "{check}"
    );
    let prefix = &run.name()[..run.name().len() - 3];
    assert_eq!(
        catalog.find(prefix).await.unwrap().name(),
        run.name(),
        "{check}"
    );
    assert!(catalog.find("1999-01-01").await.is_err(), "{check}");
    assert_eq!(
        texts(&*catalog, &run).await,
        ["first question", "second question"],
        "{check}"
    );
    let mut streamed = Vec::new();
    let mut stream = catalog.stream_conversation(&run).await.unwrap();
    while let Some(message) = stream.next().await {
        streamed.push(message.text);
    }
    let warnings = stream.finish().await.unwrap();
    assert!(warnings.is_empty(), "{check}: {warnings:?}");
    assert_eq!(streamed, texts(&*catalog, &run).await, "{check}");
    assert!(catalog.updated_at(&run).await.is_some(), "{check}");
    catalog.close().await;
}

async fn titles_and_tags_are_kept_and_a_title_finds_its_run(catalog: Arc<dyn RunCatalog>) {
    let check = "titles and tags are kept, and a title finds its run";
    let run = start_run(&*catalog, &["hello"]).await;
    let labels = catalog.set_title(&run, "  The Silver Key ").await.unwrap();
    assert_eq!(
        labels.unwrap().title.as_deref(),
        Some("The Silver Key"),
        "{check}"
    );
    assert_eq!(
        catalog.find("the silver key").await.unwrap().name(),
        run.name(),
        "{check}"
    );
    let tags = |names: &[&str]| names.iter().map(|t| (*t).to_owned()).collect::<Vec<_>>();
    let labels = catalog
        .change_tags(&run, TagChange::add(tags(&["quest", "cave"])))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(labels.tags, ["cave", "quest"], "{check}");
    let labels = catalog
        .change_tags(&run, TagChange::remove(tags(&["cave"])))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(labels.tags, ["quest"], "{check}");
    let read = catalog.labels(&run).await.unwrap().unwrap();
    assert_eq!(read.title.as_deref(), Some("The Silver Key"), "{check}");
    assert_eq!(read.tags, ["quest"], "{check}");
    let listed = &catalog.list().await.unwrap().runs[0];
    assert_eq!(listed.title.as_deref(), Some("The Silver Key"), "{check}");
    assert_eq!(listed.tags, ["quest"], "{check}");
    let labels = catalog.set_title(&run, "").await.unwrap().unwrap();
    assert_eq!(labels.title, None, "{check}");
    catalog.close().await;
}

async fn a_fork_copies_the_conversation_into_a_new_run(catalog: Arc<dyn RunCatalog>) {
    let check = "a fork copies the conversation into a new run";
    let run = start_run(&*catalog, &["one", "two"]).await;
    let target = create_run_folder(catalog.runs_dir()).unwrap();
    let forked = catalog
        .fork(RunFork {
            source: &run,
            target,
            up_to: None,
        })
        .await
        .unwrap();
    assert_ne!(forked.folder.name(), run.name(), "{check}");
    assert!(forked.folder.session_id.is_some(), "{check}");
    drop(forked.store);
    assert_eq!(
        texts(&*catalog, &forked.folder).await,
        ["one", "two"],
        "{check}"
    );
    assert_eq!(texts(&*catalog, &run).await, ["one", "two"], "{check}");
    assert_eq!(catalog.list().await.unwrap().runs.len(), 2, "{check}");

    let empty = create_run_folder(catalog.runs_dir()).unwrap();
    let target = create_run_folder(catalog.runs_dir()).unwrap();
    assert!(
        catalog
            .fork(RunFork {
                source: &empty,
                target,
                up_to: None
            })
            .await
            .is_err(),
        "{check}: a run without a conversation was forked"
    );
    catalog.close().await;
}

async fn a_deleted_run_is_gone(catalog: Arc<dyn RunCatalog>) {
    let check = "a deleted run is gone";
    let kept = start_run(&*catalog, &["keep me"]).await;
    let run = start_run(&*catalog, &["delete me"]).await;
    let store = catalog.store_for(&run, &Redactor::new());
    let lock = store
        .lock(run.session_id.as_deref().unwrap())
        .await
        .unwrap();
    catalog.delete(&run).await.unwrap();
    drop(lock);
    let names: Vec<String> = catalog
        .list()
        .await
        .unwrap()
        .runs
        .iter()
        .map(|run| run.name().to_owned())
        .collect();
    assert_eq!(names, [kept.name()], "{check}");
    assert!(!run.dir.exists(), "{check}: its folder is left");
    assert!(
        matches!(
            catalog.reopen(&run).await,
            Ok(RunFolder {
                session_id: None,
                ..
            }) | Err(_)
        ),
        "{check}: it still has its session"
    );
    catalog.close().await;
}

async fn the_newest_runs_come_first_and_say_whether_there_are_more(catalog: Arc<dyn RunCatalog>) {
    let check = "the newest runs come first and say whether there are more";
    let older = start_run(&*catalog, &["older"]).await;
    // Listings order by the time of the last message, in milliseconds at best.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let newer = start_run(&*catalog, &["newer"]).await;
    let (list, more) = catalog.list_newest(1).await.unwrap();
    let names: Vec<&str> = list.runs.iter().map(|run| run.name()).collect();
    assert_eq!(names, [newer.name()], "{check}");
    assert!(more, "{check}");
    let (list, more) = catalog.list_newest(2).await.unwrap();
    let names: Vec<&str> = list.runs.iter().map(|run| run.name()).collect();
    assert_eq!(names, [newer.name(), older.name()], "{check}");
    assert!(!more, "{check}");
    assert_eq!(
        catalog.find(LAST_RUN).await.unwrap().name(),
        newer.name(),
        "{check}"
    );
    catalog.close().await;
}

/// The texts of the messages among `entries`.
fn entry_texts(entries: &[Entry]) -> Vec<String> {
    entries
        .iter()
        .filter_map(|entry| entry.as_message())
        .map(|message| message.text())
        .collect()
}

async fn a_run_is_read_whole_with_its_subagents(catalog: Arc<dyn RunCatalog>) {
    let check = "a run is read whole, with its subagents";
    let run = start_run(&*catalog, &["plan the trip"]).await;
    let id = run.session_id.clone().unwrap();
    let store = catalog.store_for(&run, &Redactor::new());
    let lock = store.lock(&id).await.unwrap();
    store
        .append(
            &SessionKey::subagent(&id, "scout").unwrap(),
            &[Entry::message(Message::user("look ahead"))],
        )
        .await
        .unwrap();
    drop(lock);
    let record = catalog.record(&run).await.unwrap();
    assert_eq!(record.name, run.name(), "{check}");
    assert_eq!(record.session["sessionId"], id.as_str(), "{check}");
    assert_eq!(entry_texts(&record.main), ["plan the trip"], "{check}");
    assert_eq!(record.subagents.len(), 1, "{check}");
    assert_eq!(record.subagents[0].0, "scout", "{check}");
    assert_eq!(
        entry_texts(&record.subagents[0].1),
        ["look ahead"],
        "{check}"
    );
    catalog.close().await;
}

async fn each_transcript_of_a_run_is_read_by_name(catalog: Arc<dyn RunCatalog>) {
    let check = "each transcript of a run is read by name";
    let loaded_texts = async |folder: &RunFolder, subagent: Option<&str>| {
        catalog
            .entries(folder, subagent)
            .await
            .unwrap()
            .map(|loaded| entry_texts(&loaded.entries))
    };
    // A run before its first message has no transcript.
    let fresh = create_run_folder(catalog.runs_dir()).unwrap();
    catalog.ensure_local_folder(&fresh).await.unwrap();
    assert!(
        catalog.subagent_names(&fresh).await.unwrap().is_empty(),
        "{check}"
    );
    assert_eq!(loaded_texts(&fresh, None).await, None, "{check}");
    let alone = start_run(&*catalog, &["on my own"]).await;
    assert!(
        catalog.subagent_names(&alone).await.unwrap().is_empty(),
        "{check}"
    );
    assert_eq!(loaded_texts(&alone, Some("scout")).await, None, "{check}");
    let helped = start_run_with(
        &*catalog,
        &[Entry::message(Message::user("plan the trip"))],
        &[
            ("scout", vec![Entry::message(Message::user("look ahead"))]),
            ("critic", vec![Entry::message(Message::user("find faults"))]),
        ],
    )
    .await;
    assert_eq!(
        catalog.subagent_names(&helped).await.unwrap(),
        ["critic", "scout"],
        "{check}"
    );
    assert_eq!(
        loaded_texts(&helped, None).await,
        Some(vec!["plan the trip".to_owned()]),
        "{check}"
    );
    assert_eq!(
        loaded_texts(&helped, Some("scout")).await,
        Some(vec!["look ahead".to_owned()]),
        "{check}"
    );
    assert_eq!(loaded_texts(&helped, Some("nobody")).await, None, "{check}");
    catalog.close().await;
}

async fn a_run_folder_an_import_wrote_is_taken_in(catalog: Arc<dyn RunCatalog>) {
    let check = "a run folder an import wrote is taken in";
    let written = create_run_folder(&catalog.import_dir()).unwrap();
    let store = create_run_store(&written.dir);
    let id = uuid::Uuid::now_v7().to_string();
    let lock = store.lock(&id).await.unwrap();
    let main = SessionKey::session(&id).unwrap();
    store
        .append(
            &main,
            &[
                Entry::message(Message::user("imported question")),
                Entry::message(Message::assistant("imported answer")),
            ],
        )
        .await
        .unwrap();
    store
        .append(
            &SessionKey::subagent(&id, "helper").unwrap(),
            &[Entry::message(Message::user("sub task"))],
        )
        .await
        .unwrap();
    drop(lock);
    drop(store);
    let name = written.name().to_owned();
    let written = RunFolder::open(&written.dir).unwrap();
    let run = catalog.take_in(written).await.unwrap();
    assert_eq!(run.name(), name, "{check}");
    let list = catalog.list().await.unwrap();
    let names: Vec<&str> = list.runs.iter().map(|run| run.name()).collect();
    assert_eq!(names, [name.as_str()], "{check}");
    let found = catalog.find(&name).await.unwrap();
    assert_eq!(
        texts(&*catalog, &found).await,
        ["imported question", "imported answer"],
        "{check}"
    );
    let record = catalog.record(&found).await.unwrap();
    assert_eq!(record.subagents.len(), 1, "{check}");
    assert_eq!(entry_texts(&record.subagents[0].1), ["sub task"], "{check}");
    catalog.close().await;
}
