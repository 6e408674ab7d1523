//! The `[[prices]]` tables: what each model costs per million tokens, from a day on,
//! for `reprise usage`.
//!
//! ```toml
//! [[prices]]
//! model = "gpt-4o"
//! from = 2026-01-01        # a TOML date or "2026-01-01"; unset: always
//! input = 2.5              # per million input tokens
//! output = 10.0            # per million output tokens
//! cached = 1.25            # per million cached input tokens; unset: the input price
//! ```

use jiff::civil::Date;
use reprise_runs::{Price, PriceTable};
use serde::Deserialize;

/// One `[[prices]]` table as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceEntry {
    /// The model, as the replies record it.
    pub model: String,
    /// The first day the price applies to: a TOML date or a `YYYY-MM-DD` string.
    pub from: Option<toml::Value>,
    /// Per million input tokens.
    pub input: f64,
    /// Per million output tokens.
    pub output: f64,
    /// Per million cached input tokens.
    pub cached: Option<f64>,
}

impl PriceEntry {
    /// The price, or what is wrong with the table, naming the key.
    pub fn price(&self) -> Result<Price, String> {
        let from = match &self.from {
            None => Date::MIN,
            Some(value) => date_of(value).ok_or_else(|| {
                format!("from is {value}: a day as 2026-01-01 (a TOML date or a string)")
            })?,
        };
        let price = Price {
            model: self.model.clone(),
            from,
            input: self.input,
            output: self.output,
            cached: self.cached,
        };
        price.check().map_err(|error| error.to_string())?;
        Ok(price)
    }
}

fn date_of(value: &toml::Value) -> Option<Date> {
    match value {
        toml::Value::String(text) => text.parse().ok(),
        toml::Value::Datetime(datetime) if datetime.time.is_none() => {
            let date = datetime.date?;
            Date::new(
                i16::try_from(date.year).ok()?,
                i8::try_from(date.month).ok()?,
                i8::try_from(date.day).ok()?,
            )
            .ok()
        }
        _ => None,
    }
}

/// The table of `entries`, or the index of the first bad entry and what is wrong.
pub fn price_table(entries: &[PriceEntry]) -> Result<PriceTable, (usize, String)> {
    let mut prices = Vec::with_capacity(entries.len());
    for (index, entry) in entries.iter().enumerate() {
        let price = entry.price().map_err(|problem| (index, problem))?;
        if prices
            .iter()
            .any(|other: &Price| other.model == price.model && other.from == price.from)
        {
            let problem = format!("{} has a price from {} already", price.model, price.from);
            return Err((index, problem));
        }
        prices.push(price);
    }
    PriceTable::new(prices).map_err(|error| (entries.len().saturating_sub(1), error.to_string()))
}
