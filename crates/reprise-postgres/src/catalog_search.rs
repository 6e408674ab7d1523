//! The search of runs kept in PostgreSQL, with the same hits, snippets and order as
//! the search of run folders ([`reprise_runs::search_runs`]).
//!
//! The database finds the candidate entries of the runs searched, and only those
//! rows are sent; each is then decided by the matcher the run folders use
//! ([`SearchMatcher::hit`]), on the entry's JSON line stored as the library wrote it
//! (the line a run folder's file holds). So the database only has to be sound: it may
//! send a row that is no hit, never leave one out.
//!
//! - A literal query: the folders keep the lines that hold one of the spellings of
//!   the text inside a JSON line ([`SearchMatcher::spellings`]). Case-sensitive, the
//!   database keeps the rows whose body holds one (`strpos`). Ignoring case, the
//!   spellings become a PostgreSQL regular expression in which each character is the
//!   set of characters Rust's `regex` takes as the same ignoring case (Unicode simple
//!   case folding, written as code points): PostgreSQL's own `ILIKE` and `~*` fold
//!   case by the database's locale, which may differ, and could leave hits out.
//! - A regular expression: Rust's `regex` syntax is not PostgreSQL's, and what a
//!   message's decoded text matches cannot be told from its escaped JSON spelling, so
//!   the database sends every entry of the runs searched, a row at a time, and each
//!   is decided here (as the folders decode and match every line).
//!
//! Hits are put in the folders' order: the runs' order, then the main transcript
//! before the subagents' (by name), then the order of writing.

use std::collections::HashMap;
use std::fmt::Write;

use futures::TryStreamExt;
use regex_syntax::hir::{ClassUnicode, ClassUnicodeRange};
use reprise_runs::{CatalogError, PerRun, RunSummary, SearchHit, SearchMatcher, SearchQuery};
use sqlx::Row;

use crate::PgSessionStore;
use crate::store::OrFailed;

/// The entries of the sessions in `$1`; a filter on `e.body` follows.
macro_rules! entries_of {
    ($filter:expr) => {
        concat!(
            "SELECT e.session_id, e.subagent, e.seq, e.body FROM reprise_entries e \
             WHERE e.session_id = ANY ($1::text[]) ",
            $filter
        )
    };
}

/// How the database narrows the entries down.
enum Filter {
    /// The body holds one of these.
    Holds(Vec<String>),
    /// The body matches this PostgreSQL regular expression.
    Matches(String),
    /// Every entry.
    Every,
}

impl Filter {
    fn of(matcher: &SearchMatcher<'_>) -> Filter {
        match matcher.spellings() {
            None => Filter::Every,
            Some(spellings) if matcher.query().ignore_case => {
                ignoring_case(&spellings).map_or(Filter::Every, Filter::Matches)
            }
            Some(spellings) => Filter::Holds(spellings),
        }
    }
}

/// A hit, and where its entry is, to put hits in order.
struct Found {
    run: usize,
    subagent: String,
    seq: i64,
    hit: SearchHit,
}

/// The messages of `runs` that match `query`; see the module documentation.
pub(crate) async fn search(
    store: &PgSessionStore,
    runs: &[RunSummary],
    query: &SearchQuery,
) -> Result<Vec<SearchHit>, CatalogError> {
    let matcher = SearchMatcher::new(query)?;
    let mut indexes: HashMap<&str, Vec<usize>> = HashMap::new();
    for (index, run) in runs.iter().enumerate() {
        indexes
            .entry(run.session_id.as_str())
            .or_default()
            .push(index);
    }
    if indexes.is_empty() {
        return Ok(Vec::new());
    }
    let sessions: Vec<&str> = indexes.keys().copied().collect();
    let filter = Filter::of(&matcher);
    let statement = match &filter {
        Filter::Holds(spellings) => sqlx::query(entries_of!(
            "AND EXISTS (SELECT 1 FROM unnest($2::text[]) AS s (spelling) \
                         WHERE strpos(e.body, s.spelling) > 0)"
        ))
        .bind(&sessions)
        .bind(spellings),
        Filter::Matches(pattern) => sqlx::query(entries_of!("AND e.body ~ $2"))
            .bind(&sessions)
            .bind(pattern),
        Filter::Every => sqlx::query(entries_of!("")).bind(&sessions),
    };
    let what = "searching runs";
    let mut rows = statement.fetch(store.pool());
    let mut found = Vec::new();
    while let Some(row) = rows.try_next().await.or_failed(store, what).await? {
        let session: &str = row.try_get(0).or_failed(store, what).await?;
        let subagent: &str = row.try_get(1).or_failed(store, what).await?;
        let seq: i64 = row.try_get(2).or_failed(store, what).await?;
        // The body as the server sent it, without a copy into a String.
        let body = row.try_get_raw(3).or_failed(store, what).await?;
        let Ok(line) = body.as_bytes() else { continue };
        let agent = (!subagent.is_empty()).then_some(subagent);
        for &run in indexes.get(session).into_iter().flatten() {
            if let Some(hit) = matcher.hit(line, run, agent) {
                found.push(Found {
                    run,
                    subagent: subagent.to_owned(),
                    seq,
                    hit,
                });
            }
        }
    }
    // The main transcript ('') sorts before every subagent's name.
    found.sort_unstable_by(|a, b| (a.run, &a.subagent, a.seq).cmp(&(b.run, &b.subagent, b.seq)));
    let mut kept = PerRun::new(query.max_per_run);
    found.into_iter().for_each(|found| kept.push(found.hit));
    Ok(kept.finish())
}

/// A PostgreSQL regular expression that a text matches when it holds one of
/// `spellings` ignoring case as Rust's `regex` ignores it: each character as the set
/// of characters that fold to the same one, every character written as its code
/// point (so that nothing in it is taken as an operator, and no locale is involved).
/// `None` where the case folding tables are not at hand.
fn ignoring_case(spellings: &[String]) -> Option<String> {
    let mut pattern = String::new();
    for (index, spelling) in spellings.iter().enumerate() {
        if index > 0 {
            pattern.push('|');
        }
        for c in spelling.chars() {
            let mut class = ClassUnicode::new([ClassUnicodeRange::new(c, c)]);
            class.try_case_fold_simple().ok()?;
            let members: Vec<char> = class
                .ranges()
                .iter()
                .flat_map(|range| range.start()..=range.end())
                .collect();
            match members.as_slice() {
                [only] => push_code_point(&mut pattern, *only),
                _ => {
                    pattern.push('[');
                    members
                        .iter()
                        .for_each(|member| push_code_point(&mut pattern, *member));
                    pattern.push(']');
                }
            }
        }
    }
    Some(pattern)
}

/// `c` in a PostgreSQL regular expression: letters and digits as they are, anything
/// else as an escape of its code point.
fn push_code_point(pattern: &mut String, c: char) {
    if c.is_ascii_alphanumeric() {
        pattern.push(c);
    } else if let Ok(unit) = u16::try_from(u32::from(c)) {
        let _ = write!(pattern, "\\u{unit:04x}");
    } else {
        let _ = write!(pattern, "\\U{:08x}", u32::from(c));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_character_becomes_the_characters_that_fold_with_it() {
        let pattern = |spellings: &[&str]| {
            let spellings: Vec<String> = spellings.iter().map(|s| (*s).to_owned()).collect();
            ignoring_case(&spellings).unwrap()
        };
        assert_eq!(pattern(&["a-1"]), "[Aa]\\u002d1");
        // The Kelvin sign folds with K, and the long s with S.
        assert_eq!(
            pattern(&["ks", "é"]),
            "[Kk\\u212a][Ss\\u017f]|[\\u00c9\\u00e9]"
        );
        assert_eq!(pattern(&["😀"]), "\\U0001f600");
    }
}
