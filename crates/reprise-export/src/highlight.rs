//! Code in exported HTML, highlighted by syntect with the syntaxes it ships:
//! comments, strings, numbers and keywords get a class, everything is escaped, and
//! nothing needs a script to show.

use std::sync::LazyLock;

use syntect::easy::ScopeRegionIterator;
use syntect::parsing::{ParseState, Scope, ScopeStack, SyntaxReference, SyntaxSet};
use syntect::util::LinesWithEndings;

use super::markdown::escape_html;

/// The syntaxes syntect ships, loaded on the first code block.
static SYNTAXES: LazyLock<SyntaxSet> = LazyLock::new(SyntaxSet::load_defaults_newlines);

/// The page's class for each kind of scope, the first match winning; `None` leaves
/// the text plain (an operator is a keyword to syntect, not to the reader).
static CLASSES: LazyLock<Vec<(Scope, Option<&'static str>)>> = LazyLock::new(|| {
    [
        ("keyword.operator", None),
        ("comment", Some("c")),
        ("string", Some("s")),
        ("constant.numeric", Some("n")),
        ("constant.language", Some("k")),
        ("keyword", Some("k")),
        ("storage", Some("k")),
    ]
    .into_iter()
    .filter_map(|(scope, class)| Some((Scope::new(scope).ok()?, class)))
    .collect()
});

/// The syntax for a code block's language: its name or file extension, or a
/// common alias for one syntect knows.
fn syntax_of(language: &str) -> Option<&'static SyntaxReference> {
    let language = language.trim().to_ascii_lowercase();
    let token = match language.as_str() {
        "" => return None,
        "ts" | "typescript" | "tsx" | "jsx" | "javascript" => "js",
        "shell" | "console" | "zsh" => "sh",
        "jsonc" | "json5" => "json",
        "c++" => "cpp",
        "csharp" => "cs",
        "golang" => "go",
        other => other,
    };
    SYNTAXES.find_syntax_by_token(token)
}

/// The class of text under `stack`: that of its innermost scope with one.
fn class_of(stack: &ScopeStack) -> Option<&'static str> {
    stack.as_slice().iter().rev().find_map(|scope| {
        CLASSES
            .iter()
            .find(|(prefix, _)| prefix.is_prefix_of(*scope))
            .map(|(_, class)| *class)
    })?
}

/// Highlighted HTML, written a run of text of one class at a time.
#[derive(Default)]
struct Spans {
    out: String,
    class: Option<&'static str>,
    text: String,
}

impl Spans {
    fn push(&mut self, class: Option<&'static str>, text: &str) {
        // Line ends stay outside the spans, so that a span is on one line.
        for piece in text.split_inclusive('\n') {
            let (body, newline) = match piece.strip_suffix('\n') {
                Some(body) => (body, "\n"),
                None => (piece, ""),
            };
            self.run(class, body);
            self.run(None, newline);
        }
    }

    fn run(&mut self, class: Option<&'static str>, text: &str) {
        if text.is_empty() {
            return;
        }
        if class != self.class {
            self.flush();
            self.class = class;
        }
        self.text.push_str(text);
    }

    fn flush(&mut self) {
        let text = escape_html(&std::mem::take(&mut self.text));
        match self.class {
            Some(class) if !text.is_empty() => {
                self.out
                    .push_str(&format!("<span class=\"{class}\">{text}</span>"));
            }
            _ => self.out.push_str(&text),
        }
    }

    fn finish(mut self) -> String {
        self.flush();
        self.out
    }
}

/// `code` as escaped HTML with highlight spans, for a `<pre><code>` of `language`;
/// an unknown language is only escaped.
pub fn highlight(code: &str, language: &str) -> String {
    let Some(syntax) = syntax_of(language) else {
        return escape_html(code);
    };
    let mut state = ParseState::new(syntax);
    let mut stack = ScopeStack::new();
    let mut spans = Spans::default();
    let mut lines = LinesWithEndings::from(code);
    for line in lines.by_ref() {
        let Ok(ops) = state.parse_line(line, &SYNTAXES) else {
            spans.push(None, line);
            break;
        };
        for (text, op) in ScopeRegionIterator::new(&ops, line) {
            if stack.apply(op).is_err() {
                stack = ScopeStack::new();
            }
            spans.push(class_of(&stack), text);
        }
    }
    // What the parser could not read is shown as it is.
    for line in lines {
        spans.push(None, line);
    }
    spans.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_strings_comments_and_numbers_get_classes_and_everything_is_escaped() {
        let html = highlight("fn main() { let s = \"<b>\"; // 1 < 2\n x = 42; }", "rust");
        assert!(html.contains(r#"<span class="k">fn</span>"#), "{html}");
        assert!(
            html.contains(r#"<span class="s">&quot;&lt;b&gt;&quot;</span>"#),
            "{html}"
        );
        assert!(
            html.contains(r#"<span class="c">// 1 &lt; 2</span>"#),
            "{html}"
        );
        assert!(html.contains(r#"<span class="n">42</span>"#), "{html}");
        assert!(!html.contains("<b>"));
    }

    #[test]
    fn an_unknown_language_is_only_escaped() {
        assert_eq!(highlight("if <x> & y", "brainfuck"), "if &lt;x&gt; &amp; y");
    }

    #[test]
    fn an_unterminated_string_ends_the_code_without_losing_text() {
        let html = highlight("print('oops", "python");
        assert!(
            html.ends_with(r#"<span class="s">&#39;oops</span>"#),
            "{html}"
        );
    }
}
