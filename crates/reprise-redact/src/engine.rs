//! The compiled pattern table and the search for the spans to mask.
//!
//! All patterns are compiled once per process. On all but short texts a [`RegexSet`] pass
//! tells which patterns match at all, so ordinary text costs one scan; only the
//! patterns that matched are run again to find their secret groups.

use std::sync::{LazyLock, OnceLock};

use regex::{Captures, Regex, RegexSet};

use crate::MASK;
use crate::patterns::{Check, PATTERNS, Pattern};
use crate::prefixes::Prefixes;
use crate::value::{accept_assignment, accept_flag, is_placeholder};

/// One compiled table entry.
pub(crate) struct CompiledPattern {
    pub(crate) regex: Regex,
    /// Indices of the groups named `s`, `s2`, …: the secret is the first that took part.
    secret_groups: Vec<usize>,
    /// Index of the group named `key`, if any.
    key_group: Option<usize>,
    /// For assignments, the group of the unquoted value (named `s7`).
    bare_group: Option<usize>,
    check: Check,
}

/// The whole table, compiled.
pub(crate) struct Compiled {
    /// Every pattern in one set, compiled by the first long text (see
    /// [`SET_MIN_LEN`]): it costs as much again as the patterns, and a program that
    /// only redacts short texts (a search's snippets of short messages) never needs
    /// it. `None` if it fails to compile (a size limit): each pattern is then asked.
    set: OnceLock<Option<RegexSet>>,
    sources: Vec<String>,
    /// Which patterns a shorter text may match.
    prefixes: Prefixes,
    pub(crate) patterns: Vec<CompiledPattern>,
}

impl Compiled {
    /// The set, compiled now if it is not yet.
    pub(crate) fn set(&self) -> Option<&RegexSet> {
        self.set
            .get_or_init(|| RegexSet::new(&self.sources).ok())
            .as_ref()
    }
}

/// `\b` in the table means an ASCII word boundary: Unicode word boundaries would force
/// the slow engines as soon as the text holds a non-ASCII byte.
fn ascii_boundaries(source: &str) -> String {
    source.replace(r"\b", r"(?-u:\b)")
}

fn compile(table: &[Pattern]) -> Result<Compiled, regex::Error> {
    let sources: Vec<String> = table.iter().map(|p| ascii_boundaries(p.regex)).collect();
    let mut patterns = Vec::with_capacity(table.len());
    for (pattern, source) in table.iter().zip(&sources) {
        let regex = Regex::new(source)?;
        let mut secret_groups = Vec::new();
        let mut key_group = None;
        let mut bare_group = None;
        for (index, name) in regex.capture_names().enumerate() {
            match name {
                Some("key") => key_group = Some(index),
                Some("s7") if pattern.check == Check::Assignment => {
                    bare_group = Some(index);
                    secret_groups.push(index)
                }
                Some(name)
                    if name.starts_with('s') && name[1..].chars().all(|c| c.is_ascii_digit()) =>
                {
                    secret_groups.push(index)
                }
                _ => {}
            }
        }
        patterns.push(CompiledPattern {
            regex,
            secret_groups,
            key_group,
            bare_group,
            check: pattern.check,
        });
    }
    Ok(Compiled {
        set: OnceLock::new(),
        prefixes: Prefixes::new(&sources),
        sources,
        patterns,
    })
}

/// The table, compiled on first use. `None` only if a pattern fails to compile, which
/// the unit tests rule out; the redactor then fails closed (masks everything).
pub(crate) static COMPILED: LazyLock<Option<Compiled>> = LazyLock::new(|| compile(PATTERNS).ok());

/// Texts at least this long are first scanned with the [`RegexSet`]: from a 1 KiB
/// prompt to a megabyte of tool output, the set pass is faster than running each
/// pattern. On very short texts, each new one makes the set's lazy DFA build fresh
/// states for all patterns at once, which costs more than the scan saves: the 855
/// cases of the secret corpus (median 70 bytes) ran several times faster without the
/// set, so texts under 512 bytes, most prompts typed by hand and nearly all of the
/// corpus, run each pattern. The figures are in docs/benchmarks.md.
const SET_MIN_LEN: usize = 512;

/// Byte ranges of `text` that hold secrets, sorted and merged.
pub(crate) fn secret_spans(compiled: &Compiled, text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let set = (text.len() >= SET_MIN_LEN)
        .then(|| compiled.set())
        .flatten();
    if let Some(set) = set {
        for index in set.matches(text).iter() {
            pattern_spans(&compiled.patterns[index], text, &mut spans);
        }
    } else {
        // Most patterns match nothing: asking first costs a scan, while going
        // straight to the captures would allocate their slots for every pattern.
        let candidates = compiled.prefixes.candidates(text);
        for (pattern, candidate) in compiled.patterns.iter().zip(candidates) {
            if candidate && pattern.regex.is_match(text) {
                pattern_spans(pattern, text, &mut spans);
            }
        }
    }
    merge(spans, text)
}

/// The spans one pattern finds in `text`, appended to `out`.
pub(crate) fn pattern_spans(pattern: &CompiledPattern, text: &str, out: &mut Vec<(usize, usize)>) {
    for caps in pattern.regex.captures_iter(text) {
        let Some((start, end, bare)) = secret_of(pattern, &caps) else {
            continue;
        };
        let secret = &text[start..end];
        let accepted = match pattern.check {
            Check::Always => true,
            Check::HasDigit => secret.bytes().any(|b| b.is_ascii_digit()),
            Check::NotPlaceholder => !is_placeholder(secret),
            Check::NotUpperWord => !secret
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'),
            Check::NotLowerHex => !secret
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()),
            Check::RandomLooking => {
                secret.bytes().any(|b| b.is_ascii_uppercase())
                    && secret.bytes().any(|b| b.is_ascii_lowercase())
                    && secret.bytes().any(|b| b.is_ascii_digit())
            }
            Check::Assignment => {
                let key = pattern
                    .key_group
                    .and_then(|g| caps.get(g))
                    .map_or("", |m| m.as_str());
                accept_assignment(key, secret, bare, &text[end..])
            }
            Check::Flag => accept_flag(secret),
        };
        if accepted && start < end {
            out.push((start, end));
        }
    }
}

/// The secret's span in one match, and whether it is the pattern's last secret group
/// (for assignments: the unquoted alternative).
fn secret_of(pattern: &CompiledPattern, caps: &Captures<'_>) -> Option<(usize, usize, bool)> {
    if pattern.secret_groups.is_empty() {
        let whole = caps.get(0)?;
        return Some((whole.start(), whole.end(), false));
    }
    pattern.secret_groups.iter().find_map(|&g| {
        caps.get(g)
            .map(|m| (m.start(), m.end(), Some(g) == pattern.bare_group))
    })
}

/// Sorts spans, joins overlapping or touching ones, and drops spans that already hold
/// nothing but masks (so redacting twice changes nothing).
fn merge(mut spans: Vec<(usize, usize)>, text: &str) -> Vec<(usize, usize)> {
    spans.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
    for (start, end) in spans {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    merged.retain(|&(start, end)| !text[start..end].replace(MASK, "").is_empty());
    merged
}

/// `text` with each span replaced by [`MASK`].
pub(crate) fn apply(text: &str, spans: &[(usize, usize)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for &(start, end) in spans {
        out.push_str(&text[at..start]);
        out.push_str(MASK);
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_compiles() {
        let compiled = compile(PATTERNS).expect("the pattern table compiles");
        assert_eq!(compiled.patterns.len(), PATTERNS.len());
        assert!(COMPILED.is_some());
    }

    #[test]
    fn pattern_names_are_unique() {
        let mut names: Vec<_> = PATTERNS.iter().map(|p| p.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len(), "duplicate pattern names");
    }

    /// Each entry, on its own, masks its sample's secret: no entry relies on another.
    #[test]
    fn every_pattern_redacts_its_sample() {
        let compiled = compile(PATTERNS).expect("the pattern table compiles");
        let mut failures = Vec::new();
        for (pattern, entry) in compiled.patterns.iter().zip(PATTERNS) {
            assert!(
                entry.sample.contains(entry.secret),
                "{}: the sample must contain the secret",
                entry.name
            );
            let mut spans = Vec::new();
            pattern_spans(pattern, entry.sample, &mut spans);
            let spans = merge(spans, entry.sample);
            let out = apply(entry.sample, &spans);
            if out.contains(entry.secret) || !out.contains(MASK) {
                failures.push(format!("{}: {out}", entry.name));
            }
        }
        assert!(
            failures.is_empty(),
            "samples not redacted:\n{}",
            failures.join("\n")
        );
    }

    /// Asking only the patterns whose prefixes occur finds exactly what asking
    /// every pattern finds, on every sample and every case of the secret corpus.
    #[test]
    fn the_prefix_scan_skips_no_pattern_that_matches() {
        let compiled = COMPILED.as_ref().expect("the pattern table compiles");
        let corpus = reprise_testkit::secret_corpus::corpus_cases();
        let texts = PATTERNS
            .iter()
            .map(|entry| entry.sample.to_owned())
            .chain(corpus.into_iter().map(|case| case.text))
            .filter(|text| text.len() < SET_MIN_LEN);
        let mut checked = 0;
        for text in texts {
            let mut every = Vec::new();
            for pattern in &compiled.patterns {
                pattern_spans(pattern, &text, &mut every);
            }
            assert_eq!(secret_spans(compiled, &text), merge(every, &text), "{text}");
            checked += 1;
        }
        assert!(checked > 800, "{checked}");
    }

    /// The set pass on long texts finds exactly what running every pattern finds.
    #[test]
    fn set_pass_and_pattern_pass_agree() {
        let compiled = COMPILED.as_ref().expect("the pattern table compiles");
        let mut text = String::new();
        while text.len() < 2 * SET_MIN_LEN {
            for entry in PATTERNS {
                text.push_str(entry.sample);
                text.push_str("\nplain line with nothing secret, é日本\n");
            }
        }
        let mut every = Vec::new();
        for pattern in &compiled.patterns {
            pattern_spans(pattern, &text, &mut every);
        }
        let every = merge(every, &text);
        assert!(!every.is_empty());
        assert_eq!(secret_spans(compiled, &text), every);
    }

    #[test]
    fn merge_joins_overlaps_and_skips_masks() {
        let text = "aaaa[REDACTED]bbbb";
        assert_eq!(merge(vec![(0, 2), (1, 3), (3, 4)], text), vec![(0, 4)]);
        assert_eq!(merge(vec![(4, 14)], text), Vec::<(usize, usize)>::new());
    }
}
