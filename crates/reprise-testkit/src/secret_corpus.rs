//! The shared secret corpus (`testdata/secrets/secret_detection_cases.jsonl`, 855
//! cases) for tests that send every case through a path that must redact, and the
//! secrets a redactor masked in a text.
//!
//! The test asks its redactor for each case alone; [`masked_pieces`] then says which
//! parts of the text that redaction replaced, and the path under test must not let
//! any of them through.

use serde_json::Value;

/// One case of the corpus.
#[derive(Clone, Debug)]
pub struct CorpusCase {
    /// Its number in the file.
    pub case: u64,
    /// Its text.
    pub text: String,
}

/// Every case of the corpus, in file order.
pub fn corpus_cases() -> Vec<CorpusCase> {
    let path = crate::testdata("secrets/secret_detection_cases.jsonl");
    let data = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("reading {}: {error}", path.display()));
    data.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let value: Value = serde_json::from_str(line)
                .unwrap_or_else(|error| panic!("{}: {error}: {line}", path.display()));
            CorpusCase {
                case: value["case"].as_u64().unwrap_or_default(),
                text: value["text"].as_str().unwrap_or_default().to_owned(),
            }
        })
        .collect()
}

/// The parts of `original` that `redacted` (the same text with parts replaced by
/// `mask`) no longer shows, in order. Runs of masks count as one.
///
/// `redacted` is kept fragments of `original` with masks between them; each fragment
/// is found after the previous one (at least one character on, since a mask always
/// replaced something), and what lies between two fragments was masked.
pub fn masked_pieces(original: &str, redacted: &str, mask: &str) -> Vec<String> {
    let mut fragments: Vec<&str> = Vec::new();
    let mut rest = redacted;
    while let Some(at) = rest.find(mask) {
        fragments.push(&rest[..at]);
        rest = &rest[at + mask.len()..];
        // A run of masks is one gap.
        while let Some(stripped) = rest.strip_prefix(mask) {
            rest = stripped;
        }
    }
    fragments.push(rest);
    if fragments.len() == 1 {
        return Vec::new();
    }
    let mut pieces = Vec::new();
    let first = fragments[0];
    let last = fragments[fragments.len() - 1];
    let Some(tail_start) = original.len().checked_sub(last.len()) else {
        return vec![original.to_owned()];
    };
    if !original.starts_with(first) || !original.ends_with(last) {
        return vec![original.to_owned()];
    }
    let mut at = first.len();
    for fragment in &fragments[1..fragments.len() - 1] {
        let search_from = next_char(original, at);
        let Some(found) = original
            .get(search_from..tail_start)
            .and_then(|window| window.find(fragment))
        else {
            return vec![original[at..].to_owned()];
        };
        let start = search_from + found;
        pieces.push(original[at..start].to_owned());
        at = start + fragment.len();
    }
    pieces.push(original[at..tail_start.max(at)].to_owned());
    pieces.retain(|piece| !piece.is_empty());
    pieces
}

fn next_char(text: &str, at: usize) -> usize {
    text[at..]
        .chars()
        .next()
        .map_or(text.len(), |c| at + c.len_utf8())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_what_the_masks_stand_for() {
        let mask = "[M]";
        assert_eq!(
            masked_pieces("key=abc and token=def!", "key=[M] and token=[M]!", mask),
            ["abc", "def"]
        );
        assert_eq!(masked_pieces("abc", "[M]", mask), ["abc"]);
        assert_eq!(masked_pieces("x abc", "x [M][M]", mask), ["abc"]);
        assert!(masked_pieces("nothing", "nothing", mask).is_empty());
        assert_eq!(masked_pieces("aaXaa", "a[M]a", mask), ["aXa"]);
    }

    #[test]
    fn the_corpus_has_every_case() {
        assert_eq!(corpus_cases().len(), 855);
    }
}
