//! A cache of what `list_runs` read from each run (its `.summary.json`, or its
//! `session.json`), kept in `<runs_dir>/.list-cache.json`, so that a listing of
//! thousands of runs stats one file per run instead of opening and reading it.
//!
//! It is only a cache: an entry is used when the file it was read from still has the
//! same fingerprint (device, inode, size, modification and change times to the
//! nanosecond). A replaced file has a new inode; an in-place write (the run store
//! rewrites `.summary.json` that way) changes the change time, which no program can
//! set back. A cache that is missing, corrupt, from another format or
//! version, not private, or unreadable is ignored and rebuilt; failing to write it never
//! fails a listing.
//!
//! One race is closed by never caching a file changed too recently (git's "racy
//! clean" problem): file times come from a coarse kernel clock, so a write just after a
//! file was read could leave the same times and size. A file is cached only when its
//! change time is more than [`RACY_MARGIN`] older than the start of the listing; any
//! later write then gets a change time after the listing started, which differs.

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::run::RunSummary;
use reprise_session::validate_id;

/// The cache's file name in the runs directory. Its leading `.` keeps it from ever
/// being taken for a run (run names start with a letter or digit).
pub const LIST_CACHE: &str = ".list-cache.json";

/// Bumped whenever what the cache holds or means changes.
const FORMAT: u32 = 2;

/// How much older than the listing a file's change time must be for it to be cached:
/// more than the tick of any file system clock that list_runs is meant for.
pub(crate) const RACY_MARGIN: Duration = Duration::from_secs(1);

/// The largest cache file read; a bigger one is ignored (and rebuilt smaller or not
/// at all), so a damaged file cannot make a listing allocate without bound.
const MAX_CACHE_BYTES: u64 = 256 * 1024 * 1024;

/// What identifies one version of a `session.json`: device, inode, size,
/// modification and change times (seconds and nanoseconds). One-letter keys keep
/// the cache small and quick to parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Fingerprint {
    #[serde(rename = "d")]
    dev: u64,
    #[serde(rename = "i")]
    ino: u64,
    #[serde(rename = "s")]
    size: u64,
    #[serde(rename = "m")]
    mtime: i64,
    #[serde(rename = "mn")]
    mtime_ns: i64,
    #[serde(rename = "c")]
    ctime: i64,
    #[serde(rename = "cn")]
    ctime_ns: i64,
}

impl Fingerprint {
    /// The fingerprint of the file at `path` relative to the open directory `dir`
    /// (a link itself, not what it points to: reading it is refused later): one
    /// `statat`, which walks two path components instead of the whole path from the
    /// root.
    pub(crate) fn stat_at(dir: &fs::File, path: &str) -> std::io::Result<Fingerprint> {
        let stat = rustix::fs::statat(dir, path, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)?;
        Ok(Fingerprint::from_stat(&stat))
    }

    // The field types of `stat` differ between targets; on some the casts are no-ops.
    #[allow(clippy::unnecessary_cast, clippy::cast_possible_wrap)]
    fn from_stat(stat: &rustix::fs::Stat) -> Fingerprint {
        Fingerprint {
            dev: stat.st_dev as u64,
            ino: stat.st_ino as u64,
            size: stat.st_size as u64,
            mtime: stat.st_mtime as i64,
            mtime_ns: stat.st_mtime_nsec as i64,
            ctime: stat.st_ctime as i64,
            ctime_ns: stat.st_ctime_nsec as i64,
        }
    }

    /// The modification time, which stands in for a missing `updatedAt`.
    pub(crate) fn modified(&self) -> Result<Timestamp, jiff::Error> {
        Timestamp::new(self.mtime, i32::try_from(self.mtime_ns).unwrap_or(0))
    }

    fn changed_before(&self, limit: Limit) -> bool {
        i128::from(self.ctime) * 1_000_000_000 + i128::from(self.ctime_ns) < limit.0
    }
}

/// Files changed at or after this instant (nanoseconds since the epoch) are not
/// cached.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limit(i128);

impl Limit {
    /// The limit for a listing that starts now.
    pub(crate) fn now() -> Limit {
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        Limit(since_epoch.as_nanos() as i128 - RACY_MARGIN.as_nanos() as i128)
    }
}

/// One run's summary as the cache keeps it, with the fingerprint it was read at.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct CachedRun {
    #[serde(rename = "f")]
    fingerprint: Fingerprint,
    /// The fingerprint of `labels.json` when the run had one.
    #[serde(rename = "k", default, skip_serializing_if = "Option::is_none")]
    labels: Option<Fingerprint>,
    #[serde(rename = "s")]
    session_id: String,
    /// `updated_at` as seconds and nanoseconds: cheaper to parse than RFC 3339.
    #[serde(rename = "u")]
    updated_at: (i64, i32),
    #[serde(rename = "l", default, skip_serializing_if = "Option::is_none")]
    last_message: Option<String>,
    #[serde(rename = "p", default, skip_serializing_if = "Option::is_none")]
    first_message: Option<String>,
    #[serde(rename = "t", default, skip_serializing_if = "Option::is_none")]
    title: Option<String>,
    #[serde(rename = "g", default, skip_serializing_if = "Vec::is_empty")]
    tags: Vec<String>,
    #[serde(rename = "n")]
    message_count: u64,
    /// The conversation's length the summary describes (see `SummaryRecord`).
    #[serde(rename = "b", default, skip_serializing_if = "Option::is_none")]
    conversation_bytes: Option<u64>,
}

impl CachedRun {
    /// What to cache for `summary`, read from a file with `fingerprint` (and labels
    /// with `labels`); `None` when either changed too recently to be trusted later
    /// (see the module doc).
    pub(crate) fn new(
        fingerprint: Fingerprint,
        labels: Option<Fingerprint>,
        summary: &RunSummary,
        conversation_bytes: Option<u64>,
        limit: Limit,
    ) -> Option<CachedRun> {
        if !fingerprint.changed_before(limit)
            || labels.is_some_and(|labels| !labels.changed_before(limit))
        {
            return None;
        }
        Some(CachedRun {
            fingerprint,
            labels,
            first_message: summary.first_message.clone(),
            title: summary.title.clone(),
            tags: summary.tags.clone(),
            session_id: summary.session_id.clone(),
            updated_at: (
                summary.updated_at.as_second(),
                summary.updated_at.subsec_nanosecond(),
            ),
            last_message: summary.last_message.clone(),
            message_count: summary.message_count,
            conversation_bytes,
        })
    }

    /// The cached summary for the run in `dir`, if the file (and its labels) still
    /// have the fingerprint they were read at and the conversation the length it
    /// describes; the entry's strings move into it, and [`Unchanged`] keeps what is
    /// needed to cache it again.
    pub(crate) fn into_summary_if_unchanged(
        self,
        fingerprint: &Fingerprint,
        labels: Option<&Fingerprint>,
        conversation: Option<u64>,
        dir: PathBuf,
    ) -> Option<(RunSummary, Unchanged)> {
        if self.fingerprint != *fingerprint || self.labels.as_ref() != labels {
            return None;
        }
        if let (Some(expected), Some(found)) = (self.conversation_bytes, conversation)
            && expected != found
        {
            return None;
        }
        let updated_at = Timestamp::new(self.updated_at.0, self.updated_at.1).ok()?;
        let unchanged = Unchanged {
            fingerprint: self.fingerprint,
            labels: self.labels,
            conversation_bytes: self.conversation_bytes,
        };
        let summary = RunSummary {
            dir,
            session_id: self.session_id,
            updated_at,
            last_message: self.last_message,
            first_message: self.first_message,
            message_count: self.message_count,
            title: self.title,
            tags: self.tags,
        };
        Some((summary, unchanged))
    }

    /// The entry [`CachedRun::into_summary_if_unchanged`] gave `summary` from, again.
    pub(crate) fn again(unchanged: Unchanged, summary: &RunSummary) -> CachedRun {
        CachedRun {
            fingerprint: unchanged.fingerprint,
            labels: unchanged.labels,
            session_id: summary.session_id.clone(),
            updated_at: (
                summary.updated_at.as_second(),
                summary.updated_at.subsec_nanosecond(),
            ),
            last_message: summary.last_message.clone(),
            first_message: summary.first_message.clone(),
            title: summary.title.clone(),
            tags: summary.tags.clone(),
            message_count: summary.message_count,
            conversation_bytes: unchanged.conversation_bytes,
        }
    }
}

/// What a cache entry used by a listing was checked against: with the summary it
/// gave, all that is needed to write the entry back (a listing that rewrites the
/// cache keeps the entries it used), without copying its strings when it does not.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Unchanged {
    fingerprint: Fingerprint,
    labels: Option<Fingerprint>,
    conversation_bytes: Option<u64>,
}

/// Run folder name → cached summary. With a fast hash: a listing of 100,000 runs
/// looks up each once, and SipHash was a tenth of reading the cache.
pub(crate) type Cache = HashMap<String, CachedRun, foldhash::fast::RandomState>;

#[derive(Serialize, Deserialize)]
struct CacheFile {
    format: u32,
    version: String,
    runs: Cache,
}

/// The cache of `runs_dir`, or an empty one when there is none that can be trusted.
pub(crate) fn load(runs_dir: &Path) -> Cache {
    match try_load(runs_dir) {
        Ok(Some(cache)) => cache,
        Ok(None) => Cache::default(),
        Err(error) => {
            tracing::debug!(dir = %runs_dir.display(), %error, "run list cache not used");
            Cache::default()
        }
    }
}

fn try_load(runs_dir: &Path) -> std::io::Result<Option<Cache>> {
    let path = runs_dir.join(LIST_CACHE);
    // A link in its place is never read (nor written through: see `try_store`).
    let mut file = match reprise_session::fs::open_read_beneath(runs_dir, &path) {
        Ok(Some(file)) => file,
        Ok(None) => return Ok(None),
        Err(error) => return Err(std::io::Error::other(error)),
    };
    let meta = file.metadata()?;
    // Only a private regular file of ours is trusted: another user able to write it
    // could otherwise make the listing show anything.
    if !meta.is_file() || meta.mode() & 0o077 != 0 || meta.len() > MAX_CACHE_BYTES {
        return Ok(None);
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize + 1);
    file.read_to_end(&mut bytes)?;
    let Ok(cache) = serde_json::from_slice::<CacheFile>(&bytes) else {
        return Ok(None);
    };
    if cache.format != FORMAT || cache.version != env!("CARGO_PKG_VERSION") {
        return Ok(None);
    }
    // The ids were valid when cached; a cache with one that is not was not written by
    // this code, and is dropped whole.
    if cache.runs.iter().any(|(name, run)| {
        validate_id("run", name).is_err() || validate_id("session", &run.session_id).is_err()
    }) {
        return Ok(None);
    }
    Ok(Some(cache.runs))
}

/// Distinguishes the temporary files of concurrent writers in one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Replaces the cache of `runs_dir` with `runs`: written 0600 to a hidden temporary
/// file, then renamed over the old one, so a reader sees the old cache or the new one,
/// never a mix. Not synced: after a crash the worst case is a cache that is ignored.
pub(crate) fn store(runs_dir: &Path, runs: Cache) {
    if let Err(error) = try_store(runs_dir, runs) {
        tracing::debug!(dir = %runs_dir.display(), %error, "run list cache not written");
    }
}

fn try_store(runs_dir: &Path, runs: Cache) -> std::io::Result<()> {
    let file = CacheFile {
        format: FORMAT,
        version: env!("CARGO_PKG_VERSION").to_owned(),
        runs,
    };
    let bytes = serde_json::to_vec(&file).map_err(std::io::Error::other)?;
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
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(dir: &Path) -> RunSummary {
        RunSummary {
            dir: dir.to_path_buf(),
            session_id: "s1".into(),
            updated_at: Timestamp::new(1_780_000_000, 123_456_789).unwrap(),
            last_message: Some("hello".into()),
            first_message: Some("hi".into()),
            message_count: 3,
            title: Some("a title".into()),
            tags: vec!["t".into()],
        }
    }

    #[test]
    fn a_file_changed_within_the_margin_is_not_cached_and_an_older_one_is() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("f"), "x").unwrap();
        let dir = fs::File::open(tmp.path()).unwrap();
        let fingerprint = Fingerprint::stat_at(&dir, "f").unwrap();
        let run = summary(tmp.path());
        assert!(CachedRun::new(fingerprint, None, &run, None, Limit::now()).is_none());
        let later = Limit(Limit::now().0 + 2 * RACY_MARGIN.as_nanos() as i128);
        let cached = CachedRun::new(fingerprint, None, &run, Some(10), later).unwrap();
        let (again, unchanged) = cached
            .clone()
            .into_summary_if_unchanged(&fingerprint, None, Some(10), tmp.path().to_path_buf())
            .unwrap();
        assert_eq!(again, run);
        assert_eq!(CachedRun::again(unchanged, &again), cached);
        // The conversation at another length than the summary describes.
        assert_eq!(
            cached.clone().into_summary_if_unchanged(
                &fingerprint,
                None,
                Some(0),
                tmp.path().to_path_buf()
            ),
            None
        );
        let mut other = fingerprint;
        other.ctime_ns += 1;
        assert_eq!(
            cached.into_summary_if_unchanged(&other, None, Some(10), tmp.path().to_path_buf()),
            None
        );
    }

    #[test]
    fn a_stored_cache_loads_back_and_one_from_another_version_does_not() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("f"), "x").unwrap();
        let dir = fs::File::open(tmp.path()).unwrap();
        let fingerprint = Fingerprint::stat_at(&dir, "f").unwrap();
        let later = Limit(Limit::now().0 + 2 * RACY_MARGIN.as_nanos() as i128);
        let cached = CachedRun::new(fingerprint, None, &summary(tmp.path()), None, later).unwrap();
        let runs: Cache = [("2026-01-01T00-00-00-000Z".to_owned(), cached)]
            .into_iter()
            .collect();
        store(tmp.path(), runs.clone());
        assert_eq!(load(tmp.path()), runs);

        let text = fs::read_to_string(tmp.path().join(LIST_CACHE)).unwrap();
        let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
        value["version"] = "0.0.0-other".into();
        fs::write(tmp.path().join(LIST_CACHE), value.to_string()).unwrap();
        assert!(load(tmp.path()).is_empty());
    }
}
