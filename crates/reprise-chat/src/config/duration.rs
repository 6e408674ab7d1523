//! Durations as people write them, in the config and on the command line: a number
//! and a unit (`500ms`, `30s`, `10m`, `1.5h`, `90d`, `2w`, and also `1h 30m`,
//! `2 weeks` or ISO 8601's `PT10M`), read by jiff; a bare number is in the unit the
//! caller names. Days are 24 hours; months and years are refused, having no fixed
//! length, and so is anything longer than [`MAX_DAYS`] days.

use jiff::{SignedDuration, Span, SpanRelativeTo};

/// The longest duration taken, in days (100 years of 365 days): longer is surely a
/// mistake, and the bound keeps every duration far from where arithmetic on
/// instants overflows.
pub const MAX_DAYS: i64 = 36_500;

/// The longest duration taken.
pub fn max_duration() -> SignedDuration {
    SignedDuration::from_hours(MAX_DAYS * 24)
}

/// What a duration longer than [`max_duration`] is told.
pub fn too_long(text: &str) -> String {
    format!("{text:?} is too long: a duration is at most {MAX_DAYS} days")
}

/// The unit of a number written without one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BareUnit {
    /// `30` is 30 seconds (timeouts).
    Seconds,
    /// `90` is 90 days (ages of runs).
    Days,
}

impl BareUnit {
    fn suffix(self) -> &'static str {
        match self {
            BareUnit::Seconds => "s",
            BareUnit::Days => "d",
        }
    }

    fn examples(self) -> &'static str {
        match self {
            BareUnit::Seconds => "write 30, 30s, 500ms, 10m or 1h",
            BareUnit::Days => "write 90d, 12w or 36h; a bare number is days",
        }
    }
}

/// `text` as a duration that is not negative nor longer than [`max_duration`]; the
/// error says what was written and how to write one, for the caller to add where it
/// was written.
pub fn parse_duration(text: &str, bare: BareUnit) -> Result<SignedDuration, String> {
    let text = text.trim();
    let bare_number = !text.is_empty() && text.chars().all(|c| c.is_ascii_digit() || c == '.');
    let written = if bare_number {
        format!("{text}{}", bare.suffix())
    } else {
        text.to_owned()
    };
    let span: Span = match written.parse() {
        Ok(span) => span,
        Err(_) if overflows(&written) => return Err(too_long(text)),
        Err(_) => return Err(format!("{text:?} is not a duration ({})", bare.examples())),
    };
    if span.is_negative() {
        return Err(format!("{text:?}: a duration cannot be negative"));
    }
    let duration = span
        .to_duration(SpanRelativeTo::days_are_24_hours())
        .map_err(|_| {
            format!(
                "{text:?} is not a duration of fixed length ({})",
                bare.examples()
            )
        })?;
    if duration > max_duration() {
        return Err(too_long(text));
    }
    Ok(duration)
}

/// Whether `text`, refused by the parser, is one number and a unit whose value is
/// beyond what the parser holds (`99999999999999999999s`): too long, not malformed.
fn overflows(text: &str) -> bool {
    let unit_at = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(unit_at);
    let Ok(number) = number.parse::<f64>() else {
        return false;
    };
    let Ok(one) = format!("1{unit}").parse::<Span>() else {
        return false;
    };
    one.to_duration(SpanRelativeTo::days_are_24_hours())
        .is_ok_and(|one| number * one.as_secs_f64() > max_duration().as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_from_milliseconds_to_weeks_and_bare_numbers_in_the_callers_unit() {
        let seconds = |text| parse_duration(text, BareUnit::Seconds);
        assert_eq!(seconds("30"), Ok(SignedDuration::from_secs(30)));
        assert_eq!(seconds(" 45s "), Ok(SignedDuration::from_secs(45)));
        assert_eq!(seconds("30 s"), Ok(SignedDuration::from_secs(30)));
        assert_eq!(seconds("500ms"), Ok(SignedDuration::from_millis(500)));
        assert_eq!(seconds("1.5"), Ok(SignedDuration::from_millis(1500)));
        assert_eq!(seconds("10m"), Ok(SignedDuration::from_mins(10)));
        assert_eq!(seconds("10min"), Ok(SignedDuration::from_mins(10)));
        assert_eq!(seconds("1.5h"), Ok(SignedDuration::from_mins(90)));
        assert_eq!(seconds("1h 30m"), Ok(SignedDuration::from_mins(90)));
        assert_eq!(seconds("PT10M"), Ok(SignedDuration::from_mins(10)));
        assert_eq!(seconds("90 seconds"), Ok(SignedDuration::from_secs(90)));
        assert_eq!(seconds("2 minutes"), Ok(SignedDuration::from_mins(2)));
        let days = |text| parse_duration(text, BareUnit::Days);
        assert_eq!(days("7"), Ok(SignedDuration::from_hours(7 * 24)));
        assert_eq!(days("90d"), Ok(SignedDuration::from_hours(90 * 24)));
        assert_eq!(days("2w"), Ok(SignedDuration::from_hours(14 * 24)));
        assert_eq!(days("2 weeks"), Ok(SignedDuration::from_hours(14 * 24)));
        assert_eq!(days("36h"), Ok(SignedDuration::from_hours(36)));
    }

    #[test]
    fn words_negative_spans_and_months_are_refused_with_the_text_named() {
        for text in ["soon", "5 parsecs", "", "1.2.3", "3 months", "1y"] {
            let error = parse_duration(text, BareUnit::Seconds).unwrap_err();
            assert!(error.starts_with(&format!("{text:?}")), "{error}");
        }
        assert_eq!(
            parse_duration("-3d", BareUnit::Days),
            Err("\"-3d\": a duration cannot be negative".to_owned())
        );
        assert!(parse_duration("3d ago", BareUnit::Days).is_err());
        for text in ["99999999999999999999s", "1000000000h", "36501d", "5300w"] {
            assert_eq!(parse_duration(text, BareUnit::Seconds), Err(too_long(text)));
        }
        assert_eq!(
            parse_duration("36500", BareUnit::Days),
            Ok(max_duration()),
            "the longest is taken"
        );
        assert!(
            parse_duration("soon", BareUnit::Days)
                .unwrap_err()
                .contains("a bare number is days")
        );
    }
}
