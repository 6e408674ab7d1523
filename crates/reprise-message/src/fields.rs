//! The fields an entry or a message keeps without knowing them.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::LazyLock;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Fields kept verbatim, in their order: a JSON object's members that the type
/// holding them has no field of its own for.
///
/// Most entries and messages have none, and a loaded session holds one of these per
/// entry and per message, so an empty one holds no map at all: one pointer, where a
/// map is 72 bytes. It reads and writes as a [`Map`] (`Deref`, `DerefMut`); writing
/// through it makes the map.
#[derive(Clone, Default)]
pub struct Fields(Option<Box<Map<String, Value>>>);

impl Fields {
    /// No fields.
    pub const fn new() -> Fields {
        Fields(None)
    }

    /// The fields as a map of their own.
    pub fn into_map(self) -> Map<String, Value> {
        self.0.map(|map| *map).unwrap_or_default()
    }
}

/// The map an empty [`Fields`] reads as.
fn no_fields() -> &'static Map<String, Value> {
    static EMPTY: LazyLock<Map<String, Value>> = LazyLock::new(Map::new);
    &EMPTY
}

impl Deref for Fields {
    type Target = Map<String, Value>;

    fn deref(&self) -> &Map<String, Value> {
        match &self.0 {
            Some(map) => map,
            None => no_fields(),
        }
    }
}

impl DerefMut for Fields {
    fn deref_mut(&mut self) -> &mut Map<String, Value> {
        self.0.get_or_insert_with(Box::default)
    }
}

impl From<Map<String, Value>> for Fields {
    fn from(map: Map<String, Value>) -> Fields {
        if map.is_empty() {
            Fields(None)
        } else {
            Fields(Some(Box::new(map)))
        }
    }
}

impl From<Fields> for Map<String, Value> {
    fn from(fields: Fields) -> Map<String, Value> {
        fields.into_map()
    }
}

impl FromIterator<(String, Value)> for Fields {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(pairs: I) -> Fields {
        Fields::from(pairs.into_iter().collect::<Map<String, Value>>())
    }
}

impl IntoIterator for Fields {
    type Item = (String, Value);
    type IntoIter = serde_json::map::IntoIter;

    fn into_iter(self) -> Self::IntoIter {
        self.into_map().into_iter()
    }
}

impl<'a> IntoIterator for &'a Fields {
    type Item = (&'a String, &'a Value);
    type IntoIter = serde_json::map::Iter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl PartialEq for Fields {
    fn eq(&self, other: &Fields) -> bool {
        **self == **other
    }
}

impl fmt::Debug for Fields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

impl Serialize for Fields {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Fields {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Fields, D::Error> {
        Map::deserialize(deserializer).map(Fields::from)
    }
}

#[cfg(test)]
mod tests {
    use super::Fields;
    use serde_json::{Value, json};

    #[test]
    fn an_empty_set_of_fields_holds_no_map_until_written() {
        let mut fields = Fields::new();
        assert!(fields.is_empty());
        assert!(fields.0.is_none());
        assert_eq!(std::mem::size_of::<Fields>(), std::mem::size_of::<usize>());
        fields.insert("a".into(), json!(1));
        assert_eq!(fields.get("a"), Some(&json!(1)));
        assert_eq!(Fields::new(), Fields::from(serde_json::Map::new()));
        assert_ne!(fields, Fields::new());
    }

    #[test]
    fn fields_read_and_write_as_the_map_they_hold_in_order() {
        let fields: Fields = serde_json::from_str(r#"{"z":1,"a":[true],"m":{"k":null}}"#).unwrap();
        assert_eq!(
            serde_json::to_string(&fields).unwrap(),
            r#"{"z":1,"a":[true],"m":{"k":null}}"#
        );
        let empty: Fields = serde_json::from_str("{}").unwrap();
        assert!(empty.0.is_none());
        assert_eq!(
            serde_json::to_value(&empty).unwrap(),
            Value::Object(Default::default())
        );
    }
}
