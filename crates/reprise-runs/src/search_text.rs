//! Finding a search query in text, in time linear in the text whatever the query.
//!
//! A literal is found with memchr's `memmem` (Two-Way with SIMD prefilters), never
//! with a regex engine: a long literal made a lazy DFA give up and fall back to a
//! search whose time grows with the query's length times the text's. Ignoring case,
//! both sides are first folded, each character to one representative of the
//! characters Unicode simple case folding makes equal to it (what `regex`'s `(?i)`
//! matches), so a literal matches the same text in both modes. A regular expression
//! keeps `regex` (time bounded by the pattern's size times the text's), with its
//! pattern bounded by [`MAX_REGEX_BYTES`].
//!
//! The stored lines of a literal query are first filtered with Aho-Corasick over the
//! ways the query is spelled in JSON ([`LinePrefilter`]).

use std::collections::HashMap;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use grep_matcher::{Match, Matcher, NoCaptures, NoError};
use memchr::memmem;
use regex::{Regex, RegexBuilder};
use regex_syntax::hir::{ClassUnicode, ClassUnicodeRange};

use crate::error::RunError;
use crate::search_folded::FoldedNeedles;

/// The longest regular expression searched for, in bytes: its size bounds the work
/// per byte of text.
pub const MAX_REGEX_BYTES: usize = 1000;

/// How a search matcher finds its query (what tests and benchmarks check).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// memchr's `memmem` over the text as it is.
    Memmem,
    /// memchr's `memmem` over the text case-folded.
    FoldedMemmem,
    /// The `regex` crate.
    Regex,
}

/// A query made ready to find in decoded text.
#[derive(Debug)]
pub(crate) enum TextMatcher {
    /// A literal: the needle, folded when case is ignored.
    Literal {
        finder: Box<memmem::Finder<'static>>,
        ignore_case: bool,
    },
    /// A regular expression (or an empty literal, which matches everywhere as an
    /// empty regex does).
    Regex(Regex),
}

impl TextMatcher {
    /// The matcher of `pattern`; a regular expression that does not parse, or is
    /// longer than [`MAX_REGEX_BYTES`], is [`RunError::Pattern`].
    pub fn new(pattern: &str, regex: bool, ignore_case: bool) -> Result<Self, RunError> {
        if !regex && !pattern.is_empty() {
            let needle = if ignore_case {
                fold(pattern).0
            } else {
                pattern.to_owned()
            };
            return Ok(TextMatcher::Literal {
                finder: Box::new(memmem::Finder::new(needle.as_bytes()).into_owned()),
                ignore_case,
            });
        }
        let refuse = |message: String| RunError::Pattern {
            pattern: pattern.chars().take(100).collect(),
            message,
        };
        if pattern.len() > MAX_REGEX_BYTES {
            return Err(refuse(format!(
                "a regular expression is at most {MAX_REGEX_BYTES} bytes (this one is {}); \
                 search for a literal text without --regex",
                pattern.len()
            )));
        }
        RegexBuilder::new(pattern)
            .case_insensitive(ignore_case)
            .build()
            .map(TextMatcher::Regex)
            .map_err(|error| refuse(error.to_string()))
    }

    /// How the query is found.
    pub fn algorithm(&self) -> Algorithm {
        match self {
            TextMatcher::Literal {
                ignore_case: false, ..
            } => Algorithm::Memmem,
            TextMatcher::Literal { .. } => Algorithm::FoldedMemmem,
            TextMatcher::Regex(_) => Algorithm::Regex,
        }
    }

    /// Whether the query is a literal (found alike in a text and in any part of it).
    pub fn is_literal(&self) -> bool {
        matches!(self, TextMatcher::Literal { .. })
    }

    /// The first match in `text`, as a byte range.
    pub fn find(&self, text: &str) -> Option<(usize, usize)> {
        match self {
            TextMatcher::Literal {
                finder,
                ignore_case: false,
            } => finder
                .find(text.as_bytes())
                .map(|at| (at, at + finder.needle().len())),
            // ASCII folds byte for byte: no map of offsets to build (for every hit,
            // that map was most of a search of many hits).
            TextMatcher::Literal { finder, .. } if text.is_ascii() => finder
                .find(text.to_ascii_uppercase().as_bytes())
                .map(|at| (at, at + finder.needle().len())),
            TextMatcher::Literal { finder, .. } => {
                let folded = Folded::of(text);
                finder
                    .find(folded.text.as_bytes())
                    .map(|at| (folded.origin(at), folded.origin(at + finder.needle().len())))
            }
            TextMatcher::Regex(regex) => regex.find(text).map(|m| (m.start(), m.end())),
        }
    }

    /// Every match in `text`, leftmost first and not overlapping, as byte ranges.
    pub fn find_all(&self, text: &str) -> Vec<(usize, usize)> {
        match self {
            TextMatcher::Literal {
                finder,
                ignore_case: false,
            } => {
                let len = finder.needle().len();
                finder
                    .find_iter(text.as_bytes())
                    .map(|at| (at, at + len))
                    .collect()
            }
            TextMatcher::Literal { finder, .. } if text.is_ascii() => {
                let len = finder.needle().len();
                finder
                    .find_iter(text.to_ascii_uppercase().as_bytes())
                    .map(|at| (at, at + len))
                    .collect()
            }
            TextMatcher::Literal { finder, .. } => {
                let folded = Folded::of(text);
                let len = finder.needle().len();
                finder
                    .find_iter(folded.text.as_bytes())
                    .map(|at| (folded.origin(at), folded.origin(at + len)))
                    .collect()
            }
            TextMatcher::Regex(regex) => regex
                .find_iter(text)
                .map(|m| (m.start(), m.end()))
                .collect(),
        }
    }
}

/// A text case-folded: each character replaced by its case-folding representative.
struct Folded {
    text: String,
    /// For each byte offset of `text` that starts a character (and its end), the
    /// offset in the original of the character it came from; `None` when every
    /// character folded into one as long as itself, so offsets are the same.
    starts: Option<Vec<usize>>,
}

impl Folded {
    /// `text` folded. Runs of ASCII fold byte for byte; a map of offsets is built
    /// only when a character folds into one of another length (the Kelvin sign
    /// into `K`), which few texts hold: building it for every text of a few
    /// non-ASCII letters was most of a search of many hits.
    fn of(text: &str) -> Folded {
        let mut folded = Vec::with_capacity(text.len());
        let mut rest = text;
        let same_lengths = REPRESENTATIVES.with(|known| {
            let mut known = known.borrow_mut();
            loop {
                let ascii = rest
                    .bytes()
                    .position(|byte| !byte.is_ascii())
                    .unwrap_or(rest.len());
                folded.extend(rest[..ascii].bytes().map(|byte| byte.to_ascii_uppercase()));
                rest = &rest[ascii..];
                let Some(c) = rest.chars().next() else {
                    return true;
                };
                let into = *known.entry(c).or_insert_with(|| representative(c));
                if into.len_utf8() != c.len_utf8() {
                    return false;
                }
                folded.extend_from_slice(into.encode_utf8(&mut [0; 4]).as_bytes());
                rest = &rest[c.len_utf8()..];
            }
        });
        // Whole characters went in, so the bytes are UTF-8.
        if same_lengths && let Ok(text) = String::from_utf8(folded) {
            return Folded { text, starts: None };
        }
        let (text, starts) = fold(text);
        Folded {
            text,
            starts: Some(starts),
        }
    }

    /// The offset in the original text of offset `at` of the folded one.
    fn origin(&self, at: usize) -> usize {
        self.starts.as_ref().map_or(at, |starts| starts[at])
    }
}

thread_local! {
    /// The representatives of the non-ASCII characters folded so far.
    static REPRESENTATIVES: std::cell::RefCell<HashMap<char, char>> = Default::default();
}

/// `text` with each character replaced by its case-folding representative, and for
/// each byte offset of the folded text that starts a character (and its end), the
/// offset in `text` of the character it came from.
fn fold(text: &str) -> (String, Vec<usize>) {
    let mut folded = String::with_capacity(text.len());
    let mut starts = Vec::with_capacity(text.len() + 1);
    REPRESENTATIVES.with(|known| {
        let mut known = known.borrow_mut();
        for (at, c) in text.char_indices() {
            let into = if c.is_ascii() {
                // The representative is the least member: an upper-case letter.
                c.to_ascii_uppercase()
            } else {
                *known.entry(c).or_insert_with(|| representative(c))
            };
            let before = folded.len();
            folded.push(into);
            starts.extend(std::iter::repeat_n(at, folded.len() - before));
        }
    });
    starts.push(text.len());
    (folded, starts)
}

/// The least of the characters simple case folding makes equal to `c`.
fn representative(c: char) -> char {
    let mut class = ClassUnicode::new([ClassUnicodeRange::new(c, c)]);
    if class.try_case_fold_simple().is_err() {
        return c;
    }
    class
        .ranges()
        .first()
        .map_or(c, |range| range.start().min(c))
}

/// Whether Unicode simple case folding makes `c` equal to a character outside ASCII
/// (`k` the Kelvin sign, `s` the long s), or `c` is outside ASCII itself: where
/// Aho-Corasick's ASCII case folding falls short.
fn folds_beyond_ascii(c: char) -> bool {
    !c.is_ascii() || matches!(c, 'k' | 'K' | 's' | 'S')
}

/// Fragments shorter than this make a filter that lets most lines through.
const MIN_FRAGMENT: usize = 3;

/// What a query ignoring case is filtered by: for each spelling, its longest run of
/// characters that ASCII case folding matches exactly as Unicode folding does. A
/// line that holds the spelling holds that run. `None` when a spelling has no run
/// long enough.
fn ascii_fragments(spellings: &[String]) -> Option<Vec<String>> {
    spellings
        .iter()
        .map(|spelling| {
            spelling
                .split(folds_beyond_ascii)
                .max_by_key(|fragment| fragment.len())
                .filter(|fragment| fragment.len() >= MIN_FRAGMENT)
                .map(str::to_owned)
        })
        .collect()
}

/// The filter of stored JSON lines for a literal query: a line that holds none of
/// the query's spellings is no hit. Aho-Corasick finds them all in one pass; ignoring
/// case, the same search over the text with its ASCII letters folded does
/// ([`FoldedNeedles`]).
#[derive(Clone, Debug)]
pub(crate) enum LinePrefilter {
    /// The spellings as they are, or ignoring ASCII case where no SIMD search was
    /// available.
    Automaton(AhoCorasick),
    /// The spellings' fragments, ignoring ASCII case.
    Folded(FoldedNeedles),
}

impl LinePrefilter {
    /// The filter of `spellings`; ignoring case, of their [`ascii_fragments`].
    /// `None` when there is nothing to filter by (then every line is decoded and
    /// matched).
    pub fn new(spellings: &[String], ignore_case: bool) -> Option<Self> {
        if spellings.is_empty() || spellings.iter().any(String::is_empty) {
            return None;
        }
        let needles = if ignore_case {
            ascii_fragments(spellings)?
        } else {
            spellings.to_vec()
        };
        if ignore_case && let Some(folded) = FoldedNeedles::new(&needles) {
            return Some(LinePrefilter::Folded(folded));
        }
        AhoCorasickBuilder::new()
            .match_kind(MatchKind::LeftmostFirst)
            .ascii_case_insensitive(ignore_case)
            .build(needles)
            .ok()
            .map(LinePrefilter::Automaton)
    }

    /// Whether `line` holds one of the spellings.
    pub fn holds(&self, line: &[u8]) -> bool {
        match self {
            LinePrefilter::Automaton(automaton) => automaton.is_match(line),
            LinePrefilter::Folded(folded) => folded.holds(line),
        }
    }
}

impl Matcher for LinePrefilter {
    type Captures = NoCaptures;
    type Error = NoError;

    fn find_at(&self, haystack: &[u8], at: usize) -> Result<Option<Match>, NoError> {
        Ok(match self {
            LinePrefilter::Automaton(automaton) => {
                let input = aho_corasick::Input::new(haystack).span(at..haystack.len());
                automaton
                    .find(input)
                    .map(|found| Match::new(found.start(), found.end()))
            }
            LinePrefilter::Folded(folded) => folded
                .find_at(haystack, at)
                .map(|(start, end)| Match::new(start, end)),
        })
    }

    fn new_captures(&self) -> Result<NoCaptures, NoError> {
        Ok(NoCaptures::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_literal_is_found_with_memmem_and_a_regex_with_regex() {
        let plain = TextMatcher::new("a+b", false, false).unwrap();
        assert_eq!(plain.algorithm(), Algorithm::Memmem);
        assert_eq!(plain.find_all("xa+b a+b aab"), [(1, 4), (5, 8)]);
        let folded = TextMatcher::new("a+b", false, true).unwrap();
        assert_eq!(folded.algorithm(), Algorithm::FoldedMemmem);
        let regex = TextMatcher::new("a+b", true, false).unwrap();
        assert_eq!(regex.algorithm(), Algorithm::Regex);
        assert_eq!(regex.find_all("xa+b aab"), [(5, 8)]);
    }

    #[test]
    fn ignoring_case_a_literal_matches_what_regex_matches() {
        let texts = [
            "The KELVIN sign \u{212a} and k and K",
            "ſtraße STRASSE strasse Straße",
            "Café ÉCLAIR café éclair CAFÉ",
            "ǅ ǆ Ǆ dž",
            "Σσς θϑΘ",
            "ascii only: Cafe CAFE cafe, k K s S, Strasse STRASSE",
        ];
        let queries = [
            "k", "s", "é", "café", "ǆ", "σ", "ϑ", "straße", "Éclair", "cafe", "strasse", "K S",
        ];
        for query in queries {
            let ours = TextMatcher::new(query, false, true).unwrap();
            let theirs = RegexBuilder::new(&regex::escape(query))
                .case_insensitive(true)
                .build()
                .unwrap();
            for text in texts {
                let expected: Vec<(usize, usize)> = theirs
                    .find_iter(text)
                    .map(|m| (m.start(), m.end()))
                    .collect();
                assert_eq!(ours.find_all(text), expected, "{query:?} in {text:?}");
            }
        }
    }

    /// Characters whose folding keeps their length, changes it (the Kelvin sign and
    /// the long s fold into ASCII), or is ASCII, for texts and queries.
    const FOLDING: &[char] = &[
        'a', 'K', 'k', 's', 'S', ' ', 'e', 'é', 'É', '\u{212a}', '\u{17f}', 'ß', 'σ', 'Σ', 'ς', 'ǅ',
    ];

    fn folding_text(max: usize) -> impl proptest::strategy::Strategy<Value = String> {
        proptest::collection::vec(proptest::sample::select(FOLDING), 0..max)
            .prop_map(|chars| chars.into_iter().collect())
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

        /// Folding without a map of offsets (every character folds into one as
        /// long) finds what folding with one finds, and what `regex` finds.
        #[test]
        fn a_literal_ignoring_case_finds_what_regex_finds(
            query in folding_text(4).prop_filter("a query", |q| !q.is_empty()),
            text in folding_text(40),
        ) {
            let ours = TextMatcher::new(&query, false, true).unwrap();
            let theirs = RegexBuilder::new(&regex::escape(&query))
                .case_insensitive(true)
                .build()
                .unwrap();
            let expected: Vec<(usize, usize)> =
                theirs.find_iter(&text).map(|m| (m.start(), m.end())).collect();
            prop_assert_eq!(ours.find_all(&text), expected.clone());
            prop_assert_eq!(ours.find(&text), expected.first().copied());
            let (folded, starts) = fold(&text);
            let fast = Folded::of(&text);
            prop_assert_eq!(&fast.text, &folded);
            for at in (0..=folded.len()).filter(|at| folded.is_char_boundary(*at)) {
                prop_assert_eq!(fast.origin(at), starts[at]);
            }
        }
    }

    #[test]
    fn a_long_regex_is_refused_and_a_long_literal_is_not() {
        let long = "a".repeat(MAX_REGEX_BYTES + 1);
        assert!(matches!(
            TextMatcher::new(&long, true, false),
            Err(RunError::Pattern { .. })
        ));
        assert!(TextMatcher::new(&long, false, false).is_ok());
    }

    #[test]
    fn the_line_prefilter_finds_every_spelling_and_what_unicode_folding_makes_equal() {
        let spellings = vec!["plan".to_owned(), "pl\\\"an".to_owned()];
        let filter = LinePrefilter::new(&spellings, true).unwrap();
        assert!(filter.holds(b"{\"t\":\"a PLAN\"}"));
        assert!(!filter.holds(b"{\"t\":\"a pla n\"}"));
        // Ignoring case, "plans" is filtered by "plan": its s may be a long s.
        let filter = LinePrefilter::new(&["plans".to_owned()], true).unwrap();
        assert!(filter.holds("{\"t\":\"PLAN\u{17f}\"}".as_bytes()));
        assert!(!filter.holds(b"{\"t\":\"pla\"}"));
        assert!(LinePrefilter::new(&["kit".to_owned()], true).is_none());
        assert!(LinePrefilter::new(&["kit".to_owned()], false).is_some());
        assert!(LinePrefilter::new(&["été".to_owned()], true).is_none());
    }
}
