//! The checkpoint store of one run: capture, restore, recover, materialize, share.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::apply::{self, Diff};
use crate::capture::{self, Flat, Sink};
use crate::error::{CheckpointError, io_err};
use crate::folder::Folder;
use crate::id::{CheckpointId, ObjectId};
use crate::journal::{self, Journal};
use crate::objects::Objects;
use crate::record::{self, FORMAT, Record, RecordKind};
use crate::scan::{self, ScanLimits};
use crate::share;
use crate::stat_cache::StatCache;
use crate::store_file::{self, HEAD_NAME};
use crate::tree::Kind;

/// Files larger than this (10 MiB) are not captured unless
/// [`CaptureOptions::max_file_size`] says otherwise.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 10 << 20;

/// The name of the store's folder in a run folder: `<run>/checkpoints`.
pub const STORE_DIR_NAME: &str = "checkpoints";

/// What a checkpoint captures.
#[derive(Debug, Clone)]
pub struct CaptureOptions {
    /// Files larger than this are not captured (nor touched by a restore).
    pub max_file_size: u64,
    /// Paths not captured, nor walked into, nor touched by a restore: the runs
    /// folder. Relative paths are relative to the working folder. The store's own
    /// folder is always left out.
    pub exclude: Vec<PathBuf>,
}

impl Default for CaptureOptions {
    fn default() -> Self {
        Self {
            max_file_size: DEFAULT_MAX_FILE_SIZE,
            exclude: Vec::new(),
        }
    }
}

/// A checkpoint: its id and what its capture counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The checkpoint's id.
    pub id: CheckpointId,
    /// When it was taken.
    pub created_at: jiff::Timestamp,
    /// Files and links captured.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Paths left out by `.gitignore` rules (an ignored folder counts once).
    pub skipped_ignored: u64,
    /// Files left out for being over the size limit.
    pub skipped_large: u64,
    /// FIFOs, sockets and devices left out.
    pub skipped_special: u64,
    /// Bytes this checkpoint added to the store (new contents and trees).
    pub added_bytes: u64,
}

/// What a restore to a checkpoint does, path by path (relative to the working
/// folder), before it does it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestorePreview {
    /// Files that exist and get the checkpoint's content or mode back.
    pub restored: Vec<PathBuf>,
    /// Files the checkpoint has and the folder does not: created.
    pub created: Vec<PathBuf>,
    /// Captured files the checkpoint does not have: deleted.
    pub deleted: Vec<PathBuf>,
    /// Files of the checkpoint whose path holds something not captured (an ignored
    /// or large file): left as they are.
    pub kept: Vec<PathBuf>,
    /// Captured files that changed since the store's latest checkpoint (or restore):
    /// changes made outside reprise. The restore's undo point keeps them.
    pub changed_outside: Vec<PathBuf>,
}

/// What a restore did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    /// The checkpoint of the folder taken just before the restore: restoring it
    /// undoes the restore.
    pub undo: CheckpointId,
    /// What was restored, created, deleted and kept.
    pub preview: RestorePreview,
}

/// What a checkpoint materialized into a folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Materialized {
    /// Files and links written.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// The checkpoints of one working folder, kept in one run's store folder.
///
/// One writer at a time: the holder of the run's writer lock. The methods that
/// change the folder or the store take `&mut self`.
pub struct CheckpointStore {
    dir: PathBuf,
    folder: Folder,
    objects: Objects,
    max_file_size: u64,
    exclude: Vec<PathBuf>,
    /// The stat cache as last read or written (read from its file once).
    cache: Option<StatCache>,
}

impl std::fmt::Debug for CheckpointStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckpointStore")
            .field("dir", &self.dir)
            .field("workdir", &self.folder.path())
            .finish_non_exhaustive()
    }
}

impl CheckpointStore {
    /// Opens (creating) the store `dir` (usually `<run>/checkpoints`, see
    /// [`STORE_DIR_NAME`]) for the working folder `workdir`. A restore a crash
    /// interrupted is rolled forward by the next operation, or by [`recover`].
    ///
    /// [`recover`]: CheckpointStore::recover
    pub fn open(
        dir: impl AsRef<Path>,
        workdir: impl AsRef<Path>,
        options: CaptureOptions,
    ) -> Result<Self, CheckpointError> {
        let objects = Objects::open(dir.as_ref())?;
        let dir = std::fs::canonicalize(dir.as_ref()).map_err(io_err("open", dir.as_ref()))?;
        let folder = Folder::open(workdir.as_ref())?;
        let mut exclude = Vec::new();
        for path in options.exclude.iter().chain(std::iter::once(&dir)) {
            let full = folder.path().join(path);
            let full = std::fs::canonicalize(&full).unwrap_or(full);
            if let Ok(rel) = full.strip_prefix(folder.path())
                && !rel.as_os_str().is_empty()
            {
                exclude.push(rel.to_path_buf());
            }
        }
        Ok(Self {
            dir,
            folder,
            objects,
            max_file_size: options.max_file_size,
            exclude,
            cache: None,
        })
    }

    /// The store's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The working folder (absolute, links resolved).
    pub fn workdir(&self) -> &Path {
        self.folder.path()
    }

    fn head_path(&self) -> PathBuf {
        self.dir.join(HEAD_NAME)
    }

    fn journal_path(&self) -> PathBuf {
        self.dir.join("restore.journal")
    }

    fn cache_path(&self) -> PathBuf {
        self.dir.join("stat-cache.json")
    }

    /// Records the working folder's captured files as a new checkpoint. Its objects
    /// are durable when this returns; the caller then records the id (one durable
    /// entry in the conversation), which is what makes the checkpoint part of the
    /// run.
    pub fn checkpoint(&mut self) -> Result<Checkpoint, CheckpointError> {
        self.recover()?;
        let (checkpoint, _, _) = self.capture_and_store()?;
        self.set_head(&checkpoint.id)?;
        Ok(checkpoint)
    }

    fn scan_and_capture(
        &mut self,
        store: bool,
    ) -> Result<(capture::Captured, u64, u64), CheckpointError> {
        let limits = ScanLimits {
            max_file_size: self.max_file_size,
            exclude: &self.exclude,
        };
        let scan = scan::scan(&self.folder, &limits)?;
        let (ignored, special) = (scan.ignored, scan.special);
        let cache_path = self.cache_path();
        let cache = self
            .cache
            .get_or_insert_with(|| StatCache::load(&cache_path));
        let sink = if store {
            Sink::Store(&self.objects)
        } else {
            Sink::Discard
        };
        let captured = capture::capture(&self.folder, scan, cache, sink, self.max_file_size)?;
        Ok((captured, ignored, special))
    }

    fn capture_and_store(&mut self) -> Result<(Checkpoint, Flat, ObjectId), CheckpointError> {
        let (mut captured, ignored, special) = self.scan_and_capture(true)?;
        let added_trees_and_files = captured.batch.bytes;
        let record = Record {
            format: FORMAT,
            kind: RecordKind::Checkpoint,
            tree: captured.root,
            created_at: jiff::Timestamp::now(),
            files: captured.files.len() as u64,
            bytes: captured.bytes,
            skipped_ignored: ignored,
            skipped_large: captured.large,
            skipped_special: special,
            added_bytes: added_trees_and_files,
        };
        let bytes = serde_json::to_vec(&record)
            .map_err(|error| CheckpointError::io("encode", &self.dir, error))?;
        let id = ObjectId::of(&bytes);
        // Renamed into place last: a record never names an object not yet there.
        captured.batch.add(&self.objects, id, &bytes)?;
        captured.batch.commit(&self.objects)?;
        if captured.cache_stale {
            captured.cache.save(&self.cache_path())?;
            self.cache = Some(captured.cache);
        }
        let checkpoint = checkpoint_of(CheckpointId(id), &record, bytes.len() as u64);
        Ok((checkpoint, captured.files, captured.root))
    }

    fn set_head(&self, id: &CheckpointId) -> Result<(), CheckpointError> {
        store_file::overwrite(&self.head_path(), format!("{id}\n").as_bytes())
    }

    /// The checkpoint the working folder was last known to equal: the latest one
    /// taken, or the one the latest restore went to.
    pub fn head(&self) -> Result<Option<CheckpointId>, CheckpointError> {
        let Some(bytes) = store_file::read(&self.head_path(), 256)? else {
            return Ok(None);
        };
        let text = String::from_utf8_lossy(&bytes);
        Ok(text.trim().parse().ok())
    }

    fn record(&self, id: &CheckpointId) -> Result<Record, CheckpointError> {
        record::read(&self.objects, id)
    }

    /// The checkpoint `id`, with its counts.
    pub fn get(&self, id: &CheckpointId) -> Result<Checkpoint, CheckpointError> {
        let record = self.record(id)?;
        Ok(checkpoint_of(*id, &record, 0))
    }

    fn files_of(&self, id: &CheckpointId) -> Result<Flat, CheckpointError> {
        let record = self.record(id)?;
        capture::flatten(&self.objects, &record.tree, None)
    }

    /// What restoring `target` would do now, without changing anything.
    pub fn preview(&mut self, target: &CheckpointId) -> Result<RestorePreview, CheckpointError> {
        self.recover()?;
        let target_files = self.files_of(target)?;
        let (captured, _, _) = self.scan_and_capture(false)?;
        self.preview_of(&captured.files, &captured.root, &target_files)
    }

    fn preview_of(
        &self,
        current: &Flat,
        current_root: &ObjectId,
        target: &Flat,
    ) -> Result<RestorePreview, CheckpointError> {
        let Diff {
            restored,
            created,
            deleted,
        } = apply::diff(current, target);
        let mut preview = RestorePreview {
            restored,
            deleted,
            ..RestorePreview::default()
        };
        for path in created {
            if self.folder.occupied(&path)? {
                preview.kept.push(path);
            } else {
                preview.created.push(path);
            }
        }
        // The same root tree as the head's: nothing changed outside.
        if let Some(head) = self.head()?
            && let Ok(record) = self.record(&head)
            && record.tree != *current_root
            && let Ok(head_files) = capture::flatten(&self.objects, &record.tree, None)
        {
            let outside = apply::diff(&head_files, current);
            preview.changed_outside = outside
                .restored
                .into_iter()
                .chain(outside.created)
                .chain(outside.deleted)
                .collect();
            preview.changed_outside.sort();
        }
        Ok(preview)
    }

    /// Makes the working folder's captured files equal the checkpoint `target`:
    /// files restored, created and deleted, modes set, folders the deletions
    /// emptied removed; what is not captured is not touched. A checkpoint of the
    /// folder is taken first (the undo point, in the result); a crash in the middle
    /// is rolled forward by the next operation.
    pub fn restore(&mut self, target: &CheckpointId) -> Result<Restored, CheckpointError> {
        self.recover()?;
        let target_files = self.files_of(target)?;
        let (undo, current, current_root) = self.capture_and_store()?;
        let mut preview = self.preview_of(&current, &current_root, &target_files)?;
        journal::write(
            &self.journal_path(),
            &Journal {
                format: FORMAT,
                from: undo.id,
                target: *target,
            },
        )?;
        let kept = apply::apply(&self.folder, &self.objects, &current, &target_files)?;
        self.finish_restore(target)?;
        preview.created.retain(|path| !kept.contains(path));
        preview.restored.retain(|path| !kept.contains(path));
        for path in kept {
            if !preview.kept.contains(&path) {
                preview.kept.push(path);
            }
        }
        Ok(Restored {
            undo: undo.id,
            preview,
        })
    }

    fn finish_restore(&self, target: &CheckpointId) -> Result<(), CheckpointError> {
        self.set_head(target)?;
        journal::remove(&self.journal_path())
    }

    /// Finishes a restore a crash interrupted (rolls it forward, from its journal)
    /// and removes temporary files that dead processes left; returns the checkpoint
    /// the folder was restored to, if there was such a restore. Every other
    /// operation calls it first.
    pub fn recover(&mut self) -> Result<Option<CheckpointId>, CheckpointError> {
        self.objects.remove_leftovers()?;
        let path = self.journal_path();
        let Some(journal) = journal::read(&path)? else {
            return Ok(None);
        };
        let from = self.files_of(&journal.from)?;
        let target = self.files_of(&journal.target)?;
        apply::apply(&self.folder, &self.objects, &from, &target)?;
        self.finish_restore(&journal.target)?;
        Ok(Some(journal.target))
    }

    /// Writes the files of checkpoint `id` into `dest`, a new or empty folder (a fork
    /// with its files).
    pub fn materialize(
        &self,
        id: &CheckpointId,
        dest: impl AsRef<Path>,
    ) -> Result<Materialized, CheckpointError> {
        let dest = dest.as_ref();
        let files = self.files_of(id)?;
        match std::fs::read_dir(dest) {
            Ok(mut entries) => {
                if entries.next().is_some() {
                    return Err(CheckpointError::NotEmpty {
                        path: dest.to_path_buf(),
                    });
                }
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(dest).map_err(io_err("create", dest))?;
            }
            Err(error) => return Err(io_err("open", dest)(error)),
        }
        let folder = Folder::open(dest)?;
        let (files, bytes) = apply::materialize(&folder, &self.objects, &files)?;
        Ok(Materialized { files, bytes })
    }

    /// Makes the checkpoints `ids` of `source` (another run's store) part of this
    /// store, for a fork: their objects are hard-linked, not copied (copied only
    /// across file systems), so the fork costs no space and survives the source's
    /// deletion. Returns how many objects were added.
    pub fn share_objects_from(
        &mut self,
        source: &CheckpointStore,
        ids: &[CheckpointId],
    ) -> Result<u64, CheckpointError> {
        let added = share::share(&source.objects, &self.objects, ids)?;
        if let Some(last) = ids.last() {
            self.set_head(last)?;
        }
        Ok(added)
    }

    fn reachable(&self, id: &CheckpointId) -> Result<(Vec<ObjectId>, Flat), CheckpointError> {
        let record = self.record(id)?;
        let mut trees = Vec::new();
        let files = capture::flatten(&self.objects, &record.tree, Some(&mut trees))?;
        Ok((trees, files))
    }

    /// Checks that every object of checkpoint `id` is in the store and intact (its
    /// content hashes to its name); returns the files it holds, by path, with the
    /// SHA-256 of each (in hexadecimal) and whether it is executable or a link.
    pub fn verify(&self, id: &CheckpointId) -> Result<BTreeMap<PathBuf, String>, CheckpointError> {
        let (_, files) = self.reachable(id)?;
        let mut out = BTreeMap::new();
        for (path, (kind, object)) in files {
            let mut file = self.objects.open_object(&object)?;
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut file, &mut bytes)
                .map_err(io_err("read", self.objects.dir()))?;
            if ObjectId::of(&bytes) != object {
                return Err(self
                    .objects
                    .damaged(&object, "its content does not match its name"));
            }
            let mark = match kind {
                Kind::Exec => " x",
                Kind::Link => " l",
                Kind::File | Kind::Dir => "",
            };
            out.insert(path, format!("{object}{mark}"));
        }
        Ok(out)
    }
}

fn checkpoint_of(id: CheckpointId, record: &Record, record_bytes: u64) -> Checkpoint {
    Checkpoint {
        id,
        created_at: record.created_at,
        files: record.files,
        bytes: record.bytes,
        skipped_ignored: record.skipped_ignored,
        skipped_large: record.skipped_large,
        skipped_special: record.skipped_special,
        added_bytes: record.added_bytes + record_bytes,
    }
}
