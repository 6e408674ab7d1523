//! Which tool names run without asking, which never run: `allow` and `deny` glob
//! patterns from the config.

use serde::{Deserialize, Serialize};

use crate::error::ConfigError;

/// The `[gate]` table of the config.
///
/// ```toml
/// [gate]
/// allow = ["town__*", "read_file"]
/// deny = ["town__delete_*"]
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateConfig {
    /// Tools that run without asking.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Tools that never run; deny beats allow.
    #[serde(default)]
    pub deny: Vec<String>,
}

/// What the policy says about one tool name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PolicyDecision {
    /// An `allow` pattern matches (and no `deny` pattern does).
    Allow {
        /// The matching pattern.
        pattern: String,
    },
    /// A `deny` pattern matches.
    Deny {
        /// The matching pattern.
        pattern: String,
    },
    /// Neither: ask the person.
    Ask,
}

/// A tool-name pattern: `*` matches any run of characters (empty included);
/// everything else matches itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern {
    text: String,
}

impl Pattern {
    /// Parses a pattern; it must not be empty or contain whitespace or control characters.
    pub fn new(text: &str) -> Result<Pattern, ConfigError> {
        if text.is_empty() || text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(ConfigError::InvalidPattern {
                pattern: text.to_string(),
            });
        }
        Ok(Pattern {
            text: text.to_string(),
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `name` matches the whole pattern.
    pub fn matches(&self, name: &str) -> bool {
        glob_match(self.text.as_bytes(), name.as_bytes())
    }
}

/// Iterative glob with single-star backtracking: linear in practice, no recursion.
fn glob_match(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, n));
            p += 1;
        } else if p < pattern.len() && pattern[p] == name[n] {
            p += 1;
            n += 1;
        } else if let Some((sp, sn)) = star {
            p = sp + 1;
            n = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

/// The compiled `[gate]` policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GatePolicy {
    allow: Vec<Pattern>,
    deny: Vec<Pattern>,
}

impl GatePolicy {
    /// Compiles the config's patterns.
    pub fn from_config(config: &GateConfig) -> Result<GatePolicy, ConfigError> {
        Ok(GatePolicy {
            allow: config
                .allow
                .iter()
                .map(|p| Pattern::new(p))
                .collect::<Result<_, _>>()?,
            deny: config
                .deny
                .iter()
                .map(|p| Pattern::new(p))
                .collect::<Result<_, _>>()?,
        })
    }

    /// Deny beats allow; neither means ask.
    pub fn decide(&self, tool: &str) -> PolicyDecision {
        if let Some(p) = self.deny.iter().find(|p| p.matches(tool)) {
            return PolicyDecision::Deny {
                pattern: p.as_str().to_string(),
            };
        }
        if let Some(p) = self.allow.iter().find(|p| p.matches(tool)) {
            return PolicyDecision::Allow {
                pattern: p.as_str().to_string(),
            };
        }
        PolicyDecision::Ask
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, name: &str) -> bool {
        Pattern::new(pattern).unwrap().matches(name)
    }

    #[test]
    fn stars_match_any_run() {
        assert!(matches("town__*", "town__move"));
        assert!(matches("town__*", "town__"));
        assert!(!matches("town__*", "towns__move"));
        assert!(matches("*__read_*", "fs__read_file"));
        assert!(matches("*", "anything"));
        assert!(matches("a*b*c", "aXXbYYc"));
        assert!(!matches("a*b*c", "aXXbYY"));
        assert!(matches("exact", "exact"));
        assert!(!matches("exact", "exactly"));
        assert!(!matches("exact", "inexact"));
        assert!(matches("**", ""));
    }

    #[test]
    fn bad_patterns_are_refused() {
        assert!(Pattern::new("").is_err());
        assert!(Pattern::new("a b").is_err());
    }

    #[test]
    fn deny_beats_allow_and_the_default_is_ask() {
        let policy = GatePolicy::from_config(&GateConfig {
            allow: vec!["town__*".into()],
            deny: vec!["town__delete*".into()],
        })
        .unwrap();
        assert_eq!(
            policy.decide("town__move"),
            PolicyDecision::Allow {
                pattern: "town__*".into()
            }
        );
        assert_eq!(
            policy.decide("town__delete_all"),
            PolicyDecision::Deny {
                pattern: "town__delete*".into()
            }
        );
        assert_eq!(policy.decide("bash"), PolicyDecision::Ask);
        assert_eq!(
            GatePolicy::default().decide("anything"),
            PolicyDecision::Ask
        );
    }
}
