//! An error body that is not JSON (a proxy's or a web server's HTML page, a text
//! dump) as a few lines of text a person can read in an error message.

/// The most lines of an error page kept in a message.
pub const MAX_LINES: usize = 4;

/// The most characters of one kept line.
const MAX_LINE_CHARS: usize = 200;

/// Tags whose content is never text a person reads.
const HIDDEN: [&str; 4] = ["script", "style", "head", "noscript"];

/// Tags that end a line of text.
const BLOCKS: [&str; 22] = [
    "p", "br", "div", "h1", "h2", "h3", "h4", "h5", "h6", "li", "ul", "ol", "tr", "table", "pre",
    "hr", "body", "html", "title", "section", "header", "footer",
];

/// `body` as text: an HTML page without its markup (tags, scripts, styles, the
/// head), entities decoded, blank lines dropped; then at most [`MAX_LINES`] lines of
/// at most 200 characters, a cut said as `… (N more lines)`.
pub fn page_text(body: &str) -> String {
    let text = if looks_like_html(body) {
        let text = html_text(body);
        if text.trim().is_empty() {
            title_of(body).unwrap_or_default()
        } else {
            text
        }
    } else {
        body.to_owned()
    };
    let lines: Vec<String> = text
        .lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|line| !line.is_empty())
        .collect();
    let mut kept: Vec<String> = lines
        .iter()
        .take(MAX_LINES)
        .map(|line| shorten(line))
        .collect();
    let more = lines.len().saturating_sub(MAX_LINES);
    if more > 0 {
        let noun = if more == 1 { "line" } else { "lines" };
        kept.push(format!("… ({more} more {noun})"));
    }
    kept.join("\n")
}

fn shorten(line: &str) -> String {
    if line.chars().count() <= MAX_LINE_CHARS {
        line.to_owned()
    } else {
        let cut: String = line.chars().take(MAX_LINE_CHARS - 1).collect();
        format!("{cut}…")
    }
}

fn looks_like_html(body: &str) -> bool {
    let start: String = body.trim_start().chars().take(200).collect();
    let lower = start.to_ascii_lowercase();
    lower.starts_with("<!doctype") || lower.starts_with("<html") || lower.contains("<body")
}

/// The text of `<title>`, when the page has one.
fn title_of(body: &str) -> Option<String> {
    let lower = body.to_ascii_lowercase();
    let open = lower.find("<title")?;
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find("</title")?;
    Some(decode_entities(body.get(start..end)?))
}

/// The text between the tags of an HTML page, a line end for each block tag.
fn html_text(body: &str) -> String {
    let lower = body.to_ascii_lowercase();
    let mut text = String::new();
    let mut at = 0;
    while let Some(offset) = body[at..].find('<') {
        let open = at + offset;
        text.push_str(&decode_entities(&body[at..open]));
        let Some(close) = body[open..].find('>').map(|end| open + end) else {
            at = body.len();
            break;
        };
        let tag = &lower[open + 1..close];
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect();
        at = close + 1;
        if !tag.starts_with('/') && HIDDEN.contains(&name.as_str()) {
            // Everything up to the closing tag is left out.
            let closing = format!("</{name}");
            at = match lower[at..].find(&closing) {
                Some(end) => at + end,
                None => body.len(),
            };
            continue;
        }
        if BLOCKS.contains(&name.as_str()) {
            text.push('\n');
        } else {
            text.push(' ');
        }
    }
    text.push_str(&decode_entities(&body[at..]));
    text
}

/// The few entities error pages use, and numeric ones; others are left as they are.
fn decode_entities(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let Some(semi) = rest.bytes().take(12).position(|b| b == b';') else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let entity = &rest[1..semi];
        let decoded = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            "nbsp" => Some(' '),
            _ => entity
                .strip_prefix("#x")
                .or_else(|| entity.strip_prefix("#X"))
                .and_then(|hex| u32::from_str_radix(hex, 16).ok())
                .or_else(|| entity.strip_prefix('#').and_then(|dec| dec.parse().ok()))
                .and_then(char::from_u32),
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_html_page_becomes_its_first_lines_of_text() {
        let rows: String = (1..=9).map(|i| format!("<p>row {i}</p>\n")).collect();
        let page = format!(
            "<!DOCTYPE html>\n<html><head><title>501 Not Implemented</title>\
             <style>body {{ color: red; }}</style><script>alert(1)</script></head>\n\
             <body><h1>Not Implemented</h1><p>POST &amp; <b>GET</b> &lt;here&gt; &#39;x&#x27;</p>\
             {rows}</body></html>"
        );
        assert_eq!(
            page_text(&page),
            "Not Implemented\nPOST & GET <here> 'x'\nrow 1\nrow 2\n… (7 more lines)"
        );
    }

    #[test]
    fn a_page_with_only_a_title_gives_the_title() {
        assert_eq!(
            page_text("<html><head><title>502 Bad Gateway</title></head><body></body></html>"),
            "502 Bad Gateway"
        );
    }

    #[test]
    fn plain_text_is_cut_to_a_few_lines_and_long_lines_shortened() {
        assert_eq!(page_text(" upstream down \n"), "upstream down");
        assert_eq!(page_text("a\n\nb\nc\nd\ne"), "a\nb\nc\nd\n… (1 more line)");
        let long = "x".repeat(500);
        assert_eq!(page_text(&long).chars().count(), MAX_LINE_CHARS);
        // Broken markup and stray ampersands do not lose text.
        assert_eq!(page_text("<html><body>a & b &bogus; <i"), "a & b &bogus;");
    }
}
