//! Markdown to styled terminal lines (pulldown-cmark events to ratatui `Line`s).
//!
//! Only what reads well in a terminal is styled: headings, emphasis, code, lists,
//! quotes, links and rules. Anything else falls back to its text, so nothing the model
//! wrote is ever hidden.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

/// Renders Markdown text as lines (not wrapped: the caller wraps to its width).
pub fn render(text: &str) -> Vec<Line<'static>> {
    let mut options = Options::empty();
    options.insert(Options::ENABLE_STRIKETHROUGH);
    options.insert(Options::ENABLE_TABLES);
    options.insert(Options::ENABLE_TASKLISTS);
    let mut writer = Writer::default();
    for event in Parser::new_ext(text, options) {
        writer.event(event);
    }
    writer.finish()
}

#[derive(Default)]
struct Writer {
    lines: Vec<Line<'static>>,
    current: Vec<Span<'static>>,
    styles: Vec<Style>,
    /// One entry per open list: the next number for ordered lists.
    lists: Vec<Option<u64>>,
    quote_depth: usize,
    in_code_block: bool,
    /// Whether the current line was started by a list item (its marker is written).
    item_started: bool,
    link_urls: Vec<String>,
    table_row: Vec<String>,
    table_cell: Option<String>,
}

const CODE: Style = Style::new().fg(Color::Yellow);
const QUOTE: Style = Style::new().fg(Color::DarkGray);

impl Writer {
    fn style(&self) -> Style {
        self.styles
            .iter()
            .fold(Style::default(), |acc, style| acc.patch(*style))
    }

    fn push_style(&mut self, style: Style) {
        self.styles.push(style);
    }

    fn pop_style(&mut self) {
        self.styles.pop();
    }

    fn prefix(&self) -> Vec<Span<'static>> {
        let mut spans = Vec::new();
        if self.quote_depth > 0 {
            spans.push(Span::styled("│ ".repeat(self.quote_depth), QUOTE));
        }
        if !self.lists.is_empty() && !self.item_started {
            spans.push(Span::raw("  ".repeat(self.lists.len())));
        }
        spans
    }

    fn text(&mut self, text: &str) {
        if let Some(cell) = self.table_cell.as_mut() {
            cell.push_str(text);
            return;
        }
        let style = self.style();
        let mut parts = text.split('\n').peekable();
        while let Some(part) = parts.next() {
            if !part.is_empty() {
                if self.current.is_empty() {
                    self.current = self.prefix();
                }
                self.current.push(Span::styled(part.to_owned(), style));
            }
            if parts.peek().is_some() {
                self.break_line();
            }
        }
    }

    fn break_line(&mut self) {
        let mut spans = std::mem::take(&mut self.current);
        if spans.is_empty() {
            spans = self.prefix();
        }
        self.lines.push(Line::from(spans));
        self.item_started = false;
    }

    fn flush(&mut self) {
        if !self.current.is_empty() {
            self.break_line();
        }
    }

    fn blank(&mut self) {
        self.flush();
        let previous_blank = self.lines.last().is_none_or(|line| line.width() == 0);
        if !previous_blank && self.lists.is_empty() {
            self.lines.push(Line::default());
        }
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => {
                if self.in_code_block {
                    for line in text.lines() {
                        let mut spans = self.prefix();
                        spans.push(Span::styled(format!("    {line}"), CODE));
                        self.lines.push(Line::from(spans));
                    }
                } else {
                    self.text(&text);
                }
            }
            Event::Code(code) => {
                if let Some(cell) = self.table_cell.as_mut() {
                    cell.push_str(&code);
                } else {
                    if self.current.is_empty() {
                        self.current = self.prefix();
                    }
                    self.current
                        .push(Span::styled(code.into_string(), self.style().patch(CODE)));
                }
            }
            Event::InlineMath(text) | Event::DisplayMath(text) => self.text(&text),
            Event::Html(html) | Event::InlineHtml(html) => self.text(&html),
            Event::SoftBreak => self.text(" "),
            Event::HardBreak => self.break_line(),
            Event::Rule => {
                self.flush();
                self.lines.push(Line::styled(
                    "─".repeat(24),
                    Style::new().fg(Color::DarkGray),
                ));
            }
            Event::TaskListMarker(done) => self.text(if done { "[x] " } else { "[ ] " }),
            Event::FootnoteReference(name) => self.text(&format!("[^{name}]")),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => {}
            Tag::Heading { level, .. } => {
                self.blank();
                let marks = match level {
                    HeadingLevel::H1 => "# ",
                    HeadingLevel::H2 => "## ",
                    _ => "### ",
                };
                let style = Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD);
                self.current = self.prefix();
                self.current.push(Span::styled(marks, style));
                self.push_style(style);
            }
            Tag::BlockQuote(_) => {
                self.flush();
                self.quote_depth += 1;
                self.push_style(QUOTE);
            }
            Tag::CodeBlock(kind) => {
                self.blank();
                self.in_code_block = true;
                if let CodeBlockKind::Fenced(lang) = kind
                    && !lang.is_empty()
                {
                    let mut spans = self.prefix();
                    spans.push(Span::styled(
                        format!("  {lang}"),
                        Style::new().fg(Color::DarkGray),
                    ));
                    self.lines.push(Line::from(spans));
                }
            }
            Tag::List(start) => {
                self.flush();
                self.lists.push(start);
            }
            Tag::Item => {
                self.flush();
                let depth = self.lists.len().saturating_sub(1);
                let marker = match self.lists.last_mut() {
                    Some(Some(number)) => {
                        let marker = format!("{number}. ");
                        *number += 1;
                        marker
                    }
                    _ => "• ".to_owned(),
                };
                let mut spans = Vec::new();
                if self.quote_depth > 0 {
                    spans.push(Span::styled("│ ".repeat(self.quote_depth), QUOTE));
                }
                spans.push(Span::raw(format!("{}{marker}", "  ".repeat(depth))));
                self.current = spans;
                self.item_started = true;
            }
            Tag::Emphasis => self.push_style(Style::new().add_modifier(Modifier::ITALIC)),
            Tag::Strong => self.push_style(Style::new().add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => self.push_style(Style::new().add_modifier(Modifier::CROSSED_OUT)),
            Tag::Link { dest_url, .. } => {
                self.link_urls.push(dest_url.into_string());
                self.push_style(
                    Style::new()
                        .fg(Color::Blue)
                        .add_modifier(Modifier::UNDERLINED),
                );
            }
            Tag::Image { dest_url, .. } => {
                self.link_urls.push(dest_url.into_string());
                self.text("[image: ");
                self.push_style(Style::new());
            }
            Tag::Table(_) => self.blank(),
            Tag::TableRow | Tag::TableHead => self.table_row.clear(),
            Tag::TableCell => self.table_cell = Some(String::new()),
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => {
                self.flush();
                if self.lists.is_empty() {
                    self.blank();
                }
            }
            TagEnd::Heading(_) => {
                self.pop_style();
                self.flush();
                self.blank();
            }
            TagEnd::BlockQuote(_) => {
                self.flush();
                self.quote_depth = self.quote_depth.saturating_sub(1);
                self.pop_style();
                self.blank();
            }
            TagEnd::CodeBlock => {
                self.in_code_block = false;
                self.blank();
            }
            TagEnd::List(_) => {
                self.flush();
                self.lists.pop();
                if self.lists.is_empty() {
                    self.blank();
                }
            }
            TagEnd::Item => self.flush(),
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => self.pop_style(),
            TagEnd::Link => {
                self.pop_style();
                if let Some(url) = self.link_urls.pop() {
                    let shown = self
                        .current
                        .last()
                        .is_some_and(|span| span.content.as_ref() == url);
                    if !shown && !url.is_empty() {
                        let style = Style::new().fg(Color::DarkGray);
                        self.current.push(Span::styled(format!(" ({url})"), style));
                    }
                }
            }
            TagEnd::Image => {
                self.pop_style();
                self.link_urls.pop();
                self.text("]");
            }
            TagEnd::TableCell => {
                if let Some(cell) = self.table_cell.take() {
                    self.table_row.push(cell.trim().to_owned());
                }
            }
            TagEnd::TableHead | TagEnd::TableRow => {
                let row = std::mem::take(&mut self.table_row).join(" │ ");
                let head = matches!(tag, TagEnd::TableHead);
                let style = if head {
                    Style::new().add_modifier(Modifier::BOLD)
                } else {
                    Style::default()
                };
                let mut spans = self.prefix();
                spans.push(Span::styled(row, style));
                self.lines.push(Line::from(spans));
            }
            TagEnd::Table => self.blank(),
            _ => {}
        }
    }

    fn finish(mut self) -> Vec<Line<'static>> {
        self.flush();
        while self.lines.last().is_some_and(|line| line.width() == 0) {
            self.lines.pop();
        }
        self.lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(lines: &[Line<'_>]) -> Vec<String> {
        lines.iter().map(|line| line.to_string()).collect()
    }

    #[test]
    fn paragraphs_lists_and_code_become_lines() {
        let lines = render(
            "# Title\n\nSome *soft* text\nwith **bold** and `code`.\n\n- one\n- two\n  1. inner\n\n```rust\nfn main() {}\n```\n\n> quoted\n",
        );
        assert_eq!(
            plain(&lines),
            vec![
                "# Title",
                "",
                "Some soft text with bold and code.",
                "",
                "• one",
                "• two",
                "  1. inner",
                "",
                "  rust",
                "    fn main() {}",
                "",
                "│ quoted",
            ]
        );
    }

    #[test]
    fn emphasis_and_code_are_styled() {
        let lines = render("a **b** `c`");
        let spans = &lines[0].spans;
        let bold = spans.iter().find(|s| s.content == "b").unwrap();
        assert!(bold.style.add_modifier.contains(Modifier::BOLD));
        let code = spans.iter().find(|s| s.content == "c").unwrap();
        assert_eq!(code.style.fg, Some(Color::Yellow));
    }

    #[test]
    fn links_show_their_target_and_tables_their_cells() {
        let lines = render("see [docs](https://x.dev)\n\n| a | b |\n|---|---|\n| 1 | 2 |\n");
        assert_eq!(
            plain(&lines),
            vec!["see docs (https://x.dev)", "", "a │ b", "1 │ 2"]
        );
    }

    #[test]
    fn unfinished_markdown_while_streaming_does_not_panic() {
        for text in ["```rust\nfn", "**bold", "- a\n- ", "| a |", "[link](http"] {
            let _ = render(text);
        }
    }
}
