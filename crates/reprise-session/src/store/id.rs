//! Ids of sessions, runs and subagents, and the keys built from them.
//!
//! Every id ends up in a path, so anything that could climb out of its directory
//! (`../x`, `/etc`, an empty name) is refused before a path is ever built.

use std::fmt;

/// Why an id was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} id {id:?}: {reason}")]
pub struct IdError {
    /// What the id names (`session`, `run`, `subagent`).
    pub what: &'static str,
    /// The id as given, cut after [`MAX_ID_LEN`] characters (an id refused for its
    /// length may be any size).
    pub id: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// Longest id accepted.
pub const MAX_ID_LEN: usize = 128;

/// Checks an id against `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`.
pub fn validate_id(what: &'static str, id: &str) -> Result<(), IdError> {
    let refuse = |reason| IdError {
        what,
        id: match id.char_indices().nth(MAX_ID_LEN) {
            Some((end, _)) => format!("{}…", &id[..end]),
            None => id.to_owned(),
        },
        reason,
    };
    let mut chars = id.chars();
    match chars.next() {
        None => return Err(refuse("it is empty")),
        Some(first) if !first.is_ascii_alphanumeric() => {
            return Err(refuse("it must start with a letter or digit"));
        }
        Some(_) => {}
    }
    if id.len() > MAX_ID_LEN {
        return Err(refuse("it is longer than 128 characters"));
    }
    if !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')) {
        return Err(refuse("only letters, digits, '.', '_' and '-' are allowed"));
    }
    Ok(())
}

/// Where a transcript lives: a session, or a subagent's transcript inside it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionKey {
    session_id: String,
    subagent: Option<String>,
}

impl SessionKey {
    /// The main transcript of a session.
    pub fn session(session_id: &str) -> Result<Self, IdError> {
        validate_id("session", session_id)?;
        Ok(SessionKey {
            session_id: session_id.to_owned(),
            subagent: None,
        })
    }

    /// The transcript of subagent `name` inside a session (`subagents/<name>`).
    pub fn subagent(session_id: &str, name: &str) -> Result<Self, IdError> {
        validate_id("session", session_id)?;
        validate_id("subagent", name)?;
        Ok(SessionKey {
            session_id: session_id.to_owned(),
            subagent: Some(name.to_owned()),
        })
    }

    /// Parses `subagents/<name>` (or nothing) as the subpath of a session's key.
    pub fn with_subpath(session_id: &str, subpath: Option<&str>) -> Result<Self, IdError> {
        match subpath {
            None => Self::session(session_id),
            Some(path) => match path.strip_prefix("subagents/") {
                Some(name) => Self::subagent(session_id, name),
                None => Err(IdError {
                    what: "subkey",
                    id: path.to_owned(),
                    reason: "a subkey must be subagents/<name>",
                }),
            },
        }
    }

    /// The session id.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The subagent name, for a subagent's key.
    pub fn subagent_name(&self) -> Option<&str> {
        self.subagent.as_deref()
    }

    /// The subpath (`subagents/<name>`), for a subagent's key.
    pub fn subpath(&self) -> Option<String> {
        self.subagent
            .as_ref()
            .map(|name| format!("subagents/{name}"))
    }

    /// The key of the session this key belongs to.
    pub fn main(&self) -> SessionKey {
        SessionKey {
            session_id: self.session_id.clone(),
            subagent: None,
        }
    }
}

impl fmt::Display for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.subagent {
            None => f.write_str(&self.session_id),
            Some(name) => write!(f, "{}/subagents/{name}", self.session_id),
        }
    }
}
