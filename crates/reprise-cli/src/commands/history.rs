//! `reprise rename | tag | search | du | prune`: the history as something to name,
//! search and clean up.

use std::io::{BufRead, Write};

use anyhow::{Result, bail};
use clap::{Subcommand, ValueEnum};
use jiff::{SignedDuration, Timestamp};
use reprise_redact::Redactor;
use reprise_runs::{
    PrunePlan, RunCatalog, RunFolder, RunSearch, RunSummary, SearchHit, SearchQuery, SearchRole,
    TagChange, clean_tag,
};
use serde_json::json;

use crate::display::terminal::{eprint_line, visible, write_json};
use reprise_chat::text::show_date_in;

/// The history commands, flattened into the command line's subcommands.
#[derive(Debug, Subcommand)]
pub enum HistoryCommand {
    /// Give a run a title (shown by `reprise runs` and /resume; `--resume TITLE` and
    /// `reprise show TITLE` then find it). An empty title removes it.
    Rename {
        /// A run folder name, a unique prefix of one, `last`, or a title.
        run: String,
        /// The new title (several words are joined with spaces).
        #[arg(required = true, num_args = 1..)]
        title: Vec<String>,
    },
    /// Add tags to a run, or with --untag remove them; without tags, print its tags.
    Tag {
        /// A run folder name, a unique prefix of one, `last`, or a title.
        run: String,
        /// Tags: one word each.
        tags: Vec<String>,
        /// Remove the tags instead of adding them.
        #[arg(long)]
        untag: bool,
    },
    /// Search every run's whole conversation (subagents included), newest runs first:
    /// the first 3 matching messages of each run, then a line saying there are more
    /// (--run RUN shows every hit of one run, --all of every run).
    Search {
        /// The text to find, or with --regex a regular expression. Smart case, as
        /// `rg -S`: a query in lower case matches any case; one with an upper-case
        /// letter matches its case only.
        query: String,
        /// QUERY is a regular expression (Rust regex syntax; slower: every line is
        /// decoded).
        #[arg(long)]
        regex: bool,
        /// Ignore case, whatever the query's case.
        #[arg(short = 'i', long, overrides_with = "case_sensitive")]
        ignore_case: bool,
        /// Match case, also for a query in lower case.
        #[arg(short = 's', long, overrides_with = "ignore_case")]
        case_sensitive: bool,
        /// Only messages of this role.
        #[arg(long, value_enum)]
        role: Option<RoleArg>,
        /// Only this run (a folder name, a unique prefix, `last`, or a title).
        #[arg(long, value_name = "RUN")]
        run: Option<String>,
        /// Show at most N matching messages of each run (by default 3; every hit with
        /// --run, --all or --json).
        #[arg(short = 'm', long, value_name = "N", conflicts_with = "all")]
        max_per_run: Option<usize>,
        /// Show every matching message of every run.
        #[arg(long)]
        all: bool,
        /// Print the hits as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The disk space of each run, largest first, and in total.
    Du {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Delete old runs: those not used for a while (--older-than), or all but the
    /// newest (--keep); with both, only runs that are both. Asks first unless --yes;
    /// a run open in a chat is never touched.
    Prune {
        /// Runs whose conversation was last added to longer ago than this: 90d, 12w,
        /// 36h (a bare number is days).
        #[arg(long, value_name = "AGE", value_parser = parse_age)]
        older_than: Option<SignedDuration>,
        /// Keep the newest N runs.
        #[arg(long, value_name = "N")]
        keep: Option<usize>,
        /// Print what would be deleted, delete nothing.
        #[arg(long)]
        dry_run: bool,
        /// Do not ask (required when stdin is not a terminal).
        #[arg(long)]
        yes: bool,
    },
}

/// `--role` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RoleArg {
    /// The person's messages.
    User,
    /// The model's replies and tool calls.
    Assistant,
    /// Tool results.
    Tool,
}

impl From<RoleArg> for SearchRole {
    fn from(role: RoleArg) -> SearchRole {
        match role {
            RoleArg::User => SearchRole::User,
            RoleArg::Assistant => SearchRole::Assistant,
            RoleArg::Tool => SearchRole::Tool,
        }
    }
}

/// What the history commands need from outside: where to write and read, whether
/// stdin and stdout are terminals, what snippets pass.
pub struct Io<'a> {
    /// Standard output.
    pub out: &'a mut dyn Write,
    /// Standard input (for prune's question).
    pub input: &'a mut dyn BufRead,
    /// Whether stdin is a terminal (prune asks only there).
    pub stdin_terminal: bool,
    /// Whether matches are highlighted with terminal colours (else between « »).
    pub color: bool,
    /// What search snippets pass.
    pub redactor: Redactor,
}

/// Runs one history command; returns the exit code (a search that finds nothing
/// exits with 1, as grep and rg do).
pub async fn run(runs: &dyn RunCatalog, command: HistoryCommand, io: Io<'_>) -> Result<i32> {
    let done = |result: Result<()>| result.map(|()| 0);
    match command {
        HistoryCommand::Rename { run, title } => {
            done(rename(runs, &run, &title.join(" "), io.out).await)
        }
        HistoryCommand::Tag { run, tags, untag } => {
            done(tag(runs, &run, &tags, untag, io.out).await)
        }
        HistoryCommand::Search {
            query,
            regex,
            ignore_case,
            case_sensitive,
            role,
            run,
            max_per_run,
            all,
            json,
        } => {
            let ignore_case =
                !case_sensitive && (ignore_case || !reprise_runs::has_upper_case(&query, regex));
            let shown = match max_per_run {
                Some(0) => bail!("--max-per-run must be 1 or more"),
                Some(limit) => Some(limit),
                None if all || json || run.is_some() => None,
                None => Some(DEFAULT_PER_RUN),
            };
            let query = SearchQuery {
                pattern: query,
                regex,
                ignore_case,
                role: role.map(SearchRole::from),
                max_per_run: shown,
                redactor: io.redactor,
            };
            let view = SearchView {
                json,
                color: io.color,
            };
            let found = search(runs, &query, run.as_deref(), &view, io.out).await?;
            Ok(if found { 0 } else { 1 })
        }
        HistoryCommand::Du { json } => done(du(runs, json, io.out).await),
        HistoryCommand::Prune {
            older_than,
            keep,
            dry_run,
            yes,
        } => done(prune(runs, &PrunePlan { older_than, keep }, dry_run, yes, io).await),
    }
}

/// `reprise rename RUN TITLE`.
pub async fn rename(
    runs: &dyn RunCatalog,
    spec: &str,
    title: &str,
    out: &mut dyn Write,
) -> Result<()> {
    let run = runs.find(spec).await?;
    if run.session_id.is_none() {
        bail!("run {} has no conversation to name", run.name());
    }
    let labels = runs
        .set_title(&run, title)
        .await?
        .ok_or_else(|| gone(runs, run.name()))?;
    let line = title_line(run.name(), labels.title.as_deref());
    out.write_all(visible(&line).as_bytes())?;
    Ok(())
}

/// A run found a moment ago and deleted since.
fn gone(runs: &dyn RunCatalog, name: &str) -> anyhow::Error {
    anyhow::anyhow!("run {name} is no longer in {}", runs.place())
}

/// What `reprise rename` says of a run's new title.
fn title_line(run: &str, title: Option<&str>) -> String {
    match title {
        Some(title) => format!("run {run} is now called “{title}”\n"),
        None => format!("run {run} has no title now\n"),
    }
}

/// `reprise tag RUN TAG… [--untag]`.
pub async fn tag(
    runs: &dyn RunCatalog,
    spec: &str,
    tags: &[String],
    untag: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let run = runs.find(spec).await?;
    if run.session_id.is_none() {
        bail!("run {} has no conversation to tag", run.name());
    }
    let tags = clean_tags(tags)?;
    let labels = if tags.is_empty() {
        runs.labels(&run).await?
    } else if untag {
        runs.change_tags(&run, TagChange::remove(tags)).await?
    } else {
        runs.change_tags(&run, TagChange::add(tags)).await?
    }
    .ok_or_else(|| gone(runs, run.name()))?;
    let line = tags_line(run.name(), &labels.tags);
    out.write_all(visible(&line).as_bytes())?;
    Ok(())
}

/// The tags given on the command line, as they are kept.
fn clean_tags(tags: &[String]) -> Result<Vec<String>> {
    tags.iter()
        .map(|tag| clean_tag(tag).map_err(anyhow::Error::msg))
        .collect()
}

/// What `reprise tag` says of a run's tags.
fn tags_line(run: &str, tags: &[String]) -> String {
    if tags.is_empty() {
        format!("run {run} has no tags\n")
    } else {
        format!("run {run}: {}\n", tags.join(" "))
    }
}

/// Where a highlight starts and ends.
struct Marks {
    open: &'static str,
    close: &'static str,
}

const COLOR_MARKS: Marks = Marks {
    open: "\x1b[1;31m",
    close: "\x1b[0m",
};
const PLAIN_MARKS: Marks = Marks {
    open: "«",
    close: "»",
};

/// `reprise search QUERY …`: the hits grouped by run, newest runs first. Returns
/// whether anything matched.
pub async fn search(
    catalog: &dyn RunCatalog,
    query: &SearchQuery,
    only: Option<&str>,
    view: &SearchView,
    out: &mut dyn Write,
) -> Result<bool> {
    // The redactor's patterns are compiled by the first snippet, not beforehand: a
    // search of few hits would spend a quarter of its time on them, and one of many
    // finds its first hit at once, while the other search threads go on.
    let list = catalog.list().await?;
    for warning in &list.warnings {
        eprint_line(&format!("warning: {warning}"));
    }
    let runs: Vec<RunSummary> = match only {
        None => list.runs,
        Some(spec) => {
            let folder = catalog.find(spec).await?;
            list.runs
                .into_iter()
                .filter(|run| run.dir == folder.dir)
                .collect()
        }
    };
    let hits = catalog.search(RunSearch { runs: &runs, query }).await?;
    if view.json {
        let rows: Vec<_> = hits
            .iter()
            .map(|hit| {
                let run = &runs[hit.run];
                json!({
                    "run": run.name(),
                    "dir": run.dir,
                    "title": run.title,
                    "shownAs": run.display_title(80),
                    "updatedAt": run.updated_at.to_string(),
                    "agent": hit.agent,
                    "role": hit.role,
                    "entry": hit.entry.to_string(),
                    "ts": hit.ts.to_string(),
                    "snippet": hit.snippet,
                    "highlights": hit.highlights,
                    "matches": hit.matches,
                    "moreInRun": hit.more_in_run,
                })
            })
            .collect();
        write_json(out, &rows)?;
        return Ok(!hits.is_empty());
    }
    if hits.is_empty() {
        writeln!(out, "no matches")?;
        return Ok(false);
    }
    let marks = if view.color {
        &COLOR_MARKS
    } else {
        &PLAIN_MARKS
    };
    let tz = jiff::tz::TimeZone::system();
    let mut text = String::new();
    let mut current = None;
    for hit in &hits {
        let run = &runs[hit.run];
        if current != Some(hit.run) {
            if current.is_some() {
                text.push('\n');
            }
            current = Some(hit.run);
            let title = run.display_title(60);
            text.push_str(&format!(
                "{}  {}  {}\n",
                run.name(),
                show_date_in(run.updated_at, &tz),
                visible(&title)
            ));
        }
        text.push_str(&hit_line(hit, marks));
        if hit.more_in_run {
            text.push_str(&format!(
                "  … more in this run (--run {} shows every match)\n",
                visible(run.name())
            ));
        }
        // Written as it grows, not whole at the end: every hit of a long session
        // would be held twice, as hits and as text.
        if text.len() >= OUTPUT_CHUNK {
            out.write_all(text.as_bytes())?;
            text.clear();
        }
    }
    out.write_all(text.as_bytes())?;
    Ok(true)
}

/// Bytes of search results gathered before they are written.
const OUTPUT_CHUNK: usize = 64 * 1024;

/// How many matching messages of each run `reprise search` shows by default.
pub const DEFAULT_PER_RUN: usize = 3;

/// How `reprise search` shows its hits.
pub struct SearchView {
    /// As JSON, one object per hit.
    pub json: bool,
    /// Matches highlighted with terminal colours (else between « »).
    pub color: bool,
}

/// One hit: `  role [agent]: snippet`, every piece from the run passed through
/// [`visible`] and the matches between `marks`.
fn hit_line(hit: &SearchHit, marks: &Marks) -> String {
    let mut line = format!("  {}", hit.role);
    if let Some(agent) = &hit.agent {
        line.push_str(&format!(" [{}]", visible(agent)));
    }
    line.push_str(": ");
    let mut at = 0;
    for &(start, end) in &hit.highlights {
        if start < at || end > hit.snippet.len() {
            continue;
        }
        line.push_str(&visible(&hit.snippet[at..start]));
        line.push_str(marks.open);
        line.push_str(&visible(&hit.snippet[start..end]));
        line.push_str(marks.close);
        at = end;
    }
    line.push_str(&visible(&hit.snippet[at..]));
    if hit.matches > hit.highlights.len() {
        line.push_str(&format!(" ({} matches)", hit.matches));
    }
    line.push('\n');
    line
}

/// A size as people read it: `512 B`, `3.4 KiB`, `1.2 GiB`.
pub fn human_size(bytes: u64) -> String {
    bytesize::ByteSize::b(bytes).display().iec().to_string()
}

/// `reprise du`: each run's size, largest first, then the total (where the runs
/// are kept as a whole: runs, prompt history and anything else in it).
pub async fn du(catalog: &dyn RunCatalog, json: bool, out: &mut dyn Write) -> Result<()> {
    let sizes = catalog.sizes().await?;
    let sized: Vec<(u64, &RunSummary)> =
        sizes.runs.iter().map(|(run, size)| (*size, run)).collect();
    let runs_total: u64 = sized.iter().map(|(size, _)| size).sum();
    let total = sizes.total;
    if json {
        let rows: Vec<_> = sized
            .iter()
            .map(|(size, run)| {
                json!({
                    "run": run.name(),
                    "bytes": size,
                    "updatedAt": run.updated_at.to_string(),
                    "title": run.title,
                })
            })
            .collect();
        let value = json!({"runs": rows, "runsBytes": runs_total, "totalBytes": total});
        return write_json(out, &value);
    }
    let tz = jiff::tz::TimeZone::system();
    let mut text = format!(
        "{:>10}  {:<16}  {:<40}  {}\n",
        "SIZE", "DATE", "TITLE", "RUN"
    );
    for (size, run) in &sized {
        text.push_str(&format!(
            "{:>10}  {:<16}  {:<40}  {}\n",
            human_size(*size),
            show_date_in(run.updated_at, &tz),
            run.display_title(40),
            run.name()
        ));
    }
    text.push_str(&format!(
        "{:>10}  total: {}; {} in {} with the prompt history and runs without a conversation\n",
        human_size(runs_total),
        reprise_chat::text::counted(sized.len(), "run", "runs"),
        human_size(total),
        catalog.place()
    ));
    out.write_all(visible(&text).as_bytes())?;
    Ok(())
}

/// `90d`, `12w`, `36h`, or a bare number of days (see [`reprise_chat::config::duration`]).
pub fn parse_age(text: &str) -> Result<SignedDuration, String> {
    reprise_chat::config::duration::parse_duration(
        text,
        reprise_chat::config::duration::BareUnit::Days,
    )
}

/// `reprise prune`: lists what goes, asks (unless `yes`), then deletes each run
/// while holding its writer lock, so a chat can neither have it open nor open it
/// meanwhile; a run open in a chat is skipped and said so.
pub async fn prune(
    catalog: &dyn RunCatalog,
    plan: &PrunePlan,
    dry_run: bool,
    yes: bool,
    io: Io<'_>,
) -> Result<()> {
    if plan.older_than.is_none() && plan.keep.is_none() {
        bail!("say which runs to delete: --older-than AGE, --keep N, or both");
    }
    if !dry_run && !yes && !io.stdin_terminal {
        bail!(
            "prune deletes runs: run it in a terminal to confirm, pass --yes, or see what \
             it would delete with --dry-run"
        );
    }
    let out = io.out;
    let list = catalog.list().await?;
    let chosen = plan.select(&list.runs, Timestamp::now());
    // Folders with nothing written in them go whatever the plan: they hold nothing.
    let unused: Vec<RunFolder> =
        reprise_runs::unused_run_folders(catalog.runs_dir(), std::time::SystemTime::now())?
            .into_iter()
            .filter(|folder| !list.runs.iter().any(|run| run.name() == folder.name()))
            .collect();
    if chosen.is_empty() && unused.is_empty() {
        writeln!(out, "no run to delete")?;
        return Ok(());
    }
    let tz = jiff::tz::TimeZone::system();
    let sized = catalog.sizes().await?;
    let size_of = |run: &RunSummary| {
        sized
            .runs
            .iter()
            .find(|(sized, _)| sized.name() == run.name())
            .map_or(0, |(_, size)| *size)
    };
    let sizes: Vec<u64> = chosen.iter().map(|run| size_of(run)).collect();
    let total: u64 = sizes.iter().sum();
    let mut text = String::new();
    let verb = if dry_run { "would delete" } else { "to delete" };
    if !chosen.is_empty() {
        text.push_str(&format!(
            "{verb} {} ({}):\n",
            reprise_chat::text::counted(chosen.len(), "run", "runs"),
            human_size(total)
        ));
    }
    for (run, size) in chosen.iter().zip(&sizes) {
        text.push_str(&format!(
            "  {}  {:>10}  {}  {}\n",
            run.name(),
            human_size(*size),
            show_date_in(run.updated_at, &tz),
            run.display_title(48)
        ));
    }
    if !unused.is_empty() {
        text.push_str(&format!(
            "{verb} {} unused run folders (nothing was written in them):\n",
            unused.len()
        ));
        for folder in &unused {
            text.push_str(&format!("  {}\n", folder.name()));
        }
    }
    out.write_all(visible(&text).as_bytes())?;
    if dry_run {
        return Ok(());
    }
    if !yes {
        if unused.is_empty() {
            write!(out, "delete {}? [y/N] ", these_runs(chosen.len()))?;
        } else {
            write!(
                out,
                "delete {} and {}? [y/N] ",
                these_runs(chosen.len()),
                reprise_chat::text::counted(
                    unused.len(),
                    "unused run folder",
                    "unused run folders"
                )
            )?;
        }
        out.flush()?;
        let mut answer = String::new();
        io.input.read_line(&mut answer)?;
        if !reprise_chat::answers::is_yes(&answer) {
            writeln!(out, "nothing deleted")?;
            return Ok(());
        }
    }
    let mut deleted = 0;
    for run in chosen {
        match delete_unless_open(catalog, run).await {
            Ok(()) => {
                deleted += 1;
                writeln!(out, "deleted {}", run.name())?;
            }
            Err(error) => {
                let line = format!("kept {}: {error:#}\n", run.name());
                out.write_all(visible(&line).as_bytes())?;
            }
        }
    }
    writeln!(
        out,
        "deleted {}",
        reprise_chat::text::counted(deleted, "run", "runs")
    )?;
    let mut removed = 0;
    for folder in &unused {
        match reprise_runs::remove_unused_run_folder(folder) {
            Ok(true) => removed += 1,
            Ok(false) => writeln!(
                out,
                "kept {}: in use or written to meanwhile",
                folder.name()
            )?,
            Err(error) => {
                let line = format!("kept {}: {error:#}\n", folder.name());
                out.write_all(visible(&line).as_bytes())?;
            }
        }
    }
    if !unused.is_empty() {
        writeln!(out, "removed {removed} unused run folders")?;
    }
    Ok(())
}

/// Deletes a run while holding its writer lock; a run that a chat has open is
/// refused.
async fn delete_unless_open(catalog: &dyn RunCatalog, run: &RunSummary) -> Result<()> {
    let folder = run.folder();
    let store = catalog.store_for(&folder, &Redactor::new());
    let _lock = match store.lock(&run.session_id).await {
        Ok(lock) => lock,
        Err(error @ reprise_session::StoreError::Locked { .. }) => {
            return Err(anyhow::Error::from(error).context("open in a chat"));
        }
        Err(error) => return Err(anyhow::Error::from(error).context("cannot lock it")),
    };
    Ok(catalog.delete(&folder).await?)
}

/// `these 3 runs` / `this run`.
fn these_runs(count: usize) -> String {
    if count == 1 {
        "this run".to_owned()
    } else {
        format!("these {count} runs")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_parse_in_hours_days_and_weeks() {
        assert_eq!(parse_age("36h"), Ok(SignedDuration::from_hours(36)));
        assert_eq!(parse_age("90d"), Ok(SignedDuration::from_hours(90 * 24)));
        assert_eq!(parse_age("2w"), Ok(SignedDuration::from_hours(14 * 24)));
        assert_eq!(parse_age("7"), Ok(SignedDuration::from_hours(7 * 24)));
        assert!(parse_age("soon").is_err());
        assert!(parse_age("-3d").is_err());
    }

    #[test]
    fn sizes_read_in_binary_units() {
        assert_eq!(human_size(512), "512 B");
        assert_eq!(human_size(1536), "1.5 KiB");
        assert_eq!(human_size(3 * 1024 * 1024 * 1024), "3.0 GiB");
        assert_eq!(human_size(1023), "1023 B");
        assert_eq!(human_size(1024), "1.0 KiB");
        assert_eq!(human_size(1024 * 1024 - 1), "1024.0 KiB");
    }
}
