//! JSON Schemas for tool arguments, shaped for OpenAI-compatible servers.
//!
//! schemars writes JSON Schema 2020-12 with `$schema`, a root `title` and, for types
//! that refer to themselves, `$ref`/`$defs`. Many OpenAI-compatible servers (and the
//! grammars some of them build from the schema) reject references and meta fields, so
//! the schema offered to the model is fully inlined and stripped of them.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

/// How deep a recursive type is unrolled before its schema is left open (`{}`).
const MAX_RECURSION_DEPTH: usize = 3;

/// The parameters schema of a tool whose arguments deserialize into `T`: an object
/// schema with `properties` (and `required` when any field is), no `$schema`, no
/// `$ref`, no `$defs`.
pub fn parameters_schema<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.inline_subschemas = true;
            settings.meta_schema = None;
        })
        .into_generator();
    let schema = generator.into_root_schema_for::<T>().to_value();
    openai_compatible(schema)
}

/// Reshapes any schema into the form OpenAI-compatible servers accept.
pub fn openai_compatible(schema: Value) -> Value {
    let mut schema = match schema {
        Value::Object(map) => map,
        // `true` (anything) or a non-object: offer an open object.
        _ => Map::new(),
    };
    let defs = take_definitions(&mut schema);
    schema.remove("$schema");
    schema.remove("title");
    let mut root = Value::Object(schema);
    let snapshot = root.clone();
    inline_refs(
        &mut root,
        &Refs {
            root: &snapshot,
            defs: &defs,
        },
        0,
    );
    if let Value::Object(map) = &mut root {
        if !map.contains_key("type") && !has_combinator(map) {
            map.insert("type".into(), Value::String("object".into()));
        }
        if map.get("type").and_then(Value::as_str) == Some("object") {
            map.entry("properties")
                .or_insert_with(|| Value::Object(Map::new()));
        }
    }
    root
}

fn has_combinator(map: &Map<String, Value>) -> bool {
    ["anyOf", "oneOf", "allOf"]
        .iter()
        .any(|key| map.contains_key(*key))
}

fn take_definitions(schema: &mut Map<String, Value>) -> Map<String, Value> {
    let mut defs = Map::new();
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(found)) = schema.remove(key) {
            defs.extend(found);
        }
    }
    defs
}

/// What a `$ref` can point at: the root schema (`#`) or a definition.
struct Refs<'a> {
    root: &'a Value,
    defs: &'a Map<String, Value>,
}

/// Replaces every `$ref` by the schema it names, unrolling recursion a few levels.
fn inline_refs(value: &mut Value, refs: &Refs<'_>, depth: usize) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(reference)) = map.get("$ref") {
                let target = resolve(reference, refs);
                map.remove("$ref");
                let mut replacement = match target {
                    Some(target) if depth < MAX_RECURSION_DEPTH => target.clone(),
                    // Too deep, or a reference we cannot follow: leave that part open.
                    _ => Value::Object(Map::new()),
                };
                inline_refs(&mut replacement, refs, depth + 1);
                if let Value::Object(replacement) = replacement {
                    for (key, value) in replacement {
                        map.entry(key).or_insert(value);
                    }
                }
            }
            for (_, child) in map.iter_mut() {
                inline_refs(child, refs, depth);
            }
        }
        Value::Array(items) => {
            for item in items {
                inline_refs(item, refs, depth);
            }
        }
        _ => {}
    }
}

fn resolve<'a>(reference: &str, refs: &Refs<'a>) -> Option<&'a Value> {
    if reference == "#" {
        return Some(refs.root);
    }
    let name = reference
        .strip_prefix("#/$defs/")
        .or_else(|| reference.strip_prefix("#/definitions/"))?;
    refs.defs.get(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Item {
        /// What to buy.
        name: String,
        qty: Option<u32>,
    }

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Order {
        items: Vec<Item>,
        note: Option<Item>,
    }

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Tree {
        label: String,
        children: Vec<Tree>,
    }

    fn contains_key(value: &Value, key: &str) -> bool {
        match value {
            Value::Object(map) => {
                map.contains_key(key) || map.values().any(|child| contains_key(child, key))
            }
            Value::Array(items) => items.iter().any(|child| contains_key(child, key)),
            _ => false,
        }
    }

    #[test]
    fn nested_types_are_inlined_without_meta_fields() {
        let schema = parameters_schema::<Order>();
        assert_eq!(schema["type"], "object");
        assert!(!contains_key(&schema, "$ref"));
        assert!(!contains_key(&schema, "$defs"));
        assert!(!contains_key(&schema, "$schema"));
        assert_eq!(schema["required"], json!(["items"]));
        let item = &schema["properties"]["items"]["items"];
        assert_eq!(item["type"], "object");
        assert_eq!(item["properties"]["name"]["description"], "What to buy.");
    }

    #[test]
    fn recursive_types_are_unrolled_then_left_open() {
        let schema = parameters_schema::<Tree>();
        assert!(!contains_key(&schema, "$ref"));
        assert!(!contains_key(&schema, "$defs"));
        let child = &schema["properties"]["children"]["items"];
        assert_eq!(child["properties"]["label"]["type"], "string");
    }

    #[test]
    fn an_empty_struct_is_an_object_with_no_properties() {
        #[derive(Deserialize, JsonSchema)]
        struct NoArgs {}
        let schema = parameters_schema::<NoArgs>();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["properties"], json!({}));
    }

    #[test]
    fn a_non_object_schema_becomes_an_open_object() {
        assert_eq!(
            openai_compatible(Value::Bool(true)),
            json!({"type": "object", "properties": {}})
        );
    }
}
