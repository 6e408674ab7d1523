//! Entry lines: one JSON object per line in a session file.

use std::fmt;

use jiff::Timestamp;
use serde::de::{DeserializeSeed, Error as _, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::message::{Key, KeySeed, Message, set_once};

/// One line of a session file: a message, or another kind of entry (`kind` set).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Entry {
    /// Unique per entry (UUIDv7 for entries written here). Appending an entry whose
    /// uuid the session already holds is a no-op.
    pub uuid: Uuid,
    /// When the entry was made: RFC 3339, UTC, milliseconds. Read in any form jiff
    /// reads.
    #[serde(serialize_with = "ts_millis")]
    pub ts: Timestamp,
    /// Set for entries that are not messages (`compaction`, `fork`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The message, for message entries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// Every other field, kept verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Entry {
    /// A new message entry with a fresh UUIDv7 and the current time.
    pub fn message(message: Message) -> Self {
        Entry {
            uuid: Uuid::now_v7(),
            ts: now_millis(),
            kind: None,
            message: Some(message),
            extra: Map::new(),
        }
    }

    /// A new entry of another kind, with its fields in `extra`.
    pub fn other(kind: impl Into<String>, extra: Map<String, Value>) -> Self {
        Entry {
            uuid: Uuid::now_v7(),
            ts: now_millis(),
            kind: Some(kind.into()),
            message: None,
            extra,
        }
    }

    /// The message of a message entry (`kind` absent).
    pub fn as_message(&self) -> Option<&Message> {
        match self.kind {
            None => self.message.as_ref(),
            Some(_) => None,
        }
    }

    /// The uuid given to a bare-message line (the seed's reference format): derived from
    /// the session id and the 1-based line number, so it is the same at every load.
    pub fn bare_line_uuid(session_id: &str, line: usize) -> Uuid {
        Uuid::new_v5(
            &Uuid::NAMESPACE_URL,
            format!("reprise:{session_id}:{line}").as_bytes(),
        )
    }
}

/// The current time, truncated to milliseconds (what the file can hold).
pub fn now_millis() -> Timestamp {
    let now = Timestamp::now();
    Timestamp::from_millisecond(now.as_millisecond()).unwrap_or(now)
}

fn ts_millis<S: Serializer>(ts: &Timestamp, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&format_args!("{ts:.3}"))
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`, the form this crate writes, read without jiff's
/// general parser (which took a tenth of the decoding time); `None` for anything
/// else, which jiff then reads. Gives what jiff gives.
pub(crate) fn canonical_timestamp(text: &[u8]) -> Option<Timestamp> {
    let [
        y0,
        y1,
        y2,
        y3,
        b'-',
        m0,
        m1,
        b'-',
        d0,
        d1,
        b'T',
        h0,
        h1,
        b':',
        n0,
        n1,
        b':',
        s0,
        s1,
        b'.',
        f0,
        f1,
        f2,
        b'Z',
    ] = *text
    else {
        return None;
    };
    let number = |digits: &[u8]| {
        digits.iter().try_fold(0i64, |value, digit| {
            digit
                .is_ascii_digit()
                .then(|| value * 10 + i64::from(digit - b'0'))
        })
    };
    let year = number(&[y0, y1, y2, y3])?;
    let (month, day) = (number(&[m0, m1])?, number(&[d0, d1])?);
    let (hour, minute) = (number(&[h0, h1])?, number(&[n0, n1])?);
    let (second, millis) = (number(&[s0, s1])?, number(&[f0, f1, f2])?);
    // jiff reads a leap second (60) as 59: that and other oddities are left to it.
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    // Checks the day against the month's length.
    jiff::civil::Date::new(
        i16::try_from(year).ok()?,
        i8::try_from(month).ok()?,
        i8::try_from(day).ok()?,
    )
    .ok()?;
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second;
    Timestamp::new(seconds, i32::try_from(millis * 1_000_000).ok()?).ok()
}

/// Days from 1970-01-01 to a valid proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The known fields of an entry.
enum EntryField {
    Uuid,
    Ts,
    Kind,
    Message,
}

fn entry_field(key: &str) -> Option<EntryField> {
    match key {
        "uuid" => Some(EntryField::Uuid),
        "ts" => Some(EntryField::Ts),
        "kind" => Some(EntryField::Kind),
        "message" => Some(EntryField::Message),
        _ => None,
    }
}

// Written by hand rather than derived, for the reasons `message`'s reading code gives;
// accepts and refuses what the derived impl did, with the same errors.
impl<'de> Deserialize<'de> for Entry {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(EntryVisitor)
    }
}

struct EntryVisitor;

impl<'de> Visitor<'de> for EntryVisitor {
    type Value = Entry;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("struct Entry")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entry, A::Error> {
        let mut uuid = None;
        let mut ts = None;
        let mut kind = None;
        let mut message = None;
        let mut extra = Map::new();
        while let Some(key) = map.next_key_seed(KeySeed(entry_field))? {
            match key {
                Key::Known(EntryField::Uuid) => set_once(&mut uuid, "uuid", || map.next_value())?,
                Key::Known(EntryField::Ts) => set_once(&mut ts, "ts", || {
                    // A text that is not a timestamp fails once the string is read,
                    // not inside it: the error's position stays where it was.
                    map.next_value_seed(TimestampSeed)?
                        .map_err(A::Error::custom)
                })?,
                Key::Known(EntryField::Kind) => set_once(&mut kind, "kind", || map.next_value())?,
                Key::Known(EntryField::Message) => {
                    set_once(&mut message, "message", || map.next_value())?
                }
                Key::Other(key) => {
                    let value = map.next_value::<Value>()?;
                    extra.insert(key, value);
                }
            }
        }
        Ok(Entry {
            uuid: uuid.ok_or_else(|| A::Error::missing_field("uuid"))?,
            ts: ts.ok_or_else(|| A::Error::missing_field("ts"))?,
            kind: kind.flatten(),
            message: message.flatten(),
            extra,
        })
    }
}

/// Reads a timestamp string without copying it: the timestamp, or jiff's reason to
/// refuse the text.
struct TimestampSeed;

impl<'de> DeserializeSeed<'de> for TimestampSeed {
    type Value = Result<Timestamp, jiff::Error>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for TimestampSeed {
    type Value = Result<Timestamp, jiff::Error>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a string")
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Self::Value, E> {
        Ok(match canonical_timestamp(text.as_bytes()) {
            Some(ts) => Ok(ts),
            None => text.parse(),
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// The shortcut for timestamps in the form this crate writes reads what jiff
        /// reads, for any instant in jiff's range.
        #[test]
        fn canonical_timestamps_read_as_jiff_reads_them(
            millis in -377_705_116_800_000i64..253_402_300_799_999,
        ) {
            let ts = Timestamp::from_millisecond(millis).unwrap();
            let text = format!("{ts:.3}");
            if text.len() == 24 {
                prop_assert_eq!(canonical_timestamp(text.as_bytes()), Some(ts));
            }
            prop_assert_eq!(text.parse::<Timestamp>().ok(), Some(ts));
        }

        /// Any digits in that form (bad months, days, hours, leap seconds): the
        /// shortcut gives jiff's timestamp, or leaves the text to jiff.
        #[test]
        fn canonical_timestamp_shortcut_never_differs_from_jiff(
            digits in proptest::collection::vec(0u8..10, 17),
            high in proptest::collection::vec(0u8..4, 6),
        ) {
            let d = |i: usize| char::from(b'0' + digits[i]);
            let h = |i: usize| char::from(b'0' + high[i]);
            let text = format!(
                "{}{}{}{}-{}{}-{}{}T{}{}:{}{}:{}{}.{}{}{}Z",
                d(0), d(1), d(2), d(3), h(0).min('1'), d(4), h(1), d(5), h(2).min('2'), d(6),
                h(3).min('6'), d(7), h(4).min('6'), d(8), d(9), d(10), d(11)
            );
            if let Some(ts) = canonical_timestamp(text.as_bytes()) {
                prop_assert_eq!(Some(ts), text.parse::<Timestamp>().ok(), "{}", text);
            }
        }
    }
}
