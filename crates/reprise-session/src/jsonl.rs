//! The durable JSONL transcript file: reading it back (torn tails, corrupt lines,
//! bare-message lines, duplicate uuids). Appending is [`JsonlWriter`]'s job (one
//! `write` per batch, then `fdatasync`).
//!
//! Readers never modify a file: a torn last line (no `\n`) is ignored with a warning.
//! A writer cuts it off before its first append and reports that it did.

use std::collections::HashSet;
use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, mpsc};

use jiff::Timestamp;
use serde_json::Value;
use uuid::Uuid;

use crate::entry::Entry;
use crate::fast_entry::EntryDecoder;
use crate::message::Message;
use crate::store::{LoadWarning, Loaded, StoreError};

pub use crate::jsonl_writer::JsonlWriter;

/// How much an append guarantees when it returns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// The entries are on stable storage (`fdatasync`); new files' directory entries
    /// are synced too. Survives a power loss. The default. (A fork's copied data is
    /// synced in the background right after the fork returns, and by the fork's first
    /// append at the latest: until then it is on disk in the source.)
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

/// Bytes the single-threaded reader (small files, and whatever the parallel pass left)
/// reads at a time; a line longer than this grows the buffer.
const CHUNK: usize = 8 << 20;

/// Bytes a parallel worker reads and parses at a time: small enough that they are
/// still in cache when parsed and that the chunks balance between the threads.
const PARALLEL_CHUNK: usize = 2 << 20;

/// How much a worker reads past its chunk at a time to finish the chunk's last line.
const LINE_TAIL: usize = 16 << 10;

/// Below this many bytes, a file is parsed on the calling thread.
const PARALLEL_MIN: u64 = 1 << 20;

/// Most threads one load uses to parse.
const PARSE_THREADS: usize = 4;

/// Reads complete lines of a transcript and turns them into entries.
pub(crate) struct LineReader<'a> {
    pub(crate) path: &'a Path,
    pub(crate) session_id: &'a str,
    /// Uuids already seen (the first occurrence wins).
    pub(crate) seen: &'a mut HashSet<Uuid>,
    /// Lines consumed so far (1-based number of the last one).
    pub(crate) line: usize,
    pub(crate) warnings: Vec<LoadWarning>,
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

    /// Takes the next block of the file, in file order: numbers its lines, gives
    /// bare-message lines their uuids, skips duplicate uuids and reports what was
    /// skipped. Leaves `block` empty, its memory kept for the next one.
    fn merge(&mut self, block: &mut Block, sink: &mut dyn FnMut(Entry)) {
        let first = self.line;
        let Block {
            entries,
            notes,
            lines,
        } = block;
        self.seen.reserve(entries.len());
        let mut notes = notes.drain(..).peekable();
        // 0-based index in the block of the line being looked at.
        let mut index = 0;
        for mut entry in entries.drain(..) {
            // Lines before this entry's that held none.
            while let Some(note) =
                notes.next_if(|note| note.line == index && !matches!(note.kind, NoteKind::Bare))
            {
                if let NoteKind::Skipped(message) = note.kind {
                    self.warn(first + index + 1, message);
                }
                index += 1;
            }
            let line = first + index + 1;
            index += 1;
            if notes.next_if(|note| note.line + 1 == index).is_some() {
                entry.uuid = Entry::bare_line_uuid(self.session_id, line);
            }
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
        for note in notes {
            if let NoteKind::Skipped(message) = note.kind {
                self.warn(first + note.line + 1, message);
            }
        }
        self.line = first + *lines;
        *lines = 0;
    }
}

/// What parsing some whole lines produced, before their line numbers are known (a
/// parallel worker does not know how many lines come before its chunk).
#[derive(Default)]
struct Block {
    /// The lines' entries, in order; bare-message lines' uuids are not set yet.
    entries: Vec<Entry>,
    /// The lines that are not plain entries, in order.
    notes: Vec<Note>,
    /// Lines parsed, blank ones included.
    lines: usize,
}

/// A line of a [`Block`] that is not a plain entry.
struct Note {
    /// 0-based index of the line in its block.
    line: usize,
    kind: NoteKind,
}

enum NoteKind {
    /// Only whitespace: skipped silently.
    Blank,
    /// Skipped for this reason.
    Skipped(String),
    /// A bare message (the seed's reference format): its entry's uuid comes from
    /// its line number.
    Bare,
}

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

/// Parses `bytes`, whole lines each ending in `\n`, into `block`.
fn parse_block(bytes: &[u8], decoder: &mut EntryDecoder, block: &mut Block) {
    let mut start = 0;
    for end in memchr::memchr_iter(b'\n', bytes) {
        let line = &bytes[start..end];
        start = end + 1;
        let index = block.lines;
        block.lines += 1;
        if let Some(entry) = decoder.decode(line) {
            block.entries.push(entry);
            continue;
        }
        let kind = if line.iter().all(u8::is_ascii_whitespace) {
            NoteKind::Blank
        } else {
            match parse_line(line) {
                SlowLine::Entry(entry) => {
                    block.entries.push(entry);
                    continue;
                }
                SlowLine::Bare(message) => {
                    block.entries.push(Entry {
                        // Set by `LineReader::merge`, which knows the line number.
                        uuid: Uuid::nil(),
                        // The reference format records no time.
                        ts: Timestamp::UNIX_EPOCH,
                        kind: None,
                        message: Some(message),
                        extra: serde_json::Map::new(),
                    });
                    NoteKind::Bare
                }
                SlowLine::Skipped(message) => NoteKind::Skipped(message),
            }
        };
        block.notes.push(Note { line: index, kind });
    }
}

/// What a line the fast decoder did not take holds.
enum SlowLine {
    Entry(Entry),
    /// A bare message (the seed's reference format).
    Bare(Message),
    /// Not an entry: the reason it is skipped.
    Skipped(String),
}

fn parse_line(line: &[u8]) -> SlowLine {
    let entry_error = match serde_json::from_slice::<Entry>(line) {
        Ok(entry) => return SlowLine::Entry(entry),
        Err(error) => error,
    };
    // Slow path, for lines that are not entries: a bare message (the seed's
    // reference format), or something to skip with a reason.
    let value = match serde_json::from_slice::<Value>(line) {
        Ok(value) => value,
        Err(error) => return SlowLine::Skipped(format!("not valid JSON ({error}); line skipped")),
    };
    match value {
        Value::Object(map) if map.contains_key("role") && !map.contains_key("uuid") => {
            match serde_json::from_value::<Message>(Value::Object(map)) {
                Ok(message) => SlowLine::Bare(message),
                Err(error) => {
                    SlowLine::Skipped(format!("not a valid message ({error}); line skipped"))
                }
            }
        }
        _ => SlowLine::Skipped(format!("not an entry ({entry_error}); line skipped")),
    }
}

/// Where reading stopped.
pub(crate) struct ReadEnd {
    /// Offset just past the last complete line.
    pub(crate) complete_len: u64,
    /// Bytes after it without a final `\n` (a torn write).
    pub(crate) torn_len: u64,
}

fn read_error(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        op: "read",
        path: path.to_path_buf(),
        source,
    }
}

/// Reads up to `len` bytes at `pos` into `buf[at..]`, growing `buf` (but not
/// shrinking it: its bytes past what is read are stale). Returns the bytes read,
/// fewer than `len` only at the end of the file.
fn read_into(
    file: &File,
    pos: u64,
    buf: &mut Vec<u8>,
    at: usize,
    len: usize,
) -> std::io::Result<usize> {
    if buf.len() < at + len {
        buf.resize(at + len, 0);
    }
    let mut done = 0;
    while done < len {
        match file.read_at(&mut buf[at + done..at + len], pos + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(done)
}

/// Reads `file` from `offset` to its end, feeding entries to `sink`.
pub(crate) fn read_from(
    file: &File,
    offset: u64,
    reader: &mut LineReader<'_>,
    sink: &mut dyn FnMut(Entry),
) -> Result<ReadEnd, StoreError> {
    let len = file.metadata().map(|meta| meta.len()).unwrap_or(0);
    let threads = parse_threads();
    let mut offset = offset;
    if threads > 1 && len.saturating_sub(offset) >= PARALLEL_MIN {
        offset = read_parallel(file, offset, len, threads, PARALLEL_CHUNK, reader, sink)?;
    }
    // The rest: all of a small file; after a parallel pass, the torn tail or lines
    // appended meanwhile.
    read_sequential(file, offset, len, reader, sink)
}

/// Reads `file` from `offset` to its end on the calling thread.
fn read_sequential(
    file: &File,
    offset: u64,
    len: u64,
    reader: &mut LineReader<'_>,
    sink: &mut dyn FnMut(Entry),
) -> Result<ReadEnd, StoreError> {
    // Small files get a small buffer: zeroing a whole chunk would cost more than
    // reading them.
    let step = usize::try_from(len.saturating_sub(offset))
        .unwrap_or(CHUNK)
        .clamp(4096, CHUNK);
    let mut buf: Vec<u8> = Vec::new();
    let mut decoder = EntryDecoder::default();
    let mut block = Block::default();
    // Offset of buf[0] in the file, and how much of buf holds data.
    let mut base = offset;
    let mut filled = 0usize;
    loop {
        let room = buf.len().saturating_sub(filled).max(step / 2);
        let read = read_into(file, base + filled as u64, &mut buf, filled, room)
            .map_err(read_error(reader.path))?;
        if read == 0 {
            return Ok(ReadEnd {
                complete_len: base,
                torn_len: filled as u64,
            });
        }
        filled += read;
        if let Some(last) = memchr::memrchr(b'\n', &buf[..filled]) {
            parse_block(&buf[..=last], &mut decoder, &mut block);
            reader.merge(&mut block, sink);
            let done = last + 1;
            buf.copy_within(done..filled, 0);
            filled -= done;
            base += done as u64;
        }
    }
}

/// What a parallel worker made of one chunk of the file.
struct ChunkOut {
    /// Offset of the first line that starts in the chunk; `None` when none does (a
    /// longer line covers the chunk).
    first: Option<u64>,
    /// Offset just past the last line parsed.
    end: u64,
    /// The file ended inside the chunk's last line (torn, or being appended to).
    cut: bool,
    block: Block,
}

/// Parses the lines that start in chunk `index` of `[offset, len)`, reading past the
/// chunk to finish its last line.
fn parse_chunk(
    file: &File,
    offset: u64,
    len: u64,
    chunk: usize,
    index: usize,
    buf: &mut Vec<u8>,
    decoder: &mut EntryDecoder,
    mut block: Block,
) -> std::io::Result<ChunkOut> {
    let start = offset + (index * chunk) as u64;
    let end = (start + chunk as u64).min(len);
    // Chunks after the first also read the byte before them: a line starts at their
    // first byte when it is a `\n`.
    let read_start = if index == 0 { start } else { start - 1 };
    let want = (end - read_start) as usize;
    let mut filled = read_into(file, read_start, buf, 0, want)?;
    let first = if index == 0 {
        0
    } else {
        // A `\n` at buf[i] starts a line at buf[i + 1], which is in the chunk when
        // i + 1 < want.
        match memchr::memchr(b'\n', &buf[..filled.min(want - 1)]) {
            Some(newline) => newline + 1,
            None => {
                return Ok(ChunkOut {
                    first: None,
                    end: start,
                    cut: false,
                    block,
                });
            }
        }
    };
    // The chunk's last line ends at the first `\n` from its last byte on.
    let mut search = (want - 1).min(filled);
    let stop = loop {
        if let Some(newline) = memchr::memchr(b'\n', &buf[search..filled]) {
            break Some(search + newline + 1);
        }
        search = filled;
        let more = read_into(
            file,
            read_start + filled as u64,
            buf,
            filled,
            (filled - want.min(filled)).max(LINE_TAIL),
        )?;
        if more == 0 {
            break None;
        }
        filled += more;
    };
    let (stop, cut) = match stop {
        Some(stop) => (stop, false),
        None => {
            let last = memchr::memrchr(b'\n', &buf[first..filled]);
            (last.map_or(first, |last| first + last + 1), true)
        }
    };
    parse_block(&buf[first..stop], decoder, &mut block);
    Ok(ChunkOut {
        first: Some(read_start + first as u64),
        end: read_start + stop as u64,
        cut,
        block,
    })
}

/// A chunk's outcome, as a worker sends it.
type ChunkResult = std::io::Result<ChunkOut>;

/// Merges, in file order, the chunks of a parallel read as they become available.
struct ChunkMerger {
    offset: u64,
    len: u64,
    chunk: usize,
    /// Results not merged yet, by chunk index.
    pending: Vec<Option<ChunkResult>>,
    /// Chunks merged so far.
    merged: usize,
    /// Offset just past the last line merged.
    pos: u64,
    /// Set when the rest is left to the sequential reader.
    stopped: bool,
}

impl ChunkMerger {
    /// Merges the chunks that are next in order; returns whether the parallel read is
    /// over.
    fn merge_ready(
        &mut self,
        reader: &mut LineReader<'_>,
        sink: &mut dyn FnMut(Entry),
        spare: &Mutex<Vec<Block>>,
    ) -> Result<bool, StoreError> {
        while let Some(out) = self.pending.get_mut(self.merged).and_then(Option::take) {
            self.merged += 1;
            let mut out = out.map_err(read_error(reader.path))?;
            let chunk_end = (self.offset + (self.merged * self.chunk) as u64).min(self.len);
            match out.first {
                Some(first) if first == self.pos => {
                    reader.merge(&mut out.block, sink);
                    self.pos = out.end;
                }
                // A line from an earlier chunk covers this one.
                None if self.pos >= chunk_end => {}
                // The file changed under the workers: the caller reads on alone.
                _ => self.stopped = true,
            }
            if let Ok(mut blocks) = spare.lock() {
                blocks.push(out.block);
            }
            if out.cut || self.stopped {
                self.stopped = true;
                return Ok(true);
            }
        }
        Ok(self.merged == self.pending.len())
    }
}

/// Parses `[offset, len)` of `file` on `threads` threads (the calling one included),
/// each reading and parsing one chunk of `chunk` bytes at a time; the calling thread also merges the
/// chunks in file order. Returns the offset where merged lines end: `len` or past
/// it, unless the file ended in a torn line or changed meanwhile (the caller reads on
/// from there).
fn read_parallel(
    file: &File,
    offset: u64,
    len: u64,
    threads: usize,
    chunk: usize,
    reader: &mut LineReader<'_>,
    sink: &mut dyn FnMut(Entry),
) -> Result<u64, StoreError> {
    let chunks = usize::try_from((len - offset).div_ceil(chunk as u64))
        .unwrap_or(usize::MAX);
    let next = AtomicUsize::new(0);
    // Emptied blocks, so that their memory is reused.
    let spare: Mutex<Vec<Block>> = Mutex::new(Vec::new());
    let (sender, receiver) = mpsc::channel::<(usize, ChunkResult)>();
    let mut merger = ChunkMerger {
        offset,
        len,
        chunk,
        pending: std::iter::repeat_with(|| None).take(chunks).collect(),
        merged: 0,
        pos: offset,
        stopped: false,
    };
    let take_block = || {
        spare
            .lock()
            .ok()
            .and_then(|mut blocks| blocks.pop())
            .unwrap_or_default()
    };
    std::thread::scope(|scope| {
        let main_works = std::env::var_os("XMAIN").is_none();
        let spawned = if main_works { threads.min(chunks) - 1 } else { threads.min(chunks) };
        for _ in 0..spawned {
            let sender = sender.clone();
            let next = &next;
            scope.spawn(move || {
                let mut buf = Vec::new();
                let mut decoder = EntryDecoder::default();
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= chunks {
                        break;
                    }
                    let out =
                        parse_chunk(file, offset, len, chunk, index, &mut buf, &mut decoder, take_block());
                    if sender.send((index, out)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(sender);
        let mut buf = Vec::new();
        let mut decoder = EntryDecoder::default();
        let result = loop {
            while let Ok((index, out)) = receiver.try_recv() {
                merger.pending[index] = Some(out);
            }
            match merger.merge_ready(reader, sink, &spare) {
                Ok(false) => {}
                Ok(true) => break Ok(merger.pos),
                Err(error) => break Err(error),
            }
            let index = if main_works { next.fetch_add(1, Ordering::Relaxed) } else { chunks };
            if index < chunks {
                let out = parse_chunk(file, offset, len, chunk, index, &mut buf, &mut decoder, take_block());
                merger.pending[index] = Some(out);
            } else {
                match receiver.recv() {
                    Ok((index, out)) => merger.pending[index] = Some(out),
                    // A worker died (its panic is raised when the scope ends).
                    Err(_) => break Ok(merger.pos),
                }
            }
        };
        // Workers stop at their next chunk (or when they find the channel closed).
        next.store(chunks, Ordering::Relaxed);
        drop(receiver);
        result
    })
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

pub(crate) fn torn_warning(path: &Path, line: usize, len: u64, done: &str) -> LoadWarning {
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
