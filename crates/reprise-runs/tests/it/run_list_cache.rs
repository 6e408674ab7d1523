//! The `list_runs` cache (`.list-cache`): a cached listing always shows what the
//! `session.json` files hold now.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, SystemTime};

use reprise_runs::LIST_CACHE;
use reprise_runs::SESSION_JSON;
use reprise_runs::{RunSummary, find_run, list_runs};

use crate::list_cache_file::cached_names;

/// Files changed less than a second before a listing are not cached (file times come
/// from a coarse clock); waiting this long lets the listing cache them.
const SETTLE: Duration = Duration::from_millis(1100);

/// A `session.json` with listing fields of its own, as earlier versions wrote it.
fn session_bytes(session: &str, updated: Option<&str>, last: &str) -> Vec<u8> {
    let mut meta =
        serde_json::json!({"sessionId": session, "lastMessage": last, "messageCount": 3});
    if let Some(updated) = updated {
        meta["updatedAt"] = updated.into();
    }
    serde_json::to_vec(&meta).unwrap()
}

fn make_run(runs: &Path, name: &str, last: &str) -> PathBuf {
    let dir = runs.join(name);
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join(SESSION_JSON),
        session_bytes(&format!("s-{name}"), Some("2026-01-01T00:00:00Z"), last),
    )
    .unwrap();
    dir
}

/// Replaces `session.json` the way the run store does: a new file renamed over it.
fn replace_session_json(dir: &Path, bytes: &[u8]) {
    let temp = dir.join("session.json.tmp");
    fs::write(&temp, bytes).unwrap();
    fs::rename(&temp, dir.join(SESSION_JSON)).unwrap();
}

fn last_messages(runs: &Path) -> Vec<(String, Option<String>)> {
    list_runs(runs)
        .unwrap()
        .runs
        .iter()
        .map(|run| (run.name().to_owned(), run.last_message.clone()))
        .collect()
}

/// What a listing shows without any cache: the reference every cached one must match.
fn uncached(runs: &Path) -> Vec<RunSummary> {
    let copy = tempfile::tempdir().unwrap();
    for entry in fs::read_dir(runs).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            let to = copy.path().join(entry.file_name());
            fs::create_dir(&to).unwrap();
            let from = entry.path().join(SESSION_JSON);
            if from.exists() {
                fs::copy(&from, to.join(SESSION_JSON)).unwrap();
                let modified = fs::metadata(&from).unwrap().modified().unwrap();
                File::options()
                    .write(true)
                    .open(to.join(SESSION_JSON))
                    .unwrap()
                    .set_modified(modified)
                    .unwrap();
            }
        }
    }
    list_runs(copy.path())
        .unwrap()
        .runs
        .into_iter()
        .map(|mut run| {
            run.dir = runs.join(run.name());
            run
        })
        .collect()
}

#[test]
fn a_session_json_replaced_with_the_same_size_and_time_is_read_again() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = make_run(tmp.path(), "2026-01-01T00-00-00-000Z", "aaaa");
    let path = dir.join(SESSION_JSON);
    std::thread::sleep(SETTLE);
    assert_eq!(last_messages(tmp.path())[0].1.as_deref(), Some("aaaa"));
    assert_eq!(cached_names(tmp.path()), ["2026-01-01T00-00-00-000Z"]);

    // Same size, and the modification time set back to the very nanosecond: only the
    // inode and the change time say that the file is another one.
    let before = fs::metadata(&path).unwrap();
    let same_size = session_bytes(
        "s-2026-01-01T00-00-00-000Z",
        Some("2026-01-01T00:00:00Z"),
        "bbbb",
    );
    assert_eq!(same_size.len() as u64, before.len());
    replace_session_json(&dir, &same_size);
    File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(before.modified().unwrap())
        .unwrap();
    assert_eq!(
        fs::metadata(&path).unwrap().modified().unwrap(),
        before.modified().unwrap()
    );
    assert_eq!(last_messages(tmp.path())[0].1.as_deref(), Some("bbbb"));

    // Once the new file is cached, it is still what is shown.
    std::thread::sleep(SETTLE);
    assert_eq!(last_messages(tmp.path())[0].1.as_deref(), Some("bbbb"));
    assert_eq!(last_messages(tmp.path())[0].1.as_deref(), Some("bbbb"));
    assert_eq!(list_runs(tmp.path()).unwrap().runs, uncached(tmp.path()));
}

#[test]
fn a_session_json_rewritten_in_place_with_the_same_size_and_time_is_read_again() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = make_run(tmp.path(), "2026-01-01T00-00-00-000Z", "aaaa");
    let path = dir.join(SESSION_JSON);
    std::thread::sleep(SETTLE);
    assert_eq!(last_messages(tmp.path())[0].1.as_deref(), Some("aaaa"));
    assert_eq!(cached_names(tmp.path()), ["2026-01-01T00-00-00-000Z"]);

    // Same inode, same size, same modification time: only the change time differs.
    let before = fs::metadata(&path).unwrap();
    let bytes = fs::read(&path).unwrap();
    let text = String::from_utf8(bytes).unwrap().replace("aaaa", "cccc");
    let file = OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all_at(text.as_bytes(), 0).unwrap();
    file.set_modified(before.modified().unwrap()).unwrap();
    drop(file);
    let after = fs::metadata(&path).unwrap();
    assert_eq!(
        (after.len(), after.modified().unwrap()),
        (before.len(), before.modified().unwrap())
    );
    assert_eq!(last_messages(tmp.path())[0].1.as_deref(), Some("cccc"));
}

#[test]
fn a_cached_time_taken_from_the_file_follows_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("2026-01-01T00-00-00-000Z");
    fs::create_dir(&dir).unwrap();
    let path = dir.join(SESSION_JSON);
    fs::write(&path, r#"{"sessionId":"s1"}"#).unwrap();
    let first = SystemTime::UNIX_EPOCH + Duration::from_secs(1_780_000_000);
    File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(first)
        .unwrap();
    std::thread::sleep(SETTLE);
    let listed = list_runs(tmp.path()).unwrap().runs[0].updated_at;
    assert_eq!(listed.as_second(), 1_780_000_000);
    assert_eq!(cached_names(tmp.path()), ["2026-01-01T00-00-00-000Z"]);

    let second = first + Duration::from_nanos(1_500);
    File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(second)
        .unwrap();
    let listed = list_runs(tmp.path()).unwrap().runs[0].updated_at;
    assert_eq!(
        (listed.as_second(), listed.subsec_nanosecond()),
        (1_780_000_000, 1_500)
    );
}

#[test]
fn removed_runs_disappear_new_runs_appear_and_broken_ones_stay_warnings() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path();
    make_run(runs, "2026-01-01T00-00-00-000Z", "one");
    make_run(runs, "2026-01-02T00-00-00-000Z", "two");
    make_run(runs, "2026-01-03T00-00-00-000Z", "three");
    let broken = runs.join("2026-01-04T00-00-00-000Z");
    fs::create_dir(&broken).unwrap();
    fs::write(broken.join(SESSION_JSON), "{not json").unwrap();
    std::thread::sleep(SETTLE);
    let first = list_runs(runs).unwrap();
    assert_eq!(first.runs.len(), 3);
    assert_eq!(first.warnings.len(), 1);
    assert_eq!(cached_names(runs).len(), 3);

    fs::remove_dir_all(runs.join("2026-01-02T00-00-00-000Z")).unwrap();
    make_run(runs, "2026-01-05T00-00-00-000Z", "five");
    let second = list_runs(runs).unwrap();
    let mut names: Vec<&str> = second.runs.iter().map(|run| run.name()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "2026-01-01T00-00-00-000Z",
            "2026-01-03T00-00-00-000Z",
            "2026-01-05T00-00-00-000Z"
        ]
    );
    assert_eq!(second.warnings, first.warnings);
    assert!(!cached_names(runs).contains(&"2026-01-02T00-00-00-000Z".to_owned()));
    assert_eq!(second.runs, uncached(runs));

    // A run whose session.json is removed is no longer listed either.
    fs::remove_file(runs.join("2026-01-03T00-00-00-000Z").join(SESSION_JSON)).unwrap();
    assert_eq!(list_runs(runs).unwrap().runs.len(), 2);
}

#[test]
fn a_corrupt_cache_is_ignored_and_rewritten() {
    let tmp = tempfile::tempdir().unwrap();
    make_run(tmp.path(), "2026-01-01T00-00-00-000Z", "hello");
    std::thread::sleep(SETTLE);
    let cache = tmp.path().join(LIST_CACHE);
    let expected = [(
        "2026-01-01T00-00-00-000Z".to_owned(),
        Some("hello".to_owned()),
    )];
    for garbage in [&b"{\"format\":1,\"runs\":"[..], b"", b"\xff\xfe", b"[]"] {
        fs::write(&cache, garbage).unwrap();
        fs::set_permissions(&cache, fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(last_messages(tmp.path()), expected);
        assert_eq!(cached_names(tmp.path()), ["2026-01-01T00-00-00-000Z"]);
    }
    // A cache cut short anywhere, or with any byte of its text changed (what a
    // listing would show if it were trusted), is rebuilt from the folders.
    let good = fs::read(&cache).unwrap();
    let hello = good.windows(5).position(|w| w == b"hello").unwrap();
    let mut damaged: Vec<Vec<u8>> = (0..good.len()).map(|len| good[..len].to_vec()).collect();
    for at in hello..hello + 5 {
        let mut changed = good.clone();
        changed[at] = b'j';
        damaged.push(changed);
    }
    for bytes in damaged {
        fs::write(&cache, &bytes).unwrap();
        assert_eq!(last_messages(tmp.path()), expected, "{bytes:?}");
        assert_eq!(fs::read(&cache).unwrap(), good);
    }
}

#[test]
fn a_cache_others_could_have_written_is_not_trusted() {
    let tmp = tempfile::tempdir().unwrap();
    make_run(tmp.path(), "2026-01-01T00-00-00-000Z", "hello");
    std::thread::sleep(SETTLE);
    list_runs(tmp.path()).unwrap();
    let cache = tmp.path().join(LIST_CACHE);
    fs::set_permissions(&cache, fs::Permissions::from_mode(0o666)).unwrap();
    assert_eq!(last_messages(tmp.path())[0].1.as_deref(), Some("hello"));
    assert_eq!(mode(&cache), 0o600);
}

#[test]
fn a_cache_planted_from_another_runs_folder_is_not_used() {
    // Two runs folders with a run of the same name: one's cache, copied into the
    // other with its permissions, describes files that are not there.
    let name = "2026-01-01T00-00-00-000Z";
    let (mine, theirs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    make_run(mine.path(), name, "mine");
    make_run(theirs.path(), name, "theirs");
    std::thread::sleep(SETTLE);
    list_runs(mine.path()).unwrap();
    list_runs(theirs.path()).unwrap();
    fs::copy(theirs.path().join(LIST_CACHE), mine.path().join(LIST_CACHE)).unwrap();
    assert_eq!(
        last_messages(mine.path()),
        [(name.to_owned(), Some("mine".to_owned()))]
    );
    assert_eq!(list_runs(mine.path()).unwrap().runs, uncached(mine.path()));
}

#[test]
fn the_json_cache_of_earlier_versions_is_removed_and_not_read() {
    let tmp = tempfile::tempdir().unwrap();
    make_run(tmp.path(), "2026-01-01T00-00-00-000Z", "hello");
    let old = tmp.path().join(".list-cache.json");
    fs::write(&old, r#"{"format":2,"version":"0.1.0","runs":{}}"#).unwrap();
    fs::set_permissions(&old, fs::Permissions::from_mode(0o600)).unwrap();
    std::thread::sleep(SETTLE);
    assert_eq!(last_messages(tmp.path())[0].1.as_deref(), Some("hello"));
    assert!(!old.exists());
    assert_eq!(cached_names(tmp.path()), ["2026-01-01T00-00-00-000Z"]);
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn the_cache_file_is_private_and_never_taken_for_a_run() {
    let tmp = tempfile::tempdir().unwrap();
    make_run(tmp.path(), "2026-01-01T00-00-00-000Z", "hello");
    std::thread::sleep(SETTLE);
    list_runs(tmp.path()).unwrap();
    let cache = tmp.path().join(LIST_CACHE);
    assert_eq!(mode(&cache), 0o600);
    let list = list_runs(tmp.path()).unwrap();
    assert_eq!(list.runs.len(), 1);
    assert!(list.warnings.is_empty());
    assert!(find_run(tmp.path(), LIST_CACHE).is_err());
    // Nothing else is left behind: no temporary files.
    let mut entries: Vec<String> = fs::read_dir(tmp.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    entries.sort();
    assert_eq!(entries, [LIST_CACHE, "2026-01-01T00-00-00-000Z"]);
}

#[test]
fn concurrent_listings_all_return_the_right_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = Arc::new(tmp.path().to_path_buf());
    // Enough runs for list_runs to use several threads itself.
    for n in 0..300 {
        make_run(
            &runs,
            &format!("2026-01-01T00-00-{:02}-{:03}Z", n / 100, n),
            &format!("m{n}"),
        );
    }
    std::thread::sleep(SETTLE);
    for round in 0..3 {
        if round == 1 {
            // Half the runs changed, and no cache: every listing rebuilds it at once.
            for n in (0..300).step_by(2) {
                let dir = runs.join(format!("2026-01-01T00-00-{:02}-{:03}Z", n / 100, n));
                replace_session_json(
                    &dir,
                    &session_bytes(
                        &format!("s-{n}"),
                        Some("2026-02-01T00:00:00Z"),
                        &format!("new{n}"),
                    ),
                );
            }
            fs::remove_file(runs.join(LIST_CACHE)).unwrap();
        }
        let expected = uncached(&runs);
        assert_eq!(expected.len(), 300);
        let barrier = Arc::new(Barrier::new(6));
        let threads: Vec<_> = (0..6)
            .map(|_| {
                let runs = Arc::clone(&runs);
                let barrier = Arc::clone(&barrier);
                std::thread::spawn(move || {
                    barrier.wait();
                    (0..4)
                        .map(|_| list_runs(&runs).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for thread in threads {
            for list in thread.join().unwrap() {
                assert_eq!(list.runs, expected, "round {round}");
                assert!(list.warnings.is_empty());
            }
        }
        assert_eq!(list_runs(&runs).unwrap().runs, expected);
    }
    let leftovers = fs::read_dir(tmp.path())
        .unwrap()
        .filter(|entry| {
            entry
                .as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".tmp")
        })
        .count();
    assert_eq!(leftovers, 0);
}
