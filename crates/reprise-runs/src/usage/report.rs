//! Summing the ledger: totals by day, week, run, model or tool, between two days,
//! with the cost where a price is known.

use std::collections::BTreeMap;

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

use super::{PriceTable, UsageLedger};

/// What the rows of a report are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grouping {
    /// One row per day.
    Day,
    /// One row per week, named by its Monday.
    Week,
    /// One row per run.
    Run,
    /// One row per model (`(unknown)` where none is recorded).
    Model,
    /// One row per tool: its calls only (a reply's tokens are not split among its
    /// calls).
    Tool,
}

/// Which calls count, and the time zone their days are in.
#[derive(Clone, Debug)]
pub struct UsageFilter {
    /// The first day counted.
    pub since: Option<Date>,
    /// The last day counted.
    pub until: Option<Date>,
    /// The zone days and weeks are taken in.
    pub time_zone: TimeZone,
}

/// Sums over some model calls and tool calls.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Totals {
    /// Tokens sent (cached ones included).
    pub input_tokens: u64,
    /// Tokens generated.
    pub output_tokens: u64,
    /// Tokens sent that the server read from its cache, where it said.
    pub cached_tokens: u64,
    /// Model calls (replies with usage; a compaction's summary calls count as one).
    pub calls: u64,
    /// Tool calls.
    pub tool_calls: u64,
    /// The cost of the calls with a price.
    pub priced_cost: f64,
    /// How many calls had a price.
    pub priced_calls: u64,
    /// Input and output tokens of the calls without a price.
    pub unpriced_tokens: u64,
    /// How many calls had no price.
    pub unpriced_calls: u64,
}

impl Totals {
    /// The cost, when at least one call had a price (the calls without one left
    /// out: see [`Totals::unpriced_tokens`]).
    pub fn cost(&self) -> Option<f64> {
        (self.priced_calls > 0).then_some(self.priced_cost)
    }

    /// Input and output tokens together.
    pub fn tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

/// One row of a report.
#[derive(Clone, Debug, PartialEq)]
pub struct UsageRow {
    /// The day or Monday (`2026-11-30`), run name, model or tool.
    pub key: String,
    /// Its sums.
    pub totals: Totals,
}

/// The ledger summed.
#[derive(Clone, Debug, PartialEq)]
pub struct UsageReport {
    /// What the rows are.
    pub grouping: Grouping,
    /// The rows, in the order of their keys.
    pub rows: Vec<UsageRow>,
    /// Every call counted.
    pub total: Totals,
}

/// The name of the row of calls without a model.
const UNKNOWN_MODEL: &str = "(unknown)";

/// Sums the calls of `ledger` that `filter` keeps, by `grouping`, costed by `prices`.
pub fn summarise(
    ledger: &UsageLedger,
    grouping: Grouping,
    filter: &UsageFilter,
    prices: &PriceTable,
) -> UsageReport {
    let mut rows: BTreeMap<String, Totals> = BTreeMap::new();
    let mut total = Totals::default();
    for reply in &ledger.replies {
        let day = day_of(reply.ts, &filter.time_zone);
        if !kept(day, filter) {
            continue;
        }
        let mut sums = Totals {
            input_tokens: reply.input_tokens,
            output_tokens: reply.output_tokens,
            cached_tokens: reply.cached_tokens.unwrap_or(0),
            calls: 1,
            ..Totals::default()
        };
        match reply
            .model
            .as_deref()
            .and_then(|model| prices.price_on(model, day))
        {
            Some(price) => {
                sums.priced_calls = 1;
                sums.priced_cost =
                    price.cost(sums.input_tokens, sums.cached_tokens, sums.output_tokens);
            }
            None => {
                sums.unpriced_calls = 1;
                sums.unpriced_tokens = sums.tokens();
            }
        }
        add(&mut total, &sums);
        let key = match grouping {
            Grouping::Tool => continue,
            Grouping::Run => reply.run.clone(),
            Grouping::Model => model_key(reply.model.as_deref()),
            Grouping::Day | Grouping::Week => day_key(day, grouping),
        };
        add(rows.entry(key).or_default(), &sums);
    }
    for call in &ledger.tool_calls {
        let day = day_of(call.ts, &filter.time_zone);
        if !kept(day, filter) {
            continue;
        }
        total.tool_calls += 1;
        let key = match grouping {
            Grouping::Tool => call.tool.clone(),
            Grouping::Run => call.run.clone(),
            Grouping::Model => model_key(call.model.as_deref()),
            Grouping::Day | Grouping::Week => day_key(day, grouping),
        };
        rows.entry(key).or_default().tool_calls += 1;
    }
    UsageReport {
        grouping,
        rows: rows
            .into_iter()
            .map(|(key, totals)| UsageRow { key, totals })
            .collect(),
        total,
    }
}

fn day_of(ts: Timestamp, zone: &TimeZone) -> Date {
    zone.to_datetime(ts).date()
}

fn kept(day: Date, filter: &UsageFilter) -> bool {
    filter.since.is_none_or(|since| day >= since) && filter.until.is_none_or(|until| day <= until)
}

fn model_key(model: Option<&str>) -> String {
    model.unwrap_or(UNKNOWN_MODEL).to_owned()
}

/// The day, or the Monday of its week.
fn day_key(day: Date, grouping: Grouping) -> String {
    if grouping == Grouping::Week {
        let back = i64::from(day.weekday().to_monday_zero_offset());
        // Only the first days jiff can represent have no Monday before them.
        return day.checked_sub(back.days()).unwrap_or(day).to_string();
    }
    day.to_string()
}

fn add(total: &mut Totals, more: &Totals) {
    total.input_tokens = total.input_tokens.saturating_add(more.input_tokens);
    total.output_tokens = total.output_tokens.saturating_add(more.output_tokens);
    total.cached_tokens = total.cached_tokens.saturating_add(more.cached_tokens);
    total.calls += more.calls;
    total.tool_calls += more.tool_calls;
    total.priced_cost += more.priced_cost;
    total.priced_calls += more.priced_calls;
    total.unpriced_tokens = total.unpriced_tokens.saturating_add(more.unpriced_tokens);
    total.unpriced_calls += more.unpriced_calls;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Price, ReplyUsage, ToolCallUse};

    fn reply(run: &str, ts: &str, model: Option<&str>, input: u64, output: u64) -> ReplyUsage {
        ReplyUsage {
            run: run.to_owned(),
            subagent: None,
            ts: ts.parse().unwrap(),
            model: model.map(str::to_owned),
            input_tokens: input,
            output_tokens: output,
            cached_tokens: None,
        }
    }

    fn ledger() -> UsageLedger {
        UsageLedger {
            replies: vec![
                reply("a", "2026-11-29T23:00:00Z", Some("m"), 100, 10),
                reply("a", "2026-11-30T01:00:00Z", Some("m"), 200, 20),
                reply("b", "2026-12-02T12:00:00Z", None, 400, 40),
            ],
            tool_calls: vec![ToolCallUse {
                run: "a".to_owned(),
                ts: "2026-11-30T01:00:00Z".parse().unwrap(),
                model: Some("m".to_owned()),
                tool: "run_command".to_owned(),
            }],
            warnings: Vec::new(),
        }
    }

    fn utc() -> UsageFilter {
        UsageFilter {
            since: None,
            until: None,
            time_zone: TimeZone::UTC,
        }
    }

    #[test]
    fn days_weeks_and_the_filter() {
        let prices = PriceTable::default();
        let report = summarise(&ledger(), Grouping::Day, &utc(), &prices);
        let keys: Vec<_> = report.rows.iter().map(|row| row.key.as_str()).collect();
        assert_eq!(keys, ["2026-11-29", "2026-11-30", "2026-12-02"]);
        assert_eq!(report.total.input_tokens, 700);
        assert_eq!(report.total.tool_calls, 1);
        assert_eq!(report.rows[1].totals.tool_calls, 1);
        let weeks = summarise(&ledger(), Grouping::Week, &utc(), &prices);
        let keys: Vec<_> = weeks.rows.iter().map(|row| row.key.as_str()).collect();
        // 2026-11-29 is a Sunday.
        assert_eq!(keys, ["2026-11-23", "2026-11-30"]);
        let filter = UsageFilter {
            since: Some(jiff::civil::date(2026, 11, 30)),
            until: Some(jiff::civil::date(2026, 11, 30)),
            ..utc()
        };
        let one = summarise(&ledger(), Grouping::Model, &filter, &prices);
        assert_eq!(one.total.input_tokens, 200);
        assert_eq!(one.rows.len(), 1);
    }

    #[test]
    fn costs_where_a_price_is_known() {
        let prices = PriceTable::new(vec![Price {
            model: "m".to_owned(),
            from: jiff::civil::date(2026, 11, 30),
            input: 1_000.0,
            output: 10_000.0,
            cached: None,
        }])
        .unwrap();
        let report = summarise(&ledger(), Grouping::Model, &utc(), &prices);
        assert_eq!(report.total.priced_calls, 1);
        assert_eq!(report.total.cost(), Some(0.2 + 0.2));
        assert_eq!(report.total.unpriced_tokens, 110 + 440);
        let unknown = &report.rows[0];
        assert_eq!(unknown.key, "(unknown)");
        assert_eq!(unknown.totals.cost(), None);
    }
}
