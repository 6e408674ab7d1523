//! `reprise usage --html`: the report as one page in the export's style, its chart
//! an inline SVG (no script, nothing loaded: the same Content-Security-Policy as an
//! exported run).

use reprise_runs::{Grouping, Totals, UsageReport};

use super::html::STYLE;
use super::markdown::escape_html;

const CHART_STYLE: &str = r#"
svg.chart { display: block; margin: 8px 0 24px; background: #fff; border: 1px solid #d1d9e0; border-radius: 8px; }
svg.chart text { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; fill: #1f2328; }
svg.chart text.value { fill: #59636e; }
svg.chart rect { fill: #0969da; }
table.usage { background: #fff; font-size: 0.9em; }
table.usage td.n { text-align: right; font-variant-numeric: tabular-nums; }
table.usage tr.total td { font-weight: 600; }
"#;

/// The width of the chart's drawing, in SVG units.
const CHART_WIDTH: u64 = 880;
/// Room for the row names, left of the bars.
const LABEL_WIDTH: u64 = 220;
/// Room for the value, right of the longest bar.
const VALUE_WIDTH: u64 = 130;
/// The height of one row.
const ROW_HEIGHT: u64 = 24;

/// What the chart measures, in words.
fn measure(grouping: Grouping) -> &'static str {
    if grouping == Grouping::Tool {
        "tool calls"
    } else {
        "tokens (input + output)"
    }
}

fn value_of(totals: &Totals, grouping: Grouping) -> u64 {
    if grouping == Grouping::Tool {
        totals.tool_calls
    } else {
        totals.tokens()
    }
}

/// At most this many characters of a row's name in the chart (the table has it whole).
const LABEL_CHARS: usize = 28;

fn short(key: &str) -> String {
    if key.chars().count() <= LABEL_CHARS {
        return key.to_owned();
    }
    let cut: String = key.chars().take(LABEL_CHARS - 1).collect();
    format!("{cut}…")
}

fn chart(report: &UsageReport) -> String {
    let grouping = report.grouping;
    let widest = report
        .rows
        .iter()
        .map(|row| value_of(&row.totals, grouping))
        .max()
        .unwrap_or(0)
        .max(1);
    let rows = report.rows.len() as u64;
    let height = rows * ROW_HEIGHT + 8;
    let room = CHART_WIDTH - LABEL_WIDTH - VALUE_WIDTH;
    let mut svg = format!(
        "<svg class=\"chart\" role=\"img\" viewBox=\"0 0 {CHART_WIDTH} {height}\" width=\"100%\" \
         xmlns=\"http://www.w3.org/2000/svg\"><title>{}</title>\n",
        escape_html(measure(grouping))
    );
    for (index, row) in report.rows.iter().enumerate() {
        let value = value_of(&row.totals, grouping);
        let y = index as u64 * ROW_HEIGHT + 4;
        let length = if value == 0 {
            0
        } else {
            (value as u128 * room as u128 / widest as u128).max(1) as u64
        };
        svg.push_str(&format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
             <rect x=\"{LABEL_WIDTH}\" y=\"{}\" width=\"{length}\" height=\"{}\" rx=\"2\"><title>{}: {value}</title></rect>\
             <text class=\"value\" x=\"{}\" y=\"{}\">{value}</text>\n",
            LABEL_WIDTH - 8,
            y + 16,
            escape_html(&short(&row.key)),
            y + 3,
            ROW_HEIGHT - 6,
            escape_html(&row.key),
            LABEL_WIDTH + length + 6,
            y + 16,
        ));
    }
    svg.push_str("</svg>\n");
    svg
}

fn cells(totals: &Totals) -> String {
    let cost = match totals.cost() {
        None => "—".to_owned(),
        Some(cost) if totals.unpriced_calls > 0 => format!("{cost:.4}*"),
        Some(cost) => format!("{cost:.4}"),
    };
    [
        totals.input_tokens,
        totals.cached_tokens,
        totals.output_tokens,
        totals.calls,
        totals.tool_calls,
    ]
    .iter()
    .map(|n| format!("<td class=\"n\">{n}</td>"))
    .chain([format!("<td class=\"n\">{}</td>", escape_html(&cost))])
    .collect()
}

/// The report as one HTML page titled `title`.
pub fn render(report: &UsageReport, title: &str) -> String {
    let mut out = String::with_capacity(16 * 1024);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n",
    );
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    out.push_str(&format!("<title>{}</title>\n", escape_html(title)));
    out.push_str(&format!(
        "<style>{STYLE}{CHART_STYLE}</style>\n</head>\n<body>\n<main>\n<h1>{}</h1>\n",
        escape_html(title)
    ));
    out.push_str(&format!(
        "<p class=\"label\">{}</p>\n",
        escape_html(measure(report.grouping))
    ));
    out.push_str(&chart(report));
    out.push_str(
        "<table class=\"usage\">\n<tr><th></th><th>input</th><th>cached</th><th>output</th>\
         <th>calls</th><th>tool calls</th><th>cost</th></tr>\n",
    );
    for row in &report.rows {
        out.push_str(&format!(
            "<tr><td>{}</td>{}</tr>\n",
            escape_html(&row.key),
            cells(&row.totals)
        ));
    }
    out.push_str(&format!(
        "<tr class=\"total\"><td>total</td>{}</tr>\n</table>\n",
        cells(&report.total)
    ));
    if report.total.unpriced_calls > 0 {
        out.push_str(&format!(
            "<p class=\"note\">{} tokens of {} model calls had no price (— and * mark them).</p>\n",
            report.total.unpriced_tokens, report.total.unpriced_calls
        ));
    }
    out.push_str("</main>\n</body>\n</html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use reprise_runs::UsageRow;

    #[test]
    fn names_from_the_runs_are_escaped_and_bars_scale_to_the_widest() {
        let row = |key: &str, input| UsageRow {
            key: key.to_owned(),
            totals: Totals {
                input_tokens: input,
                calls: 1,
                ..Totals::default()
            },
        };
        let report = UsageReport {
            grouping: Grouping::Model,
            rows: vec![row("<script>x</script>", 100), row("m", 50)],
            total: Totals::default(),
        };
        let page = render(&report, "Usage by model");
        assert!(!page.contains("<script>"), "{page}");
        assert!(page.contains("&lt;script&gt;"));
        let room = CHART_WIDTH - LABEL_WIDTH - VALUE_WIDTH;
        assert!(page.contains(&format!("width=\"{room}\"")));
        assert!(page.contains(&format!("width=\"{}\"", room / 2)));
    }
}
