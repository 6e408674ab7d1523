//! A tool call's arguments: a JSON text the model sent, shared rather than copied.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// The arguments of a tool call as a JSON text (possibly invalid, as the model sent
/// them). A clone shares the text: arguments can be as large as a file the model
/// writes, and the history, the next request, the events and the tool each hold them.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Arguments(Arc<String>);

impl Arguments {
    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for Arguments {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Arguments {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl From<String> for Arguments {
    fn from(mut text: String) -> Self {
        // Kept as long as the history: the spare room a growing text had goes back.
        text.shrink_to_fit();
        Arguments(Arc::new(text))
    }
}

impl From<&str> for Arguments {
    fn from(text: &str) -> Self {
        Arguments(Arc::new(text.to_owned()))
    }
}

impl From<&String> for Arguments {
    fn from(text: &String) -> Self {
        Arguments::from(text.as_str())
    }
}

impl From<Arguments> for String {
    fn from(arguments: Arguments) -> Self {
        Arc::try_unwrap(arguments.0).unwrap_or_else(|shared| shared.as_str().to_owned())
    }
}

impl fmt::Debug for Arguments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Arguments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self)
    }
}

impl PartialEq<str> for Arguments {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Arguments {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Arguments {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<Arguments> for str {
    fn eq(&self, other: &Arguments) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<Arguments> for &str {
    fn eq(&self, other: &Arguments) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<Arguments> for String {
    fn eq(&self, other: &Arguments) -> bool {
        self == other.as_str()
    }
}

impl Serialize for Arguments {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self)
    }
}

/// A text as it is; a server that sends an object (or any other value) gets it
/// re-encoded as JSON text; `null` is no arguments.
impl<'de> Deserialize<'de> for Arguments {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ArgumentsVisitor)
    }
}

struct ArgumentsVisitor;

impl<'de> Visitor<'de> for ArgumentsVisitor {
    type Value = Arguments;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tool call arguments")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Arguments, E> {
        Ok(Arguments::from(text))
    }

    fn visit_string<E: de::Error>(self, text: String) -> Result<Arguments, E> {
        Ok(Arguments::from(text))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Arguments, E> {
        Ok(Arguments::default())
    }

    fn visit_none<E: de::Error>(self) -> Result<Arguments, E> {
        Ok(Arguments::default())
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Arguments, E> {
        Ok(Arguments::from(value.to_string()))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Arguments, E> {
        Ok(Arguments::from(Value::from(value).to_string()))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Arguments, E> {
        Ok(Arguments::from(Value::from(value).to_string()))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Arguments, E> {
        Ok(Arguments::from(Value::from(value).to_string()))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<Arguments, A::Error> {
        let value = Value::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
        Ok(Arguments::from(value.to_string()))
    }

    fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Arguments, A::Error> {
        let value = Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
        Ok(Arguments::from(value.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clone_shares_the_text() {
        let arguments = Arguments::from("{\"a\":1}".to_owned());
        let clone = arguments.clone();
        assert!(std::ptr::eq(arguments.as_str(), clone.as_str()));
        assert_eq!(clone, "{\"a\":1}");
    }

    #[test]
    fn objects_are_re_encoded_and_null_is_empty() {
        let text: Arguments = serde_json::from_str("\"{}\"").unwrap();
        assert_eq!(text, "{}");
        let object: Arguments = serde_json::from_str("{\"a\":1}").unwrap();
        assert_eq!(object, "{\"a\":1}");
        let null: Arguments = serde_json::from_str("null").unwrap();
        assert_eq!(null, "");
        let number: Arguments = serde_json::from_str("5").unwrap();
        assert_eq!(number, "5");
        assert_eq!(serde_json::to_string(&object).unwrap(), "\"{\\\"a\\\":1}\"");
    }
}
