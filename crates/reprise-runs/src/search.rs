//! Searching the whole history: every message of every run's conversation and of its
//! subagents, newest runs first.
//!
//! A conversation file holds JSON lines, so what the person typed is stored escaped:
//! `say "hi"` is `say \"hi\"` on disk, a newline is `\n`, a backslash `\\`, and a tool
//! call's arguments (a JSON text inside a JSON string) are escaped twice. A literal
//! query is therefore looked for, in the raw bytes, in each of those spellings at once
//! (and with non-ASCII characters as `\uXXXX`, how other writers spell them) by
//! ripgrep's line searcher (`grep-searcher`, with an Aho-Corasick matcher of the
//! spellings); only the lines it finds are parsed, and the query is then matched
//! against the decoded text, which decides (see [`crate::search_text`]: a literal
//! in time linear in the text, whatever its length). A regular expression cannot be
//! rewritten into its escaped spelling, so in regex mode every line is decoded and
//! matched. A query ignoring case is looked for by its longest run that ASCII case
//! folding matches as Unicode folding does. Files are searched by several threads.
//!
//! What is searched: the messages of the person, the model (its text and its tool
//! calls) and the tools, and the notes and compaction summaries a run holds (an
//! import's notes, a compaction's summary); never system messages. A snippet shows
//! at most [`MATCH_CHARS`] characters of a long match.
//!
//! Snippets pass the redactor before they are returned (the whole message is
//! redacted, then the match looked for again), so a search never prints a secret
//! that the run's other files would have masked; a match inside a secret shows the
//! redacted text around where it was, without a highlight.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use jiff::Timestamp;
use reprise_redact::Redactor;
use uuid::Uuid;

use crate::error::RunError;
use crate::run::RunSummary;
use crate::search_folded::FoldBuffers;
use crate::search_text::{Algorithm, LinePrefilter, TextMatcher};
use crate::store::{CONVERSATION_JSONL, SUBAGENTS_DIR};
use reprise_session::parts::jsonl_stems;
use reprise_session::{Entry, EntryLineDecoder};
use reprise_session::{Message, Role};

/// Characters of context shown before a match in a snippet.
const BEFORE_CHARS: usize = 50;
/// Characters shown from the start of a match on.
const AFTER_CHARS: usize = 100;
/// The most characters of one match a snippet shows.
pub const MATCH_CHARS: usize = 300;
/// Bytes on each side of a hit's first match that are redacted to cut its snippet
/// from (see [`snippet_at`]).
const REDACTED_MARGIN: usize = 64 * 1024;

/// Which messages a search looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SearchRole {
    /// The person's messages.
    User,
    /// The model's replies and the tool calls it made.
    Assistant,
    /// Tool results.
    Tool,
}

impl SearchRole {
    fn admits(self, role: &Role) -> bool {
        matches!(
            (self, role),
            (SearchRole::User, Role::User)
                | (SearchRole::Assistant, Role::Assistant)
                | (SearchRole::Tool, Role::Tool)
        )
    }
}

/// Whether a search query has an upper-case letter (smart case: then it matches
/// its case only). In a regular expression the letter after a `\` is an escape
/// (`\S`, `\W`), not text.
pub fn has_upper_case(query: &str, regex: bool) -> bool {
    let mut chars = query.chars();
    while let Some(c) = chars.next() {
        if regex && c == '\\' {
            chars.next();
        } else if c.is_uppercase() {
            return true;
        }
    }
    false
}

/// What to search for.
#[derive(Clone, Debug)]
pub struct SearchQuery {
    /// The text (or, with `regex`, the regular expression) to find.
    pub pattern: String,
    /// Whether `pattern` is a regular expression (Rust `regex` syntax).
    pub regex: bool,
    /// Whether case is ignored.
    pub ignore_case: bool,
    /// Only messages of this role (system messages are never searched).
    pub role: Option<SearchRole>,
    /// At most this many hits per run (its conversation and its subagents'
    /// together, the first ones in order); `None` for every hit. A file is read no
    /// further than its limit, so a small limit makes a search of many hits fast.
    pub max_per_run: Option<usize>,
    /// What snippets pass before they are returned.
    pub redactor: Redactor,
}

impl SearchQuery {
    /// A case-sensitive literal search over every role.
    pub fn literal(pattern: impl Into<String>) -> SearchQuery {
        SearchQuery {
            pattern: pattern.into(),
            regex: false,
            ignore_case: false,
            role: None,
            max_per_run: None,
            redactor: Redactor::new(),
        }
    }
}

/// One message that matched.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchHit {
    /// The index of its run in the runs given to [`search_runs`].
    pub run: usize,
    /// The subagent whose transcript holds it; `None` for the main conversation.
    pub agent: Option<String>,
    /// The entry's uuid.
    pub entry: Uuid,
    /// When the entry was made.
    pub ts: Timestamp,
    /// `user`, `assistant` or `tool`.
    pub role: String,
    /// The redacted text around the first match, whitespace runs shown as one space,
    /// with `…` where it was cut.
    pub snippet: String,
    /// The byte ranges of the matches inside `snippet`.
    pub highlights: Vec<(usize, usize)>,
    /// How many matches the message holds.
    pub matches: usize,
    /// Whether its run has more hits after this one, left out by
    /// [`SearchQuery::max_per_run`] (set on the last hit kept of such a run).
    pub more_in_run: bool,
}

/// One file of a run to search: its conversation, or a subagent's.
struct SearchFile {
    run: usize,
    agent: Option<String>,
    path: PathBuf,
}

/// A [`SearchQuery`] made ready to match stored entries: the matcher that decides on
/// a message's decoded text and, for a literal query, the one that finds candidate
/// lines. Catalogs that find candidate lines themselves (a database) hand each one to
/// [`SearchMatcher::hit`].
pub struct SearchMatcher<'q> {
    query: &'q SearchQuery,
    decided: TextMatcher,
    prefilter: Option<LinePrefilter>,
}

impl<'q> SearchMatcher<'q> {
    /// The matchers of `query`; a pattern that is not a valid regular expression is
    /// [`RunError::Pattern`].
    pub fn new(query: &'q SearchQuery) -> Result<Self, RunError> {
        let decided = TextMatcher::new(&query.pattern, query.regex, query.ignore_case)?;
        let prefilter = if query.regex {
            None
        } else {
            LinePrefilter::new(&spellings(&query.pattern), query.ignore_case)
        };
        Ok(SearchMatcher {
            query,
            decided,
            prefilter,
        })
    }

    /// How the decoded text is matched.
    pub fn algorithm(&self) -> Algorithm {
        self.decided.algorithm()
    }

    /// The query matched.
    pub fn query(&self) -> &SearchQuery {
        self.query
    }

    /// For a literal query, the ways its text is spelled inside a stored JSON line (as
    /// they appear there, not escaped for a regex): a line that holds none of them
    /// (ignoring case when the query does) is no hit. `None` for a regular
    /// expression, which is matched on every line.
    pub fn spellings(&self) -> Option<Vec<String>> {
        (!self.query.regex).then(|| spellings(&self.query.pattern))
    }

    /// The hit in one stored entry, its JSON line, of the run at index `run` (in the
    /// transcript of subagent `agent`, or the main one): the line holds one of the
    /// [`spellings`](Self::spellings) of a literal query, and the message's decoded
    /// text matches, exactly as [`search_runs`] decides for a line of a file.
    pub fn hit(&self, line: &[u8], run: usize, agent: Option<&str>) -> Option<SearchHit> {
        if let Some(prefilter) = &self.prefilter
            && !prefilter.holds(line)
        {
            return None;
        }
        self.decoded_hit(line, run, agent, true)
    }

    /// The hit in a line, deciding on its decoded text alone; with `snippet` false,
    /// the hit's snippet is left empty (a hit only counted).
    fn decoded_hit(
        &self,
        line: &[u8],
        run: usize,
        agent: Option<&str>,
        snippet: bool,
    ) -> Option<SearchHit> {
        match_line(line, run, agent, &self.decided, self.query, snippet)
    }
}

/// Searches the conversations (and subagent transcripts) of `runs`, in their order;
/// hits come back in that order, and within a run in file order (the main
/// conversation first). A pattern that is not a valid regular expression is
/// [`RunError::Pattern`]. Files that cannot be read are skipped (a run deleted
/// meanwhile).
pub fn search_runs(runs: &[RunSummary], query: &SearchQuery) -> Result<Vec<SearchHit>, RunError> {
    let matcher = SearchMatcher::new(query)?;
    // A run's subagents are listed by the thread that searches it: 2,000 runs are
    // 2,000 folders to look into, which would otherwise come before any search.
    let files_of = |run: usize| -> Vec<SearchFile> {
        let dir = &runs[run].dir;
        let mut files = vec![SearchFile {
            run,
            agent: None,
            path: dir.join(CONVERSATION_JSONL),
        }];
        let subagents = dir.join(SUBAGENTS_DIR);
        for name in jsonl_stems(&subagents).unwrap_or_default() {
            files.push(SearchFile {
                run,
                path: subagents.join(format!("{name}.jsonl")),
                agent: Some(name),
            });
        }
        files
    };
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 8);
    let next = AtomicUsize::new(0);
    let limit = query.max_per_run.unwrap_or(usize::MAX);
    // A file is read up to its `limit` hits, then on to one more only to know that
    // its run has more: that one gets no snippet, the costly part of a hit.
    let search_file = |file: &SearchFile, buffers: &mut ThreadBuffers| -> FileHits {
        let ThreadBuffers {
            searcher,
            folded: fold_buffers,
            line,
        } = buffers;
        let mut hits = Vec::new();
        let mut more = false;
        let mut on_line = |line: &[u8]| {
            let full = hits.len() >= limit;
            match matcher.decoded_hit(line, file.run, file.agent.as_deref(), !full) {
                Some(_) if full => {
                    more = true;
                    false
                }
                Some(hit) => {
                    hits.push(hit);
                    true
                }
                None => true,
            }
        };
        match &matcher.prefilter {
            Some(LinePrefilter::Folded(folded)) => {
                let _ = folded.search_file(&file.path, fold_buffers, &mut on_line);
            }
            Some(matcher) => {
                let _ = searcher.search_path(matcher, &file.path, LineSink(&mut on_line));
            }
            // Line by line, not the file whole: memory as the longest line, not
            // as the session.
            None => {
                let _ = each_line(&file.path, line, &mut on_line);
            }
        }
        FileHits { hits, more }
    };
    let mut per_run: Vec<Vec<FileHits>> = Vec::new();
    per_run.resize_with(runs.len(), Vec::new);
    let results = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.min(runs.len().max(1)))
            .map(|_| {
                scope.spawn(|| {
                    // One searcher (and its buffers) per thread, reused for every file.
                    let mut buffers = ThreadBuffers {
                        searcher: SearcherBuilder::new()
                            .binary_detection(BinaryDetection::none())
                            .line_number(false)
                            .build(),
                        folded: FoldBuffers::default(),
                        line: Vec::new(),
                    };
                    let mut found = Vec::new();
                    loop {
                        let run = next.fetch_add(1, Ordering::Relaxed);
                        if run >= runs.len() {
                            break;
                        }
                        let hits: Vec<FileHits> = files_of(run)
                            .iter()
                            .map(|file| search_file(file, &mut buffers))
                            .filter(|hits| !hits.hits.is_empty() || hits.more)
                            .collect();
                        if !hits.is_empty() {
                            found.push((run, hits));
                        }
                    }
                    found
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join())
            .collect::<Vec<_>>()
    });
    for result in results {
        // A search thread that panicked is a bug: its panic goes on here.
        let found = result.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        for (run, hits) in found {
            per_run[run] = hits;
        }
    }
    if query.max_per_run.is_none() {
        // Every hit is kept: the files' hits are joined, not moved one by one into a
        // second list (a long session's hits would be held twice).
        let mut all: Vec<SearchHit> = Vec::new();
        for mut found in per_run.into_iter().flatten() {
            if all.is_empty() {
                all = found.hits;
            } else {
                all.append(&mut found.hits);
            }
        }
        return Ok(all);
    }
    let mut kept = PerRun::new(query.max_per_run);
    for (run, files) in per_run.into_iter().enumerate() {
        for found in files {
            found.hits.into_iter().for_each(|hit| kept.push(hit));
            if found.more {
                kept.more(run);
            }
        }
    }
    Ok(kept.finish())
}

/// What a search thread keeps from one file to the next.
struct ThreadBuffers {
    /// Finds the lines of a literal query respecting case.
    searcher: Searcher,
    /// Finds the lines of a literal query ignoring case.
    folded: FoldBuffers,
    /// The line read last, in a regex search (which reads every line).
    line: Vec<u8>,
}

/// Hands each line of the file at `path` (without its `\n`) to `on_line`, in order,
/// until it returns false; `line` holds one line at a time.
fn each_line(
    path: &std::path::Path,
    line: &mut Vec<u8>,
    on_line: &mut dyn FnMut(&[u8]) -> bool,
) -> std::io::Result<()> {
    use std::io::BufRead;
    let mut reader = std::io::BufReader::with_capacity(64 * 1024, std::fs::File::open(path)?);
    loop {
        line.clear();
        if reader.read_until(b'\n', line)? == 0 {
            return Ok(());
        }
        let text = line.strip_suffix(b"\n").unwrap_or(line);
        if !on_line(text) {
            return Ok(());
        }
    }
}

/// What one file gave: its first hits, and whether it has more than were taken.
#[derive(Default)]
struct FileHits {
    hits: Vec<SearchHit>,
    more: bool,
}

/// The first [`SearchQuery::max_per_run`] hits of each run, from hits given in run
/// order, with [`SearchHit::more_in_run`] set where a run had more. Catalogs that
/// find every hit themselves (a database) pass them through it.
pub struct PerRun {
    limit: usize,
    kept: Vec<SearchHit>,
    /// The run of the hits last given, and how many of its hits were given.
    current: Option<(usize, usize)>,
}

impl PerRun {
    /// Keeps at most `limit` hits of each run (`None`: every hit).
    pub fn new(limit: Option<usize>) -> PerRun {
        PerRun {
            limit: limit.unwrap_or(usize::MAX),
            kept: Vec::new(),
            current: None,
        }
    }

    /// The next hit, in run order.
    pub fn push(&mut self, hit: SearchHit) {
        let run = hit.run;
        let given = match self.current {
            Some((current, given)) if current == run => given + 1,
            _ => 1,
        };
        self.current = Some((run, given));
        if given <= self.limit {
            self.kept.push(hit);
        } else {
            self.more(run);
        }
    }

    /// Says that `run`, whose hits were the last given, has more than were given.
    fn more(&mut self, run: usize) {
        if let Some(last) = self.kept.last_mut().filter(|last| last.run == run) {
            last.more_in_run = true;
        }
    }

    /// The hits kept.
    pub fn finish(self) -> Vec<SearchHit> {
        self.kept
    }
}

/// Hands each line the searcher found to a closure; stops when it returns false.
struct LineSink<'f, F: FnMut(&[u8]) -> bool>(&'f mut F);

impl<F: FnMut(&[u8]) -> bool> Sink for LineSink<'_, F> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, found: &SinkMatch<'_>) -> Result<bool, std::io::Error> {
        Ok((self.0)(found.bytes()))
    }
}

/// The ways `text` can be spelled inside a JSON line: as a JSON string's content,
/// with non-ASCII as `\uXXXX`, and escaped twice (inside a tool call's arguments).
fn spellings(text: &str) -> Vec<String> {
    let once = json_escaped(text);
    let mut spellings = vec![once.clone(), json_escaped(&once)];
    if !text.is_ascii() {
        let mut ascii = String::with_capacity(once.len() * 2);
        for unit in once.chars() {
            if unit.is_ascii() {
                ascii.push(unit);
            } else {
                let mut buf = [0u16; 2];
                for half in unit.encode_utf16(&mut buf) {
                    ascii.push_str(&format!("\\u{half:04x}"));
                }
            }
        }
        spellings.push(ascii);
    }
    spellings.sort();
    spellings.dedup();
    spellings
}

/// `text` as the inside of a JSON string.
fn json_escaped(text: &str) -> String {
    let quoted = serde_json::Value::String(text.to_owned()).to_string();
    quoted[1..quoted.len() - 1].to_owned()
}

/// The hit in one JSON line, if its message (or note, or compaction summary)
/// matches.
fn match_line(
    line: &[u8],
    run: usize,
    agent: Option<&str>,
    decided: &TextMatcher,
    query: &SearchQuery,
    with_snippet: bool,
) -> Option<SearchHit> {
    // The loader's decoder, one per search thread: its buffer is kept between the
    // lines it decodes.
    thread_local! {
        static DECODER: std::cell::RefCell<EntryLineDecoder> = Default::default();
    }
    let entry: Entry = DECODER
        .with(|decoder| decoder.borrow_mut().decode(trim_line(line)))
        .ok()?;
    let (role, fields) = match entry.as_message() {
        Some(message) => {
            if message.role == Role::System
                || !query.role.is_none_or(|role| role.admits(&message.role))
            {
                return None;
            }
            (message.role.as_str(), searchable(message))
        }
        // Notes and summaries are no one's message: a search of one role leaves
        // them out.
        None if query.role.is_some() => return None,
        None => {
            let (role, field) = match entry.kind.as_deref()? {
                NOTE => ("note", "text"),
                COMPACTION => ("compaction", "summary"),
                _ => return None,
            };
            let text = entry.extra.get(field)?.as_str()?.to_owned();
            (role, vec![text])
        }
    };
    let mut matches = 0;
    let mut first = None;
    for field in &fields {
        let found = decided.find_all(field);
        if first.is_none()
            && let Some(&at) = found.first()
        {
            first = Some((field, at));
        }
        matches += found.len();
    }
    let (first, at) = first?;
    let (snippet, highlights) = if with_snippet {
        snippet_at(first, at, decided, &query.redactor)
    } else {
        (String::new(), Vec::new())
    };
    Some(SearchHit {
        run,
        agent: agent.map(str::to_owned),
        entry: entry.uuid,
        ts: entry.ts,
        role: role.to_owned(),
        snippet,
        highlights,
        matches,
        more_in_run: false,
    })
}

/// The `kind` of a note entry (kept by an import) and of a compaction marker.
const NOTE: &str = "note";
const COMPACTION: &str = "compaction";

fn trim_line(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// What of a message is searched: its text, and each tool call as its name followed
/// by its arguments' string values decoded (or the raw arguments when they are not
/// JSON).
fn searchable(message: &Message) -> Vec<String> {
    let mut fields = vec![message.text()];
    for call in message.calls() {
        let mut field = call.function.name.clone();
        match serde_json::from_str::<serde_json::Value>(&call.function.arguments) {
            Ok(value) => push_leaves(&value, &mut field),
            Err(_) => {
                field.push(' ');
                field.push_str(&call.function.arguments);
            }
        }
        fields.push(field);
    }
    fields
}

fn push_leaves(value: &serde_json::Value, out: &mut String) {
    match value {
        serde_json::Value::String(text) => {
            out.push(' ');
            out.push_str(text);
        }
        serde_json::Value::Array(items) => items.iter().for_each(|item| push_leaves(item, out)),
        serde_json::Value::Object(map) => map.values().for_each(|item| push_leaves(item, out)),
        other => {
            out.push(' ');
            out.push_str(&other.to_string());
        }
    }
}

/// [`snippet_at`] the first match in `text`, which holds one.
#[cfg(test)]
fn snippet(
    text: &str,
    decided: &TextMatcher,
    redactor: &Redactor,
) -> (String, Vec<(usize, usize)>) {
    let at = decided.find(text).expect("a snippet is cut around a match");
    snippet_at(text, at, decided, redactor)
}

/// The redacted snippet around the first match in `text`, `first` (its byte range),
/// and where the matches are in it. A match longer than [`MATCH_CHARS`] is cut.
fn snippet_at(
    text: &str,
    first: (usize, usize),
    decided: &TextMatcher,
    redactor: &Redactor,
) -> (String, Vec<(usize, usize)>) {
    let original = first.0;
    // Only the text around the match is redacted: a snippet shows a few hundred
    // characters of it, and redacting a megabyte of tool output for each hit would
    // cost a thousand times that. The margin is wider than any secret the redactor
    // knows (a PEM key is a few kilobytes), so a secret cut at the region's edge
    // lies far outside the snippet.
    let from = floor_char(text, original.saturating_sub(REDACTED_MARGIN));
    let to = floor_char(
        text,
        original.saturating_add(REDACTED_MARGIN).min(text.len()),
    );
    let (text, original) = (&text[from..to], original - from);
    let redacted = redactor.redact(text);
    // Text the redactor left as it was holds a literal's first match where it was
    // (a regex may match otherwise in a part of the text: `^`, `\b`).
    let found = match &redacted {
        std::borrow::Cow::Borrowed(_) if decided.is_literal() && first.1 <= to => {
            Some((original, first.1 - from))
        }
        _ => decided.find(&redacted),
    };
    // Where the window starts: before the first match in the redacted text, or near
    // where the match was when redaction hid it.
    let anchor = found.map_or(original.min(redacted.len()), |(start, _)| start);
    let anchor = floor_char(&redacted, anchor);
    let start = redacted[..anchor]
        .char_indices()
        .rev()
        .nth(BEFORE_CHARS - 1)
        .map_or(0, |(at, _)| at);
    let end = redacted[anchor..]
        .char_indices()
        .nth(AFTER_CHARS)
        .map_or(redacted.len(), |(at, _)| anchor + at);
    // A long match is shown whole, up to a bound.
    let longest = redacted[anchor..]
        .char_indices()
        .nth(MATCH_CHARS)
        .map_or(redacted.len(), |(at, _)| anchor + at);
    let end = match found {
        Some((_, match_end)) if match_end > end => match_end.min(longest),
        _ => end,
    };
    let end = floor_char(&redacted, end);
    let mut out = String::with_capacity(end - start + 8);
    let mut highlights = Vec::new();
    if start > 0 {
        out.push('…');
    }
    let base = out.len();
    let window = &redacted[start..end];
    if found.is_some() {
        for (from, to) in decided.find_all(window) {
            if from < to {
                highlights.push((base + from, base + to));
            }
        }
        // The cut match, highlighted as far as it is shown.
        if let Some((match_start, match_end)) = found
            && match_end > end
            && match_start >= start
            && !highlights
                .iter()
                .any(|&(from, _)| from == base + match_start - start)
        {
            highlights.push((base + match_start - start, base + window.len()));
            highlights.sort_unstable();
        }
    }
    // Whitespace is shown as spaces byte for byte, so the highlights stay in place.
    out.extend(window.chars().map(|c| match c {
        '\n' | '\r' | '\t' => ' ',
        c => c,
    }));
    if end < redacted.len() {
        out.push('…');
    }
    (out, highlights)
}

fn floor_char(text: &str, mut at: usize) -> usize {
    while at > 0 && !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_spellings_cover_quotes_newlines_backslashes_and_non_ascii() {
        let filter = LinePrefilter::new(&spellings("say \"hé\"\n\\"), false).unwrap();
        let line = serde_json::json!({"t": "say \"hé\"\n\\"}).to_string();
        assert!(filter.holds(line.as_bytes()));
        let twice =
            serde_json::json!({"t": serde_json::json!({"a": "say \"hé\"\n\\"}).to_string()})
                .to_string();
        assert!(filter.holds(twice.as_bytes()));
        let ascii = "{\"t\":\"say \\\"h\\u00e9\\\"\\n\\\\\"}";
        assert!(filter.holds(ascii.as_bytes()));
    }

    #[test]
    fn a_snippet_is_cut_around_the_match_and_highlights_it() {
        let text = format!("{}needle here\nand more", "x".repeat(200));
        let decided = TextMatcher::new("needle", false, false).unwrap();
        let (snippet, highlights) = snippet(&text, &decided, &Redactor::new());
        assert!(snippet.starts_with('…'));
        assert_eq!(highlights.len(), 1);
        let (start, end) = highlights[0];
        assert_eq!(&snippet[start..end], "needle");
        assert!(snippet.contains("here and more"));
    }

    #[test]
    fn a_hit_deep_in_a_long_text_is_cut_from_its_redacted_surroundings() {
        let secret = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";
        let text = format!(
            "{}OPENAI_API_KEY={secret} needle{}",
            "x ".repeat(300_000),
            " y".repeat(300_000)
        );
        let decided = TextMatcher::new("needle", false, false).unwrap();
        let (snippet, highlights) = snippet(&text, &decided, &Redactor::new());
        assert!(!snippet.contains(secret), "{snippet}");
        assert!(snippet.contains(reprise_redact::MASK), "{snippet}");
        assert_eq!(highlights.len(), 1);
        let (start, end) = highlights[0];
        assert_eq!(&snippet[start..end], "needle");
        assert!(
            snippet.starts_with('…') && snippet.ends_with('…'),
            "{snippet}"
        );
    }

    #[test]
    fn each_line_gives_the_lines_a_split_on_newlines_gives_and_stops_when_told() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lines.jsonl");
        let long = "y".repeat(200_000);
        for text in [
            format!("a\n\nb\r\n{long}\nlast"),
            format!("a\n{long}\n"),
            String::new(),
        ] {
            std::fs::write(&path, &text).unwrap();
            let mut seen = Vec::new();
            let mut line = Vec::new();
            each_line(&path, &mut line, &mut |found| {
                seen.push(found.to_vec());
                true
            })
            .unwrap();
            let mut expected: Vec<Vec<u8>> = text
                .as_bytes()
                .split(|b| *b == b'\n')
                .map(<[u8]>::to_vec)
                .collect();
            // A split gives an empty piece after a last newline: no line to search.
            if expected.last().is_some_and(Vec::is_empty) {
                expected.pop();
            }
            assert_eq!(seen, expected);
        }
        let mut count = 0;
        each_line(&path, &mut Vec::new(), &mut |_| {
            count += 1;
            false
        })
        .unwrap();
        assert_eq!(count, 0, "an empty file has no line");
        std::fs::write(&path, "one\ntwo\nthree\n").unwrap();
        each_line(&path, &mut Vec::new(), &mut |_| {
            count += 1;
            count < 2
        })
        .unwrap();
        assert_eq!(count, 2);
    }

    use proptest::prelude::*;

    /// Pieces of texts to cut snippets from: the query in several cases, letters that
    /// fold into others of another length, whitespace, and a secret to mask.
    const PIECES: &[&str] = &[
        "needle",
        "NeEdLe",
        "nee",
        "dle ",
        "\u{212a}",
        "é",
        "\n",
        "\t",
        " word",
        "OPENAI_API_KEY=sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789 ",
        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    ];

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

        /// A literal's snippet (which keeps the match it found where the redactor
        /// changed nothing) is the one its escaped regular expression gives (which
        /// looks for the match again in the redacted text).
        #[test]
        fn a_literal_snippet_is_the_snippet_of_its_regex(
            pieces in proptest::collection::vec(proptest::sample::select(PIECES), 1..30),
            ignore_case in any::<bool>(),
        ) {
            let text: String = pieces.concat();
            let literal = TextMatcher::new("needle", false, ignore_case).unwrap();
            let regex = TextMatcher::new("needle", true, ignore_case).unwrap();
            prop_assume!(literal.find(&text).is_some());
            let redactor = Redactor::new();
            prop_assert_eq!(
                snippet(&text, &literal, &redactor),
                snippet(&text, &regex, &redactor)
            );
        }
    }

    #[test]
    fn a_snippet_shows_a_bounded_part_of_a_long_match() {
        let line = "a".repeat(1 << 20);
        let decided = TextMatcher::new("a+", true, false).unwrap();
        let (snippet, highlights) = snippet(&line, &decided, &Redactor::new());
        assert!(
            snippet.chars().count() <= MATCH_CHARS + 2,
            "{}",
            snippet.len()
        );
        assert!(snippet.ends_with('…'));
        assert_eq!(highlights, [(0, MATCH_CHARS)]);
    }

    #[test]
    fn a_literal_query_is_matched_with_memmem_however_long() {
        // Quadratic for a regex engine: a 3,000-character query over a line of
        // "aaaa…b" that holds it only at its end.
        let query = SearchQuery::literal(format!("{}b", "a".repeat(3_000)));
        let matcher = SearchMatcher::new(&query).unwrap();
        assert_eq!(matcher.algorithm(), Algorithm::Memmem);
        let mut ignoring = query.clone();
        ignoring.ignore_case = true;
        assert_eq!(
            SearchMatcher::new(&ignoring).unwrap().algorithm(),
            Algorithm::FoldedMemmem
        );
        let text = format!("{}b", "a".repeat(1 << 20));
        let line = serde_json::to_vec(&reprise_session::Entry::message(
            reprise_session::Message::user(text),
        ))
        .unwrap();
        let hit = matcher.hit(&line, 0, None).unwrap();
        assert_eq!(hit.matches, 1);
        assert!(hit.snippet.len() < 1_000, "{}", hit.snippet.len());
    }
}
