//! Which patterns a short text can match, told by one scan for the literal texts
//! their matches begin with.
//!
//! Most patterns of the table begin with a fixed text or one of a few (`ghp_`,
//! `xox[bp]-`, `AKIA`, `-----BEGIN`): a match can only start where one of them
//! occurs. One Aho-Corasick scan of the text for every such prefix tells which of
//! those patterns are worth asking; the others (an assignment to a secret-looking
//! name, a URL with credentials) are always asked. On a short text without
//! secrets this replaces about eighty regex calls with one scan.
//!
//! The prefixes are what `regex-syntax` extracts from each pattern's parsed form,
//! as the `regex` crate does for its own prefilters: every match of the pattern
//! begins with one of them, so a pattern whose prefixes are all absent cannot
//! match, and skipping it changes nothing.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use regex_syntax::hir::literal::{ExtractKind, Extractor};

/// The prefix scan of the whole table.
pub(crate) struct Prefixes {
    /// Every prefix of every pattern that has them; `None` when the scan could not
    /// be built (every pattern is then asked).
    scan: Option<AhoCorasick>,
    /// For each prefix of `scan`, the pattern it begins.
    owner: Vec<usize>,
    /// The patterns without usable prefixes, always asked.
    always: Vec<bool>,
}

impl Prefixes {
    /// The prefixes of `sources`, patterns in the `regex` crate's syntax.
    pub(crate) fn new(sources: &[String]) -> Prefixes {
        let mut literals: Vec<Vec<u8>> = Vec::new();
        let mut owner = Vec::new();
        let mut always = Vec::with_capacity(sources.len());
        for (index, source) in sources.iter().enumerate() {
            match prefixes_of(source) {
                Some(found) => {
                    owner.extend(std::iter::repeat_n(index, found.len()));
                    literals.extend(found);
                    always.push(false);
                }
                None => always.push(true),
            }
        }
        let scan = AhoCorasickBuilder::new()
            .match_kind(MatchKind::Standard)
            .build(&literals)
            .ok();
        if scan.is_none() {
            always.iter_mut().for_each(|always| *always = true);
        }
        Prefixes {
            scan,
            owner,
            always,
        }
    }

    /// For each pattern, whether it may match `text`.
    pub(crate) fn candidates(&self, text: &str) -> Vec<bool> {
        let mut candidates = self.always.clone();
        if let Some(scan) = &self.scan {
            // Overlapping, so that a prefix inside another (`sk-` in `sk-ant-`) is
            // found too.
            for found in scan.find_overlapping_iter(text) {
                if let Some(&pattern) = self.owner.get(found.pattern().as_usize()) {
                    candidates[pattern] = true;
                }
            }
        }
        candidates
    }
}

/// The texts every match of `source` begins with, or `None` when there is no such
/// finite set of non-empty texts (the pattern is then always asked).
fn prefixes_of(source: &str) -> Option<Vec<Vec<u8>>> {
    let hir = regex_syntax::parse(source).ok()?;
    let mut extractor = Extractor::new();
    extractor.kind(ExtractKind::Prefix);
    let seq = extractor.extract(&hir);
    let literals = seq.literals()?;
    if literals.is_empty() || literals.iter().any(|literal| literal.is_empty()) {
        return None;
    }
    Some(
        literals
            .iter()
            .map(|literal| literal.as_bytes().to_vec())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_is_a_candidate_where_one_of_its_prefixes_occurs() {
        let sources = [
            r"ghp_[A-Za-z0-9]{36}".to_owned(),
            r"(?i)xox[bp]-[0-9]+".to_owned(),
            r"[A-Za-z]+=\S+".to_owned(),
        ];
        let prefixes = Prefixes::new(&sources);
        assert_eq!(prefixes.candidates("nothing here"), [false, false, true]);
        assert_eq!(prefixes.candidates("a ghp_ token"), [true, false, true]);
        assert_eq!(prefixes.candidates("XOXB-12"), [false, true, true]);
        assert_eq!(prefixes.candidates("xoxp-1 ghp_"), [true, true, true]);
    }
}
