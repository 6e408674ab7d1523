//! The person's answer to a yes-or-no question (`[y/N]`), read the same way by
//! every question the chat and its commands ask: deleting runs, rewinding,
//! starting a local model.

/// Whether `answer`, a line as typed, says yes: `y` or `yes` in any case, with
/// white space around it. Anything else, an empty line included, is no.
pub fn is_yes(answer: &str) -> bool {
    let answer = answer.trim();
    answer.eq_ignore_ascii_case("y") || answer.eq_ignore_ascii_case("yes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn y_and_yes_in_any_case_are_yes_and_nothing_else_is() {
        for yes in ["y", "Y", "yes", "YES", "Yes", "yEs", " y\n", "\tyes \r\n"] {
            assert!(is_yes(yes), "{yes:?}");
        }
        for no in [
            "", "\n", "n", "N", "no", "NO", "ye", "yess", "y es", "yes!", "oui", "1", "true",
            "y\u{0}",
        ] {
            assert!(!is_yes(no), "{no:?}");
        }
    }
}
