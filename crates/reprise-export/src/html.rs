//! One self-contained HTML file: styles inline, images as `data:` URLs, no script,
//! and a Content-Security-Policy that forbids loading anything, so that a page
//! opened from disk never reaches the network even if a message tries.
//!
//! Every string from the run is escaped. Messages are Markdown written by
//! pulldown-cmark's HTML writer, their events filtered first: raw HTML in them is
//! written as text, links keep only `http`, `https` and `mailto` targets, and images
//! from the web are shown as their alt text.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, LinkType, Options, Parser, Tag, TagEnd};
use pulldown_cmark_escape::escape_href;

use super::highlight::highlight;
use super::markdown::escape_html;
use jiff::Timestamp;

use super::{
    CallView, ItemWriter, Page, PageItems, ReplyView, RunHead, RunView, render_view, show_ts,
};

pub(crate) const STYLE: &str = r#"
:root { color-scheme: light; }
body { margin: 0; background: #f6f7f9; color: #1f2328; font: 15px/1.55 system-ui, -apple-system, "Segoe UI", sans-serif; }
main { max-width: 920px; margin: 0 auto; padding: 24px 16px 64px; }
h1 { font-size: 1.6em; margin: 0 0 12px; overflow-wrap: anywhere; }
table.facts { border-collapse: collapse; margin-bottom: 24px; font-size: 0.9em; }
table.facts th { text-align: left; padding: 2px 12px 2px 0; color: #59636e; font-weight: 600; }
table.facts td { padding: 2px 0; overflow-wrap: anywhere; }
.msg { background: #fff; border: 1px solid #d1d9e0; border-radius: 8px; padding: 10px 16px; margin: 12px 0; }
.msg.user { border-left: 4px solid #0969da; }
.msg.assistant { border-left: 4px solid #1a7f37; }
.msg.meta, .msg.system, .note { background: #f6f8fa; }
.who { font-weight: 600; font-size: 0.85em; color: #59636e; margin-bottom: 4px; }
.who time { font-weight: 400; margin-left: 8px; }
.body { overflow-wrap: anywhere; }
pre { background: #f6f8fa; border: 1px solid #d1d9e0; border-radius: 6px; padding: 8px 10px; overflow-x: auto; white-space: pre-wrap; overflow-wrap: anywhere; font: 13px/1.45 ui-monospace, SFMono-Regular, Menlo, monospace; }
code { font: 0.9em ui-monospace, SFMono-Regular, Menlo, monospace; background: #eff1f3; padding: 1px 4px; border-radius: 4px; }
pre code { background: none; padding: 0; }
details { margin: 8px 0; border: 1px solid #d1d9e0; border-radius: 6px; padding: 4px 10px; background: #fbfcfd; }
details > summary { cursor: pointer; font-size: 0.9em; color: #59636e; }
details.tool > summary { color: #8250df; }
.label { font-size: 0.8em; font-weight: 600; color: #59636e; margin: 6px 0 2px; }
.rewound { opacity: 0.6; border-style: dashed; }
.mark { margin: 12px 0; font-size: 0.85em; font-weight: 600; color: #59636e; }
.compaction { border: 1px dashed #bf8700; background: #fff8c5; border-radius: 8px; padding: 8px 16px; margin: 16px 0; }
.note { border: 1px solid #d1d9e0; border-radius: 6px; padding: 4px 10px; margin: 8px 0; font-size: 0.85em; color: #59636e; }
.subagent { border-top: 2px solid #d1d9e0; margin-top: 32px; padding-top: 8px; }
img { max-width: 100%; border: 1px solid #d1d9e0; border-radius: 4px; }
blockquote { margin: 0; padding-left: 12px; border-left: 3px solid #d1d9e0; color: #59636e; }
table { border-collapse: collapse; } td, th { border: 1px solid #d1d9e0; padding: 2px 6px; }
.k { color: #cf222e; } .s { color: #0a3069; } .c { color: #6e7781; font-style: italic; } .n { color: #0550ae; }
"#;

/// An image kept in the page: one held in the file itself, never fetched.
fn safe_image(url: &str) -> Option<String> {
    let lower = url.trim_start().to_ascii_lowercase();
    let raster = ["png", "jpeg", "jpg", "gif", "webp"]
        .iter()
        .any(|kind| lower.starts_with(&format!("data:image/{kind};base64,")));
    raster.then(|| escape_html(url.trim()))
}

/// Markdown as HTML, written by pulldown-cmark's HTML writer after `safe_event`
/// has taken out everything that could make the text markup or reach the network.
pub fn markdown_to_html(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len() * 2);
    let mut filter = SafeEvents::default();
    let parser = Parser::new_ext(markdown, Options::all() - Options::ENABLE_SMART_PUNCTUATION);
    pulldown_cmark::html::push_html(
        &mut out,
        parser.filter_map(|event| filter.safe_event(event)),
    );
    out
}

/// What [`SafeEvents::safe_event`] remembers between events.
#[derive(Default)]
struct SafeEvents {
    /// For each open link or image, what to write at its end instead of the
    /// writer's own closing tag (`None`: the writer closes it).
    ends: Vec<Option<&'static str>>,
    /// The code block being read: its language and text, highlighted at its end.
    code: Option<(String, String)>,
}

impl SafeEvents {
    /// The event to give the writer in place of `event`, if any: raw HTML becomes
    /// text, links other than web and mail addresses become their text, images not
    /// held in the page become `[image: alt]`, code blocks come highlighted, and
    /// headings stay below the page's own and lose attributes written in the text.
    fn safe_event<'a>(&mut self, event: Event<'a>) -> Option<Event<'a>> {
        if let Some((language, text)) = self.code.as_mut() {
            return match event {
                Event::Text(piece) => {
                    text.push_str(&piece);
                    None
                }
                Event::End(TagEnd::CodeBlock) => {
                    let class = if language.is_empty() {
                        String::new()
                    } else {
                        format!(" class=\"language-{}\"", escape_html(language))
                    };
                    let block = format!(
                        "<pre><code{class}>{}</code></pre>\n",
                        highlight(text, language)
                    );
                    self.code = None;
                    Some(Event::Html(block.into()))
                }
                _ => None,
            };
        }
        match event {
            Event::Html(text) | Event::InlineHtml(text) => Some(Event::Text(text)),
            Event::Start(Tag::CodeBlock(kind)) => {
                let language = match kind {
                    CodeBlockKind::Fenced(info) => info
                        .split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_owned(),
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some((language, String::new()));
                None
            }
            Event::Start(Tag::Heading { level, .. }) => Some(Event::Start(Tag::Heading {
                level: below_page_headings(level),
                id: None,
                classes: Vec::new(),
                attrs: Vec::new(),
            })),
            Event::End(TagEnd::Heading(level)) => {
                Some(Event::End(TagEnd::Heading(below_page_headings(level))))
            }
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                ..
            }) => {
                let url = match link_type {
                    LinkType::Email => format!("mailto:{dest_url}"),
                    _ => dest_url.trim().to_owned(),
                };
                let lower = url.to_ascii_lowercase();
                if ["https://", "http://", "mailto:"]
                    .iter()
                    .any(|scheme| lower.starts_with(scheme))
                {
                    self.ends.push(None);
                    let mut open = String::from("<a href=\"");
                    // Writing to a String cannot fail.
                    let _ = escape_href(&mut open, &url);
                    open.push_str("\" rel=\"noopener noreferrer nofollow\">");
                    Some(Event::InlineHtml(open.into()))
                } else {
                    self.ends.push(Some(""));
                    None
                }
            }
            Event::Start(Tag::Image { ref dest_url, .. }) => {
                if safe_image(dest_url).is_some() {
                    self.ends.push(None);
                    Some(event)
                } else {
                    self.ends.push(Some("]</span>"));
                    Some(Event::InlineHtml("<span class=\"image\">[image: ".into()))
                }
            }
            Event::End(TagEnd::Link | TagEnd::Image) => match self.ends.pop().flatten() {
                None => Some(event),
                Some("") => None,
                Some(close) => Some(Event::InlineHtml(close.into())),
            },
            // Front matter shows as the text it is, as any other paragraph.
            Event::Start(Tag::MetadataBlock(_)) | Event::End(TagEnd::MetadataBlock(_)) => None,
            event => Some(event),
        }
    }
}

/// Headings inside a message stay below the page's own (`h1`, `h2`).
fn below_page_headings(level: HeadingLevel) -> HeadingLevel {
    match level {
        HeadingLevel::H1 | HeadingLevel::H2 => HeadingLevel::H3,
        level => level,
    }
}

fn pre(text: &str, language: &str) -> String {
    format!("<pre><code>{}</code></pre>\n", highlight(text, language))
}

fn who(out: &mut String, label: &str, ts: Timestamp) {
    out.push_str(&format!(
        "<div class=\"who\">{}<time>{}</time></div>\n",
        escape_html(label),
        escape_html(&show_ts(ts))
    ));
}

fn call(out: &mut String, view: &CallView) {
    let language = if view.arguments.trim_start().starts_with('{') {
        "json"
    } else {
        ""
    };
    out.push_str(&format!(
        "<details class=\"tool\"><summary>Tool call: <code>{}</code>{}</summary>\n",
        escape_html(&view.name),
        if view.result.is_none() {
            " (no result)"
        } else {
            ""
        },
    ));
    for note in &view.notes {
        out.push_str(&format!(
            "<div class=\"label\">{}</div>\n",
            escape_html(note)
        ));
    }
    out.push_str(&format!(
        "<div class=\"label\">Arguments</div>\n{}",
        pre(&view.arguments, language)
    ));
    if let Some(result) = &view.result {
        let label = if view.failed {
            "Result (failed)"
        } else {
            "Result"
        };
        out.push_str(&format!("<div class=\"label\">{label}</div>\n"));
        out.push_str(&pre(result, ""));
    }
    out.push_str("</details>\n");
}

/// The HTML of a conversation's items.
struct Items<'o> {
    out: &'o mut String,
}

impl ItemWriter for Items<'_> {
    fn user(&mut self, ts: Timestamp, text: &str, images: &[String]) {
        let out = &mut *self.out;
        out.push_str("<section class=\"msg user\">\n");
        who(out, "User", ts);
        out.push_str("<div class=\"body\">\n");
        out.push_str(&markdown_to_html(text));
        for url in images {
            match safe_image(url) {
                Some(src) => out.push_str(&format!("<p><img src=\"{src}\" alt=\"image\"></p>\n")),
                None => out.push_str(&format!("<p>[image: {}]</p>\n", escape_html(url))),
            }
        }
        out.push_str("</div>\n</section>\n");
    }

    fn program_text(&mut self, ts: Timestamp, text: &str) {
        let out = &mut *self.out;
        out.push_str("<details class=\"msg meta\"><summary>Program text sent as the user <time>");
        out.push_str(&escape_html(&show_ts(ts)));
        out.push_str("</time></summary>\n");
        out.push_str(&pre(text, ""));
        out.push_str("</details>\n");
    }

    fn assistant(&mut self, reply: ReplyView<'_>) {
        let (ts, reasoning, text, calls) = (reply.ts, reply.reasoning, reply.text, reply.calls);
        let out = &mut *self.out;
        out.push_str("<section class=\"msg assistant\">\n");
        who(out, "Assistant", ts);
        out.push_str("<div class=\"body\">\n");
        if let Some(reasoning) = reasoning {
            out.push_str("<details class=\"reasoning\"><summary>Reasoning</summary>\n");
            out.push_str(&markdown_to_html(reasoning));
            out.push_str("</details>\n");
        }
        out.push_str(&markdown_to_html(text));
        for view in calls {
            call(out, view);
        }
        out.push_str("</div>\n</section>\n");
    }

    fn result(&mut self, ts: Timestamp, call_id: &str, text: &str) {
        self.out.push_str(&format!(
            "<details class=\"tool\"><summary>Tool result for <code>{}</code> <time>{}</time></summary>\n{}</details>\n",
            escape_html(call_id),
            escape_html(&show_ts(ts)),
            pre(text, "")
        ));
    }

    fn system(&mut self, ts: Timestamp, text: &str) {
        let out = &mut *self.out;
        out.push_str("<section class=\"msg system\">\n");
        who(out, "System", ts);
        out.push_str(&pre(text, ""));
        out.push_str("</section>\n");
    }

    fn compaction(&mut self, ts: Timestamp, summary: &str, tokens: &str) {
        let out = &mut *self.out;
        out.push_str("<section class=\"compaction\">\n");
        who(
            out,
            &format!("Compacted{tokens}: the conversation above was summarised"),
            ts,
        );
        out.push_str(&markdown_to_html(summary));
        out.push_str("</section>\n");
    }

    fn mark(&mut self, ts: Timestamp, text: &str) {
        self.out.push_str(&format!(
            "<div class=\"mark\">{} <time>{}</time></div>\n",
            escape_html(text),
            escape_html(&show_ts(ts))
        ));
    }

    fn note(&mut self, ts: Timestamp, label: &str, text: &str) {
        self.out.push_str(&format!(
            "<details class=\"note\"><summary>{} <time>{}</time></summary>\n{}</details>\n",
            escape_html(label),
            escape_html(&show_ts(ts)),
            pre(text, "")
        ));
    }

    /// What a rewind took out of the model's view is set apart and says so.
    fn rewound(&mut self, start: bool) {
        self.out.push_str(if start {
            "<div class=\"rewound\" title=\"rewound: out of the model's view\">\n"
        } else {
            "</div>\n"
        });
    }
}

impl PageItems for Items<'_> {
    fn out(&mut self) -> &mut String {
        self.out
    }
}

/// One HTML page.
pub struct Html;

impl Page for Html {
    fn head(&self, out: &mut String, head: &RunHead) {
        out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
        out.push_str(
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n",
        );
        out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
        out.push_str(&format!("<title>{}</title>\n", escape_html(&head.title)));
        out.push_str(&format!(
            "<style>{STYLE}</style>\n</head>\n<body>\n<main>\n"
        ));
        out.push_str(&format!(
            "<h1>{}</h1>\n<table class=\"facts\">\n",
            escape_html(&head.title)
        ));
        for (name, value) in &head.facts {
            out.push_str(&format!(
                "<tr><th>{}</th><td>{}</td></tr>\n",
                escape_html(name),
                escape_html(value)
            ));
        }
        out.push_str("</table>\n");
    }

    fn items<'o>(&self, out: &'o mut String, _subagent: bool) -> Box<dyn PageItems + 'o> {
        Box::new(Items { out })
    }

    fn subagent_start(&self, out: &mut String, name: &str) {
        out.push_str(&format!(
            "<section class=\"subagent\">\n<h2>Subagent <code>{}</code></h2>\n",
            escape_html(name)
        ));
    }

    fn subagent_end(&self, out: &mut String) {
        out.push_str("</section>\n");
    }

    fn tail(&self, out: &mut String) {
        out.push_str("</main>\n</body>\n</html>\n");
    }
}

/// The run as one HTML page.
pub fn render(view: &RunView) -> String {
    render_view(&Html, view)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_html_and_unsafe_links_from_a_message_stay_text() {
        let html = markdown_to_html(
            "<b onclick=x>hi</b> [a](javascript:alert(1)) [b](https://example.com/?q=\"x\") \
             ![logo](https://example.com/logo.png) \"quoted\"\n\n<script>alert(1)</script>",
        );
        assert!(!html.contains("<b "), "{html}");
        assert!(html.contains("&lt;b onclick=x&gt;"), "{html}");
        assert!(!html.contains("javascript"), "{html}");
        // The writer's href escaping: a quote cannot end the attribute.
        assert!(
            html.contains(r#"<a href="https://example.com/?q=%22x%22""#),
            "{html}"
        );
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("[image: logo]"), "{html}");
        // Quotes in body text are text; only attribute values escape them.
        assert!(html.contains(r#" "quoted"</p>"#), "{html}");
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{html}"
        );
    }

    #[test]
    fn headings_stay_below_the_page_and_lose_attributes_from_the_text() {
        let html = markdown_to_html("# Top {#main .x onclick=alert(1)}\n\n#### Low");
        assert!(html.contains("<h3>Top</h3>"), "{html}");
        assert!(html.contains("<h4>Low</h4>"), "{html}");
        assert!(!html.contains("onclick"), "{html}");
    }

    #[test]
    fn every_element_opened_is_closed_even_in_broken_markdown() {
        let html = markdown_to_html("> quote\n> - item *open\n\n```rust\nfn unclosed() {");
        for tag in ["blockquote", "ul", "li", "p", "pre", "code"] {
            assert_eq!(
                html.matches(&format!("<{tag}>")).count()
                    + html.matches(&format!("<{tag} ")).count(),
                html.matches(&format!("</{tag}>")).count(),
                "{tag} in {html}"
            );
        }
    }
}
