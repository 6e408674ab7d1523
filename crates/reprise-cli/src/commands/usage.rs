//! `reprise usage`: the tokens, model calls, tool calls and cost of every run, by
//! day, week, run, model or tool, as a table with bars, JSON, or an HTML page.

use std::io::Write;

use anyhow::Result;
use clap::ValueEnum;
use jiff::civil::Date;
use jiff::tz::TimeZone;
use reprise_runs::{
    Grouping, PriceTable, RunCatalog, Totals, UsageFilter, UsageReport, read_usage, summarise,
};
use serde_json::{Value, json};

use crate::display::terminal::{eprint_line, visible, write_json};

/// `--by` values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum ByArg {
    /// One row per day.
    #[default]
    Day,
    /// One row per week (Monday to Sunday), named by its Monday.
    Week,
    /// One row per run.
    Run,
    /// One row per model.
    Model,
    /// One row per tool: its calls.
    Tool,
}

impl From<ByArg> for Grouping {
    fn from(by: ByArg) -> Grouping {
        match by {
            ByArg::Day => Grouping::Day,
            ByArg::Week => Grouping::Week,
            ByArg::Run => Grouping::Run,
            ByArg::Model => Grouping::Model,
            ByArg::Tool => Grouping::Tool,
        }
    }
}

/// What `reprise usage` was asked for.
#[derive(Clone, Debug, Default)]
pub struct UsageRequest {
    /// The rows.
    pub by: ByArg,
    /// The first day counted.
    pub since: Option<Date>,
    /// The last day counted.
    pub until: Option<Date>,
    /// JSON instead of the table.
    pub json: bool,
    /// Also write an HTML page with a chart here.
    pub html: Option<std::path::PathBuf>,
}

/// Parses `--since` and `--until`: a day, `2026-11-30`.
pub fn parse_day(text: &str) -> Result<Date, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a day: write it as 2026-11-30"))
}

/// The widest bar, in characters.
const BAR_WIDTH: usize = 24;

/// `reprise usage`.
pub async fn usage(
    runs: &dyn RunCatalog,
    prices: &PriceTable,
    request: &UsageRequest,
    out: &mut dyn Write,
) -> Result<()> {
    if let (Some(since), Some(until)) = (request.since, request.until)
        && since > until
    {
        anyhow::bail!("--since {since} is after --until {until}");
    }
    let ledger = read_usage(runs).await?;
    for warning in &ledger.warnings {
        if warning.line == 0 {
            eprint_line(&format!(
                "warning: {}: {}",
                warning.file.display(),
                warning.message
            ));
        } else {
            eprint_line(&format!("warning: {warning}"));
        }
    }
    let time_zone = TimeZone::system();
    let filter = UsageFilter {
        since: request.since,
        until: request.until,
        time_zone: time_zone.clone(),
    };
    let report = summarise(&ledger, request.by.into(), &filter, prices);
    if let Some(path) = &request.html {
        let page = crate::export::usage_html::render(&report, &heading(request, &time_zone));
        super::export::write_private(path, &page)?;
    }
    if request.json {
        return write_json(out, &report_json(&report, request, &time_zone));
    }
    let text = table(&report, request.by);
    out.write_all(visible(&text).as_bytes())?;
    if let Some(note) = unpriced_note(&report.total, prices) {
        eprint_line(&note);
    }
    Ok(())
}

/// What the page is titled: the grouping and the days.
fn heading(request: &UsageRequest, zone: &TimeZone) -> String {
    let mut title = format!("Usage by {}", by_name(request.by));
    match (request.since, request.until) {
        (Some(since), Some(until)) => title.push_str(&format!(", {since} to {until}")),
        (Some(since), None) => title.push_str(&format!(", since {since}")),
        (None, Some(until)) => title.push_str(&format!(", until {until}")),
        (None, None) => {}
    }
    if let Some(name) = zone.iana_name() {
        title.push_str(&format!(" ({name})"));
    }
    title
}

fn by_name(by: ByArg) -> &'static str {
    match by {
        ByArg::Day => "day",
        ByArg::Week => "week",
        ByArg::Run => "run",
        ByArg::Model => "model",
        ByArg::Tool => "tool",
    }
}

/// The sums as JSON (the shape docs/usage.md documents).
fn totals_json(totals: &Totals) -> Value {
    json!({
        "inputTokens": totals.input_tokens,
        "outputTokens": totals.output_tokens,
        "cachedTokens": totals.cached_tokens,
        "calls": totals.calls,
        "toolCalls": totals.tool_calls,
        "cost": totals.cost(),
        "unpricedTokens": totals.unpriced_tokens,
        "unpricedCalls": totals.unpriced_calls,
    })
}

fn report_json(report: &UsageReport, request: &UsageRequest, zone: &TimeZone) -> Value {
    let rows: Vec<Value> = report
        .rows
        .iter()
        .map(|row| {
            let mut value = json!({"key": row.key});
            if let (Some(object), Value::Object(sums)) =
                (value.as_object_mut(), totals_json(&row.totals))
            {
                object.extend(sums);
            }
            value
        })
        .collect();
    json!({
        "by": by_name(request.by),
        "since": request.since.map(|day| day.to_string()),
        "until": request.until.map(|day| day.to_string()),
        "timeZone": zone.iana_name(),
        "rows": rows,
        "total": totals_json(&report.total),
    })
}

/// `1234567` as `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// A cost: `—` without a price, `*` after it when some calls had none.
pub(crate) fn cost_text(totals: &Totals) -> String {
    match totals.cost() {
        None => "—".to_owned(),
        Some(cost) => {
            let mark = if totals.unpriced_calls > 0 { "*" } else { "" };
            let digits = if cost >= 1.0 { 2 } else { 4 };
            format!("{cost:.digits$}{mark}")
        }
    }
}

/// What a row's bar measures: tokens, or for tools their calls.
pub(crate) fn bar_value(totals: &Totals, by: Grouping) -> u64 {
    if by == Grouping::Tool {
        totals.tool_calls
    } else {
        totals.tokens()
    }
}

/// A bar of `value` scaled so that `widest` fills [`BAR_WIDTH`]; any value above
/// zero gets at least one block.
fn bar(value: u64, widest: u64) -> String {
    if value == 0 || widest == 0 {
        return String::new();
    }
    let blocks = (value as u128 * BAR_WIDTH as u128).div_ceil(widest as u128);
    "▇".repeat(
        usize::try_from(blocks)
            .unwrap_or(BAR_WIDTH)
            .clamp(1, BAR_WIDTH),
    )
}

fn table(report: &UsageReport, by: ByArg) -> String {
    let header = match by {
        ByArg::Day => "DAY",
        ByArg::Week => "WEEK OF",
        ByArg::Run => "RUN",
        ByArg::Model => "MODEL",
        ByArg::Tool => "TOOL",
    };
    if report.rows.is_empty() {
        return "no model calls recorded in these runs\n".to_owned();
    }
    let keys: Vec<String> = report
        .rows
        .iter()
        .map(|row| visible(&row.key).into_owned())
        .collect();
    let width = keys
        .iter()
        .map(|key| key.chars().count())
        .chain([header.len(), "TOTAL".len()])
        .max()
        .unwrap_or(0);
    let grouping = report.grouping;
    let widest = report
        .rows
        .iter()
        .map(|row| bar_value(&row.totals, grouping))
        .max()
        .unwrap_or(0);
    let mut text = String::new();
    let line = |text: &mut String, key: &str, totals: &Totals, bar: &str| {
        let pad = width.saturating_sub(key.chars().count());
        let row = format!(
            "{key}{:pad$}  {:>12}  {:>12}  {:>10}  {:>6}  {:>6}  {:>10}  {bar}",
            "",
            thousands(totals.input_tokens),
            thousands(totals.cached_tokens),
            thousands(totals.output_tokens),
            thousands(totals.calls),
            thousands(totals.tool_calls),
            cost_text(totals),
        );
        text.push_str(row.trim_end());
        text.push('\n');
    };
    text.push_str(
        format!(
            "{header:<width$}  {:>12}  {:>12}  {:>10}  {:>6}  {:>6}  {:>10}\n",
            "INPUT", "CACHED", "OUTPUT", "CALLS", "TOOLS", "COST"
        )
        .as_str(),
    );
    for (row, key) in report.rows.iter().zip(&keys) {
        let shown = bar(bar_value(&row.totals, grouping), widest);
        line(&mut text, key, &row.totals, &shown);
    }
    line(&mut text, "TOTAL", &report.total, "");
    text
}

/// The note under the table when some calls had no price.
fn unpriced_note(total: &Totals, prices: &PriceTable) -> Option<String> {
    if total.unpriced_calls == 0 {
        return None;
    }
    let hint = if prices.is_empty() {
        "; prices go in [[prices]] in the config file"
    } else {
        ""
    };
    Some(format!(
        "note: {} tokens of {} model calls had no price (— and * mark them){hint}",
        thousands(total.unpriced_tokens),
        thousands(total.unpriced_calls),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_bars() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(bar(0, 10), "");
        assert_eq!(bar(1, 1_000), "▇");
        assert_eq!(bar(10, 10).chars().count(), BAR_WIDTH);
        assert_eq!(bar(5, 10).chars().count(), BAR_WIDTH / 2);
    }

    #[test]
    fn days_are_parsed_or_refused_by_name() {
        assert_eq!(parse_day("2026-11-30"), Ok(jiff::civil::date(2026, 11, 30)));
        assert_eq!(
            parse_day("yesterday").unwrap_err(),
            "\"yesterday\" is not a day: write it as 2026-11-30"
        );
    }
}
