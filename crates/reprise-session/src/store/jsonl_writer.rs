//! The one writer of a transcript file: appends with one `write` per batch, then
//! `fdatasync` (as [`Durability`] says), skipping uuids the file already holds.
//! After a sync fails, the session takes no more appends in this process (see
//! `stopped_writes`).

use std::cell::Cell;
use std::collections::HashSet;
use std::fs::File;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use reprise_message::Entry;
use rustix::fs::OFlags;

use crate::fs::{IoError, io_err, open_beneath, parent_of, sync_dir};
use crate::store::jsonl::{
    Durability, LineReader, UuidSet, push_expected, read_from, torn_warning,
};
use crate::store::session_store::{AppendReport, LoadWarning, Loaded, LoadedView, StoreError};
use crate::store::stopped_writes;

/// What a writer knows about its file, so that an append does not re-read it.
#[derive(Debug)]
struct FileIndex {
    /// Device and inode: a different file at the same path means starting over.
    identity: (u64, u64),
    /// Bytes of complete lines.
    len: u64,
    /// Lines in those bytes from `counted_from` on.
    lines: usize,
    /// Where the line count starts: 0 after a whole read; the start of the model
    /// view after a read from there ([`JsonlWriter::load_view`]). Lines before it are
    /// counted only when a warning needs their number.
    counted_from: u64,
    /// Uuids the file holds.
    uuids: UuidSet,
    /// The last bytes before `len`: if they changed, someone rewrote the file (cut it
    /// and wrote again) and the index starts over.
    tail: Vec<u8>,
    /// The file as this writer left it after its last append.
    stamp: Option<Stamp>,
}

/// What a stat shows of a file: device, inode, size, modification and change times.
///
/// Taken right after this writer's own append; when a stat of the path still shows
/// exactly that, nobody has touched the file since (a write, a cut or a replacement
/// changes the inode, the size or the change time, which no program can set back), so
/// the next append needs neither to open the file again nor to re-check its last
/// bytes: `pread` on a file just written updates its access time, a journaled inode
/// change that cost more than the open and the read together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// How many bytes before the index's end are compared to detect a rewritten file.
const TAIL_CHECK: u64 = 64;

/// The `TAIL_CHECK` bytes before `len` in `file`.
fn read_tail(file: &File, path: &Path, len: u64) -> Result<Vec<u8>, StoreError> {
    let start = len.saturating_sub(TAIL_CHECK);
    let mut buf = vec![0u8; (len - start) as usize];
    file.read_exact_at(&mut buf, start)
        .map_err(io_err("read", path))?;
    Ok(buf)
}

/// Stops the writes of the session keyed `key` in this process because of `cause`
/// (a failed sync), and returns the error saying so.
fn stop(key: &Path, session: &str, cause: IoError) -> StoreError {
    StoreError::WritesStopped {
        session: session.to_owned(),
        source: stopped_writes::stop(key, cause),
    }
}

/// Where a batch of entries goes: straight into the file as they are encoded (an
/// entry can hold a file the model wrote, and a batch encoded whole first would be
/// one more copy of it), counting the bytes and keeping the last [`TAIL_CHECK`].
struct Lines<'a> {
    file: &'a File,
    len: u64,
    tail: Vec<u8>,
}

impl Write for Lines<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let written = self.file.write(bytes)?;
        self.len += written as u64;
        self.tail.extend_from_slice(&bytes[..written]);
        let excess = self.tail.len().saturating_sub(TAIL_CHECK as usize);
        self.tail.drain(..excess);
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Why a batch was not written whole.
enum Failure {
    /// The file refused a write.
    Write(std::io::Error),
    /// The entry with this uuid cannot be encoded.
    Encode(uuid::Uuid, serde_json::Error),
}

/// Writes the entries at `indices` of `entries`, one line each.
fn write_lines(lines: &mut Lines<'_>, entries: &[Entry], indices: &[usize]) -> Result<(), Failure> {
    let mut out = std::io::BufWriter::with_capacity(1 << 16, lines);
    for &i in indices {
        let entry = &entries[i];
        serde_json::to_writer(&mut out, entry).map_err(|error| {
            if error.is_io() {
                Failure::Write(error.into())
            } else {
                Failure::Encode(entry.uuid, error)
            }
        })?;
        out.write_all(b"\n").map_err(Failure::Write)?;
    }
    out.flush().map_err(Failure::Write)
}

/// Syncs the data of `file` (at `path`) when `durability` asks for it; when the sync
/// fails, the writes of the session keyed `key` stop.
fn sync_or_stop(
    file: &File,
    path: &Path,
    durability: Durability,
    key: &Path,
    session: &str,
) -> Result<(), StoreError> {
    if !durability.syncs_data() {
        return Ok(());
    }
    file.sync_data().map_err(|source| {
        stop(
            key,
            session,
            IoError::new("sync", path.to_path_buf(), source),
        )
    })
}

/// The one writer of a transcript file.
///
/// Keeps the file's uuids in memory after the first read, and reads only what other
/// writers added since (none, when the session's writer lock is respected). Callers
/// hold the session's writer lock while calling [`JsonlWriter::append`].
#[derive(Debug)]
pub struct JsonlWriter {
    path: PathBuf,
    /// Below this directory no symbolic link is followed to reach the file.
    root: PathBuf,
    session_id: String,
    /// The session's key among the stopped ones: the absolute path of its main
    /// transcript (this file, unless [`JsonlWriter::part_of`] says otherwise).
    session_key: PathBuf,
    durability: Durability,
    index: Option<FileIndex>,
    /// Kept open between appends when asked to ([`JsonlWriter::keeping_file_open`]);
    /// always the file the index's stamp was taken from.
    file: Option<File>,
    keep_open: bool,
}

impl JsonlWriter {
    /// A writer for `path`, a transcript of session `session_id` (the id is used for
    /// bare-message lines' uuids). Nothing is opened yet.
    pub fn new(path: impl Into<PathBuf>, session_id: &str, durability: Durability) -> Self {
        let path = path.into();
        JsonlWriter {
            root: parent_of(&path).to_path_buf(),
            session_key: stopped_writes::session_key(&path),
            path,
            session_id: session_id.to_owned(),
            durability,
            index: None,
            file: None,
            keep_open: false,
        }
    }

    /// Reaches the file from `root` without following any symbolic link below it (by
    /// default only the file itself is never a link), so that a link swapped in for
    /// the file or a folder on its way is refused instead of written through.
    pub fn beneath(mut self, root: impl Into<PathBuf>) -> Self {
        self.root = root.into();
        self
    }

    /// Writes a transcript that belongs to the session whose main transcript is
    /// `main` (a subagent's): a failed sync of either stops the whole session.
    pub fn part_of(mut self, main: &Path) -> Self {
        self.session_key = stopped_writes::session_key(main);
        self
    }

    /// Fails with [`StoreError::WritesStopped`] once a sync of the session failed in
    /// this process (in this writer or any other of the session): nothing more is
    /// appended to it then.
    pub fn check_writable(&self) -> Result<(), StoreError> {
        match stopped_writes::stopped(&self.session_key) {
            None => Ok(()),
            Some(source) => Err(StoreError::WritesStopped {
                session: self.session_id.clone(),
                source,
            }),
        }
    }

    /// Keeps the file open between appends (one descriptor for the writer's life),
    /// saving an `open` and a `close` per append. For writers of which a process has
    /// a handful (a run's conversation and subagents), not one per session of a store
    /// that may hold thousands.
    pub fn keeping_file_open(mut self) -> Self {
        self.keep_open = true;
        self
    }

    /// The file written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the writer knows the file's uuids already, so that an append reads at
    /// most the lines others added since (none, under the writer lock).
    pub fn is_indexed(&self) -> bool {
        self.index.is_some()
    }

    /// The bytes of complete lines the file held after this writer's last read or
    /// append, when it has read the file.
    pub fn indexed_len(&self) -> Option<u64> {
        self.index.as_ref().map(|index| index.len)
    }

    /// Opens the file for appending, creating it 0600 (and syncing its directory)
    /// when missing. The parent directory must exist.
    fn open(&self) -> Result<(File, bool), StoreError> {
        let flags = OFlags::RDWR | OFlags::APPEND;
        match open_beneath(&self.root, &self.path, flags, "open") {
            Ok(file) => return Ok((file, false)),
            Err(error) if error.kind() == ErrorKind::NotFound => {}
            Err(error) => return Err(error.into()),
        }
        let file = open_beneath(&self.root, &self.path, flags | OFlags::CREATE, "create")?;
        if self.durability.syncs_dirs() {
            sync_dir(parent_of(&self.path))?;
        }
        Ok((file, true))
    }

    /// Brings the index up to date with the file, cutting off a torn tail. With
    /// `collect`, also returns every entry (a full read).
    fn refresh(
        &mut self,
        file: &File,
        collect: bool,
        cut: bool,
    ) -> Result<(Vec<Entry>, Vec<LoadWarning>), StoreError> {
        let meta = file.metadata().map_err(io_err("stat", &self.path))?;
        let identity = (meta.dev(), meta.ino());
        let reusable = !collect
            && match self.index.as_ref() {
                Some(index) if index.identity == identity && index.len <= meta.len() => {
                    read_tail(file, &self.path, index.len)? == index.tail
                }
                _ => false,
            };
        let mut index = match (reusable, self.index.take()) {
            (true, Some(index)) => index,
            _ => FileIndex {
                identity,
                len: 0,
                lines: 0,
                counted_from: 0,
                uuids: UuidSet::default(),
                tail: Vec::new(),
                stamp: None,
            },
        };
        index.stamp = None;
        if index.len == meta.len() {
            self.index = Some(index);
            return Ok((Vec::new(), Vec::new()));
        }
        let mut entries = Vec::new();
        let expected = Cell::new(0);
        let mut reader = LineReader {
            line: index.lines,
            ..LineReader::new(&self.path, &self.session_id, &mut index.uuids, &expected)
        };
        let end = if collect {
            read_from(file, index.len, &mut reader, &mut |entry| {
                push_expected(&mut entries, &expected, entry)
            })?
        } else {
            read_from(file, index.len, &mut reader, &mut |_| {})?
        };
        let lines = reader.line;
        let warnings = reader.warnings;
        let warnings = self.finish_read(file, &mut index, end, lines, warnings, cut)?;
        self.index = Some(index);
        Ok((entries, warnings))
    }

    /// Ends a read that left `index` at `lines` lines: numbers the warnings from the
    /// start of the file, cuts off a torn tail (with `cut`) or warns of it, and
    /// records where the complete lines end.
    fn finish_read(
        &self,
        file: &File,
        index: &mut FileIndex,
        end: crate::store::jsonl::ReadEnd,
        lines: usize,
        mut warnings: Vec<LoadWarning>,
        cut: bool,
    ) -> Result<Vec<LoadWarning>, StoreError> {
        let mut lines = lines;
        if index.counted_from > 0 && (!warnings.is_empty() || end.torn_len > 0) {
            let before = crate::store::view_start::count_lines(file, index.counted_from)
                .map_err(io_err("read", &self.path))?;
            for warning in &mut warnings {
                warning.line += before;
            }
            lines += before;
            index.counted_from = 0;
        }
        if end.torn_len > 0 && !cut {
            warnings.push(torn_warning(&self.path, lines + 1, end.torn_len, "ignored"));
        } else if end.torn_len > 0 {
            file.set_len(end.complete_len)
                .map_err(io_err("truncate", &self.path))?;
            sync_or_stop(
                file,
                &self.path,
                self.durability,
                &self.session_key,
                &self.session_id,
            )?;
            warnings.push(torn_warning(
                &self.path,
                lines + 1,
                end.torn_len,
                "cut off by the writer",
            ));
        }
        index.len = end.complete_len;
        index.lines = lines;
        index.tail = read_tail(file, &self.path, index.len)?;
        Ok(warnings)
    }

    /// Reads the transcript as its writer for a resume, from the line of the latest
    /// compaction's `through` when that is within the file's last 64 MiB and what is
    /// read from there holds the whole model view; otherwise whole, as
    /// [`JsonlWriter::load`]. `None` when the file does not exist.
    ///
    /// After a read from the view's start, the writer knows the uuids of the entries
    /// read, not of those before: an append of an entry whose uuid only the earlier
    /// history holds is written again.
    pub fn load_view(&mut self) -> Result<Option<LoadedView>, StoreError> {
        let opened = self.open_for_writing();
        let Some(file) = self.found(opened)? else {
            return Ok(None);
        };
        let meta = file.metadata().map_err(io_err("stat", &self.path))?;
        let start = crate::store::view_start::find_view_start(&file, meta.len())
            .map_err(io_err("read", &self.path))?;
        if let Some(start) = start
            && let Some(view) = self.read_view_from(&file, &meta, &start)?
        {
            return Ok(Some(view));
        }
        let (entries, warnings) = self.refresh(&file, true, true)?;
        Ok(Some(LoadedView {
            loaded: Loaded { entries, warnings },
            skipped_bytes: None,
        }))
    }

    /// Reads from `start` to the end; `None` (nothing changed) when what was read
    /// does not hold the whole model view.
    fn read_view_from(
        &mut self,
        file: &File,
        meta: &std::fs::Metadata,
        start: &crate::store::view_start::ViewStart,
    ) -> Result<Option<LoadedView>, StoreError> {
        let mut index = FileIndex {
            identity: (meta.dev(), meta.ino()),
            len: start.offset,
            lines: 0,
            counted_from: start.offset,
            uuids: UuidSet::default(),
            tail: Vec::new(),
            stamp: None,
        };
        let mut entries = Vec::new();
        let expected = Cell::new(0);
        let mut reader = LineReader::new(&self.path, &self.session_id, &mut index.uuids, &expected);
        let end = read_from(file, start.offset, &mut reader, &mut |entry| {
            push_expected(&mut entries, &expected, entry)
        })?;
        let lines = reader.line;
        let warnings = reader.warnings;
        if !crate::store::view_start::covers_the_view(&entries, start) {
            return Ok(None);
        }
        let warnings = self.finish_read(file, &mut index, end, lines, warnings, true)?;
        self.index = Some(index);
        Ok(Some(LoadedView {
            loaded: Loaded { entries, warnings },
            skipped_bytes: Some(start.offset),
        }))
    }

    /// Reads the whole file as its writer: like [`load_file`](crate::store::jsonl::load_file), but a torn tail is cut
    /// off (and the warning says so), and the uuid index is rebuilt. `None` when the
    /// file does not exist.
    pub fn load(&mut self) -> Result<Option<Loaded>, StoreError> {
        // Cutting a torn tail needs the file open for writing.
        let opened = self.open_for_writing();
        self.read_whole(opened, true)
    }

    /// Reads the whole file as a reader would ([`load_file`](crate::store::jsonl::load_file): a torn tail is ignored,
    /// not cut), keeping the uuid index so that a later append need not read it again.
    pub fn read(&mut self) -> Result<Option<Loaded>, StoreError> {
        let opened = open_beneath(&self.root, &self.path, OFlags::RDONLY, "open");
        self.read_whole(opened, false)
    }

    /// [`JsonlWriter::load`] (`cut`) or [`JsonlWriter::read`] on the file as opened.
    fn read_whole(
        &mut self,
        opened: Result<File, IoError>,
        cut: bool,
    ) -> Result<Option<Loaded>, StoreError> {
        let Some(file) = self.found(opened)? else {
            return Ok(None);
        };
        let (entries, warnings) = self.refresh(&file, true, cut)?;
        Ok(Some(Loaded { entries, warnings }))
    }

    /// The file, as it is, opened for appending (a torn tail may be cut off).
    fn open_for_writing(&self) -> Result<File, IoError> {
        open_beneath(
            &self.root,
            &self.path,
            OFlags::RDWR | OFlags::APPEND,
            "open",
        )
    }

    /// The file as opened, or `None` when it does not exist (its index dropped).
    fn found(&mut self, opened: Result<File, IoError>) -> Result<Option<File>, StoreError> {
        match opened {
            Ok(file) => Ok(Some(file)),
            Err(error) if error.kind() == ErrorKind::NotFound => {
                self.index = None;
                Ok(None)
            }
            Err(error) => Err(error.into()),
        }
    }

    /// Appends the entries whose uuid the file does not hold yet, in order, with one
    /// `write`, then syncs as [`Durability`] says. Returns what was written and the
    /// warnings met while catching up with the file (a torn tail cut off).
    pub fn append(
        &mut self,
        entries: &[Entry],
    ) -> Result<(AppendReport, Vec<LoadWarning>), StoreError> {
        let (_, report, warnings) = self.append_indices(entries)?;
        Ok((report, warnings))
    }

    /// [`JsonlWriter::append`], also returning the indices (in `entries`) of the
    /// entries written.
    pub(crate) fn append_indices(
        &mut self,
        entries: &[Entry],
    ) -> Result<(Vec<usize>, AppendReport, Vec<LoadWarning>), StoreError> {
        self.append_indices_then(entries, |_| {})
    }

    /// `JsonlWriter::append_indices`, calling `while_syncing` with the indices of
    /// the entries written once they are written and before they are synced, so that
    /// work can overlap the wait for the disk.
    pub fn append_indices_then(
        &mut self,
        entries: &[Entry],
        while_syncing: impl FnOnce(&[usize]),
    ) -> Result<(Vec<usize>, AppendReport, Vec<LoadWarning>), StoreError> {
        self.check_writable()?;
        // lstat: a link swapped in for the file never matches the stamp, so the file
        // is opened again, which refuses the link.
        let at_path = match std::fs::symlink_metadata(&self.path) {
            Ok(meta) => Some(Stamp::of(&meta)),
            Err(error) if error.kind() == ErrorKind::NotFound => None,
            Err(source) => {
                return Err(StoreError::Io(IoError::new(
                    "stat",
                    self.path.clone(),
                    source,
                )));
            }
        };
        let untouched = at_path.is_some()
            && self
                .index
                .as_ref()
                .is_some_and(|index| index.stamp == at_path);
        let cached = self.file.take();
        let (file, warnings) = match cached {
            // The stamp was taken from this very file, so it is the one at the path.
            Some(file) if untouched => (file, Vec::new()),
            _ if untouched => (self.open()?.0, Vec::new()),
            _ => {
                let (file, _created) = self.open()?;
                let (_, warnings) = self.refresh(&file, false, true)?;
                (file, warnings)
            }
        };
        let Some(index) = self.index.as_mut() else {
            return Err(StoreError::Format {
                path: self.path.clone(),
                message: "transcript index missing after refresh".to_owned(),
            });
        };
        let mut report = AppendReport::default();
        let mut batch_uuids = HashSet::new();
        let mut written = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            if index.uuids.contains(&entry.uuid) || !batch_uuids.insert(entry.uuid) {
                report.skipped += 1;
                continue;
            }
            report.written += 1;
            written.push(i);
        }
        if written.is_empty() {
            if self.keep_open && index.stamp.is_some() {
                self.file = Some(file);
            }
            return Ok((written, report, warnings));
        }
        // Until the write is done and stamped, the file is not as the stamp says.
        index.stamp = None;
        let mut lines = Lines {
            file: &file,
            len: 0,
            tail: index.tail.clone(),
        };
        if let Err(failure) = write_lines(&mut lines, entries, &written) {
            let error = match failure {
                Failure::Write(source) => IoError::new("write", self.path.clone(), source),
                Failure::Encode(uuid, error) => {
                    if file.set_len(index.len).is_ok() {
                        return Err(StoreError::Format {
                            path: self.path.clone(),
                            message: format!("cannot encode entry {uuid}: {error}"),
                        });
                    }
                    IoError::new("write", self.path.clone(), std::io::Error::other(error))
                }
            };
            // Leave no partial line behind for the next reader. When even that
            // fails, part of the batch may be in the file, and stays unknown.
            if file.set_len(index.len).is_err() {
                return Err(stop(&self.session_key, &self.session_id, error));
            }
            return Err(StoreError::Io(error));
        }
        let Lines { len, tail, .. } = lines;
        while_syncing(&written);
        sync_or_stop(
            &file,
            &self.path,
            self.durability,
            &self.session_key,
            &self.session_id,
        )?;
        index.len += len;
        index.lines += report.written;
        index.tail = tail;
        index.uuids.extend(batch_uuids);
        // One fstat, in place of an open, a stat and a read at the next append.
        if let Ok(meta) = file.metadata() {
            index.stamp = Some(Stamp::of(&meta));
            if self.keep_open {
                self.file = Some(file);
            }
        }
        Ok((written, report, warnings))
    }
}
