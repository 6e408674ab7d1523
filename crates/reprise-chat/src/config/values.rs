//! Values of the config file that check themselves while the file is read, so that
//! a bad one is refused like a value of the wrong type: naming the file, line and
//! column of its key, and saying what is expected. Durations, finite numbers, the
//! compaction share, and the fields sent as they are in every request.
//!
//! The command line's flags go through the same checks ([`finite_number`],
//! [`super::parse_duration`]); clap names the flag.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

use super::duration::{max_duration, too_long};
use super::message::short;

/// What a duration is expected to be, in the errors.
const DURATION_EXPECTED: &str =
    "a duration: a number of seconds, or text such as \"30s\", \"500ms\" or \"10m\"";

/// A duration in the config: seconds as a number (`90`, `1.5`), or text such as
/// `"90s"`, `"10m"`, `"500ms"` (see [`super::duration`]). Never negative nor longer than
/// [`max_duration`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DurationValue(pub Duration);

impl<'de> Deserialize<'de> for DurationValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(DurationVisitor)
    }
}

struct DurationVisitor;

impl DurationVisitor {
    fn seconds<E: de::Error>(seconds: f64, written: &str) -> Result<DurationValue, E> {
        if seconds < 0.0 {
            return Err(E::custom(format!(
                "{written}: a duration cannot be negative"
            )));
        }
        if seconds > max_duration().as_secs_f64() {
            return Err(E::custom(too_long(written)));
        }
        Ok(DurationValue(Duration::from_secs_f64(seconds)))
    }
}

impl Visitor<'_> for DurationVisitor {
    type Value = DurationValue;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(DURATION_EXPECTED)
    }

    fn visit_u64<E: de::Error>(self, seconds: u64) -> Result<DurationValue, E> {
        // u32::MAX seconds is already past the bound, and exact as an f64.
        let clamped = seconds.min(u64::from(u32::MAX));
        Self::seconds(clamped as f64, &seconds.to_string())
    }

    fn visit_i64<E: de::Error>(self, seconds: i64) -> Result<DurationValue, E> {
        match u64::try_from(seconds) {
            Ok(seconds) => self.visit_u64(seconds),
            Err(_) => Self::seconds(-1.0, &seconds.to_string()),
        }
    }

    fn visit_i128<E: de::Error>(self, seconds: i128) -> Result<DurationValue, E> {
        let sign = if seconds < 0 { -1.0 } else { f64::MAX };
        Self::seconds(sign, &seconds.to_string())
    }

    fn visit_u128<E: de::Error>(self, seconds: u128) -> Result<DurationValue, E> {
        Self::seconds(f64::MAX, &seconds.to_string())
    }

    fn visit_f64<E: de::Error>(self, seconds: f64) -> Result<DurationValue, E> {
        if !seconds.is_finite() {
            return Err(E::custom(format!(
                "{seconds} is not a duration (expected {DURATION_EXPECTED})"
            )));
        }
        Self::seconds(seconds, &seconds.to_string())
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<DurationValue, E> {
        super::parse_duration(text)
            .map(DurationValue)
            .map_err(E::custom)
    }
}

/// A number that is finite: `nan` and `inf` are refused (JSON has neither, so a
/// request would carry `null`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Finite(pub f64);

impl<'de> Deserialize<'de> for Finite {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let number = f64::deserialize(deserializer)?;
        check_finite(number).map(Finite).map_err(de::Error::custom)
    }
}

/// `number` when it is finite; else what to say about it.
fn check_finite(number: f64) -> Result<f64, String> {
    if number.is_finite() {
        Ok(number)
    } else {
        Err(format!("{number} is not a finite number"))
    }
}

/// A flag's number, refused when it is not finite (`--temperature nan`).
pub fn finite_number(text: &str) -> Result<f64, String> {
    let number: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    check_finite(number)
}

/// The share of the context window a request may fill before compacting: between
/// [`WindowShare::MIN`] and 1.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowShare(pub f64);

impl WindowShare {
    /// The smallest share taken.
    pub const MIN: f64 = 0.1;
}

impl<'de> Deserialize<'de> for WindowShare {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let Finite(share) = Finite::deserialize(deserializer)?;
        if (WindowShare::MIN..=1.0).contains(&share) {
            Ok(WindowShare(share))
        } else {
            Err(de::Error::custom(format!(
                "{share} is not a share of the window: write a number between {} and 1",
                WindowShare::MIN
            )))
        }
    }
}

/// A TOML value sent to the server as JSON (`tool_choice`): its numbers finite.
#[derive(Clone, Debug, PartialEq)]
pub struct BodyValue(pub toml::Value);

impl<'de> Deserialize<'de> for BodyValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = toml::Value::deserialize(deserializer)?;
        all_finite(&value).map_err(de::Error::custom)?;
        Ok(BodyValue(value))
    }
}

/// `Err` naming the first number inside `value` that is not finite.
fn all_finite(value: &toml::Value) -> Result<(), String> {
    match value {
        toml::Value::Float(number) => check_finite(*number).map(|_| ()),
        toml::Value::Array(items) => items.iter().try_for_each(all_finite),
        toml::Value::Table(table) => table.iter().try_for_each(|(key, value)| {
            all_finite(value).map_err(|problem| format!("{}: {problem}", short(key)))
        }),
        _ => Ok(()),
    }
}

/// The fields of `[extra_body]`: added to every request body as they are, except
/// those reprise writes itself ([`reprise_provider::RESERVED_BODY_FIELDS`]: the
/// model, the conversation, the tools, streaming), which would replace what reprise
/// sends, and numbers that are not finite.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RequestFields(pub toml::Table);

impl<'de> Deserialize<'de> for RequestFields {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let table = toml::Table::deserialize(deserializer)?;
        for (key, value) in &table {
            if reprise_provider::RESERVED_BODY_FIELDS.contains(&key.as_str()) {
                return Err(de::Error::custom(format!(
                    "{key:?} is written by reprise itself and cannot be set here \
                     (none of {} can)",
                    reprise_provider::RESERVED_BODY_FIELDS.join(", ")
                )));
            }
            all_finite(value)
                .map_err(|problem| de::Error::custom(format!("{}: {problem}", short(key))))?;
        }
        Ok(RequestFields(table))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct Table {
        timeout: Option<DurationValue>,
        number: Option<Finite>,
        share: Option<WindowShare>,
        body: Option<RequestFields>,
    }

    fn read(text: &str) -> Result<Table, String> {
        toml::from_str::<Table>(text).map_err(|error| error.message().to_owned())
    }

    #[test]
    fn durations_as_numbers_or_text_within_bounds() {
        let timeout = |text: &str| read(&format!("timeout = {text}")).map(|t| t.timeout.unwrap().0);
        assert_eq!(timeout("30"), Ok(Duration::from_secs(30)));
        assert_eq!(timeout("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(timeout("\"500ms\""), Ok(Duration::from_millis(500)));
        assert_eq!(timeout("0"), Ok(Duration::ZERO));
        for (text, words) in [
            ("-5", "-5: a duration cannot be negative"),
            ("\"-5s\"", "cannot be negative"),
            ("-1.5", "cannot be negative"),
            ("\"1y\"", "not a duration of fixed length"),
            ("99999999999999999999", "too long"),
            ("9223372036854775807", "too long"),
            ("\"99999999999999999999s\"", "too long"),
            ("nan", "is not a duration"),
            ("true", "expected a duration: a number of seconds, or text"),
        ] {
            let error = timeout(text).unwrap_err();
            assert!(error.contains(words), "{text}: {error}");
            assert!(
                !error.contains("untagged") && !error.contains("i128"),
                "{error}"
            );
        }
    }

    #[test]
    fn numbers_that_are_not_finite_are_refused_everywhere() {
        assert_eq!(read("number = 0.5").unwrap().number, Some(Finite(0.5)));
        assert_eq!(read("number = 1").unwrap().number, Some(Finite(1.0)));
        for text in ["number = nan", "number = inf", "number = -inf"] {
            assert!(
                read(text).unwrap_err().contains("is not a finite number"),
                "{text}"
            );
        }
        let error = read("body = { options = { penalty = nan } }").unwrap_err();
        assert!(
            error.contains("options: penalty: NaN is not a finite number"),
            "{error}"
        );
        assert_eq!(finite_number("0.7"), Ok(0.7));
        assert!(
            finite_number("nan")
                .unwrap_err()
                .contains("not a finite number")
        );
        assert!(finite_number("warm").unwrap_err().contains("not a number"));
    }

    #[test]
    fn shares_outside_the_window_are_refused() {
        assert_eq!(read("share = 0.5").unwrap().share, Some(WindowShare(0.5)));
        for text in ["share = 5.0", "share = 0.01", "share = nan"] {
            assert!(read(text).is_err(), "{text}");
        }
    }

    #[test]
    fn request_fields_may_not_replace_what_reprise_sends() {
        let body = read("body = { top_k = 40 }").unwrap().body.unwrap();
        assert_eq!(body.0["top_k"], toml::Value::Integer(40));
        for key in ["messages", "model", "stream", "tools", "stream_options"] {
            let error = read(&format!("body = {{ {key} = [] }}")).unwrap_err();
            assert!(
                error.contains(&format!("\"{key}\" is written by reprise")),
                "{error}"
            );
        }
    }
}
