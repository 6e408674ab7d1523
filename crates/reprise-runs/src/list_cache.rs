//! A cache of what `list_runs` read from each run (its `.summary.json`, or its
//! `session.json`), kept in `<runs_dir>/.list-cache`, so that a listing of
//! thousands of runs stats the files of each run instead of opening and reading
//! them, and reads one file in a compact layout ([`list_cache_codec`]) instead of
//! parsing JSON.
//!
//! It is only a cache: an entry is used when the file it was read from still has the
//! same [`Fingerprint`], and so do the run's labels and conversation length. A cache
//! that is missing, damaged, from another format or version, not a private file of
//! this user, or unreadable is ignored and rebuilt; failing to write it never fails a
//! listing.
//!
//! [`list_cache_codec`]: crate::list_cache_codec

use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::fingerprint::{Fingerprint, Limit};
use crate::list_cache_codec::{self, CachedRun, Entries, Stamp};
use crate::run::RunSummary;
use reprise_session::validate_id;

/// The cache's file name in the runs directory. Its leading `.` keeps it from ever
/// being taken for a run (run names start with a letter or digit).
pub const LIST_CACHE: &str = ".list-cache";

/// The JSON cache of earlier versions, removed when the cache is written.
const OLD_LIST_CACHE: &str = ".list-cache.json";

/// The largest cache file read; a bigger one is ignored (and rebuilt smaller or not
/// at all), so a damaged file cannot make a listing allocate without bound.
const MAX_CACHE_BYTES: u64 = 256 * 1024 * 1024;

/// The stamp of a summary read from a file with `fingerprint`, labels with `labels`,
/// describing a conversation of `conversation_bytes`; `None` when a file changed
/// too recently for a later listing to tell a write apart (see [`Limit`]).
pub(crate) fn stamp(
    fingerprint: Fingerprint,
    labels: Option<Fingerprint>,
    conversation_bytes: Option<u64>,
    limit: Limit,
) -> Option<Stamp> {
    (fingerprint.changed_before(limit) && labels.is_none_or(|labels| labels.changed_before(limit)))
        .then_some(Stamp {
            fingerprint,
            labels,
            conversation_bytes,
        })
}

/// The summary `cached` holds for the run in `dir`, when the file it was read from
/// (and the labels) still have the fingerprints they were read at and the
/// conversation (`conversation`: its length now) is the length the summary
/// describes; with the stamp to cache it under again.
pub(crate) fn summary_if_unchanged(
    cached: &CachedRun<'_>,
    fingerprint: &Fingerprint,
    labels: Option<&Fingerprint>,
    conversation: Option<u64>,
    dir: PathBuf,
) -> Option<(RunSummary, Stamp)> {
    let stamp = cached.stamp;
    if stamp.fingerprint != *fingerprint || stamp.labels.as_ref() != labels {
        return None;
    }
    if let (Some(expected), Some(found)) = (stamp.conversation_bytes, conversation)
        && expected != found
    {
        return None;
    }
    // Ids were valid when cached: one that is not was not written by this code.
    validate_id("session", cached.session_id).ok()?;
    let summary = RunSummary {
        dir,
        session_id: cached.session_id.to_owned(),
        updated_at: cached.updated_at,
        last_message: cached.last_message.map(str::to_owned),
        first_message: cached.first_message.map(str::to_owned),
        message_count: cached.message_count,
        title: cached.title.map(str::to_owned),
        tags: cached.tags(),
    };
    Some((summary, stamp))
}

/// The bytes of the cache of `runs_dir`, when there is one that can be trusted to
/// be ours; decode them with [`entries`].
pub(crate) fn load(runs_dir: &Path) -> Option<Vec<u8>> {
    match try_load(runs_dir) {
        Ok(bytes) => bytes,
        Err(error) => {
            tracing::debug!(dir = %runs_dir.display(), %error, "run list cache not used");
            None
        }
    }
}

/// The entries of cache `bytes` (from [`load`]); none when they are damaged or from
/// another format or version.
pub(crate) fn entries(bytes: Option<&[u8]>) -> Entries<'_> {
    bytes
        .and_then(|bytes| list_cache_codec::decode(bytes, env!("CARGO_PKG_VERSION")))
        .unwrap_or_default()
}

fn try_load(runs_dir: &Path) -> std::io::Result<Option<Vec<u8>>> {
    let path = runs_dir.join(LIST_CACHE);
    // A link in its place is never read (nor written through: see `try_store`).
    let mut file = match reprise_session::fs::open_read_beneath(runs_dir, &path) {
        Ok(Some(file)) => file,
        Ok(None) => return Ok(None),
        Err(error) => return Err(std::io::Error::other(error)),
    };
    let meta = file.metadata()?;
    // Only a private regular file of this user is trusted: another user able to
    // write it could otherwise make the listing show anything.
    if !meta.is_file()
        || meta.mode() & 0o077 != 0
        || meta.uid() != rustix::process::geteuid().as_raw()
        || meta.len() > MAX_CACHE_BYTES
    {
        return Ok(None);
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize + 1);
    file.read_to_end(&mut bytes)?;
    Ok(Some(bytes))
}

/// Distinguishes the temporary files of concurrent writers in one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Replaces the cache of `runs_dir` with `runs` (folder name, stamp, summary):
/// written 0600 to a hidden temporary file, then renamed over the old one, so a
/// reader sees the old cache or the new one, never a mix. Not synced: after a crash
/// the worst case is a cache that is ignored.
pub(crate) fn store<'a>(
    runs_dir: &Path,
    runs: impl ExactSizeIterator<Item = (&'a str, &'a Stamp, &'a RunSummary)>,
) {
    if let Err(error) = try_store(runs_dir, runs) {
        tracing::debug!(dir = %runs_dir.display(), %error, "run list cache not written");
    }
}

fn try_store<'a>(
    runs_dir: &Path,
    runs: impl ExactSizeIterator<Item = (&'a str, &'a Stamp, &'a RunSummary)>,
) -> std::io::Result<()> {
    let bytes = list_cache_codec::encode(env!("CARGO_PKG_VERSION"), runs)
        .ok_or_else(|| std::io::Error::other("a run too large for the list cache"))?;
    let temp: PathBuf = runs_dir.join(format!(
        "{LIST_CACHE}.{}.{}.tmp",
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temp)
        .and_then(|mut out| out.write_all(&bytes))
        .and_then(|()| fs::rename(&temp, runs_dir.join(LIST_CACHE)));
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    // What earlier versions cached is of no more use.
    let _ = fs::remove_file(runs_dir.join(OLD_LIST_CACHE));
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    use crate::fingerprint::RACY_MARGIN;
    use jiff::Timestamp;

    fn summary(dir: &Path, last: &str) -> RunSummary {
        RunSummary {
            dir: dir.to_path_buf(),
            session_id: "s1".into(),
            updated_at: Timestamp::new(1_780_000_000, 123_456_789).unwrap(),
            last_message: Some(last.into()),
            first_message: Some("hi".into()),
            message_count: 3,
            title: Some("a title".into()),
            tags: vec!["t".into()],
        }
    }

    fn later() -> Limit {
        Limit(Limit::now().0 + 2 * RACY_MARGIN.as_nanos() as i128)
    }

    #[test]
    fn a_file_changed_within_the_margin_is_not_stamped_and_an_older_one_is() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("f"), "x").unwrap();
        let dir = fs::File::open(tmp.path()).unwrap();
        let fingerprint = Fingerprint::stat_at(&dir, "f").unwrap();
        assert!(stamp(fingerprint, None, None, Limit::now()).is_none());
        assert!(stamp(fingerprint, Some(fingerprint), None, Limit::now()).is_none());
        assert!(stamp(fingerprint, None, Some(10), later()).is_some());
    }

    #[test]
    fn a_cached_summary_is_used_only_while_its_files_are_unchanged() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("f"), "x").unwrap();
        let dir = fs::File::open(tmp.path()).unwrap();
        let fingerprint = Fingerprint::stat_at(&dir, "f").unwrap();
        let run = summary(tmp.path(), "hello");
        let stamped = stamp(fingerprint, None, Some(10), later()).unwrap();
        store(tmp.path(), [("r", &stamped, &run)].into_iter());
        let bytes = load(tmp.path()).unwrap();
        let entries = entries(Some(&bytes));
        let cached = &entries["r"];
        let dir_of = || tmp.path().to_path_buf();
        assert_eq!(
            summary_if_unchanged(cached, &fingerprint, None, Some(10), dir_of()),
            Some((run, stamped))
        );
        // The conversation at another length than the summary describes.
        assert_eq!(
            summary_if_unchanged(cached, &fingerprint, None, Some(0), dir_of()),
            None
        );
        // Labels that appeared.
        assert_eq!(
            summary_if_unchanged(cached, &fingerprint, Some(&fingerprint), Some(10), dir_of()),
            None
        );
        let mut other = fingerprint;
        other.ctime_ns += 1;
        assert_eq!(
            summary_if_unchanged(cached, &other, None, Some(10), dir_of()),
            None
        );
    }

    #[test]
    fn only_a_private_cache_is_loaded_and_the_old_json_one_is_removed() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("f"), "x").unwrap();
        fs::write(tmp.path().join(OLD_LIST_CACHE), "{}").unwrap();
        let dir = fs::File::open(tmp.path()).unwrap();
        let fingerprint = Fingerprint::stat_at(&dir, "f").unwrap();
        // A cache that matches the file but says what the file does not: only
        // its permissions tell it from ours.
        let planted = summary(tmp.path(), "planted");
        let stamped = stamp(fingerprint, None, None, later()).unwrap();
        store(tmp.path(), [("r", &stamped, &planted)].into_iter());
        assert!(!tmp.path().join(OLD_LIST_CACHE).exists());
        let cache = tmp.path().join(LIST_CACHE);
        assert_eq!(
            fs::metadata(&cache).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(load(tmp.path()).is_some());
        for mode in [0o640, 0o604, 0o660] {
            fs::set_permissions(&cache, fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(load(tmp.path()), None, "mode {mode:o}");
        }
    }
}
