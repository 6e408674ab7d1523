//! Redaction of a JSON value: every string in it, object keys included, as the
//! transcript's records and the exports write them.

use reprise_redact::Redactor;
use serde_json::Value;

/// `value` with every string in it redacted, object keys included: keys here, then
/// values by [`Redactor::redact_json`], which also masks a string kept under a
/// secret-looking key (`"password": "…"`): once the JSON is parsed the key and the
/// value are no longer side by side in one text for a pattern to see.
pub fn redact_value(redactor: &Redactor, value: Value) -> Value {
    let mut value = redact_keys(redactor, value);
    redactor.redact_json(&mut value);
    value
}

fn redact_keys(redactor: &Redactor, value: Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|item| redact_keys(redactor, item))
                .collect(),
        ),
        Value::Object(object) => Value::Object(
            object
                .into_iter()
                .map(|(key, item)| {
                    let key = match redactor.redact(&key) {
                        std::borrow::Cow::Borrowed(_) => key,
                        std::borrow::Cow::Owned(redacted) => redacted,
                    };
                    (key, redact_keys(redactor, item))
                })
                .collect(),
        ),
        other => other,
    }
}
