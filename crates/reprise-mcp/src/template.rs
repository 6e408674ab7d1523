//! `${NAME}` references in config values, so secrets stay in the environment.

/// A parsed value: literal text and variable references, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Template {
    parts: Vec<Part>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Literal(String),
    Variable(String),
}

impl Template {
    /// Parses `text`; `$$` is a literal `$`, any other `$` must open `${NAME}`.
    pub(crate) fn parse(text: &str) -> Result<Template, String> {
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while let Some(at) = rest.find('$') {
            literal.push_str(&rest[..at]);
            let after = &rest[at + 1..];
            if let Some(tail) = after.strip_prefix('$') {
                literal.push('$');
                rest = tail;
            } else if let Some(body) = after.strip_prefix('{') {
                let end = body
                    .find('}')
                    .ok_or_else(|| format!("unclosed `${{` in {text:?}"))?;
                let name = &body[..end];
                if !is_env_name(name) {
                    return Err(format!(
                        "`${{{name}}}` is not a valid variable name (letters, digits, _)"
                    ));
                }
                if !literal.is_empty() {
                    parts.push(Part::Literal(std::mem::take(&mut literal)));
                }
                parts.push(Part::Variable(name.to_string()));
                rest = &body[end + 1..];
            } else {
                return Err(format!(
                    "a `$` must start `${{NAME}}`; write `$$` for a literal `$` (in {text:?})"
                ));
            }
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            parts.push(Part::Literal(literal));
        }
        Ok(Template { parts })
    }

    /// The variables referred to, in order.
    pub(crate) fn variables(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|part| match part {
            Part::Variable(name) => Some(name.as_str()),
            Part::Literal(_) => None,
        })
    }

    /// Substitutes each variable; the error is the first variable `lookup` lacks.
    pub(crate) fn render(&self, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Literal(text) => out.push_str(text),
                Part::Variable(name) => out.push_str(&lookup(name).ok_or_else(|| name.clone())?),
            }
        }
        Ok(out)
    }
}

/// A POSIX-style variable name.
pub(crate) fn is_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        (name == "TOKEN").then(|| "s3cr3t".to_string())
    }

    #[test]
    fn substitutes_and_escapes() {
        let t = Template::parse("Bearer ${TOKEN} costs $$5").unwrap();
        assert_eq!(t.variables().collect::<Vec<_>>(), ["TOKEN"]);
        assert_eq!(t.render(&env).unwrap(), "Bearer s3cr3t costs $5");
        assert_eq!(
            Template::parse("plain").unwrap().render(&env).unwrap(),
            "plain"
        );
        assert_eq!(Template::parse("").unwrap().render(&env).unwrap(), "");
    }

    #[test]
    fn a_missing_variable_is_named() {
        let t = Template::parse("${TOKEN}-${OTHER}").unwrap();
        assert_eq!(t.render(&env).unwrap_err(), "OTHER");
    }

    #[test]
    fn malformed_templates_are_refused() {
        assert!(Template::parse("${TOKEN").is_err());
        assert!(Template::parse("$TOKEN").is_err());
        assert!(Template::parse("${}").is_err());
        assert!(Template::parse("${A B}").is_err());
        assert!(Template::parse("trailing $").is_err());
    }
}
