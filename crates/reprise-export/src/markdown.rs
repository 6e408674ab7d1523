//! Markdown that reads well on GitHub: a heading per message, tool calls and
//! reasoning folded in `<details>`, code in fences.
//!
//! Messages are Markdown already and stay so, but any raw HTML in them is written
//! as text: a message holding `</details>` or `<script>` cannot change the page.

use pulldown_cmark::{Event, Options, Parser};

use jiff::Timestamp;

use super::{
    CallView, ItemWriter, Page, PageItems, ReplyView, RunHead, RunView, render_view, show_ts,
};
use reprise_chat::text::one_line;

/// `text` as HTML text or a quoted attribute value: `&`, `<`, `>` and quotes
/// escaped.
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    // Writing to a String cannot fail.
    let _ = pulldown_cmark_escape::escape_html(&mut out, text);
    out
}

/// Markdown with its raw HTML (blocks and inline tags) escaped, so that it shows as
/// text; the rest, code included, is left as written.
pub fn neutralize_html(markdown: &str) -> String {
    let mut ranges = Vec::new();
    for (event, range) in
        Parser::new_ext(markdown, Options::all() - Options::ENABLE_SMART_PUNCTUATION)
            .into_offset_iter()
    {
        if matches!(event, Event::Html(_) | Event::InlineHtml(_)) {
            ranges.push(range);
        }
    }
    if ranges.is_empty() {
        return markdown.to_owned();
    }
    let mut out = String::with_capacity(markdown.len() + 16);
    let mut at = 0;
    for range in ranges {
        if range.start < at {
            continue;
        }
        out.push_str(&markdown[at..range.start]);
        // Writing to a String cannot fail.
        let _ = pulldown_cmark_escape::escape_html_body_text(&mut out, &markdown[range.clone()]);
        at = range.end;
    }
    out.push_str(&markdown[at..]);
    out
}

/// A fenced block holding `text` exactly: the fence is longer than any run of
/// backticks inside.
fn fenced(text: &str, language: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    let fence = "`".repeat(longest.max(2) + 1);
    let body = text.trim_end_matches('\n');
    format!("{fence}{language}\n{body}\n{fence}\n")
}

fn details(summary: &str, body: &str) -> String {
    format!(
        "<details>\n<summary>{summary}</summary>\n\n{}\n\n</details>\n\n",
        body.trim_end()
    )
}

fn call(view: &CallView) -> String {
    let language = if view.arguments.trim_start().starts_with('{') {
        "json"
    } else {
        ""
    };
    let mut body = String::new();
    for note in &view.notes {
        body.push_str(&format!("*{}*\n\n", escape_html(note).replace('*', "\\*")));
    }
    body.push_str(&format!(
        "**Arguments**\n\n{}",
        fenced(&view.arguments, language)
    ));
    match &view.result {
        Some(result) => {
            let label = if view.failed {
                "Result (failed)"
            } else {
                "Result"
            };
            body.push_str(&format!("\n**{label}**\n\n{}", fenced(result, "")));
        }
        None => body.push_str("\n*No result recorded.*\n"),
    }
    details(
        &format!("Tool call: <code>{}</code>", escape_html(&view.name)),
        &body,
    )
}

fn image(url: &str) -> String {
    match url.strip_prefix("data:") {
        Some(rest) => {
            let kind = rest.split([';', ',']).next().unwrap_or("image");
            format!(
                "*(image: {}, {} bytes encoded)*\n\n",
                escape_html(kind),
                rest.len()
            )
        }
        None => format!("*(image: <{}>)*\n\n", url.replace('>', "%3E")),
    }
}

/// The Markdown of a conversation's items, its messages under headings of `hashes`.
struct Items<'o> {
    out: &'o mut String,
    hashes: String,
    /// What a rewind took out of the model's view says so where it is named.
    rewound: &'static str,
}

impl ItemWriter for Items<'_> {
    fn user(&mut self, ts: Timestamp, text: &str, images: &[String]) {
        let (hashes, rewound) = (&self.hashes, self.rewound);
        self.out
            .push_str(&format!("{hashes} User · {}{rewound}\n\n", show_ts(ts)));
        if !text.trim().is_empty() {
            self.out.push_str(&neutralize_html(text.trim_end()));
            self.out.push_str("\n\n");
        }
        for url in images {
            self.out.push_str(&image(url));
        }
    }

    fn program_text(&mut self, ts: Timestamp, text: &str) {
        self.out.push_str(&details(
            &format!(
                "Program text sent as the user · {}{}",
                show_ts(ts),
                self.rewound
            ),
            &fenced(text, ""),
        ));
    }

    fn assistant(&mut self, reply: ReplyView<'_>) {
        let (ts, reasoning, text, calls) = (reply.ts, reply.reasoning, reply.text, reply.calls);
        let (hashes, rewound) = (&self.hashes, self.rewound);
        self.out.push_str(&format!(
            "{hashes} Assistant · {}{rewound}\n\n",
            show_ts(ts)
        ));
        if let Some(reasoning) = reasoning {
            self.out.push_str(&details(
                "Reasoning",
                &neutralize_html(reasoning.trim_end()),
            ));
        }
        if !text.trim().is_empty() {
            self.out.push_str(&neutralize_html(text.trim_end()));
            self.out.push_str("\n\n");
        }
        for view in calls {
            self.out.push_str(&call(view));
        }
    }

    fn result(&mut self, ts: Timestamp, call_id: &str, text: &str) {
        self.out.push_str(&details(
            &format!(
                "Tool result for <code>{}</code> · {}{}",
                escape_html(call_id),
                show_ts(ts),
                self.rewound
            ),
            &fenced(text, ""),
        ));
    }

    fn system(&mut self, ts: Timestamp, text: &str) {
        self.out.push_str(&details(
            &format!("System · {}{}", show_ts(ts), self.rewound),
            &fenced(text, ""),
        ));
    }

    fn compaction(&mut self, ts: Timestamp, summary: &str, tokens: &str) {
        self.out.push_str(&format!(
            "> **Compacted** · {}{}{tokens}: the conversation above was summarised:\n>\n",
            show_ts(ts),
            self.rewound
        ));
        for line in neutralize_html(summary.trim_end()).lines() {
            self.out.push_str(&format!("> {line}\n"));
        }
        self.out.push('\n');
    }

    fn mark(&mut self, ts: Timestamp, text: &str) {
        self.out.push_str(&format!(
            "**— {} · {}{} —**\n\n",
            neutralize_html(&one_line(text)).replace('*', "\\*"),
            show_ts(ts),
            self.rewound
        ));
    }

    fn note(&mut self, ts: Timestamp, label: &str, text: &str) {
        let text = text.trim_end();
        if !text.contains('\n') && text.chars().count() <= 200 {
            self.out.push_str(&format!(
                "*{} · {}{}:* {}\n\n",
                escape_html(label),
                show_ts(ts),
                self.rewound,
                neutralize_html(&one_line(text)).replace('*', "\\*")
            ));
        } else {
            self.out.push_str(&details(
                &format!("{} · {}{}", escape_html(label), show_ts(ts), self.rewound),
                &fenced(text, ""),
            ));
        }
    }

    fn rewound(&mut self, start: bool) {
        self.rewound = if start { " · rewound" } else { "" };
    }
}

impl PageItems for Items<'_> {
    fn out(&mut self) -> &mut String {
        self.out
    }
}

/// Markdown that reads well on GitHub.
pub struct Markdown;

impl Page for Markdown {
    fn head(&self, out: &mut String, head: &RunHead) {
        out.push_str(&format!(
            "# {}\n\n",
            neutralize_html(&one_line(&head.title))
        ));
        out.push_str("| | |\n|---|---|\n");
        for (name, value) in &head.facts {
            out.push_str(&format!(
                "| {} | {} |\n",
                name,
                escape_html(value).replace('|', "\\|")
            ));
        }
        out.push('\n');
    }

    fn items<'o>(&self, out: &'o mut String, subagent: bool) -> Box<dyn PageItems + 'o> {
        Box::new(Items {
            out,
            hashes: "#".repeat(if subagent { 3 } else { 2 }),
            rewound: "",
        })
    }

    fn subagent_start(&self, out: &mut String, name: &str) {
        out.push_str(&format!("## Subagent `{}`\n\n", name.replace('`', "'")));
    }

    fn subagent_end(&self, _out: &mut String) {}

    fn tail(&self, _out: &mut String) {}
}

/// The run as Markdown.
pub fn render(view: &RunView) -> String {
    render_view(&Markdown, view)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_html_is_escaped_and_code_is_left_as_written() {
        let text =
            "Close it: </details> and <script>x</script>\n\n`<b>` stays\n\n```\n<div>\n```\n";
        let out = neutralize_html(text);
        assert!(out.contains("&lt;/details&gt;"), "{out}");
        assert!(out.contains("&lt;script&gt;"), "{out}");
        assert!(out.contains("`<b>` stays"), "{out}");
        assert!(out.contains("```\n<div>\n```"), "{out}");
    }

    #[test]
    fn a_fence_is_longer_than_any_backticks_inside() {
        assert_eq!(fenced("a ```` b", ""), "`````\na ```` b\n`````\n");
        assert_eq!(fenced("plain", "json"), "```json\nplain\n```\n");
    }
}
