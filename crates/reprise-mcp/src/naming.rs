//! `<server>__<tool>`: the names MCP tools get in the agent.

/// Separator between the server and the tool in an exposed name.
pub const SEPARATOR: &str = "__";

/// Longest function name OpenAI-compatible servers accept.
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// The name the model sees for `tool` of `server`: characters outside
/// `[A-Za-z0-9_-]` become `_` (MCP allows `.` and `/`, function names do not),
/// cut to 64 characters.
pub fn exposed_name(server: &str, tool: &str) -> String {
    let clean: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut name = format!("{server}{SEPARATOR}{clean}");
    name.truncate(MAX_TOOL_NAME_LEN);
    name
}

/// The server part of an exposed name, if it has one.
pub fn server_of(exposed: &str) -> Option<&str> {
    exposed.split_once(SEPARATOR).map(|(server, _)| server)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_prefixed_cleaned_and_cut() {
        assert_eq!(exposed_name("town", "get-sum"), "town__get-sum");
        assert_eq!(exposed_name("fs", "files/read.v2"), "fs__files_read_v2");
        assert_eq!(exposed_name("s", &"x".repeat(100)).len(), 64);
        assert_eq!(server_of("town__move__x"), Some("town"));
        assert_eq!(server_of("bash"), None);
    }
}
