//! A small highlighter for code in exported HTML: comments, strings, numbers and
//! keywords get a class, everything is escaped, nothing needs a script to show.
//!
//! It knows the lexical shape of C-like languages, scripting languages with `#`
//! comments, and JSON; that is enough to make code readable, not a parser.

use super::markdown::escape_html;

/// How one language writes comments, and its keywords.
struct Syntax {
    line_comment: &'static [&'static str],
    block_comment: bool,
    keywords: &'static [&'static str],
}

const C_LIKE: &[&str] = &[
    "as",
    "async",
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "default",
    "do",
    "else",
    "enum",
    "export",
    "extends",
    "false",
    "fn",
    "for",
    "func",
    "function",
    "go",
    "if",
    "impl",
    "import",
    "in",
    "interface",
    "let",
    "loop",
    "match",
    "mod",
    "mut",
    "new",
    "null",
    "package",
    "pub",
    "return",
    "self",
    "static",
    "struct",
    "super",
    "switch",
    "this",
    "throw",
    "trait",
    "true",
    "try",
    "type",
    "typeof",
    "use",
    "var",
    "void",
    "where",
    "while",
    "yield",
    "nil",
    "int",
    "char",
    "bool",
    "string",
    "u8",
    "u32",
    "u64",
    "i32",
    "i64",
    "usize",
];
const SCRIPT: &[&str] = &[
    "and", "as", "assert", "async", "await", "break", "case", "class", "continue", "def", "del",
    "do", "done", "elif", "else", "esac", "except", "export", "false", "fi", "finally", "for",
    "from", "function", "if", "import", "in", "is", "lambda", "local", "None", "not", "or", "pass",
    "raise", "return", "then", "True", "False", "true", "try", "while", "with", "yield",
];
const JSON: &[&str] = &["true", "false", "null"];

fn syntax_of(language: &str) -> Option<Syntax> {
    let language = language.trim().to_ascii_lowercase();
    let (line_comment, block_comment, keywords): (
        &'static [&'static str],
        bool,
        &'static [&'static str],
    ) = match language.as_str() {
        "rust" | "rs" | "c" | "h" | "cpp" | "c++" | "cc" | "go" | "java" | "kotlin" | "js"
        | "javascript" | "jsx" | "ts" | "typescript" | "tsx" | "swift" | "scala" | "cs"
        | "csharp" | "dart" | "zig" => (&["//"], true, C_LIKE),
        "python" | "py" | "sh" | "bash" | "shell" | "zsh" | "console" | "ruby" | "rb" | "toml"
        | "yaml" | "yml" | "perl" | "r" | "make" | "makefile" | "dockerfile" => {
            (&["#"], false, SCRIPT)
        }
        "sql" => (&["--"], true, SCRIPT),
        "json" | "jsonc" | "json5" => (&["//"], true, JSON),
        _ => return None,
    };
    Some(Syntax {
        line_comment,
        block_comment,
        keywords,
    })
}

fn span(out: &mut String, class: &str, text: &str) {
    out.push_str("<span class=\"");
    out.push_str(class);
    out.push_str("\">");
    out.push_str(&escape_html(text));
    out.push_str("</span>");
}

/// `code` as escaped HTML with highlight spans, for a `<pre><code>` of `language`;
/// an unknown language is only escaped.
pub fn highlight(code: &str, language: &str) -> String {
    let Some(syntax) = syntax_of(language) else {
        return escape_html(code);
    };
    let mut out = String::with_capacity(code.len() * 2);
    let chars: Vec<(usize, char)> = code.char_indices().collect();
    let end_of = |i: usize| chars.get(i).map_or(code.len(), |&(at, _)| at);
    let mut i = 0;
    while i < chars.len() {
        let (at, c) = chars[i];
        let rest = &code[at..];
        if let Some(marker) = syntax.line_comment.iter().find(|m| rest.starts_with(**m)) {
            let len = rest.find('\n').unwrap_or(rest.len());
            let _ = marker;
            span(&mut out, "c", &rest[..len]);
            let stop = at + len;
            while i < chars.len() && chars[i].0 < stop {
                i += 1;
            }
            continue;
        }
        if syntax.block_comment && rest.starts_with("/*") {
            let len = rest[2..].find("*/").map_or(rest.len(), |n| n + 4);
            span(&mut out, "c", &rest[..len]);
            let stop = at + len;
            while i < chars.len() && chars[i].0 < stop {
                i += 1;
            }
            continue;
        }
        if c == '"' || c == '\'' || c == '`' {
            let mut j = i + 1;
            while j < chars.len() && chars[j].1 != c && chars[j].1 != '\n' {
                if chars[j].1 == '\\' {
                    j += 1;
                }
                j += 1;
            }
            let stop = end_of((j + 1).min(chars.len()));
            span(&mut out, "s", &code[at..stop]);
            i = (j + 1).min(chars.len());
            continue;
        }
        if c.is_ascii_digit() {
            let mut j = i;
            while j < chars.len()
                && (chars[j].1.is_ascii_alphanumeric() || chars[j].1 == '.' || chars[j].1 == '_')
            {
                j += 1;
            }
            span(&mut out, "n", &code[at..end_of(j)]);
            i = j;
            continue;
        }
        if c.is_alphabetic() || c == '_' {
            let mut j = i;
            while j < chars.len() && (chars[j].1.is_alphanumeric() || chars[j].1 == '_') {
                j += 1;
            }
            let word = &code[at..end_of(j)];
            if syntax.keywords.contains(&word) {
                span(&mut out, "k", word);
            } else {
                out.push_str(&escape_html(word));
            }
            i = j;
            continue;
        }
        out.push_str(&escape_html(&rest[..c.len_utf8()]));
        i += 1;
    }
    out
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
