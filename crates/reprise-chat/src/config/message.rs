//! What an error about the config file says: serde's words put in people's terms
//! (`expected u32` is "a whole number from 0 to 4294967295"), and never a key or a
//! value echoed whole, however long it was.

/// The most characters of a key or value an error shows.
const MAX_SHOWN_CHARS: usize = 64;

/// `text` cut to [`MAX_SHOWN_CHARS`], saying how long it was.
pub fn short(text: &str) -> String {
    if text.chars().count() <= MAX_SHOWN_CHARS {
        return text.to_owned();
    }
    let cut: String = text.chars().take(MAX_SHOWN_CHARS).collect();
    format!("{cut}… ({} bytes)", text.len())
}

/// Serde's names of number types, and what they mean to a person.
const TYPE_WORDS: [(&str, &str); 7] = [
    (
        "expected u32",
        "expected a whole number from 0 to 4294967295",
    ),
    ("expected u64", "expected a whole number of at least 0"),
    ("expected usize", "expected a whole number of at least 0"),
    ("expected i64", "expected a whole number"),
    ("expected f64", "expected a number"),
    ("expected a sequence", "expected a list"),
    ("expected a map", "expected a table"),
];

/// A deserializer's `message` as a person can act on it: type names in words, the
/// `as i128` of an integer too large for any key dropped, and every quoted key or
/// value ("`…`" or "\"…\"") cut to [`MAX_SHOWN_CHARS`].
pub fn readable(message: &str) -> String {
    let mut text = message.replace(" as i128", "");
    for (serde_words, words) in TYPE_WORDS {
        if text.ends_with(serde_words) {
            text.truncate(text.len() - serde_words.len());
            text.push_str(words);
        }
    }
    cut_quoted(&text)
}

/// `text` with each quoted part longer than [`MAX_SHOWN_CHARS`] cut.
fn cut_quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(4096));
    let mut rest = text;
    while let Some(open) = rest.find(['`', '"']) {
        let quote = &rest[open..open + 1];
        out.push_str(&rest[..=open]);
        rest = &rest[open + 1..];
        let Some(close) = rest.find(quote) else {
            break;
        };
        out.push_str(&short(&rest[..close]));
        out.push_str(quote);
        rest = &rest[close + 1..];
    }
    out.push_str(&short_tail(rest));
    out
}

/// An unquoted tail, cut only when it is very long (an unclosed quote).
fn short_tail(text: &str) -> String {
    if text.chars().count() <= MAX_SHOWN_CHARS * 16 {
        text.to_owned()
    } else {
        short(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_keys_and_values_are_cut_and_type_names_put_in_words() {
        let key = "k".repeat(10 * 1024 * 1024);
        let message = format!("unknown field `{key}`, expected one of `model`, `base_url`");
        let shown = readable(&message);
        assert!(shown.len() < 300, "{} bytes", shown.len());
        assert!(shown.contains("(10485760 bytes)`, expected one of `model`, `base_url`"));
        assert_eq!(
            readable("invalid type: integer `99999999999999999999` as i128, expected u32"),
            "invalid type: integer `99999999999999999999`, expected a whole number from 0 to \
             4294967295"
        );
        let value = "v".repeat(5000);
        let shown = readable(&format!(
            "invalid type: string \"{value}\", expected a number"
        ));
        assert!(shown.len() < 200, "{shown}");
        assert!(readable(&format!("unclosed `{value}")).len() < 1100);
        assert_eq!(short("top_k"), "top_k");
    }
}
