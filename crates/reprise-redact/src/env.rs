//! Which environment variables hold secrets worth redacting by exact value.

/// Name endings that mark a variable as secret (compared case-insensitively).
const SECRET_NAME_ENDINGS: &[&str] = &["KEY", "TOKEN", "SECRET", "PASSWORD"];

/// Values shorter than this are ignored: masking them would mask ordinary words.
pub(crate) const MIN_SECRET_LEN: usize = 8;

/// Values that are settings, not secrets, even under a secret-looking name.
const NOT_SECRET_VALUES: &[&str] = &[
    "true", "false", "yes", "no", "on", "off", "none", "null", "enabled", "disabled",
];

/// Whether a variable's name says it holds a secret.
pub(crate) fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAME_ENDINGS.iter().any(|end| upper.ends_with(end))
}

/// Whether a value is worth redacting wherever it appears: long enough, not a flag
/// word, not a number, not a file path.
pub(crate) fn is_secret_value(value: &str) -> bool {
    let v = value.trim();
    if v.chars().count() < MIN_SECRET_LEN || v.contains(crate::MASK) {
        return false;
    }
    if NOT_SECRET_VALUES.iter().any(|w| v.eq_ignore_ascii_case(w)) {
        return false;
    }
    if v.chars().all(|c| c.is_ascii_digit()) {
        return false;
    }
    !["/", "./", "../", "~/"].iter().any(|p| v.starts_with(p))
}

/// The values, among `vars`, to redact by exact match.
pub(crate) fn secret_values<I>(vars: I) -> Vec<String>
where
    I: IntoIterator<Item = (String, String)>,
{
    vars.into_iter()
        .filter(|(name, value)| is_secret_name(name) && is_secret_value(value))
        .map(|(_, value)| value.trim().to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn picks_secret_names_and_real_values() {
        let found = secret_values(vars(&[
            ("OPENAI_API_KEY", "sk-test-0123456789abcdef"),
            ("github_token", "ghp_aaaaaaaaaaaaaaaa"),
            ("DB_Password", "hunter2hunter2"),
            ("MY_SECRET", "s3cr3t-value"),
            ("HOME", "/home/someone-long"),
            ("USE_TOKEN", "true"),
            ("SHORT_KEY", "abc"),
            ("EMPTY_SECRET", ""),
            ("PORT_KEY", "123456789"),
            ("SSH_KEY", "/home/me/.ssh/id_ed25519"),
            ("TOKENIZER", "cl100k_base_tokenizer"),
        ]));
        assert_eq!(
            found,
            vec![
                "sk-test-0123456789abcdef",
                "ghp_aaaaaaaaaaaaaaaa",
                "hunter2hunter2",
                "s3cr3t-value"
            ]
        );
    }
}
