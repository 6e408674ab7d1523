//! The checkpoint store of one run: capture, restore, recover, materialize, share.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use crate::apply::{self, Diff};
use crate::capture::{self, Flat, Sink};
use crate::error::UnfinishedRestore;
use crate::error::{CheckpointError, io_err};
use crate::folder::Folder;
use crate::id::{CheckpointId, ObjectId};
use crate::journal::{self, JOURNAL_NAME, Journal, MARK_NAME};
use crate::kill_hook;
use crate::links::{self, LinkPlan, Links};
use crate::objects::Objects;
use crate::record::{self, FORMAT, RECORD_FORMAT, Record, RecordKind};
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
    /// Files and folders left out because they could not be read (no permission),
    /// by path relative to the working folder, sorted. The checkpoint holds
    /// everything else; a restore to it leaves these paths as they are.
    pub not_captured: Vec<PathBuf>,
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
    /// Files and folders the checkpoint could not capture (they could not be read
    /// when it was taken): left as they are, whatever they hold now.
    pub not_captured: Vec<PathBuf>,
    /// Files and folders that cannot be read now: left as they are (nothing could
    /// bring back what they hold, so they are not replaced or deleted).
    pub unreadable_now: Vec<PathBuf>,
    /// Files made one file (hard-linked) with another again, as the checkpoint has
    /// them: `(path, the path it is linked to)`.
    pub linked: Vec<(PathBuf, PathBuf)>,
    /// Files hard-linked now to one the checkpoint has apart: given a file of their
    /// own.
    pub unlinked: Vec<PathBuf>,
    /// Captured files that changed since the store's latest checkpoint (or restore):
    /// changes made outside reprise. The restore's undo point keeps them.
    pub changed_outside: Vec<PathBuf>,
}

/// What finishing a restore that was cut will do, before it does it (or, returned
/// by [`CheckpointStore::finish`], what it did).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinishPreview {
    /// The restore that was cut.
    pub restore: UnfinishedRestore,
    /// What is still to change: files restored, created and deleted to finish it,
    /// and files of the checkpoint left as they are because something not
    /// captured is in their way.
    pub remaining: RestorePreview,
    /// Files the restore was to change that are now neither as it found them nor
    /// as it leaves them: changed by something else after the restore was cut.
    /// Left as they are.
    pub changed: Vec<PathBuf>,
    /// How many of the restore's changes were already made.
    pub done: usize,
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
    /// `dir` with links resolved: what the folder's mark names, so that another
    /// process finds the store (`dir` may lead through this process's own handle).
    real_dir: PathBuf,
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
    /// [`STORE_DIR_NAME`]) for the working folder `workdir`. While a restore of the
    /// folder is unfinished (a crash cut it; [`unfinished`]), every operation but
    /// [`finish`] fails with [`CheckpointError::Unfinished`].
    ///
    /// [`unfinished`]: CheckpointStore::unfinished
    /// [`finish`]: CheckpointStore::finish
    pub fn open(
        dir: impl AsRef<Path>,
        workdir: impl AsRef<Path>,
        options: CaptureOptions,
    ) -> Result<Self, CheckpointError> {
        let objects = Objects::open(dir.as_ref())?;
        // The store's files are reached by the path given: it may lead through a
        // handle the caller holds (`/proc/self/fd/<n>/…`), which stays valid when
        // the folders above change. Links resolved, it is what captures leave out.
        let real = std::fs::canonicalize(dir.as_ref()).map_err(io_err("open", dir.as_ref()))?;
        let dir = std::path::absolute(dir.as_ref()).map_err(io_err("open", dir.as_ref()))?;
        let folder = Folder::open(workdir.as_ref())?;
        let mut exclude = Vec::new();
        // The mark of an unfinished restore is never captured, nor touched by one.
        let mark = [
            PathBuf::from(MARK_NAME),
            PathBuf::from(journal::MARK_TEMP_NAME),
        ];
        for path in options
            .exclude
            .iter()
            .chain(std::iter::once(&real))
            .chain(&mark)
        {
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
            real_dir: real,
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
        self.dir.join(JOURNAL_NAME)
    }

    fn cache_path(&self) -> PathBuf {
        self.dir.join("stat-cache.json")
    }

    /// Records the working folder's captured files as a new checkpoint. Its objects
    /// are durable when this returns; the caller then records the id (one durable
    /// entry in the conversation), which is what makes the checkpoint part of the
    /// run.
    pub fn checkpoint(&mut self) -> Result<Checkpoint, CheckpointError> {
        self.refuse_if_unfinished()?;
        self.objects.remove_leftovers()?;
        let (checkpoint, _, _, _) = self.capture_and_store()?;
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

    fn capture_and_store(
        &mut self,
    ) -> Result<(Checkpoint, Flat, ObjectId, Links), CheckpointError> {
        let (mut captured, ignored, special) = self.scan_and_capture(true)?;
        let links = if captured.links.is_empty() {
            None
        } else {
            let bytes = links::encode(&captured.links);
            let id = ObjectId::of(&bytes);
            captured.batch.add(&self.objects, id, &bytes)?;
            Some(id)
        };
        let added_trees_and_files = captured.batch.bytes;
        let record = Record {
            format: RECORD_FORMAT,
            kind: RecordKind::Checkpoint,
            tree: captured.root,
            created_at: jiff::Timestamp::now(),
            files: captured.files.len() as u64,
            bytes: captured.bytes,
            skipped_ignored: ignored,
            skipped_large: captured.large,
            skipped_special: special,
            skipped_unreadable: captured.unreadable.len() as u64,
            added_bytes: added_trees_and_files,
            links,
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
        let mut checkpoint = checkpoint_of(CheckpointId(id), &record, bytes.len() as u64);
        checkpoint.not_captured = captured.unreadable;
        Ok((checkpoint, captured.files, captured.root, captured.links))
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
        let mut checkpoint = checkpoint_of(*id, &record, 0);
        if record.skipped_unreadable > 0 {
            let files = capture::flatten(&self.objects, &record.tree, None)?;
            checkpoint.not_captured = files
                .into_iter()
                .filter(|(_, (kind, _))| *kind == Kind::Unreadable)
                .map(|(path, _)| path)
                .collect();
            checkpoint.not_captured.sort();
        }
        Ok(checkpoint)
    }

    /// The files of checkpoint `id` hard-linked together.
    fn links_of(&self, id: &CheckpointId) -> Result<Links, CheckpointError> {
        /// A list of paths: one larger than this is not one of ours.
        const LINKS_LIMIT: u64 = 256 << 20;
        let Some(object) = self.record(id)?.links else {
            return Ok(Links::new());
        };
        let bytes = self.objects.read(&object, LINKS_LIMIT)?;
        links::decode(&bytes).map_err(|reason| self.objects.damaged(&object, reason))
    }

    fn files_of(&self, id: &CheckpointId) -> Result<Flat, CheckpointError> {
        let record = self.record(id)?;
        capture::flatten(&self.objects, &record.tree, None)
    }

    /// What restoring `target` would do now, without changing anything.
    pub fn preview(&mut self, target: &CheckpointId) -> Result<RestorePreview, CheckpointError> {
        self.refuse_if_unfinished()?;
        let target_files = self.files_of(target)?;
        let target_links = self.links_of(target)?;
        let (captured, _, _) = self.scan_and_capture(false)?;
        let mut preview = self.preview_of(&captured.files, &captured.root, &target_files)?;
        let plan = link_plan(
            &captured.files,
            &captured.links,
            &target_files,
            &target_links,
            &preview.kept,
        );
        preview.linked = plan.join;
        preview.unlinked = plan.split;
        Ok(preview)
    }

    /// What carrying `diff` out does to the folder as it is: a path to be created
    /// where something the restore does not delete stands is kept.
    fn changes_of(&self, diff: Diff) -> Result<RestorePreview, CheckpointError> {
        let Diff {
            restored,
            created,
            deleted,
            not_captured,
            unreadable_now,
        } = diff;
        let mut preview = RestorePreview {
            restored,
            deleted,
            not_captured,
            unreadable_now,
            ..RestorePreview::default()
        };
        // A captured file or link where a folder of the path should be is deleted
        // first: it does not keep the path from being created.
        let cleared: HashSet<&Path> = preview.deleted.iter().map(PathBuf::as_path).collect();
        for path in created {
            let clear = path.ancestors().skip(1).any(|dir| cleared.contains(dir));
            if !clear && self.folder.occupied(&path)? {
                preview.kept.push(path);
            } else {
                preview.created.push(path);
            }
        }
        Ok(preview)
    }

    fn preview_of(
        &self,
        current: &Flat,
        current_root: &ObjectId,
        target: &Flat,
    ) -> Result<RestorePreview, CheckpointError> {
        let mut preview = self.changes_of(apply::diff(current, target))?;
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
    /// folder is taken first (the undo point, in the result). A crash in the middle
    /// leaves the journal and the folder's mark: the restore is then
    /// [`unfinished`](CheckpointStore::unfinished) until [`finish`](CheckpointStore::finish)ed.
    pub fn restore(&mut self, target: &CheckpointId) -> Result<Restored, CheckpointError> {
        self.refuse_if_unfinished()?;
        self.objects.remove_leftovers()?;
        let target_files = self.files_of(target)?;
        let target_links = self.links_of(target)?;
        let (undo, current, current_root, current_links) = self.capture_and_store()?;
        let mut preview = self.preview_of(&current, &current_root, &target_files)?;
        let record = Journal {
            format: FORMAT,
            from: undo.id,
            target: *target,
        };
        journal::write(&self.journal_path(), &record)?;
        kill_hook::step();
        journal::write_mark(&self.folder, &self.real_dir, &record)?;
        kill_hook::step();
        let kept = apply::apply(&self.folder, &self.objects, &current, &target_files)?;
        let plan = link_plan(
            &current,
            &current_links,
            &target_files,
            &target_links,
            &kept,
        );
        links::apply(&self.folder, &self.objects, &target_files, &plan)?;
        self.finish_restore(target)?;
        preview.created.retain(|path| !kept.contains(path));
        preview.restored.retain(|path| !kept.contains(path));
        for path in kept {
            if !preview.kept.contains(&path) {
                preview.kept.push(path);
            }
        }
        preview.linked = plan.join;
        preview.unlinked = plan.split;
        Ok(Restored {
            undo: undo.id,
            preview,
        })
    }

    /// `head` set, then the mark removed before the journal: a mark always has
    /// its journal.
    fn finish_restore(&self, target: &CheckpointId) -> Result<(), CheckpointError> {
        self.set_head(target)?;
        kill_hook::step();
        journal::remove_mark(&self.folder, &self.real_dir)?;
        kill_hook::step();
        journal::remove(&self.journal_path())?;
        kill_hook::step();
        Ok(())
    }

    /// The restore of the working folder that a crash cut, if any: this store's
    /// own (its journal), or another store's whose mark is at the folder's root.
    /// Reads only.
    pub fn unfinished(&self) -> Result<Option<UnfinishedRestore>, CheckpointError> {
        if let Some(journal) = journal::read(&self.journal_path())? {
            return Ok(Some(UnfinishedRestore {
                store: self.real_dir.clone(),
                from: journal.from,
                target: journal.target,
            }));
        }
        journal::unfinished_marked(&self.folder)
    }

    fn refuse_if_unfinished(&self) -> Result<(), CheckpointError> {
        match self.unfinished()? {
            None => Ok(()),
            Some(restore) => Err(CheckpointError::Unfinished {
                workdir: self.folder.path().to_path_buf(),
                restore: Box::new(restore),
            }),
        }
    }

    /// What finishing this store's cut restore would do now (`None`: there is
    /// none), without changing anything. Each file the restore was to change is
    /// compared with what the restore found and what it leaves: one that is
    /// neither was changed by something else after the cut, and is named in
    /// [`FinishPreview::changed`] and left as it is.
    pub fn finish_preview(&mut self) -> Result<Option<FinishPreview>, CheckpointError> {
        Ok(self.finish_plan()?.map(|(preview, _, _)| preview))
    }

    fn finish_plan(&mut self) -> Result<Option<(FinishPreview, Flat, Flat)>, CheckpointError> {
        let Some(journal) = journal::read(&self.journal_path())? else {
            return Ok(None);
        };
        let restore = UnfinishedRestore {
            store: self.real_dir.clone(),
            from: journal.from,
            target: journal.target,
        };
        let from = self.files_of(&journal.from)?;
        let target = self.files_of(&journal.target)?;
        let (captured, _, _) = self.scan_and_capture(false)?;
        let current = captured.files;
        let planned = apply::diff(&from, &target);
        let mut goal = current.clone();
        let mut changed = Vec::new();
        let mut done = 0;
        for path in planned
            .restored
            .iter()
            .chain(&planned.created)
            .chain(&planned.deleted)
        {
            let now = current.get(path);
            let wanted = target.get(path);
            if now == wanted {
                done += 1;
            } else if now == from.get(path) {
                match wanted {
                    Some(entry) => goal.insert(path.clone(), *entry),
                    None => goal.remove(path),
                };
            } else {
                changed.push(path.clone());
            }
        }
        changed.sort();
        let remaining = self.changes_of(apply::diff(&current, &goal))?;
        let preview = FinishPreview {
            restore,
            remaining,
            changed,
            done,
        };
        Ok(Some((preview, current, goal)))
    }

    /// Finishes this store's restore that a crash cut (`None`: there was none):
    /// the changes it had not made yet are made, except to the files changed after
    /// the cut (see [`finish_preview`](CheckpointStore::finish_preview)), which are
    /// left as they are; the temporary files it (or a cut checkpoint) left are
    /// removed; then `head` names
    /// its target and the journal and the folder's mark go. Returns what it did. A
    /// crash while finishing leaves it to be finished again.
    pub fn finish(&mut self) -> Result<Option<FinishPreview>, CheckpointError> {
        self.objects.remove_leftovers()?;
        let Some((mut preview, current, goal)) = self.finish_plan()? else {
            return Ok(None);
        };
        let kept = apply::apply(&self.folder, &self.objects, &current, &goal)?;
        let from = self.files_of(&preview.restore.from)?;
        let target = self.files_of(&preview.restore.target)?;
        let planned = apply::diff(&from, &target);
        // A file changed after the cut is left alone by the link pass too.
        let untouched: Vec<PathBuf> = kept.iter().chain(&preview.changed).cloned().collect();
        let (from_links, target_links) = (
            self.links_of(&preview.restore.from)?,
            self.links_of(&preview.restore.target)?,
        );
        let plan = link_plan(&from, &from_links, &target, &target_links, &untouched);
        links::apply(&self.folder, &self.objects, &target, &plan)?;
        apply::remove_emptied(&self.folder, &planned.deleted, &goal)?;
        apply::remove_temp_files(
            &self.folder,
            planned
                .restored
                .iter()
                .chain(&planned.created)
                .chain(&planned.deleted),
        );
        self.finish_restore(&preview.restore.target)?;
        let remaining = &mut preview.remaining;
        remaining.created.retain(|path| !kept.contains(path));
        remaining.restored.retain(|path| !kept.contains(path));
        for path in kept {
            if !remaining.kept.contains(&path) {
                remaining.kept.push(path);
            }
        }
        Ok(Some(preview))
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
        let (written, bytes) = apply::materialize(&folder, &self.objects, &files)?;
        let plan = link_plan(
            &Flat::new(),
            &Links::new(),
            &files,
            &self.links_of(id)?,
            &[],
        );
        links::apply(&folder, &self.objects, &files, &plan)?;
        let files = written;
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
    /// SHA-256 of each (in hexadecimal) and whether it is executable or a link, or
    /// `not captured` for a path it could not read.
    pub fn verify(&self, id: &CheckpointId) -> Result<BTreeMap<PathBuf, String>, CheckpointError> {
        let (_, files) = self.reachable(id)?;
        let mut out = BTreeMap::new();
        for (path, (kind, object)) in files {
            if kind == Kind::Unreadable {
                out.insert(path, "not captured".to_owned());
                continue;
            }
            let mut file = self.objects.open_object(&object)?.reader()?;
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
                Kind::File | Kind::Dir | Kind::Unreadable => "",
            };
            out.insert(path, format!("{object}{mark}"));
        }
        Ok(out)
    }
}

/// What a restore from `current` to `target` does to hard links; `kept`: the paths
/// of the target it leaves as they are.
fn link_plan(
    current: &Flat,
    current_links: &Links,
    target: &Flat,
    target_links: &Links,
    kept: &[PathBuf],
) -> LinkPlan {
    let unreadable = apply::Unreadable::of(current, target);
    let touchable = |path: &Path| !unreadable.covers(path) && !kept.iter().any(|k| k == path);
    let changes = apply::diff(current, target);
    let rewritten: HashSet<PathBuf> = changes
        .restored
        .into_iter()
        .chain(changes.created)
        .collect();
    links::plan(current_links, target_links, target, &touchable, &rewritten)
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
        not_captured: Vec::new(),
        added_bytes: record.added_bytes + record_bytes,
    }
}
