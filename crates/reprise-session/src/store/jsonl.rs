//! The durable JSONL transcript file: reading it back (torn tails, corrupt lines,
//! bare-message lines, duplicate uuids). Appending is [`JsonlWriter`]'s job (one
//! `write` per batch, then `fdatasync`).
//!
//! Readers never modify a file: a torn last line (no `\n`) is ignored with a warning.
//! A writer cuts it off before its first append and reports that it did.

use std::cell::Cell;
use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, mpsc};

use jiff::Timestamp;
use reprise_message::{Entry, Message};
use serde_json::Value;
use uuid::Uuid;

use crate::fs::IoError;
use crate::store::decode::EntryDecoder;
use crate::store::session_store::{LoadWarning, Loaded, StoreError};

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
/// still in cache when parsed and that the chunks balance between the threads
/// (measured: 512 KB to 2 MB are alike, 512 KB a little better).
const PARALLEL_CHUNK: usize = 512 << 10;

/// How much a worker reads past its chunk at a time to finish the chunk's last line.
const LINE_TAIL: usize = 4 << 10;

/// Below this many bytes, a file is parsed on the calling thread.
const PARALLEL_MIN: u64 = 1 << 20;

/// Most threads one load uses to parse.
const PARSE_THREADS: usize = 4;

pub(crate) use super::uuid_set::UuidSet;

/// Reads complete lines of a transcript and turns them into entries.
pub(crate) struct LineReader<'a> {
    pub(crate) path: &'a Path,
    pub(crate) session_id: &'a str,
    /// Uuids already seen (the first occurrence wins).
    pub(crate) seen: &'a mut UuidSet,
    /// Lines consumed so far (1-based number of the last one).
    pub(crate) line: usize,
    pub(crate) warnings: Vec<LoadWarning>,
    /// How many entries the whole file likely holds, once a parallel read has
    /// parsed its first chunk (0 before): a caller collecting entries sizes its
    /// list with it, rather than moving a long transcript's entries at each
    /// doubling.
    pub(crate) expected: &'a Cell<usize>,
    /// Whether entries are decoded without their `model` field (see
    /// [`read_view_beneath`]).
    pub(crate) lean: bool,
}

impl<'a> LineReader<'a> {
    /// A reader of `path` from its first line, decoding whole entries.
    pub(crate) fn new(
        path: &'a Path,
        session_id: &'a str,
        seen: &'a mut UuidSet,
        expected: &'a Cell<usize>,
    ) -> Self {
        LineReader {
            path,
            session_id,
            seen,
            line: 0,
            warnings: Vec::new(),
            expected,
            lean: false,
        }
    }

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
    /// A bare message (a line holding only a message): its entry's uuid comes from
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
    // One entry per line at most: counting the lines first (a SIMD scan) spares the
    // entries' vector its regrowth, each a copy of every entry so far and a peak of
    // twice their memory.
    block
        .entries
        .reserve(memchr::memchr_iter(b'\n', bytes).count());
    let mut start = 0;
    while start < bytes.len() {
        // A last line without `\n` is not a whole line (and never given).
        let (end, note) = match decoder.decode_line_if_fast(bytes, start) {
            Some((entry, end)) if end < bytes.len() => {
                block.entries.push(entry);
                (end, None)
            }
            Some(_) => break,
            None => {
                let Some(end) = memchr::memchr(b'\n', &bytes[start..]) else {
                    break;
                };
                let line = &bytes[start..start + end];
                (start + end, parse_slow_line(line, &mut block.entries))
            }
        };
        if let Some(kind) = note {
            block.notes.push(Note {
                line: block.lines,
                kind,
            });
        }
        block.lines += 1;
        start = end + 1;
    }
}

/// Parses a line the fast decoder did not take, pushing its entry (if any) to
/// `entries`; returns what the line's note says, if it needs one.
fn parse_slow_line(line: &[u8], entries: &mut Vec<Entry>) -> Option<NoteKind> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Some(NoteKind::Blank);
    }
    match parse_line(line) {
        SlowLine::Entry(entry) => {
            entries.push(entry);
            None
        }
        SlowLine::Bare(message) => {
            entries.push(Entry {
                // Set by `LineReader::merge`, which knows the line number.
                uuid: Uuid::nil(),
                // The reference format records no time.
                ts: Timestamp::UNIX_EPOCH,
                kind: None,
                message: Some(message),
                usage: None,
                extra: Default::default(),
            });
            Some(NoteKind::Bare)
        }
        SlowLine::Skipped(message) => Some(NoteKind::Skipped(message)),
    }
}

/// What a line the fast decoder did not take holds.
enum SlowLine {
    Entry(Entry),
    /// A bare message (a line holding only a message).
    Bare(Message),
    /// Not an entry: the reason it is skipped.
    Skipped(String),
}

fn parse_line(line: &[u8]) -> SlowLine {
    let entry_error = match serde_json::from_slice::<Entry>(line) {
        Ok(entry) => return SlowLine::Entry(entry),
        Err(error) => error,
    };
    // Slow path, for lines that are not entries: a bare message (a line holding
    // only a message), or something to skip with a reason.
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
    move |source| StoreError::Io(IoError::new("read", path.to_path_buf(), source))
}

/// Alignment of the bytes a read lands on: the kernel copies into a destination
/// that is only 16-byte aligned (where malloc puts large blocks) several times slower
/// than into a 32- or 64-byte aligned one (docs/benchmarks.md has the figure).
const READ_ALIGN: usize = 64;

/// A buffer for file data whose first byte is [`READ_ALIGN`]-aligned.
#[derive(Default)]
struct ReadBuf {
    bytes: Vec<u8>,
    /// Where the data starts in `bytes`.
    skew: usize,
}

impl ReadBuf {
    /// The data bytes in `range`.
    fn data(&self, range: std::ops::Range<usize>) -> &[u8] {
        &self.bytes[self.skew + range.start..self.skew + range.end]
    }

    /// Reads up to `len` bytes at file offset `pos` into the data at `at`, keeping
    /// the `at` bytes before it. Returns the bytes read, fewer than `len` only at the
    /// end of the file.
    fn read(&mut self, file: &File, pos: u64, at: usize, len: usize) -> std::io::Result<usize> {
        let end = at + len;
        if self.skew + end > self.bytes.len() {
            // A fresh zeroed allocation (calloc: no memset for fresh pages), aligned
            // anew, rather than a reallocation that would lose the alignment.
            let mut bytes = vec![0u8; end + end / 4 + READ_ALIGN];
            let skew = bytes.as_ptr().addr().wrapping_neg() % READ_ALIGN;
            bytes[skew..skew + at].copy_from_slice(self.data(0..at));
            self.bytes = bytes;
            self.skew = skew;
        }
        let buf = &mut self.bytes[self.skew + at..self.skew + end];
        let mut done = 0;
        while done < len {
            match file.read_at(&mut buf[done..], pos + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        Ok(done)
    }

    /// Moves the data in `range` to the start.
    fn shift(&mut self, range: std::ops::Range<usize>) {
        let skew = self.skew;
        self.bytes
            .copy_within(skew + range.start..skew + range.end, skew);
    }
}

/// Pushes `item` (an entry, or what is made of one) onto `items`, which the first
/// time it is full grows by the `LineReader::expected` count, when there is one,
/// rather than doubling.
pub fn push_expected<T>(items: &mut Vec<T>, expected: &Cell<usize>, item: T) {
    if items.len() == items.capacity() {
        items.reserve(expected.take());
    }
    items.push(item);
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
    let mut buf = ReadBuf::default();
    let mut decoder = EntryDecoder::new(reader.lean);
    let mut block = Block::default();
    // Offset of the buffer's first byte in the file, and how much of it holds data.
    let mut base = offset;
    let mut filled = 0usize;
    loop {
        let spare = buf.bytes.len().saturating_sub(buf.skew + filled);
        let room = if spare < step / 2 { step } else { spare };
        let read = buf
            .read(file, base + filled as u64, filled, room)
            .map_err(read_error(reader.path))?;
        if read == 0 {
            return Ok(ReadEnd {
                complete_len: base,
                torn_len: filled as u64,
            });
        }
        filled += read;
        if let Some(last) = memchr::memrchr(b'\n', buf.data(0..filled)) {
            parse_block(buf.data(0..last + 1), &mut decoder, &mut block);
            reader.merge(&mut block, sink);
            let done = last + 1;
            buf.shift(done..filled);
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

/// `[offset, len)` of a file, cut into chunks of `size` bytes for parallel workers.
#[derive(Clone, Copy)]
struct Chunks<'f> {
    file: &'f File,
    offset: u64,
    len: u64,
    size: usize,
}

impl Chunks<'_> {
    fn count(self) -> usize {
        usize::try_from(
            self.len
                .saturating_sub(self.offset)
                .div_ceil(self.size as u64),
        )
        .unwrap_or(usize::MAX)
    }

    /// About how many bytes of the file each of `threads` threads parses.
    fn share(self, threads: usize) -> usize {
        usize::try_from(self.len.saturating_sub(self.offset))
            .unwrap_or(usize::MAX)
            .div_ceil(threads.max(1))
    }

    /// Where chunk `index` ends.
    fn end(self, index: usize) -> u64 {
        (self.offset + ((index + 1) * self.size) as u64).min(self.len)
    }
}

/// Parses the lines that start in chunk `index`, reading past the chunk to finish
/// its last line.
fn parse_chunk(
    chunks: Chunks<'_>,
    index: usize,
    buf: &mut ReadBuf,
    decoder: &mut EntryDecoder,
    mut block: Block,
) -> std::io::Result<ChunkOut> {
    let file = chunks.file;
    let start = chunks.offset + (index * chunks.size) as u64;
    let end = chunks.end(index);
    // Chunks after the first also read the byte before them: a line starts at their
    // first byte when it is a `\n`.
    let read_start = if index == 0 { start } else { start - 1 };
    let want = (end - read_start) as usize;
    let mut filled = buf.read(file, read_start, 0, want)?;
    let first = if index == 0 {
        0
    } else {
        // A `\n` at buf[i] starts a line at buf[i + 1], which is in the chunk when
        // i + 1 < want.
        match memchr::memchr(b'\n', buf.data(0..filled.min(want - 1))) {
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
        if let Some(newline) = memchr::memchr(b'\n', buf.data(search..filled)) {
            break Some(search + newline + 1);
        }
        search = filled;
        let more = buf.read(
            file,
            read_start + filled as u64,
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
            let last = memchr::memrchr(b'\n', buf.data(first..filled));
            (last.map_or(first, |last| first + last + 1), true)
        }
    };
    parse_block(buf.data(first..stop), decoder, &mut block);
    Ok(ChunkOut {
        first: Some(read_start + first as u64),
        end: read_start + stop as u64,
        cut,
        block,
    })
}

/// Readies the calling thread's heap for about `bytes` of allocations.
///
/// glibc's malloc grows the heap of a thread other than the main one by exactly the
/// pages an allocation needs, one `mprotect` call each time: for a worker decoding
/// tens of MB of small strings that is thousands of calls, with the address-space
/// lock contended (measured: a tenth of a 100 MB load's CPU time). Allocating the
/// expected growth in blocks just below the size malloc would map separately
/// (128 KB), then freeing them, grows the heap in a few hundred calls; the memory is
/// not touched, so it costs no page faults. Other allocators only see a few
/// allocations freed at once.
fn reserve_heap(bytes: usize) {
    const BLOCK: usize = 120 << 10;
    // A worker may parse more than its share; the decoded text is about as long as
    // the file's. (Past 64 MB, glibc starts a new heap, which the blocks then grow.)
    let blocks = (bytes + bytes / 2).min(128 << 20) / BLOCK;
    let mut reserved: Vec<Vec<u8>> = Vec::new();
    if reserved.try_reserve_exact(blocks).is_err() {
        return;
    }
    for _ in 0..blocks {
        // Only an optimisation: where memory is short (strict overcommit), stop
        // rather than fail; the load then grows the heap as it goes.
        let mut block = Vec::new();
        if block.try_reserve_exact(BLOCK).is_err() {
            break;
        }
        reserved.push(block);
    }
    drop(reserved);
}

/// A chunk's outcome, as a worker sends it.
type ChunkResult = std::io::Result<ChunkOut>;

/// Merges, in file order, the chunks of a parallel read as they become available.
struct ChunkMerger {
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
        chunks: Chunks<'_>,
        reader: &mut LineReader<'_>,
        sink: &mut dyn FnMut(Entry),
        spare: &Mutex<Vec<Block>>,
    ) -> Result<bool, StoreError> {
        while let Some(out) = self.pending.get_mut(self.merged).and_then(Option::take) {
            let chunk_end = chunks.end(self.merged);
            self.merged += 1;
            let mut out = out.map_err(read_error(reader.path))?;
            match out.first {
                Some(first) if first == self.pos => {
                    if self.merged == 1 {
                        // Size the uuid set for the whole file at once, from the
                        // first chunk: growing it rehashes every uuid each time.
                        let parsed = (out.end - chunks.offset).max(1);
                        let estimate =
                            out.block.entries.len() as u64 * (chunks.len - chunks.offset) / parsed;
                        let estimate = usize::try_from(estimate).unwrap_or(0);
                        reader.seen.reserve(estimate);
                        reader.expected.set(estimate);
                    }
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

/// How many chunks past the last one merged each thread of a parallel read may
/// parse: a reader that takes the entries slowly (one that writes each out as it
/// comes) holds these, not the whole file parsed ahead of it.
const CHUNKS_AHEAD_PER_THREAD: usize = 4;

/// How far the merging of a parallel read has come, for the workers to wait on.
struct MergeProgress {
    /// Chunks merged, and whether the read is over.
    state: Mutex<(usize, bool)>,
    changed: Condvar,
}

impl MergeProgress {
    fn set(&self, merged: usize, over: bool) {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        *state = (merged, over || state.1);
        self.changed.notify_all();
    }

    /// Waits until chunk `index` is fewer than `ahead` chunks past the last merged;
    /// `false` when the read is over.
    fn wait_for(&self, index: usize, ahead: usize) -> bool {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        while !state.1 && index >= state.0 + ahead {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(|poison| poison.into_inner());
        }
        !state.1
    }
}

/// Parses `[offset, len)` of `file` on `threads` threads (the calling one included),
/// each reading and parsing one chunk of `chunk` bytes at a time; the calling thread
/// also merges the chunks in file order. Returns the offset where merged lines end:
/// `len` or past it, unless the file ended in a torn line or changed meanwhile (the
/// caller reads on from there).
fn read_parallel(
    file: &File,
    offset: u64,
    len: u64,
    threads: usize,
    chunk: usize,
    reader: &mut LineReader<'_>,
    sink: &mut dyn FnMut(Entry),
) -> Result<u64, StoreError> {
    let chunks = Chunks {
        file,
        offset,
        len,
        size: chunk,
    };
    let count = chunks.count();
    if count == 0 {
        return Ok(offset);
    }
    let next = AtomicUsize::new(0);
    let ahead = threads * CHUNKS_AHEAD_PER_THREAD;
    let progress = MergeProgress {
        state: Mutex::new((0, false)),
        changed: Condvar::new(),
    };
    // Emptied blocks, so that their memory is reused.
    let spare: Mutex<Vec<Block>> = Mutex::new(Vec::new());
    let (sender, receiver) = mpsc::channel::<(usize, ChunkResult)>();
    let mut merger = ChunkMerger {
        pending: std::iter::repeat_with(|| None).take(count).collect(),
        merged: 0,
        pos: offset,
        stopped: false,
    };
    let lean = reader.lean;
    let take_block = || {
        spare
            .lock()
            .ok()
            .and_then(|mut blocks| blocks.pop())
            .unwrap_or_default()
    };
    std::thread::scope(|scope| {
        for _ in 1..threads.min(count) {
            let sender = sender.clone();
            let next = &next;
            let progress = &progress;
            scope.spawn(move || {
                reserve_heap(chunks.share(threads));
                let mut buf = ReadBuf::default();
                let mut decoder = EntryDecoder::new(lean);
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= count || !progress.wait_for(index, ahead) {
                        break;
                    }
                    let out = parse_chunk(chunks, index, &mut buf, &mut decoder, take_block());
                    if sender.send((index, out)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(sender);
        let mut buf = ReadBuf::default();
        let mut decoder = EntryDecoder::new(lean);
        let result = loop {
            while let Ok((index, out)) = receiver.try_recv() {
                merger.pending[index] = Some(out);
            }
            match merger.merge_ready(chunks, reader, sink, &spare) {
                Ok(false) => {}
                Ok(true) => break Ok(merger.pos),
                Err(error) => break Err(error),
            }
            progress.set(merger.merged, false);
            // Past the window, the workers' chunks are waited for instead.
            let index = if next.load(Ordering::Relaxed) < merger.merged + ahead {
                next.fetch_add(1, Ordering::Relaxed)
            } else {
                count
            };
            if index < count {
                let out = parse_chunk(chunks, index, &mut buf, &mut decoder, take_block());
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
        next.store(count, Ordering::Relaxed);
        progress.set(merger.merged, true);
        drop(receiver);
        result
    })
}

/// Reads a transcript file without modifying it: `None` when it does not exist.
///
/// A torn last line is ignored with a warning; corrupt lines are skipped with a
/// warning naming file and line; of two lines with one uuid, the first is kept.
///
/// The file itself is never a symbolic link: one is refused (see
/// [`load_file_beneath`] to guard the folders on its way too).
pub fn load_file(path: &Path, session_id: &str) -> Result<Option<Loaded>, StoreError> {
    load_file_beneath(crate::fs::parent_of(path), path, session_id)
}

/// [`load_file`], reaching `path` from `root` without following any symbolic link
/// below it.
pub fn load_file_beneath(
    root: &Path,
    path: &Path,
    session_id: &str,
) -> Result<Option<Loaded>, StoreError> {
    let mut entries = Vec::new();
    let expected = Cell::new(0);
    let warnings = read_beneath(root, path, session_id, &expected, false, &mut |entry| {
        push_expected(&mut entries, &expected, entry)
    })?;
    Ok(warnings.map(|warnings| Loaded { entries, warnings }))
}

/// Reads a transcript for a reader that shows the conversation, handing each entry
/// to `sink` as soon as it is in order rather than collecting them; returns the
/// warnings, or `None` when the file does not exist. `expected` is set as
/// `LineReader::expected` says. The entries come without their `model` field (the
/// model a reply's call asked for, which only the usage ledger reads). A
/// chat-written session has one on every reply, and building it was six allocations
/// per reply, a tenth of `show`'s time on short turns.
pub fn read_view_beneath(
    root: &Path,
    path: &Path,
    session_id: &str,
    expected: &Cell<usize>,
    sink: &mut dyn FnMut(Entry),
) -> Result<Option<Vec<LoadWarning>>, StoreError> {
    read_beneath(root, path, session_id, expected, true, sink)
}

/// Reads a transcript as [`load_file_beneath`] does, handing each entry to `sink`
/// as soon as it is in order rather than collecting them; returns the warnings, or
/// `None` when the file does not exist.
pub fn read_file_beneath(
    root: &Path,
    path: &Path,
    session_id: &str,
    sink: &mut dyn FnMut(Entry),
) -> Result<Option<Vec<LoadWarning>>, StoreError> {
    read_beneath(root, path, session_id, &Cell::new(0), false, sink)
}

/// Reads a transcript as [`load_file_beneath`] does, handing each entry to `sink`;
/// with `lean`, as [`read_view_beneath`] does.
fn read_beneath(
    root: &Path,
    path: &Path,
    session_id: &str,
    expected: &Cell<usize>,
    lean: bool,
    sink: &mut dyn FnMut(Entry),
) -> Result<Option<Vec<LoadWarning>>, StoreError> {
    let Some(file) = crate::fs::open_read_beneath(root, path)? else {
        return Ok(None);
    };
    let mut seen = UuidSet::default();
    let mut reader = LineReader {
        lean,
        ..LineReader::new(path, session_id, &mut seen, expected)
    };
    let end = read_from(&file, 0, &mut reader, sink)?;
    let mut warnings = reader.warnings;
    if end.torn_len > 0 {
        let line = reader.line + 1;
        warnings.push(torn_warning(path, line, end.torn_len, "ignored"));
    }
    Ok(Some(warnings))
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// A line of a test file.
    #[derive(Clone, Debug)]
    enum Line {
        /// An entry with uuid number `.0` (duplicates are likely) and `.1` bytes of text.
        Entry(u128, usize),
        Blank,
        Corrupt,
        /// A bare message (a line holding only a message).
        Bare,
        /// Valid JSON, but not an entry.
        NotEntry,
    }

    fn line() -> impl Strategy<Value = Line> {
        prop_oneof![
            12 => (0u128..12, prop_oneof![0usize..40, 0usize..700]).prop_map(|(id, len)| Line::Entry(id, len)),
            1 => Just(Line::Blank),
            1 => Just(Line::Corrupt),
            1 => Just(Line::Bare),
            1 => Just(Line::NotEntry),
        ]
    }

    fn render(line: &Line) -> Vec<u8> {
        let mut bytes = match line {
            Line::Entry(id, len) => {
                let mut entry = Entry::message(Message::user("é\"x\n".repeat(*len / 4)));
                entry.uuid = Uuid::from_u128(id + 1);
                serde_json::to_vec(&entry).unwrap()
            }
            Line::Blank => b" \t ".to_vec(),
            Line::Corrupt => br#"{"uuid": "0193c0de-0000-7000-8000-0000000"#.to_vec(),
            Line::Bare => br#"{"role":"user","content":"hi"}"#.to_vec(),
            Line::NotEntry => b"[1,2]".to_vec(),
        };
        bytes.push(b'\n');
        bytes
    }

    type Read = (Vec<Entry>, Vec<(usize, String)>, u64, u64, usize);

    /// The file's lines after `offset` (where line `first` ends), read one by one with
    /// the derived decoder: what the readers must return.
    fn line_by_line(bytes: &[u8], offset: usize, first: usize, session_id: &str) -> Read {
        let rest = &bytes[offset..];
        let complete = memchr::memrchr(b'\n', rest).map_or(0, |last| last + 1);
        let mut seen = UuidSet::default();
        let (mut entries, mut warnings) = (Vec::new(), Vec::new());
        let mut lines = 0;
        for (i, line) in rest[..complete]
            .split_inclusive(|byte| *byte == b'\n')
            .enumerate()
        {
            lines += 1;
            let number = first + i + 1;
            let line = &line[..line.len() - 1];
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let entry = match serde_json::from_slice::<Entry>(line) {
                Ok(entry) => entry,
                Err(_) => match parse_line(line) {
                    SlowLine::Bare(message) => Entry {
                        uuid: Entry::bare_line_uuid(session_id, number),
                        ts: Timestamp::UNIX_EPOCH,
                        kind: None,
                        message: Some(message),
                        usage: None,
                        extra: Default::default(),
                    },
                    SlowLine::Skipped(message) => {
                        warnings.push((number, message));
                        continue;
                    }
                    SlowLine::Entry(_) => panic!("the derived decoder refused this line"),
                },
            };
            if seen.insert(entry.uuid) {
                entries.push(entry);
            } else {
                let message = format!(
                    "duplicate uuid {} (an earlier line has it); line skipped",
                    entry.uuid
                );
                warnings.push((number, message));
            }
        }
        let complete_len = (offset + complete) as u64;
        let torn_len = (rest.len() - complete) as u64;
        (entries, warnings, complete_len, torn_len, first + lines)
    }

    /// Reads like `read_from` does, with `chunk`-byte chunks on `threads` threads.
    fn read_in_chunks(
        file: &File,
        path: &Path,
        offset: u64,
        first: usize,
        threads: usize,
        chunk: usize,
    ) -> Read {
        let len = file.metadata().unwrap().len();
        let mut seen = UuidSet::default();
        let mut entries = Vec::new();
        let expected = Cell::new(0);
        let mut reader = LineReader {
            line: first,
            ..LineReader::new(path, "s", &mut seen, &expected)
        };
        let mut sink = |entry| entries.push(entry);
        let pos = read_parallel(file, offset, len, threads, chunk, &mut reader, &mut sink).unwrap();
        let end = read_sequential(file, pos, len, &mut reader, &mut sink).unwrap();
        // A file that does not change is read by the workers up to its torn tail.
        assert_eq!(pos, end.complete_len, "the parallel pass stopped early");
        let warnings = reader
            .warnings
            .iter()
            .map(|w| (w.line, w.message.clone()))
            .collect();
        let lines = reader.line;
        (entries, warnings, end.complete_len, end.torn_len, lines)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Chunks of any size (lines longer than several chunks, chunks without a line
        /// start, lines ending right at a chunk's end), any number of threads, reading
        /// from any line on, with a torn tail or not: the parallel reader returns what
        /// reading line by line returns, warnings and line numbers included.
        #[test]
        fn parallel_reading_equals_reading_line_by_line(
            lines in proptest::collection::vec(line(), 0..40),
            torn in proptest::option::of("[a-z{\"]{1,30}"),
            skip in 0usize..4,
            chunk in prop_oneof![1usize..8, 8usize..400, 400usize..5000],
            threads in 1usize..5,
        ) {
            let mut bytes: Vec<u8> = lines.iter().flat_map(render).collect();
            if let Some(torn) = &torn {
                bytes.extend_from_slice(torn.as_bytes());
            }
            let skip = skip.min(lines.len());
            let offset: usize = lines[..skip].iter().map(|line| render(line).len()).sum();
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("s.jsonl");
            std::fs::write(&path, &bytes).unwrap();
            let file = File::open(&path).unwrap();
            let read = read_in_chunks(&file, &path, offset as u64, skip, threads, chunk);
            prop_assert_eq!(read, line_by_line(&bytes, offset, skip, "s"));
        }
    }

    /// A file big enough for `load_file` to read it in parallel with the real chunk
    /// size, with every kind of line, duplicates across chunks and a torn tail.
    #[test]
    fn a_big_file_loads_as_read_line_by_line() {
        let mut bytes = Vec::new();
        let mut i = 0u128;
        while bytes.len() < 2 * PARALLEL_CHUNK + PARALLEL_CHUNK / 2 {
            let line = match i % 50 {
                7 => Line::Blank,
                13 => Line::Corrupt,
                21 => Line::Bare,
                33 => Line::NotEntry,
                // A uuid from far back in the file: a duplicate.
                41 => Line::Entry(i / 3, 100),
                _ => Line::Entry(i, (i as usize * 37) % 3000),
            };
            bytes.extend_from_slice(&render(&line));
            i += 1;
        }
        bytes.extend_from_slice(br#"{"uuid":"#);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.jsonl");
        std::fs::write(&path, &bytes).unwrap();
        let loaded = load_file(&path, "big").unwrap().unwrap();
        let (entries, mut warnings, _, torn_len, lines) = line_by_line(&bytes, 0, 0, "big");
        warnings.push((
            lines + 1,
            torn_warning(&path, lines + 1, torn_len, "ignored").message,
        ));
        assert_eq!(loaded.entries, entries);
        let got: Vec<_> = loaded
            .warnings
            .iter()
            .map(|w| (w.line, w.message.clone()))
            .collect();
        assert_eq!(got, warnings);
        assert!(
            warnings
                .iter()
                .any(|(_, message)| message.starts_with("duplicate uuid"))
        );
    }
}
