//! The stat cache: for each captured path, the file status it had and the object
//! its content was stored as, so that a checkpoint reads again only the files whose
//! status changed.
//!
//! Git's rule for "racy" entries applies: a file modified in the same tick of the
//! file system's clock as the cache was written could change again without its
//! status changing, so an entry whose modification time is not older than the
//! cache file's own is not trusted (the file is read again, and the next cache,
//! written later, trusts it).

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};

use crate::error::CheckpointError;
use crate::id::ObjectId;
use crate::scan::FileStat;

/// The largest cache read (about 2 million paths).
const CACHE_LIMIT: u64 = 256 << 20;

const FORMAT: u32 = 1;

/// What the cache knows about one path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Known {
    pub(crate) stat: FileStat,
    pub(crate) id: ObjectId,
}

/// The cache in memory.
#[derive(Default)]
pub(crate) struct StatCache {
    pub(crate) entries: HashMap<PathBuf, Known>,
}

/// One entry as written: `[path, size, mtime s, mtime ns, ctime s, ctime ns, inode,
/// mode, object]`.
type CacheLine = (String, u64, i64, u32, i64, u32, u64, u32, ObjectId);

#[derive(serde::Serialize, serde::Deserialize)]
struct CacheFile {
    format: u32,
    entries: Vec<CacheLine>,
}

impl StatCache {
    /// The object of `path` when its status is `stat` and the cache knows it.
    pub(crate) fn get(&self, path: &Path, stat: &FileStat) -> Option<ObjectId> {
        self.entries
            .get(path)
            .filter(|known| known.stat == *stat)
            .map(|known| known.id)
    }

    /// Reads the cache at `path`. A missing, unreadable, damaged or foreign cache
    /// (not a private file of this user) is an empty one: it is only a shortcut.
    pub(crate) fn load(path: &Path) -> Self {
        Self::try_load(path).unwrap_or_default()
    }

    fn try_load(path: &Path) -> Option<Self> {
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        let file = std::fs::File::from(fd);
        let meta = file.metadata().ok()?;
        if !meta.is_file()
            || meta.mode() & 0o077 != 0
            || meta.uid() != rustix::process::geteuid().as_raw()
        {
            return None;
        }
        let written = (meta.mtime(), u32::try_from(meta.mtime_nsec()).ok()?);
        let mut bytes = Vec::new();
        file.take(CACHE_LIMIT).read_to_end(&mut bytes).ok()?;
        let parsed: CacheFile = serde_json::from_slice(&bytes).ok()?;
        if parsed.format != FORMAT {
            return None;
        }
        let entries = parsed
            .entries
            .into_iter()
            .filter(|entry| (entry.2, entry.3) < written)
            .map(|(path, size, ms, mns, cs, cns, ino, mode, id)| {
                let stat = FileStat {
                    size,
                    mtime: (ms, mns),
                    ctime: (cs, cns),
                    ino,
                    mode,
                };
                (PathBuf::from(path), Known { stat, id })
            })
            .collect();
        Some(Self { entries })
    }

    /// Writes the cache to `path`: a private temporary file renamed over it. Not
    /// synced: a cache lost in a crash is rebuilt by reading the files.
    pub(crate) fn save(&mut self, path: &Path) -> Result<(), CheckpointError> {
        let entries = self
            .entries
            .iter()
            .filter_map(|(path, known)| {
                let text = path.to_str()?.to_owned();
                let stat = known.stat;
                Some((
                    text,
                    stat.size,
                    stat.mtime.0,
                    stat.mtime.1,
                    stat.ctime.0,
                    stat.ctime.1,
                    stat.ino,
                    stat.mode,
                    known.id,
                ))
            })
            .collect();
        let bytes = serde_json::to_vec(&CacheFile {
            format: FORMAT,
            entries,
        })
        .map_err(|error| CheckpointError::io("encode", path, error))?;
        crate::store_file::replace(path, &bytes, false)?;
        // The copy kept in memory follows the same rule as the file read back.
        match std::fs::metadata(path) {
            Ok(meta) => {
                let written = (meta.mtime(), u32::try_from(meta.mtime_nsec()).unwrap_or(0));
                self.entries.retain(|_, known| known.stat.mtime < written);
            }
            Err(_) => self.entries.clear(),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(mtime: i64) -> FileStat {
        FileStat {
            size: 3,
            mtime: (mtime, 0),
            ctime: (mtime, 0),
            ino: 7,
            mode: 0o100644,
        }
    }

    #[test]
    fn entries_not_older_than_the_cache_are_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cache.json");
        let mut cache = StatCache::default();
        let id = ObjectId::of(b"abc");
        cache.entries.insert(
            PathBuf::from("old"),
            Known {
                stat: stat(1_000),
                id,
            },
        );
        cache.entries.insert(
            PathBuf::from("racy"),
            Known {
                stat: stat(i64::MAX / 2),
                id,
            },
        );
        cache.save(&path).unwrap();
        let loaded = StatCache::load(&path);
        assert_eq!(loaded.get(Path::new("old"), &stat(1_000)), Some(id));
        assert_eq!(loaded.get(Path::new("old"), &stat(1_001)), None);
        assert_eq!(loaded.get(Path::new("racy"), &stat(i64::MAX / 2)), None);
        // A cache others may write is not trusted.
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o666))
            .unwrap();
        assert!(StatCache::load(&path).entries.is_empty());
        std::fs::write(dir.path().join("bad.json"), "{").unwrap();
        assert!(
            StatCache::load(&dir.path().join("bad.json"))
                .entries
                .is_empty()
        );
    }
}
