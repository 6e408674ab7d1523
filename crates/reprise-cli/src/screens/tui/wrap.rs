//! Word wrapping of styled lines to a width, so the chat knows exactly how many rows
//! each item takes (and can draw only the bottom of a long conversation).

use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthStr;

/// Wraps one line to `width` columns, breaking at spaces where it can and inside a
/// word only when the word alone is wider than the line.
pub fn wrap_line(line: &Line<'static>, width: usize) -> Vec<Line<'static>> {
    let width = width.max(1);
    if line.width() <= width {
        return vec![line.clone()];
    }
    let mut rows: Vec<Line<'static>> = Vec::new();
    let mut row: Vec<Span<'static>> = Vec::new();
    let mut row_width = 0;
    for span in &line.spans {
        for word in split_keeping_spaces(&span.content) {
            let word_width = word.width();
            if row_width + word_width > width && row_width > 0 {
                rows.push(finish_row(std::mem::take(&mut row)));
                row_width = 0;
                if word.trim().is_empty() {
                    continue;
                }
            }
            if word_width > width {
                for c in word.chars() {
                    let w = c.to_string().width();
                    if row_width + w > width && row_width > 0 {
                        rows.push(finish_row(std::mem::take(&mut row)));
                        row_width = 0;
                    }
                    push(&mut row, c.to_string(), span);
                    row_width += w;
                }
            } else {
                push(&mut row, word.to_owned(), span);
                row_width += word_width;
            }
        }
    }
    if !row.is_empty() {
        rows.push(finish_row(row));
    }
    rows
}

/// Wraps many lines.
pub fn wrap_lines(lines: &[Line<'static>], width: usize) -> Vec<Line<'static>> {
    lines
        .iter()
        .flat_map(|line| wrap_line(line, width))
        .collect()
}

fn push(row: &mut Vec<Span<'static>>, text: String, like: &Span<'static>) {
    match row.last_mut() {
        Some(last) if last.style == like.style => last.content.to_mut().push_str(&text),
        _ => row.push(Span::styled(text, like.style)),
    }
}

fn finish_row(mut spans: Vec<Span<'static>>) -> Line<'static> {
    if let Some(last) = spans.last_mut() {
        let trimmed = last.content.trim_end().to_owned();
        last.content = trimmed.into();
    }
    Line::from(spans)
}

fn split_keeping_spaces(text: &str) -> Vec<&str> {
    let mut words = Vec::new();
    let mut start = 0;
    let mut in_space = None;
    for (i, c) in text.char_indices() {
        let space = c == ' ';
        match in_space {
            Some(previous) if previous != space => {
                words.push(&text[start..i]);
                start = i;
            }
            _ => {}
        }
        in_space = Some(space);
    }
    if start < text.len() {
        words.push(&text[start..]);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::style::{Style, Stylize};

    fn texts(lines: &[Line<'_>]) -> Vec<String> {
        lines.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn breaks_at_spaces_and_keeps_styles() {
        let line = Line::from(vec![
            Span::raw("the quick "),
            "brown".bold(),
            Span::raw(" fox jumps"),
        ]);
        let rows = wrap_line(&line, 11);
        assert_eq!(texts(&rows), vec!["the quick", "brown fox", "jumps"]);
        let brown = rows[1].spans.iter().find(|s| s.content == "brown").unwrap();
        assert_eq!(brown.style, Style::new().bold());
    }

    #[test]
    fn long_words_are_cut_and_wide_chars_counted() {
        let rows = wrap_line(&Line::raw("abcdefghij"), 4);
        assert_eq!(texts(&rows), vec!["abcd", "efgh", "ij"]);
        let rows = wrap_line(&Line::raw("日本語のテキスト"), 6);
        assert_eq!(texts(&rows), vec!["日本語", "のテキ", "スト"]);
    }

    #[test]
    fn every_row_fits() {
        let text = "lorem ipsum dolor sit amet, consectetur adipiscing elit sed do eiusmod";
        for width in 1..30 {
            for row in wrap_line(&Line::raw(text.to_owned()), width) {
                assert!(row.width() <= width, "{width}: {row:?}");
            }
        }
    }
}
