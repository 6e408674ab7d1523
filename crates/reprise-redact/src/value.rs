//! Judging a candidate secret once a regex has found it: is it a placeholder, a
//! reference to code, or a value that really looks like a credential?
//!
//! Regexes find `password = …`; these rules keep `password = $DB_PASSWORD`,
//! `token: null` or `key: "name"` readable.

/// How strict to be with a value, from the name it is assigned to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyClass {
    /// `password`, `passwd`, `pwd`, `pass`, `…_pw`: any real value is a secret.
    Password,
    /// `secret`, `token`, `api_key`, `credentials`, `…_pat`: values of a few characters or more.
    Token,
    /// Any other `…key` (`license_key`, `AccountKey`): only values that look random.
    Key,
}

/// Names that end like a secret's but name something public or ordinary.
const NOT_SECRET_NAME_ENDINGS: &[&str] = &[
    "bypass",
    "compass",
    "encompass",
    "surpass",
    "trespass",
    "overpass",
    "underpass",
    "primary_key",
    "primarykey",
    "foreign_key",
    "foreignkey",
    "sort_key",
    "sortkey",
    "partition_key",
    "partitionkey",
    "cache_key",
    "cachekey",
    "idempotency_key",
    "idempotency-key",
    "object_key",
    "row_key",
    "routing_key",
    "lookup_key",
    "dedup_key",
    "hotkey",
    "monkey",
    "turkey",
    "donkey",
    "hockey",
    "jockey",
    "whiskey",
];

/// The class of a name that a value is assigned to, or `None` when the name does not
/// announce a secret after all (`public_key`, `bypass`, `sort_key`).
pub(crate) fn key_class(key: &str) -> Option<KeyClass> {
    let key = key
        .trim_start_matches(['$', '-', '.', '_'])
        .to_ascii_lowercase();
    // A bare `key` names an entry (`<add key="…">`, `{"key": "name"}`), not a secret.
    if key.is_empty() || key == "key" || key.contains("public") || key.contains("publishable") {
        return None;
    }
    if NOT_SECRET_NAME_ENDINGS.iter().any(|end| key.ends_with(end)) {
        return None;
    }
    if key.contains("pass") || key.contains("pwd") || key.ends_with("pw") {
        return Some(KeyClass::Password);
    }
    const TOKENISH: &[&str] = &[
        "secret",
        "token",
        "credential",
        "api",
        "access",
        "private",
        "session",
        "signing",
        "encryption",
        "master",
    ];
    if TOKENISH.iter().any(|word| key.contains(word)) {
        return Some(KeyClass::Token);
    }
    // `pat` (a personal access token) and `auth` name a secret only as words of their
    // own: `github_pat`, `GITHUB_PAT`, `auth_header`, but never `path`, `file_path`,
    // `pattern`, `author` or `authority`, which tools take all the time.
    let words = key.split(|c: char| !c.is_ascii_alphanumeric());
    if words.clone().any(|word| word.ends_with("pat"))
        || words
            .filter(|word| !word.starts_with("author"))
            .any(|word| word.contains("auth"))
    {
        return Some(KeyClass::Token);
    }
    Some(KeyClass::Key)
}

/// Whether `value` is a placeholder, a reference or a non-secret literal rather than a
/// secret: `$VAR`, `${VAR}`, `%s`, `<YOUR_KEY>`, `{{ x }}`, `xxxx`, `****`, `null`,
/// `arn:…`, a URL, a path, a CSS selector.
pub(crate) fn is_placeholder(value: &str) -> bool {
    let v = value.trim();
    let Some(first) = v.chars().next() else {
        return true;
    };
    if matches!(first, '$' | '%' | '<' | '{' | '[') {
        return true;
    }
    if ["{{", "${", "<%", "#{", "://"]
        .iter()
        .any(|marker| v.contains(marker))
    {
        return true;
    }
    if v.chars().all(|c| "xX*#.•_-0=/+ ".contains(c)) {
        return true;
    }
    let lower = v.to_ascii_lowercase();
    if matches!(
        lower.as_str(),
        "true" | "false" | "null" | "none" | "nil" | "undefined" | "yes" | "no" | "on" | "off"
    ) {
        return true;
    }
    if ["your_", "your-", "_here", "-here", "placeholder", "insert_"]
        .iter()
        .any(|marker| lower.contains(marker))
    {
        return true;
    }
    if lower.starts_with("arn:") {
        return true;
    }
    if ["/", "./", "../", "~/"].iter().any(|p| v.starts_with(p)) {
        return true;
    }
    is_css_selector(v)
}

/// `#add-password`, `.login-form`: a selector, not a password.
fn is_css_selector(v: &str) -> bool {
    let mut chars = v.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    let rest = chars.as_str();
    (first == '#' || first == '.')
        && rest.contains('-')
        && rest
            .split('-')
            .all(|part| !part.is_empty() && part.chars().all(|c| c.is_ascii_lowercase()))
}

/// `env.DB_PASSWORD`, `settings.secret`, `self.token`: a dotted name in code.
fn is_dotted_identifier(v: &str) -> bool {
    v.contains('.')
        && v.split('.').all(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

/// Type names that follow `password:` in typed code (`password: str`, `token: String`).
fn is_type_name(v: &str) -> bool {
    matches!(
        v.to_ascii_lowercase().as_str(),
        "str"
            | "string"
            | "int"
            | "bool"
            | "bytes"
            | "number"
            | "any"
            | "object"
            | "optional"
            | "option"
            | "secretstr"
            | "secretstring"
            | "secretbytes"
            | "text"
            | "varchar"
            | "char"
            | "u8"
    )
}

/// Words that start an expression (`x = new Foo()`, `$c = New-Object …`).
fn is_code_keyword(v: &str) -> bool {
    matches!(
        v.to_ascii_lowercase().as_str(),
        "new"
            | "new-object"
            | "await"
            | "function"
            | "lambda"
            | "require"
            | "import"
            | "typeof"
            | "this"
            | "self"
            | "return"
    )
}

/// Whether a value looks machine-generated: no spaces, long enough, letters and digits.
pub(crate) fn looks_random(v: &str) -> bool {
    let len = v.chars().count();
    if len < 12
        || !v
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+/=_.-~".contains(c))
    {
        return false;
    }
    let digit = v.chars().any(|c| c.is_ascii_digit());
    let upper = v.chars().any(|c| c.is_ascii_uppercase());
    let lower = v.chars().any(|c| c.is_ascii_lowercase());
    (digit && (upper || lower)) || (len >= 20 && upper && lower)
}

/// Whether `value`, assigned to `key`, is a secret to mask. `bare` is true when the
/// value was not quoted (then code such as `password = form.password` is likelier);
/// `after` is the text that follows the value.
pub(crate) fn accept_assignment(key: &str, value: &str, bare: bool, after: &str) -> bool {
    let Some(class) = key_class(key) else {
        return false;
    };
    if is_placeholder(value) {
        return false;
    }
    if bare {
        if after.starts_with(['(', '[', '<', '{']) {
            return false;
        }
        if is_dotted_identifier(value) || is_type_name(value) || is_code_keyword(value) {
            return false;
        }
        let key_lower = key.to_ascii_lowercase();
        let value_lower = value.to_ascii_lowercase();
        if key_lower.ends_with(&value_lower) {
            return false;
        }
        if value.chars().all(|c| c.is_ascii_digit()) && value.len() < 6 {
            return false;
        }
    }
    let len = value.chars().count();
    match class {
        KeyClass::Password => len >= 3,
        KeyClass::Token => len >= 6,
        KeyClass::Key => looks_random(value),
    }
}

/// Whether a string assigned to a key might be masked whole, judged from its
/// characters as they arrive in pieces, for a text too long to hold twice: only when
/// it might be must it be held whole for [`Redactor::masks_assigned`](crate::Redactor::masks_assigned)
/// to decide. Under an ordinary name (`content`, `command`) a value is masked whole
/// only when it looks machine-generated, which one space or line end rules out.
#[derive(Clone, Debug)]
pub struct AssignmentScan {
    class: Option<KeyClass>,
    chars: usize,
    /// Every character so far is one a random-looking value may hold.
    random_chars: bool,
    digit: bool,
    upper: bool,
    lower: bool,
}

impl AssignmentScan {
    /// A scan of a value assigned to `key`.
    pub fn new(key: &str) -> Self {
        AssignmentScan {
            class: key_class(key),
            chars: 0,
            random_chars: true,
            digit: false,
            upper: false,
            lower: false,
        }
    }

    /// Looks at the next piece of the value.
    pub fn push(&mut self, piece: &str) {
        if self.is_settled() {
            return;
        }
        for c in piece.chars() {
            self.chars += 1;
            if !(c.is_ascii_alphanumeric() || "+/=_.-~".contains(c)) {
                self.random_chars = false;
                return;
            }
            self.digit |= c.is_ascii_digit();
            self.upper |= c.is_ascii_uppercase();
            self.lower |= c.is_ascii_lowercase();
        }
    }

    /// Whether the rest of the value can no longer change [`might_be_masked`](Self::might_be_masked).
    pub fn is_settled(&self) -> bool {
        !matches!(self.class, Some(KeyClass::Key)) || !self.random_chars
    }

    /// Whether the value seen so far might be masked whole; `false` means it is not.
    pub fn might_be_masked(&self) -> bool {
        match self.class {
            None => false,
            Some(KeyClass::Password | KeyClass::Token) => true,
            // `looks_random`, counted as the pieces went by.
            Some(KeyClass::Key) => {
                self.random_chars
                    && self.chars >= 12
                    && ((self.digit && (self.upper || self.lower))
                        || (self.chars >= 20 && self.upper && self.lower))
            }
        }
    }
}

/// Whether a command-line flag's value is a secret to mask.
pub(crate) fn accept_flag(value: &str) -> bool {
    value.chars().count() >= 3 && !value.starts_with('-') && !is_placeholder(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_recognised() {
        for v in [
            "",
            "$DB_PASSWORD",
            "${TOKEN}",
            "$(cat secret)",
            "%s",
            "%PASSWORD%",
            "<YOUR_API_KEY>",
            "{{ secrets.TOKEN }}",
            "xxxxxxxx",
            "XXXX-XXXX",
            "********",
            "######",
            "null",
            "None",
            "arn:aws:iam::aws:policy/X",
            "https://example.com",
            "/etc/passwd",
            "#add-password",
            "your_api_key_here",
        ] {
            assert!(is_placeholder(v), "{v:?} should be a placeholder");
        }
        for v in [
            "hunter22",
            "open sesame",
            "#gets0m3",
            "super$ecret",
            "AKCp8abc",
        ] {
            assert!(!is_placeholder(v), "{v:?} should not be a placeholder");
        }
    }

    #[test]
    fn key_classes_follow_the_name() {
        assert_eq!(key_class("DB_PASSWORD"), Some(KeyClass::Password));
        assert_eq!(key_class("jenkins_passwd"), Some(KeyClass::Password));
        assert_eq!(key_class("client_secret"), Some(KeyClass::Token));
        assert_eq!(key_class("OPENAI_API_KEY"), Some(KeyClass::Token));
        assert_eq!(key_class("AccountKey"), Some(KeyClass::Key));
        assert_eq!(key_class("GITHUB_PAT"), Some(KeyClass::Token));
        assert_eq!(key_class("githubpat"), Some(KeyClass::Token));
        assert_eq!(key_class("auth_header"), Some(KeyClass::Token));
        assert_eq!(key_class("oauth"), Some(KeyClass::Token));
        assert_eq!(key_class("path"), Some(KeyClass::Key));
        assert_eq!(key_class("file_path"), Some(KeyClass::Key));
        assert_eq!(key_class("pattern"), Some(KeyClass::Key));
        assert_eq!(key_class("author"), Some(KeyClass::Key));
        assert_eq!(key_class("PublicKey"), None);
        assert_eq!(key_class("key"), None);
        assert_eq!(key_class("bypass"), None);
        assert_eq!(key_class("sort_key"), None);
    }

    #[test]
    fn assignments_skip_code_and_keep_data() {
        assert!(accept_assignment("password", "open_sesame", true, "\n"));
        assert!(!accept_assignment("password", "env.PASSWORD", true, "\n"));
        assert!(!accept_assignment("password", "getPassword", true, "()"));
        assert!(!accept_assignment("password", "str", true, ","));
        assert!(!accept_assignment("password", "password", true, ","));
        assert!(!accept_assignment("token", "abc", false, ""));
        assert!(!accept_assignment("key", "name", false, ""));
        assert!(accept_assignment(
            "AccountKey",
            "1gy3lpE7Du1j5ljKiupgKzywSw2isjsa69sfsdfsd==",
            true,
            ";"
        ));
    }

    #[test]
    fn random_looking_values() {
        assert!(looks_random("77yg7tx91p4lag"));
        assert!(looks_random("c55dbac4-e0e8-4a06-b892-75cac2387ce5"));
        assert!(!looks_random("created_at"));
        assert!(!looks_random("has spaces 123456"));
    }
}
