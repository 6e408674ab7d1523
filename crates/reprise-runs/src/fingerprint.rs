//! What identifies one version of a file without reading it (device, inode, size,
//! modification and change times to the nanosecond), and the instant before which a
//! file's times can be trusted to tell a later write apart.
//!
//! A replaced file has a new inode; an in-place write changes the change time,
//! which no program can set back. File times come from a coarse kernel clock, so a
//! write just after a file was read could leave the same times and size (git's
//! "racy clean" problem): a file is trusted to be unchanged only when its change time
//! is more than [`RACY_MARGIN`] older than the start of the listing that read it.

use std::fs;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jiff::Timestamp;

/// How much older than the listing a file's change time must be for it to be cached:
/// more than the tick of any file system clock that list_runs is meant for.
pub(crate) const RACY_MARGIN: Duration = Duration::from_secs(1);

/// One version of a file: device, inode, size, modification and change times
/// (seconds and nanoseconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) size: u64,
    pub(crate) mtime: i64,
    pub(crate) mtime_ns: i64,
    pub(crate) ctime: i64,
    pub(crate) ctime_ns: i64,
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

    /// Whether the file last changed before `limit`.
    pub(crate) fn changed_before(&self, limit: Limit) -> bool {
        i128::from(self.ctime) * 1_000_000_000 + i128::from(self.ctime_ns) < limit.0
    }
}

/// Files changed at or after this instant (nanoseconds since the epoch) are not
/// cached.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limit(pub(crate) i128);

impl Limit {
    /// The limit for a listing that starts now.
    pub(crate) fn now() -> Limit {
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        Limit(since_epoch.as_nanos() as i128 - RACY_MARGIN.as_nanos() as i128)
    }
}
