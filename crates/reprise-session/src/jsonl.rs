//! The durable JSONL transcript file: reading it back (torn tails, corrupt lines,
//! bare-message lines, duplicate uuids) and appending to it (one `write` per batch,
//! then `fdatasync`).
//!
//! Readers never modify a file: a torn last line (no `\n`) is ignored with a warning.
//! A writer cuts it off before its first append and reports that it did.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde_json::Value;
use uuid::Uuid;

use crate::entry::Entry;
use crate::message::Message;
use crate::store::{AppendReport, LoadWarning, Loaded, StoreError};
use crate::store_fs::{FILE_MODE, io_err, parent_of, sync_dir};

/// How much an append guarantees when it returns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// The entries are on stable storage (`fdatasync`); new files' directory entries
    /// are synced too. Survives a power loss. The default.
    #[default]
    Full,
    /// The entries reached the kernel (one `write`), directory entries are synced, but
    /// data is not. Survives a crash of this process, not of the machine.
    Flush,
    /// Nothing is synced. For tests and throwaway sessions.
    None,
}

impl Durability {
    /// Whether file data is synced after each append.
    pub fn syncs_data(self) -> bool {
        self == Durability::Full
    }

    /// Whether directory entries are synced when a file or directory is created.
    pub fn syncs_dirs(self) -> bool {
        self != Durability::None
    }
}

/// Bytes read from the file at a time; a line longer than this grows the buffer.
const CHUNK: usize = 8 << 20;

/// Reads complete lines of a transcript and turns them into entries.
struct LineReader<'a> {
    path: &'a Path,
    session_id: &'a str,
    /// Uuids already seen (the first occurrence wins).
    seen: &'a mut HashSet<Uuid>,
    /// Lines consumed so far (1-based number of the last one).
    line: usize,
    warnings: Vec<LoadWarning>,
}

impl LineReader<'_> {
    fn warn(&mut self, line: usize, message: String) {
        tracing::warn!(file = %self.path.display(), line, "{message}");
        self.warnings.push(LoadWarning {
            file: self.path.to_path_buf(),
            line,
            message,
        });
    }

    /// Parses `bytes`, which holds whole lines each ending in `\n`, on up to
    /// [`PARSE_THREADS`] threads; entries reach `sink` in file order.
    fn parse_lines(&mut self, bytes: &[u8], sink: &mut dyn FnMut(Entry)) {
        let parts = if bytes.len() < PARALLEL_MIN {
            vec![bytes]
        } else {
            split_at_lines(bytes, parse_threads())
        };
        let session_id = self.session_id;
        let first = self.line;
        // Line numbers where each part starts, counted before parsing in parallel (one
        // pass; the count also sizes each part's result exactly).
        let mut starts = Vec::with_capacity(parts.len() + 1);
        let mut line = first;
        for part in &parts {
            starts.push(line);
            line += memchr::memchr_iter(b'\n', part).count();
        }
        starts.push(line);
        let results: Vec<Vec<Parsed>> = if parts.len() == 1 {
            vec![parse_block(bytes, first, line - first, session_id)]
        } else {
            std::thread::scope(|scope| {
                let handles: Vec<_> = parts
                    .iter()
                    .zip(starts.windows(2))
                    .skip(1)
                    .map(|(part, span)| {
                        let (start, lines) = (span[0], span[1] - span[0]);
                        scope.spawn(move || parse_block(part, start, lines, session_id))
                    })
                    .collect();
                let mut results = vec![parse_block(parts[0], first, starts[1] - first, session_id)];
                for handle in handles {
                    // A panic in a parser thread is a bug; re-raise it here.
                    results.push(
                        handle
                            .join()
                            .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                    );
                }
                results
            })
        };
        self.line = line;
        for (line, parsed) in results.into_iter().flatten() {
            match parsed {
                Ok(entry) => {
                    if self.seen.insert(entry.uuid) {
                        sink(entry);
                    } else {
                        let message = format!(
                            "duplicate uuid {} (an earlier line has it); line skipped",
                            entry.uuid
                        );
                        self.warn(line, message);
                    }
                }
                Err(message) => self.warn(line, message),
            }
        }
    }
}

/// A line's number and what it held.
type Parsed = (usize, Result<Entry, String>);

/// Most threads one load uses to parse.
const PARSE_THREADS: usize = 4;
/// Below this, a block is parsed on the calling thread.
const PARALLEL_MIN: usize = 1 << 20;

fn parse_threads() -> usize {
    // Asking the OS reads cgroup files: once per process is enough.
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .clamp(1, PARSE_THREADS)
    })
}

/// Splits `bytes` (whole lines) into up to `n` parts of whole lines.
fn split_at_lines(bytes: &[u8], n: usize) -> Vec<&[u8]> {
    if n <= 1 || bytes.len() < PARALLEL_MIN {
        return vec![bytes];
    }
    let mut parts = Vec::with_capacity(n);
    let mut rest = bytes;
    for i in (1..n).rev() {
        let cut = rest.len() - rest.len() * i / (i + 1);
        match memchr::memchr(b'\n', &rest[cut.saturating_sub(1)..]) {
            Some(pos) => {
                let end = cut.saturating_sub(1) + pos + 1;
                parts.push(&rest[..end]);
                rest = &rest[end..];
            }
            None => break,
        }
    }
    if !rest.is_empty() {
        parts.push(rest);
    }
    parts
}

/// Parses whole lines; `first` is the number of the line before `bytes`, which holds
/// `lines` lines.
fn parse_block(bytes: &[u8], first: usize, lines: usize, session_id: &str) -> Vec<Parsed> {
    let mut out = Vec::with_capacity(lines);
    let mut start = 0;
    let mut line_no = first;
    for end in memchr::memchr_iter(b'\n', bytes) {
        line_no += 1;
        let line = &bytes[start..end];
        start = end + 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        out.push((line_no, parse_line(line, line_no, session_id)));
    }
    out
}

fn parse_line(line: &[u8], line_no: usize, session_id: &str) -> Result<Entry, String> {
    if let Some(entry) = crate::fast_entry::decode_entry(line) {
        return Ok(entry);
    }
    let entry_error = match serde_json::from_slice::<Entry>(line) {
        Ok(entry) => return Ok(entry),
        Err(error) => error,
    };
    // Slow path, for lines that are not entries: a bare message (the seed's
    // reference format), or something to skip with a reason.
    let value = serde_json::from_slice::<Value>(line)
        .map_err(|error| format!("not valid JSON ({error}); line skipped"))?;
    match value {
        Value::Object(map) if map.contains_key("role") && !map.contains_key("uuid") => {
            let message = serde_json::from_value::<Message>(Value::Object(map))
                .map_err(|error| format!("not a valid message ({error}); line skipped"))?;
            Ok(Entry {
                uuid: Entry::bare_line_uuid(session_id, line_no),
                // The reference format records no time.
                ts: Timestamp::UNIX_EPOCH,
                kind: None,
                message: Some(message),
                extra: serde_json::Map::new(),
            })
        }
        _ => Err(format!("not an entry ({entry_error}); line skipped")),
    }
}

/// Where reading stopped.
struct ReadEnd {
    /// Offset just past the last complete line.
    complete_len: u64,
    /// Bytes after it without a final `\n` (a torn write).
    torn_len: u64,
}

/// Reads `file` from `offset` to its end, feeding entries to `sink`.
fn read_from(
    file: &File,
    offset: u64,
    reader: &mut LineReader<'_>,
    sink: &mut dyn FnMut(Entry),
) -> Result<ReadEnd, StoreError> {
    // Small files get a small buffer: zeroing a whole chunk would cost more than
    // reading them.
    let remaining = file
        .metadata()
        .map(|meta| meta.len().saturating_sub(offset))
        .unwrap_or(0);
    let step = usize::try_from(remaining)
        .unwrap_or(CHUNK)
        .clamp(4096, CHUNK);
    let mut buf: Vec<u8> = Vec::new();
    // Offset of buf[0] in the file, and how much of buf holds data.
    let mut base = offset;
    let mut filled = 0usize;
    loop {
        if buf.len() - filled < step / 2 {
            buf.resize((filled + step).max(buf.len()), 0);
        }
        let read = loop {
            match file.read_at(&mut buf[filled..], base + filled as u64) {
                Ok(n) => break n,
                Err(error) if error.kind() == ErrorKind::Interrupted => continue,
                Err(source) => {
                    return Err(StoreError::Io {
                        op: "read",
                        path: reader.path.to_path_buf(),
                        source,
                    });
                }
            }
        };
        if read == 0 {
            return Ok(ReadEnd {
                complete_len: base,
                torn_len: filled as u64,
            });
        }
        filled += read;
        if let Some(last) = memchr::memrchr(b'\n', &buf[..filled]) {
            reader.parse_lines(&buf[..=last], sink);
            let done = last + 1;
            buf.copy_within(done..filled, 0);
            filled -= done;
            base += done as u64;
        }
    }
}

/// Reads a transcript file without modifying it: `None` when it does not exist.
///
/// A torn last line is ignored with a warning; corrupt lines are skipped with a
/// warning naming file and line; of two lines with one uuid, the first is kept.
pub fn load_file(path: &Path, session_id: &str) -> Result<Option<Loaded>, StoreError> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(StoreError::Io {
                op: "open",
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let mut seen = HashSet::new();
    let mut entries = Vec::new();
    let mut reader = LineReader {
        path,
        session_id,
        seen: &mut seen,
        line: 0,
        warnings: Vec::new(),
    };
    let end = read_from(&file, 0, &mut reader, &mut |entry| entries.push(entry))?;
    let mut warnings = reader.warnings;
    if end.torn_len > 0 {
        let line = reader.line + 1;
        warnings.push(torn_warning(path, line, end.torn_len, "ignored"));
    }
    Ok(Some(Loaded { entries, warnings }))
}

fn torn_warning(path: &Path, line: usize, len: u64, done: &str) -> LoadWarning {
    let message = format!(
        "torn last line ({len} bytes without a final newline, an interrupted write); {done}"
    );
    tracing::warn!(file = %path.display(), line, "{message}");
    LoadWarning {
        file: path.to_path_buf(),
        line,
        message,
    }
}

/// What a writer knows about its file, so that an append does not re-read it.
#[derive(Debug)]
struct FileIndex {
    /// Device and inode: a different file at the same path means starting over.
    identity: (u64, u64),
    /// Bytes of complete lines.
    len: u64,
    /// Lines in those bytes.
    lines: usize,
    /// Uuids the file holds.
    uuids: HashSet<Uuid>,
    /// The last bytes before `len`: if they changed, someone rewrote the file (cut it
    /// and wrote again) and the index starts over.
    tail: Vec<u8>,
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

/// The one writer of a transcript file.
///
/// Keeps the file's uuids in memory after the first read, and reads only what other
/// writers added since (none, when the session's writer lock is respected). Callers
/// hold the session's writer lock while calling [`JsonlWriter::append`].
#[derive(Debug)]
pub struct JsonlWriter {
    path: PathBuf,
    session_id: String,
    durability: Durability,
    index: Option<FileIndex>,
}

impl JsonlWriter {
    /// A writer for `path`, a transcript of session `session_id` (the id is used for
    /// bare-message lines' uuids). Nothing is opened yet.
    pub fn new(path: impl Into<PathBuf>, session_id: &str, durability: Durability) -> Self {
        JsonlWriter {
            path: path.into(),
            session_id: session_id.to_owned(),
            durability,
            index: None,
        }
    }

    /// The file written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens the file for appending, creating it 0600 (and syncing its directory)
    /// when missing. The parent directory must exist.
    fn open(&self) -> Result<(File, bool), StoreError> {
        let mut options = OpenOptions::new();
        options.read(true).append(true);
        match options.open(&self.path) {
            Ok(file) => return Ok((file, false)),
            Err(error) if error.kind() == ErrorKind::NotFound => {}
            Err(source) => {
                return Err(StoreError::Io {
                    op: "open",
                    path: self.path.clone(),
                    source,
                });
            }
        }
        let file = options
            .create(true)
            .mode(FILE_MODE)
            .open(&self.path)
            .map_err(io_err("create", &self.path))?;
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
                uuids: HashSet::new(),
                tail: Vec::new(),
            },
        };
        if index.len == meta.len() {
            self.index = Some(index);
            return Ok((Vec::new(), Vec::new()));
        }
        let mut entries = Vec::new();
        let mut reader = LineReader {
            path: &self.path,
            session_id: &self.session_id,
            seen: &mut index.uuids,
            line: index.lines,
            warnings: Vec::new(),
        };
        let end = if collect {
            read_from(file, index.len, &mut reader, &mut |entry| {
                entries.push(entry)
            })?
        } else {
            read_from(file, index.len, &mut reader, &mut |_| {})?
        };
        let lines = reader.line;
        let mut warnings = reader.warnings;
        if end.torn_len > 0 && !cut {
            warnings.push(torn_warning(&self.path, lines + 1, end.torn_len, "ignored"));
        } else if end.torn_len > 0 {
            file.set_len(end.complete_len)
                .map_err(io_err("truncate", &self.path))?;
            if self.durability.syncs_data() {
                file.sync_data().map_err(io_err("sync", &self.path))?;
            }
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
        self.index = Some(index);
        Ok((entries, warnings))
    }

    /// Reads the whole file as its writer: like [`load_file`], but a torn tail is cut
    /// off (and the warning says so), and the uuid index is rebuilt. `None` when the
    /// file does not exist.
    pub fn load(&mut self) -> Result<Option<Loaded>, StoreError> {
        // Cutting a torn tail needs the file open for writing.
        let opened = OpenOptions::new().read(true).append(true).open(&self.path);
        self.read_whole(opened, true)
    }

    /// Reads the whole file as a reader would ([`load_file`]: a torn tail is ignored,
    /// not cut), keeping the uuid index so that a later append need not read it again.
    pub fn read(&mut self) -> Result<Option<Loaded>, StoreError> {
        let opened = File::open(&self.path);
        self.read_whole(opened, false)
    }

    /// [`JsonlWriter::load`] (`cut`) or [`JsonlWriter::read`] on the file as opened.
    fn read_whole(
        &mut self,
        opened: std::io::Result<File>,
        cut: bool,
    ) -> Result<Option<Loaded>, StoreError> {
        let file = match opened {
            Ok(file) => file,
            Err(error) if error.kind() == ErrorKind::NotFound => {
                self.index = None;
                return Ok(None);
            }
            Err(source) => {
                return Err(StoreError::Io {
                    op: "open",
                    path: self.path.clone(),
                    source,
                });
            }
        };
        let (entries, warnings) = self.refresh(&file, true, cut)?;
        Ok(Some(Loaded { entries, warnings }))
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
        let (mut file, _created) = self.open()?;
        let (_, warnings) = self.refresh(&file, false, true)?;
        let Some(index) = self.index.as_mut() else {
            return Err(StoreError::Format {
                path: self.path.clone(),
                message: "transcript index missing after refresh".to_owned(),
            });
        };
        let mut report = AppendReport::default();
        let mut batch_uuids = HashSet::new();
        let mut buf = Vec::with_capacity(entries.len() * 512);
        let mut written = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            if index.uuids.contains(&entry.uuid) || !batch_uuids.insert(entry.uuid) {
                report.skipped += 1;
                continue;
            }
            serde_json::to_writer(&mut buf, entry).map_err(|error| StoreError::Format {
                path: self.path.clone(),
                message: format!("cannot encode entry {}: {error}", entry.uuid),
            })?;
            buf.push(b'\n');
            report.written += 1;
            written.push(i);
        }
        if buf.is_empty() {
            return Ok((written, report, warnings));
        }
        if let Err(source) = file.write_all(&buf) {
            // Leave no partial line behind for the next reader.
            let _ = file.set_len(index.len);
            return Err(StoreError::Io {
                op: "write",
                path: self.path.clone(),
                source,
            });
        }
        if self.durability.syncs_data() {
            file.sync_data().map_err(io_err("sync", &self.path))?;
        }
        index.len += buf.len() as u64;
        index.lines += report.written;
        let keep = buf.len().min(TAIL_CHECK as usize);
        let mut tail = std::mem::take(&mut index.tail);
        tail.extend_from_slice(&buf[buf.len() - keep..]);
        let excess = tail.len().saturating_sub(TAIL_CHECK as usize);
        tail.drain(..excess);
        index.tail = tail;
        index.uuids.extend(batch_uuids);
        Ok((written, report, warnings))
    }
}
